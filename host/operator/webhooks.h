// The worker's admission webhooks as a running thing: the HTTPS server (every replica), the
// caches the rules read (InstanceTypes by entrance, the settings), the certificate (made and
// rotated by the worker, or cert-manager's from a directory) and the webhook configurations the
// apiserver calls them through.
#ifndef GPUSTACK_HOST_OPERATOR_WEBHOOKS_H_
#define GPUSTACK_HOST_OPERATOR_WEBHOOKS_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "host/api/api_server.h"
#include "host/https/server.h"
#include "host/kube/client.h"
#include "host/operator/fleet.h"

namespace gpustack::op {

inline constexpr const char* kMutatingConfiguration = "gpustack-worker-mutation";
inline constexpr const char* kValidatingConfiguration = "gpustack-worker-validation";
inline constexpr const char* kWebhookTlsSecret = "gpustack-worker-webhook-tls";
inline constexpr const char* kWebhooksManager = "gpustack-worker-webhooks";

struct WebhookOptions {
  bool enabled = true;
  // Four threads: a v1 write waits on the apiserver on one of them.
  https::ServerOptions server{.name = "webhooks", .port = 9443, .threads = 4};
  // How the apiserver reaches us: a URL base (a control plane outside the cluster, tests) or,
  // when empty, the Service `service` in the system namespace on `service_port`.
  std::string url;
  std::string service = "gpustack-operator-worker-webhook";
  uint16_t service_port = 443;
  // "self": the worker keeps a CA and serving certificate in the Secret kWebhookTlsSecret and
  // patches the CA into the configurations. "cert-manager": tls.crt/tls.key from `cert_dir`
  // (re-read when they change), the CA injected by cert-manager's cainjector from `certificate`.
  std::string certificates = "self";
  std::filesystem::path cert_dir;
  std::string certificate = "gpustack-operator-worker-webhook";  // cert-manager Certificate
  bool apply_configurations = true;                              // false: the chart owns them
  // Gate 3 runs and pins admitted Pods to nodes: the Pod webhook adds no fit affinity.
  bool nodes_pinned = true;
  // The worker.gpustack.ai/v1 aggregated API, on the same server and certificate
  // (docs/decisions.md D49), and its APIService (with apply_configurations).
  bool serve_api = true;
  // With `url` (a control plane outside the cluster): the address the apiserver reaches this
  // process at. The worker then keeps a Service without selector and its Endpoints pointing
  // there, which the APIService names (the aggregator resolves them with
  // --enable-aggregator-routing). Empty with `url`: the API is served but not registered.
  std::string api_address;
  api::ApiOptions api{};  // its system namespace and settings table: the worker's
};

// The two webhook configurations (docs/behaviour.md §4.1 scope): pods (CREATE, with a queue-name
// label, outside kube-system and the system namespace, failurePolicy Fail), Workloads (fit-pin,
// failurePolicy Ignore), InstanceTypes and Instances (Fail). `ca_bundle` is PEM (empty: left to
// cainjector).
std::vector<Json> RenderWebhookConfigurations(const WebhookOptions& options,
                                              const std::string& system_namespace,
                                              const std::string& ca_bundle);

// The names a serving certificate must carry for `options` (DNS names, IP addresses).
std::pair<std::vector<std::string>, std::vector<std::string>> ServingNames(
    const WebhookOptions& options, const std::string& system_namespace);

class AdmissionWebhooks {
 public:
  AdmissionWebhooks(kube::Client& client, WebhookOptions options, std::string system_namespace,
                    ManufacturerTable manufacturers);
  ~AdmissionWebhooks();

  // Certificates, caches, the server and the configurations; an error says which failed.
  Status Start();
  void Stop();
  uint16_t port() const;
  bool ready() const;  // the webhooks' caches and, when served, the v1 API's
  std::string RenderMetrics() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_WEBHOOKS_H_
