// The worker.gpustack.ai/v1 aggregated API: routes on the worker's HTTPS server (the one that
// serves the webhooks), behind the aggregating apiserver. Every replica serves it: reads (get,
// list, watch) from its own caches of the v1alpha1 objects, writes forwarded to the v1alpha1
// storage after the caller is authenticated (front proxy) and authorized (SubjectAccessReview),
// so the CRD's schema, the admission webhooks, resourceVersion conflicts, dryRun,
// fieldValidation, managedFields and server-side apply are the apiserver's own.
// docs/architecture.md §5 says which API conventions are honoured and which are not.
#ifndef GPUSTACK_HOST_API_API_SERVER_H_
#define GPUSTACK_HOST_API_API_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "host/api/kinds.h"
#include "host/https/server.h"
#include "host/kube/client.h"

namespace gpustack::api {

struct ApiOptions {
  std::chrono::milliseconds bookmark_every{10000};
  std::chrono::milliseconds authentication_refresh{30000};
  size_t events_kept = 1000;  // per kind: how far back a watch may resume
  std::chrono::seconds max_watch{1800};
};

class ApiServer {
 public:
  ApiServer(kube::Client& client, std::vector<Kind> kinds, ApiOptions options = {});
  ~ApiServer();

  // The caches and the front-proxy configuration; serving starts once the routes are mounted.
  Status Start();
  void Stop();
  // /apis/..., /openapi/..., /healthz, /livez, /readyz.
  std::vector<https::Route> Routes();
  bool ready() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The APIService that registers the API with the aggregator: the Service `service` in
// `service_namespace` on `port`, trusted with `ca_bundle` (PEM; empty: left to cert-manager's
// cainjector, annotated from `certificate`).
nlohmann::json RenderApiService(const std::string& service_namespace, const std::string& service,
                                int port, const std::string& ca_bundle,
                                const std::string& certificate);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_API_SERVER_H_
