// The worker.gpustack.ai/v1 and gpustack.ai/v1 aggregated APIs: routes on the worker's HTTPS
// server (the one that serves the webhooks), behind the aggregating apiserver. Every replica
// serves them from its own caches. Each request is authenticated (the front proxy's client
// certificate and the user it names) and authorized (a SubjectAccessReview) before a kind's
// backend (backend.h) answers it. docs/architecture.md §5 says which API conventions are
// honoured and which are not.
#ifndef GPUSTACK_HOST_API_API_SERVER_H_
#define GPUSTACK_HOST_API_API_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/api/backend.h"
#include "host/api/settings_kind.h"
#include "host/https/server.h"
#include "host/kube/client.h"

namespace gpustack::api {

struct ApiOptions {
  std::string system_namespace = "gpustack-system";
  std::vector<SettingSpec> settings;  // the Setting kind's table
  std::chrono::milliseconds bookmark_every{10000};
  std::chrono::milliseconds authentication_refresh{30000};
  size_t events_kept = 1000;  // per kind: how far back a watch may resume
  std::chrono::seconds max_watch{1800};
  // The helper kinds (InstanceSSHPublicKey ...) read and write Secrets, PVCs and StorageClasses
  // in every namespace: off when the worker is not allowed to.
  bool helpers = true;
  // Answers `instances/<name>/metrics` for the Instance the cache holds (docs/behaviour.md §8.1);
  // unset: a 503 saying the worker does not serve it.
  std::function<https::Response(const Json& instance)> instance_metrics;
};

class ApiServer {
 public:
  ApiServer(kube::Client& client, ApiOptions options);
  ~ApiServer();

  // The kinds and their caches; an error when a kind's definition does not build.
  Status Start();
  void Stop();
  // /apis/..., /openapi/..., /healthz, /livez, /readyz.
  std::vector<https::Route> Routes();
  bool ready() const;
  std::vector<std::string> groups() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The APIService that registers `group` with the aggregator: the Service `service` in
// `service_namespace` on `port`, trusted with `ca_bundle` (PEM; empty: left to cert-manager's
// cainjector, annotated from `certificate`).
nlohmann::json RenderApiService(const std::string& group, const std::string& service_namespace,
                                const std::string& service, int port, const std::string& ca_bundle,
                                const std::string& certificate);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_API_SERVER_H_
