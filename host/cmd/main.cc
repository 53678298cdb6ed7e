// gpustack-operator: one binary, subcommands. Flags and wiring only; the work is in libraries.
//
// Exit status, for every subcommand: 0 when everything asked for worked; 1 when something did
// not (a plugin failed, discovery failed, a check failed: stdout's report and stderr say what);
// 2 for bad input (a flag, an environment value, the node config, an unreadable sysfs tree).
#include <CLI/CLI.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "host/common/logging.h"
#include "host/common/text.h"
#include "host/common/yaml.h"
#include "host/device_manager/detect.h"
#include "host/device_manager/detect_report.h"
#include "host/device_manager/monitor.h"
#include "host/device_manager/preflight.h"
#include "host/kube/client.h"
#include "host/loader/dlopen_source.h"
#include "host/node/daemon.h"
#include "host/operator/cleanup.h"
#include "host/operator/worker.h"
#include "host/runtime/node_config.h"

namespace {

namespace dm = gpustack::device_manager;
namespace runtime = gpustack::runtime;

constexpr int kBadInput = 2;

// Environment defaults are read with secure_getenv: ignored when the process is setuid.
std::string Env(const std::string& name) {
  const char* value = secure_getenv(name.c_str());
  return value == nullptr ? std::string() : std::string(value);
}

// The flags every device-manager subcommand shares: where plugins are, which run, which node
// (real or fixture) they look at, and how the runtime guards them.
struct NodeFlags {
  dm::NodeOptions options;
  std::string class_prefixes = "02,03,0b,12";
  double hook_timeout_seconds = 30;
  std::string state_dir = "/var/lib/gpustack/device-manager";
};

void AddNodeFlags(CLI::App* command, NodeFlags& flags) {
  dm::NodeOptions& o = flags.options;
  command->add_option("--plugin-dir", o.plugin_dirs,
                      "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                      "default (repeatable)");
  command->add_option("--enable", o.enable_flag,
                      "Force plugins on or off: nvidia=on,amd=off (* for every plugin)");
  command->add_option("--node-config", o.node_config_path, "Node config file (JSON)")
      ->envname("GPUSTACK_NODE_CONFIG");
  command->add_option("--sysfs-root", o.pci.sysfs_root, "Root of the sysfs tree to scan")
      ->envname("GPUSTACK_SYSFS_ROOT")
      ->capture_default_str();
  command->add_option("--pci-classes", flags.class_prefixes, "PCI base classes to scan")
      ->envname("GPUSTACK_RUNTIME_DETECT_PCI_CLASS_PREFIXES")
      ->capture_default_str();
  command->add_option("--node-name", o.node_name, "Node name (default: the host name)")
      ->envname("NODE_NAME");
  command
      ->add_option("--state-dir", flags.state_dir,
                   "Where crashes are recorded and crashed plugins quarantined (empty: nowhere)")
      ->envname("GPUSTACK_STATE_DIR")
      ->capture_default_str();
  command
      ->add_option("--hook-timeout", flags.hook_timeout_seconds,
                   "Seconds a plugin hook may run before the plugin is marked hung")
      ->envname("GPUSTACK_HOOK_TIMEOUT")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
}

// Finishes the shared flags after parsing; false (with the message printed) on bad input.
bool ResolveNodeFlags(NodeFlags& flags) {
  flags.options.plugin_path_env = Env("GPUSTACK_PLUGIN_PATH");
  flags.options.enable_env = Env("GPUSTACK_PLUGIN_ENABLE");
  flags.options.env = Env;
  flags.options.state_dir = flags.state_dir;
  flags.options.hook_deadline = std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(flags.hook_timeout_seconds * 1000.0)));
  auto prefixes = gpustack::pci::ParseClassPrefixes(flags.class_prefixes);
  if (!prefixes) {
    std::cerr << "error: " << prefixes.error() << "\n";
    return false;
  }
  flags.options.pci.class_prefixes = *prefixes;
  return true;
}

// Vendor libraries name devices; a name that is not valid UTF-8 must not abort the output.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

// What went wrong, on stderr, whatever stdout's format: a script sees it, a person reads it.
// Errors and warnings on stderr, whatever the output format: stdout stays machine-readable.
void ReportProblems(const runtime::NodeReport& report) {
  for (const runtime::SourceProblem& p : report.problems) {
    std::cerr << (p.fatal ? "error: " : "warning: ") << gpustack::Printable(p.message) << "\n";
  }
  for (const runtime::PluginStatus& p : report.plugins) {
    const std::string name = p.name.empty() ? p.origin : p.name;
    if (p.error && (p.enabled || p.state == runtime::PluginState::kRefused)) {
      std::cerr << "error: plugin " << gpustack::Printable(name) << " "
                << runtime::StateName(p.state) << ": " << gpustack::Printable(p.error->message)
                << "\n";
    }
    if (p.discovery_error) {
      std::cerr << "error: " << gpustack::Printable(p.discovery_error->message) << "\n";
    }
    for (const std::string& w : p.warnings) {
      std::cerr << "warning: " << gpustack::Printable(w) << "\n";
    }
  }
  if (!report.spec) std::cerr << "error: " << gpustack::Printable(report.spec.error()) << "\n";
}

// The node's runtime after one discovery pass; nullptr (the reason printed) on bad input.
std::unique_ptr<runtime::NodeRuntime> OpenAndDiscover(NodeFlags& flags) {
  if (!ResolveNodeFlags(flags)) return nullptr;
  auto node = dm::OpenNode(flags.options);
  if (!node) {
    std::cerr << "error: " << gpustack::Printable(node.error()) << "\n";
    return nullptr;
  }
  (*node)->Discover();
  return std::move(*node);
}

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
void OnSignal(int signal) {
  g_signal = signal;
  g_stop = true;
  runtime::RequestStop();  // a caller waiting on a plugin gives up its call at once
}

// An interrupted command ends with the shell's status for its signal (130, 143), whatever else.
int Finish(int status) { return g_signal != 0 ? 128 + g_signal : status; }

int RunDetect(NodeFlags& flags, dm::DetectOptions& options, const std::string& output) {
  if (!ResolveNodeFlags(flags)) return kBadInput;
  options.node = flags.options;
  auto report = dm::Detect(options);
  if (!report) {
    std::cerr << "error: " << gpustack::Printable(report.error()) << "\n";
    return kBadInput;
  }
  if (output == "json") {
    std::cout << dm::ToJson(*report).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
  } else if (output == "yaml") {
    std::cout << gpustack::ToYaml(dm::ToJson(*report));
  } else {
    std::cout << dm::ToText(*report);
  }
  std::cout.flush();
  ReportProblems(report->node);
  return report->ok() ? 0 : 1;
}

int RunMonitor(NodeFlags& flags, const std::string& output, double interval, int count,
               bool processes) {
  auto node = OpenAndDiscover(flags);
  if (node == nullptr) return kBadInput;
  const runtime::NodeReport report = node->Report();
  bool failed = !report.ok();
  ReportProblems(report);
  for (int round = 0; !g_stop && (count == 0 || round < count); ++round) {
    if (round > 0) {
      // Sleep in short steps so Ctrl-C stops promptly; plugins shut down on the way out.
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval);
      while (!g_stop && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (g_stop) break;
    }
    const dm::MonitorRound sample = dm::SampleRound(*node, processes);
    failed = failed || !sample.samples.errors.empty();
    if (output == "json") {
      std::cout << dm::ToJson(sample).dump(-1, ' ', false, kReplaceInvalidUtf8) << "\n";
    } else if (output == "yaml") {
      std::cout << "---\n" << gpustack::ToYaml(dm::ToJson(sample));
    } else {
      std::cout << dm::ToText(sample) << "\n";
    }
    std::cout.flush();
    if (output != "text") {  // text shows them in the table already
      for (const std::string& e : sample.samples.errors) {
        std::cerr << "error: " << gpustack::Printable(e) << "\n";
      }
    }
  }
  return failed ? 1 : 0;
}

int RunPreflight(NodeFlags& flags, const dm::PreflightOptions& preflight,
                 const std::string& output) {
  auto node = OpenAndDiscover(flags);
  if (node == nullptr) return kBadInput;
  const auto checks = dm::RunPreflight(*node, preflight);
  if (output == "json") {
    std::cout << dm::ToJson(checks).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
  } else {
    std::cout << dm::ToText(checks);
  }
  if (!dm::AllPassed(checks)) std::cerr << "error: preflight failed: see the checks marked FAIL\n";
  return dm::AllPassed(checks) ? 0 : 1;
}

// Env switches of §10.2 that default to true: anything but false/0/no/off keeps them on.
bool EnvSwitch(const std::string& name, bool fallback) {
  std::string value = Env(name);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value.empty()) return fallback;
  return !(value == "false" || value == "0" || value == "no" || value == "off");
}

int RunServe(NodeFlags& flags, gpustack::node::DaemonOptions& options) {
  if (options.node_name.empty()) options.node_name = Env("KUBERNETES_NODE_NAME");
  if (options.node_name.empty()) options.node_name = Env("NODE_NAME");
  if (options.node_name.empty()) {
    std::cerr << "error: serve needs the node's name: --node-name or KUBERNETES_NODE_NAME\n";
    return kBadInput;
  }
  flags.options.node_name = options.node_name;
  // The reference's "gate off" clamps a card's remaining credits at 0, which over-admits it.
  if (!EnvSwitch("GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE", true)) {
    std::cerr << "warning: GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE=false is not supported: a "
                 "slice that does not fit its card is always refused\n";
  }
  options.allocator.identify_by_kubelet =
      EnvSwitch("GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET", true);
  options.allocator.release_terminated = EnvSwitch("GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS", true);
  if (!ResolveNodeFlags(flags)) return kBadInput;
  if (!flags.state_dir.empty()) {
    auto lock = gpustack::node::LockNode(std::filesystem::path(flags.state_dir) / "serve.lock");
    if (!lock) {
      std::cerr << "error: " << gpustack::Printable(lock.error()) << "\n";
      return 1;
    }
  }
  if (auto lock = gpustack::node::LockDirectory(options.kubelet.device_plugin_dir); !lock) {
    std::cerr << "error: " << gpustack::Printable(lock.error()) << "\n";
    return lock.code() == gpustack::Code::kAlreadyExists ? 1 : kBadInput;
  }
  auto client = gpustack::kube::Client::FromEnvironment();
  if (!client) {
    std::cerr << "error: cannot reach the Kubernetes API: " << gpustack::Printable(client.error())
              << "\n";
    return kBadInput;
  }
  // The Node's plugins.gpustack.ai/<name> labels turn plugins on or off here; a change to them
  // later restarts the daemon (RunDaemon), which then reads them again.
  auto labels = gpustack::node::PluginLabelsOf(**client, options.node_name);
  if (!labels) {
    std::cerr << "error: cannot read node " << options.node_name << ": "
              << gpustack::Printable(labels.error()) << "\n";
    return 1;
  }
  options.plugin_labels = *labels;
  const auto from_labels = gpustack::runtime::EnableOverridesFromLabels(*labels);
  for (const std::string& problem : from_labels.problems)
    std::cerr << "warning: " << problem << "\n";
  flags.options.label_overrides = from_labels.overrides;
  auto node = dm::OpenNode(flags.options);
  if (!node) {
    std::cerr << "error: " << gpustack::Printable(node.error()) << "\n";
    return kBadInput;
  }
  ReportProblems((*node)->Report());
  return gpustack::node::RunDaemon(**node, **client, options, g_stop);
}

struct WorkerFlags {
  gpustack::op::WorkerOptions options;
  std::vector<std::string> plugin_dirs;
  int secure_port = 31443;
  std::string cert_dir;
  double qps = 200;
  int burst = 400;
};

int RunWorkerCommand(WorkerFlags& flags) {
  auto& o = flags.options;
  if (o.webhooks.enabled && o.webhooks.certificates == "cert-manager" &&
      o.webhooks.cert_dir.empty()) {
    std::cerr << "error: --webhook-certificates cert-manager needs --webhook-cert-dir (where the "
                 "cert-manager Secret is mounted)\n";
    return kBadInput;
  }
  o.getenv = [](const std::string& name) { return Env(name); };
  std::string& identity = o.election.identity;
  if (identity.empty()) identity = Env("KUBERNETES_POD_NAME");
  if (identity.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    identity = std::string(host) + "_" + std::to_string(getpid());
  }
  const auto default_dir = gpustack::loader::DefaultPluginDir();
  const auto dirs = gpustack::loader::PluginSearchPath(flags.plugin_dirs,
                                                       Env("GPUSTACK_PLUGIN_PATH"), default_dir);
  std::vector<std::filesystem::path> required;
  for (const auto& dir : dirs)
    if (dir != default_dir.lexically_normal()) required.push_back(dir);
  std::vector<std::string> problems;
  auto manufacturers = gpustack::op::LoadManufacturers(dirs, required, o.getenv, &problems);
  for (const std::string& p : problems) std::cerr << "warning: " << gpustack::Printable(p) << "\n";
  if (!manufacturers) {
    std::cerr << "error: " << gpustack::Printable(manufacturers.error()) << "\n";
    return kBadInput;
  }
  o.manufacturers = std::move(*manufacturers);
  if (o.manufacturers.empty()) {
    std::cerr << "error: no plugin loaded from " << dirs.size()
              << " plugin directory(ies): the worker needs the manufacturer table they declare\n";
    return kBadInput;
  }
  o.serve_https = flags.secure_port != 0;
  o.health.port = static_cast<uint16_t>(flags.secure_port);
  o.health.cert_dir = flags.cert_dir;
  o.health.common_name = "gpustack-operator-worker";
  gpustack::kube::ClientOptions client_options;
  client_options.qps = flags.qps;
  client_options.burst = flags.burst;
  auto client = gpustack::kube::Client::FromEnvironment(client_options);
  if (!client) {
    std::cerr << "error: cannot reach the Kubernetes API: " << gpustack::Printable(client.error())
              << "\n";
    return kBadInput;
  }
  return gpustack::op::RunWorker(**client, o, g_stop);
}

}  // namespace

int main(int argc, char** argv) {
  // First of all: a stop asked for while starting (a DaemonSet rolled at once) is still clean.
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  CLI::App app{"GPUStack Operator: share accelerators between Kubernetes workloads"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("GPUSTACK_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();

  CLI::App* manager = app.add_subcommand("device-manager", "The per-node device manager");
  manager->require_subcommand(1);

  CLI::App* detect = manager->add_subcommand(
      "detect", "Print this node's Devices spec, node profile and which plugins run and why");
  NodeFlags detect_flags;
  dm::DetectOptions detect_options;
  AddNodeFlags(detect, detect_flags);
  std::string detect_output = "yaml";
  detect
      ->add_option("--proc-root", detect_options.proc_root, "Root of the /proc tree (node profile)")
      ->envname("GPUSTACK_PROC_ROOT")
      ->capture_default_str();
  detect->add_option("--data-dir", detect_options.data_dir, "Data directory whose disk is profiled")
      ->envname("GPUSTACK_DATA_DIR")
      ->capture_default_str();
  detect
      ->add_flag("--group-id-with-memory", detect_flags.options.spec.group_id_with_memory,
                 "Append the card's memory to group ids (tesla-t4-16g)")
      ->envname("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY");
  detect
      ->add_option("-o,--output", detect_output,
                   "yaml or json (the Devices object, node profile and plugin decisions), or "
                   "text (a summary)")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();

  CLI::App* monitor = manager->add_subcommand(
      "monitor", "Sample every accelerator: memory, utilization, temperature, power, health");
  NodeFlags monitor_flags;
  AddNodeFlags(monitor, monitor_flags);
  std::string monitor_output = "text";
  double interval = 0;
  int count = 0;
  bool processes = false;
  monitor->add_option("-i,--interval", interval, "Seconds between rounds; 0 samples once")
      ->check(CLI::Range(0.0, 86400.0))  // also refuses nan and inf
      ->capture_default_str();
  monitor->add_option("-c,--count", count, "Rounds to take (0: until interrupted)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  monitor->add_flag("--processes", processes, "Also sample per-process usage");
  monitor->add_option("-o,--output", monitor_output, "text, json (a line per round) or yaml")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();

  CLI::App* preflight = manager->add_subcommand(
      "preflight", "Check what each enabled manufacturer needs on this node, and say what to fix");
  NodeFlags preflight_flags;
  AddNodeFlags(preflight, preflight_flags);
  dm::PreflightOptions preflight_options;
  std::string preflight_output = "text";
  preflight->add_option("--dev-root", preflight_options.dev_root, "Where device nodes live")
      ->envname("GPUSTACK_DEV_ROOT")
      ->capture_default_str();
  preflight
      ->add_option("--containerd-config", preflight_options.containerd_config,
                   "containerd's configuration, for runtime handlers")
      ->capture_default_str();
  preflight->add_option("-o,--output", preflight_output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  CLI::App* serve = manager->add_subcommand(
      "serve", "Run the node daemon: serve the kubelet, allocate, publish the node's Devices");
  NodeFlags serve_flags;
  AddNodeFlags(serve, serve_flags);
  gpustack::node::DaemonOptions serve_options;
  bool no_shared = false, no_sliced = false, no_partitioned = false;
  double discover_period = 60, reconcile_period = 30;
  std::string plugin_dir = serve_options.kubelet.device_plugin_dir.string();
  std::string pod_resources = serve_options.pod_resources_socket.string();
  serve->add_flag("--no-shared", no_shared, "Do not serve <base>.shared");
  serve->add_flag("--no-sliced", no_sliced, "Do not serve <base>.sliced");
  serve->add_flag("--no-partitioned", no_partitioned, "Do not serve <base>.partitioned");
  serve
      ->add_option("--device-plugin-dir", plugin_dir,
                   "The kubelet's device-plugin directory (its kubelet.sock and our sockets)")
      ->envname("GPUSTACK_DEVICE_PLUGIN_DIR")
      ->capture_default_str();
  serve
      ->add_option("--pod-resources-socket", pod_resources,
                   "The kubelet's pod-resources socket (empty: identify Pods from the apiserver "
                   "only)")
      ->envname("GPUSTACK_POD_RESOURCES_SOCKET")
      ->capture_default_str();
  double monitor_period = 15;
  int secure_port = 32443;
  std::string cert_dir;
  serve
      ->add_option("--secure-port", secure_port,
                   "HTTPS port of /metrics, /monitor/snapshot, /livez and /readyz (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve
      ->add_option("--cert-dir", cert_dir,
                   "Directory with tls.crt and tls.key for that port (empty: self-signed)")
      ->envname("GPUSTACK_CERT_DIR");
  serve->add_option("--monitor-period", monitor_period, "Seconds between utilisation samples")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  serve->add_option("--discover-period", discover_period, "Seconds between discovery passes")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  serve
      ->add_option("--reconcile-period", reconcile_period,
                   "Seconds between passes that release what finished or deleted Pods hold")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();

  CLI::App* cleanup = app.add_subcommand(
      "cleanup",
      "Remove what the worker created at run time: webhook configurations, its Kueue objects, the "
      "InstanceTypes' finalizers, the CRDs, its Secrets (the chart's cleanupOnUninstall hook)");
  gpustack::op::CleanupOptions cleanup_options;
  cleanup
      ->add_option("--namespace", cleanup_options.system_namespace,
                   "The system namespace the worker ran in")
      ->envname("KUBERNETES_POD_NAMESPACE")
      ->capture_default_str();
  bool keep_crds = false;
  cleanup->add_flag("--keep-crds", keep_crds, "Leave the operator's CRDs (and their objects)");

  CLI::App* worker = app.add_subcommand(
      "worker", "Run the central worker: node pools, InstanceTypes and the Kueue chain");
  worker->alias("w");
  WorkerFlags worker_flags;
  worker->add_option("--plugin-dir", worker_flags.plugin_dirs,
                     "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                     "default (repeatable); plugins are only identified, never initialised");
  worker
      ->add_option("--namespace", worker_flags.options.system_namespace,
                   "The system namespace: the Lease and the settings Secret live there")
      ->envname("KUBERNETES_POD_NAMESPACE")
      ->capture_default_str();
  worker->add_option("--identity", worker_flags.options.election.identity,
                     "This replica's name in the Lease (default: KUBERNETES_POD_NAME, else "
                     "host_pid)");
  worker
      ->add_option("--secure-port", worker_flags.secure_port,
                   "HTTPS port of /metrics, /livez and /readyz (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  worker->add_option("--cert-dir", worker_flags.cert_dir,
                     "Directory with tls.crt and tls.key (default: a self-signed certificate)");
  worker->add_flag("!--no-kube-leader-election", worker_flags.options.leader_election,
                   "Reconcile without a Lease (one replica only)");
  auto seconds = [](double s) {
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000)));
  };
  double lease = 15, renew = 10, retry = 2;
  worker->add_option("--kube-leader-election-lease-duration", lease, "Seconds")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  worker->add_option("--kube-leader-election-renew-deadline", renew, "Seconds")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  worker->add_option("--kube-leader-election-retry-period", retry, "Seconds")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  auto& hooks = worker_flags.options.webhooks;
  int webhook_port = 9443;
  worker
      ->add_option("--webhook-port", webhook_port,
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
                       std::string(gpustack::op::kWebhookTlsSecret) +
                       "); cert-manager: tls.crt/tls.key from --webhook-cert-dir")
      ->check(CLI::IsMember({"self", "cert-manager"}))
      ->capture_default_str();
  worker->add_option("--webhook-cert-dir", hooks.cert_dir,
                     "The mounted cert-manager Secret (with --webhook-certificates cert-manager)");
  worker->add_flag("!--no-webhook-configurations", hooks.apply_configurations,
                   "Leave the webhook configurations to the chart");
  worker->add_flag("!--no-node-devices-check", worker_flags.options.node_check,
                   "Do not judge Workloads for the gpustack-node-devices AdmissionCheck");
  int retry_after = 5;
  worker
      ->add_option("--node-devices-retry-after", retry_after,
                   "Seconds Kueue waits before retrying a Workload the check found no room for")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  worker->add_option("--kube-conn-qps", worker_flags.qps, "Requests per second to the apiserver")
      ->check(CLI::Range(1.0, 100000.0))
      ->capture_default_str();
  worker->add_option("--kube-conn-burst", worker_flags.burst, "Request burst")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // help on stdout, status 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint
    return kBadInput;
  }
  gpustack::InitLogging(log_level);
  // NaN passes range checks in some CLI11 versions: refuse it here too.
  if (!std::isfinite(interval)) {
    std::cerr << "error: --interval must be a finite number of seconds\n";
    return kBadInput;
  }

  if (detect->parsed()) return Finish(RunDetect(detect_flags, detect_options, detect_output));
  if (monitor->parsed()) {
    if (interval == 0 && count == 0) count = 1;  // no interval: one round
    // Ctrl-C is how a continuous monitor ends: not a failure.
    const int status = RunMonitor(monitor_flags, monitor_output, interval, count, processes);
    return count == 0 && g_signal == SIGINT ? status : Finish(status);
  }
  if (serve->parsed()) {
    serve_options.families = {!no_shared, !no_sliced, !no_partitioned};
    serve_options.kubelet.device_plugin_dir = plugin_dir;
    serve_options.pod_resources_socket = pod_resources;
    serve_options.discover_period =
        std::chrono::milliseconds(static_cast<int64_t>(std::llround(discover_period * 1000)));
    serve_options.reconcile_period =
        std::chrono::milliseconds(static_cast<int64_t>(std::llround(reconcile_period * 1000)));
    serve_options.node_name = serve_flags.options.node_name;
    serve_options.monitor_period =
        std::chrono::milliseconds(static_cast<int64_t>(std::llround(monitor_period * 1000)));
    serve_options.serve_https = secure_port != 0;
    serve_options.exporter.port = static_cast<uint16_t>(secure_port);
    serve_options.exporter.cert_dir = cert_dir;
    // SIGTERM is how a DaemonSet Pod stops: a clean stop, status 0.
    const int status = RunServe(serve_flags, serve_options);
    return g_signal == SIGTERM || g_signal == SIGINT ? status : Finish(status);
  }
  if (worker->parsed()) {
    worker_flags.options.election.lease_duration = seconds(lease);
    worker_flags.options.election.renew_deadline = seconds(renew);
    worker_flags.options.election.retry_period = seconds(retry);
    hooks.enabled = webhook_port >= 0;
    hooks.server.dump_dir = Env("GPUSTACK_WEBHOOK_DUMP_DIR");
    hooks.server.port = static_cast<uint16_t>(std::max(webhook_port, 0));
    worker_flags.options.node_check_options.retry_after = std::chrono::seconds(retry_after);
    const int status = RunWorkerCommand(worker_flags);
    return g_signal == SIGTERM || g_signal == SIGINT ? status : Finish(status);
  }
  if (cleanup->parsed()) {
    auto client = gpustack::kube::Client::FromEnvironment();
    if (!client) {
      std::cerr << "error: cannot reach the Kubernetes API: " << gpustack::Printable(client.error())
                << "\n";
      return kBadInput;
    }
    cleanup_options.crds = !keep_crds;
    cleanup_options.progress = [](const std::string& line) { std::cout << line << std::endl; };
    const auto report = gpustack::op::Cleanup(**client, cleanup_options);
    for (const std::string& problem : report.problems) std::cerr << "error: " << problem << "\n";
    std::cout << report.deleted << " object(s) deleted"
              << (report.problems.empty()
                      ? ""
                      : ", " + std::to_string(report.problems.size()) + " could not be removed")
              << std::endl;
    return Finish(report.problems.empty() ? 0 : 1);
  }
  if (preflight->parsed()) {
    return Finish(RunPreflight(preflight_flags, preflight_options, preflight_output));
  }
  return 0;
}
