// `worker-gateway`: the multi-cluster gateway's flags and start-up (docs/behaviour.md §11).
#include <iostream>
#include <thread>

#include "host/cmd/command.h"
#include "host/common/files.h"
#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "host/common/text.h"
#include "host/gateway/gateway.h"

namespace gpustack::cmd {
namespace {

struct GatewayCommand {
  gateway::GatewayOptions options;
  std::string mode = "loopback";
  double readiness_timeout = 30;
  double kube_timeout = 300;
  std::string unix_path = "/var/lib/gpustack/gpustack-operator-worker-gateway.sock";
  std::string bind_address = "0.0.0.0";
  int secure_port = 0;
  std::string cert_dir;
  std::string client_ca_file;
  CLI::Option* unix_option = nullptr;
  CLI::Option* port_option = nullptr;

  int Run() { return FinishDaemon(Start()); }

  Status Resolve() {
    if (readiness_timeout > kube_timeout)
      return Error{"--worker-readiness-check-timeout (" + Text(readiness_timeout) +
                   " s) may not exceed --kube-conn-timeout (" + Text(kube_timeout) + " s)"};
    options.connection.mode =
        mode == "loopback" ? gateway::ConnMode::kLoopback : gateway::ConnMode::kGpustackApi;
    options.connection.readiness_timeout = Milliseconds(readiness_timeout);
    options.connection.request_timeout = Milliseconds(kube_timeout);
    // --secure-port alone asks for HTTPS; the unix socket is the default otherwise.
    const bool port_given = port_option->count() > 0;
    const bool unix_given = unix_option->count() > 0;
    if (port_given && unix_given && !unix_path.empty())
      return Error{
          "--secure-port and --bind-unix-path both given: serve on one (pass "
          "--bind-unix-path '' for HTTPS)"};
    if (port_given || unix_path.empty()) {
      unix_path.clear();
      if (secure_port < 1)
        return Error{"--secure-port must be 1-65535 when not serving on a unix socket"};
      // Over the network the views (every member's Instances and SSH keys) need a client
      // identity: the socket's file mode is what guards them otherwise.
      if (client_ca_file.empty())
        return Error{"serving HTTPS needs --client-ca-file: clients must present a certificate"};
      auto ca = ReadSmallFile(client_ca_file, 1 << 20, "--client-ca-file");
      if (!ca) return ca.failure();
      if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
        return Error{"--client-ca-file " + client_ca_file + ": no PEM certificate in it"};
      options.client_ca = std::move(*ca);
    }
    return Ok{};
  }

  int Start() {
    if (Status resolved = Resolve(); !resolved) {
      std::cerr << "error: " << resolved.error() << "\n";
      return kBadInput;
    }
    gateway::Gateway gateway(options);
    if (Status started = gateway.Start(); !started) {
      std::cerr << "error: " << Printable(started.error()) << "\n";
      return kBadInput;
    }
    https::EndpointOptions endpoint;
    endpoint.server.name = "worker-gateway";
    endpoint.server.unix_socket = unix_path;
    endpoint.server.address = bind_address;
    endpoint.server.port = static_cast<uint16_t>(secure_port);
    endpoint.server.threads = 2;
    endpoint.server.request_client_certificate = !options.client_ca.empty();
    endpoint.cert_dir = cert_dir;
    endpoint.common_name = "gpustack-operator-worker-gateway";
    auto server = https::StartEndpoint(endpoint, gateway.Routes());
    if (!server) {
      std::cerr << "error: " << Printable(server.error()) << "\n";
      return kBadInput;
    }
    Logger("gateway")->info(
        "serving on {}", unix_path.empty()
                             ? "https://" + bind_address + ":" + std::to_string((*server)->port())
                             : "unix:" + unix_path);
    while (SleepUnlessStopped(std::chrono::hours(1))) {
    }
    (*server)->Stop();
    gateway.Stop();
    return 0;
  }

  static std::string Text(double seconds) {
    std::string s = std::to_string(seconds);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  }
};

}  // namespace

Command AddWorkerGateway(CLI::App& root) {
  auto c = std::make_shared<GatewayCommand>();
  CLI::App* wg = root.add_subcommand(
      "worker-gateway",
      "Serve InstanceTypes and capacity aggregated over several clusters' workers");
  wg->alias("wg");
  wg->add_option("--cluster-config", c->options.config,
                 "The member clusters: a YAML file of names and kubeconfigs (docs/gateway.md); "
                 "re-read when it changes")
      ->required();
  wg->add_option("--worker-conn-mode", c->mode,
                 "loopback: each member's kubeconfig; gpustack-api: through a GPUStack server's "
                 "cluster proxy with each member's token")
      ->check(CLI::IsMember({"loopback", "gpustack-api"}))
      ->capture_default_str();
  wg->add_option("--worker-conn-gpustack-api-host", c->options.connection.gpustack_api_host,
                 "The GPUStack server (gpustack-api mode)")
      ->capture_default_str();
  wg->add_option("--worker-conn-gpustack-api-port", c->options.connection.gpustack_api_port,
                 "Its port (gpustack-api mode)")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  wg->add_option("--worker-readiness-check-timeout", c->readiness_timeout,
                 "Seconds a member's v1 API may take to answer before its figures stop counting")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  wg->add_option("--kube-conn-timeout", c->kube_timeout, "Seconds for each request to a member")
      ->check(CLI::Range(10.0, 3600.0))
      ->capture_default_str();
  c->unix_option = wg->add_option("--bind-unix-path", c->unix_path,
                                  "Serve plain HTTP on this unix socket (mode 0600); empty: HTTPS "
                                  "on --bind-address:--secure-port")
                       ->capture_default_str();
  wg->add_option("--bind-address", c->bind_address, "HTTPS address (without a unix socket)")
      ->capture_default_str();
  c->port_option = wg->add_option("--secure-port", c->secure_port,
                                  "HTTPS port; giving it serves HTTPS instead of the unix socket")
                       ->check(CLI::Range(0, 65535));
  wg->add_option("--client-ca-file", c->client_ca_file,
                 "PEM CA bundle that signs the clients' certificates (needed for HTTPS)");
  wg->add_option("--cert-dir", c->cert_dir,
                 "Directory with tls.crt and tls.key (default: a self-signed certificate)");
  return {wg, [c] { return c->Run(); }};
}

}  // namespace gpustack::cmd
