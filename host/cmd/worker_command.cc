// `worker`: the central worker's flags and start-up.
#include <malloc.h>
#include <unistd.h>

#include <iostream>

#include "host/cmd/command.h"
#include "host/common/text.h"
#include "host/loader/dlopen_source.h"
#include "host/operator/worker.h"

namespace gpustack::cmd {
namespace {

struct WorkerCommand {
  op::WorkerOptions options;
  std::vector<std::string> plugin_dirs;
  int secure_port = 31443;
  std::string cert_dir;
  double qps = 200;
  int burst = 400;
  double lease = 15, renew = 10, retry = 2;
  int webhook_port = 9443;
  int retry_after = 5;

  int Run() { return FinishDaemon(Start()); }

  int Start() {
    // glibc gives each thread that contends for malloc an arena of its own, up to 8 a core; the
    // informers' lists then leave freed pages in many of them. One keeps the heap compact at
    // fleet scale (14 MB less than two at 1,000 nodes) at no cost in latency (docs/footprint.md).
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    if (Status resolved = Resolve(); !resolved) {
      std::cerr << "error: " << resolved.error() << "\n";
      return kBadInput;
    }
    if (Status loaded = LoadManufacturers(); !loaded) {
      std::cerr << "error: " << Printable(loaded.error()) << "\n";
      return kBadInput;
    }
    auto client = ConnectToKubernetes({.qps = qps, .burst = burst});
    if (!client) return kBadInput;
    return op::RunWorker(*client, options, StopRequested());
  }

  // The worker's options from the flags and the environment.
  Status Resolve() {
    auto& hooks = options.webhooks;
    hooks.enabled = webhook_port >= 0;
    hooks.server.dump_dir = Env("GPUSTACK_WEBHOOK_DUMP_DIR");
    hooks.server.port = static_cast<uint16_t>(std::max(webhook_port, 0));
    if (hooks.enabled && hooks.certificates == "cert-manager" && hooks.cert_dir.empty()) {
      return Error{
          "--webhook-certificates cert-manager needs --webhook-cert-dir (where the "
          "cert-manager Secret is mounted)"};
    }
    options.election.lease_duration = Milliseconds(lease);
    options.election.renew_deadline = Milliseconds(renew);
    options.election.retry_period = Milliseconds(retry);
    options.node_check_options.retry_after = std::chrono::seconds(retry_after);
    hooks.nodes_pinned = options.node_check;
    options.getenv = [](const std::string& name) { return Env(name); };
    std::string& identity = options.election.identity;
    if (identity.empty()) identity = Env("KUBERNETES_POD_NAME");
    if (identity.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      identity = std::string(host) + "_" + std::to_string(getpid());
    }
    options.serve_https = secure_port != 0;
    options.health.server.port = static_cast<uint16_t>(secure_port);
    options.health.cert_dir = cert_dir;
    return Ok{};
  }

  // The manufacturer table from the plugins, identify only (docs/decisions.md D17).
  Status LoadManufacturers() {
    const auto default_dir = loader::DefaultPluginDir();
    const auto dirs =
        loader::PluginSearchPath(plugin_dirs, Env("GPUSTACK_PLUGIN_PATH"), default_dir);
    std::vector<std::filesystem::path> required;
    for (const auto& dir : dirs)
      if (dir != default_dir.lexically_normal()) required.push_back(dir);
    std::vector<std::string> problems;
    auto manufacturers = op::LoadManufacturers(dirs, required, options.getenv, &problems);
    for (const std::string& p : problems) std::cerr << "warning: " << Printable(p) << "\n";
    if (!manufacturers) return manufacturers.failure();
    options.manufacturers = std::move(*manufacturers);
    if (options.manufacturers.empty()) {
      return Error{"no plugin loaded from " + std::to_string(dirs.size()) +
                   " plugin directory(ies): the worker needs the manufacturer table they declare"};
    }
    return Ok{};
  }
};

}  // namespace

Command AddWorker(CLI::App& root) {
  auto c = std::make_shared<WorkerCommand>();
  op::WorkerOptions& o = c->options;
  CLI::App* worker = root.add_subcommand(
      "worker", "Run the central worker: node pools, InstanceTypes and the Kueue chain");
  worker->alias("w");
  worker->add_option("--plugin-dir", c->plugin_dirs,
                     "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                     "default (repeatable); plugins are only identified, never initialised");
  worker
      ->add_option("--namespace", o.system_namespace,
                   "The system namespace: the Lease and the settings Secret live there")
      ->envname("KUBERNETES_POD_NAMESPACE")
      ->capture_default_str();
  worker->add_option("--identity", o.election.identity,
                     "This replica's name in the Lease (default: KUBERNETES_POD_NAME, else "
                     "host_pid)");
  worker
      ->add_option("--secure-port", c->secure_port,
                   "HTTPS port of /metrics, /livez and /readyz (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  worker->add_option("--cert-dir", c->cert_dir,
                     "Directory with tls.crt and tls.key (default: a self-signed certificate)");
  worker->add_flag("!--no-kube-leader-election", o.leader_election,
                   "Reconcile without a Lease (one replica only)");
  worker->add_option("--kube-leader-election-lease-duration", c->lease, "Seconds")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  worker->add_option("--kube-leader-election-renew-deadline", c->renew, "Seconds")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  worker->add_option("--kube-leader-election-retry-period", c->retry, "Seconds")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  auto& hooks = o.webhooks;
  worker
      ->add_option("--webhook-port", c->webhook_port,
                   "HTTPS port of the admission webhooks (0: any free port, -1: no webhooks)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  worker->add_option("--webhook-address", hooks.server.address, "Address the webhooks listen on")
      ->capture_default_str();
  worker
      ->add_option("--webhook-url", hooks.url,
                   "URL base the apiserver calls the webhooks at (a control plane outside the "
                   "cluster, e.g. https://127.0.0.1:9443); default: the Service")
      ->check([](const std::string& url) {
        return url.rfind("https://", 0) == 0 ? std::string()
                                             : std::string("must start with https://");
      });
  worker
      ->add_option("--webhook-service", hooks.service,
                   "Service in the system namespace that fronts the webhooks")
      ->capture_default_str();
  worker
      ->add_option("--webhook-certificates", hooks.certificates,
                   "self: the worker makes and rotates a CA and certificate (Secret " +
                       std::string(op::kWebhookTlsSecret) +
                       "); cert-manager: tls.crt/tls.key from --webhook-cert-dir")
      ->check(CLI::IsMember({"self", "cert-manager"}))
      ->capture_default_str();
  worker->add_option("--webhook-cert-dir", hooks.cert_dir,
                     "The mounted cert-manager Secret (with --webhook-certificates cert-manager)");
  worker->add_flag("!--no-webhook-configurations", hooks.apply_configurations,
                   "Leave the webhook configurations and the APIService to the chart");
  worker->add_flag("!--no-api", hooks.serve_api,
                   "Do not serve the worker.gpustack.ai/v1 and gpustack.ai/v1 aggregated APIs");
  worker->add_flag("!--no-api-helpers", hooks.api.helpers,
                   "Leave out the v1 helper kinds (they read and write labelled Secrets, PVCs and "
                   "StorageClasses in every namespace)");
  worker
      ->add_option("--api-address", hooks.api_address,
                   "With --webhook-url: the address (not loopback) the apiserver reaches this "
                   "worker at; the worker then registers the v1 API through a Service and "
                   "Endpoints of its own (the apiserver needs --enable-aggregator-routing)")
      ->check(CLI::ValidIPV4);
  worker->add_flag("!--no-node-devices-check", o.node_check,
                   "Do not judge Workloads for the gpustack-node-devices AdmissionCheck");
  worker->add_flag("!--no-instance-controller", o.instance_controller,
                   "Do not run Instances (no Pods, Services or status for them)");
  worker->add_flag("!--no-requeue-refused-pods", o.requeue_refused_pods,
                   "Leave a queued Pod the node refused after gate 3's Ready Failed instead of "
                   "replacing it");
  worker
      ->add_option("--node-devices-retry-after", c->retry_after,
                   "Seconds Kueue waits before retrying a Workload the check found no room for")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  worker->add_option("--kube-conn-qps", c->qps, "Requests per second to the apiserver")
      ->check(CLI::Range(1.0, 100000.0))
      ->capture_default_str();
  worker->add_option("--kube-conn-burst", c->burst, "Request burst")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  return {worker, [c] { return c->Run(); }};
}

}  // namespace gpustack::cmd
