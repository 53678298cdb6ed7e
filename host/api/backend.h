// How one kind of the v1 API is served. Reads (get, list, watch) come from the backend's
// ServedCache, which its informers keep; writes are the backend's own: a proxy forwards them to
// the v1alpha1 storage, a derived kind (Setting, the helpers) maps them onto the objects it is
// derived from, a catalog (InstanceTypeFlavor) refuses them.
#ifndef GPUSTACK_HOST_API_BACKEND_H_
#define GPUSTACK_HOST_API_BACKEND_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host/api/cache.h"
#include "host/api/http.h"
#include "host/api/kinds.h"
#include "host/kube/client.h"

namespace gpustack::api {

class Backend {
 public:
  Backend(Kind kind, size_t events_kept) : kind_(std::move(kind)), cache_(events_kept) {}
  virtual ~Backend() = default;

  const Kind& kind() const { return kind_; }
  ServedCache& cache() { return cache_; }

  virtual void Start() = 0;
  virtual void Stop() = 0;
  // On the server's timer: mark the cache synced once the informers are, and let bookmarks
  // carry the informers' newest version.
  virtual void Tick() = 0;
  // Whether the worker's readiness waits for this kind (an optional source, Kueue's flavors,
  // must not hold the webhooks back).
  virtual bool RequiredForReadiness() const { return true; }

  // A get the cache cannot answer. The default: 404.
  virtual https::Response Miss(const Call& call);
  // create, update, patch, delete, deletecollection, and every subresource call.
  virtual https::Response Write(const Call& call) = 0;

  // Read-your-writes: an object this replica wrote, kept until the cache has caught up.
  ServedPtr Recent(const std::string& key, ServedPtr cached);
  void Remember(const Json& served);

  https::Response NotFound(const Call& call) const;

 protected:
  Kind kind_;
  ServedCache cache_;

 private:
  std::mutex recent_mutex_;
  std::map<std::string, ServedPtr> recent_;
};

// Instance, Devices, InstanceType: the v1alpha1 objects, converted (kinds.h). `metrics` answers
// the metrics subresource of a kind that has one, given the served object (parsed from its text).
using MetricsHandler = std::function<https::Response(const Json& object)>;
std::unique_ptr<Backend> MakeProxyBackend(kube::Client& client, Kind kind, size_t events_kept,
                                          MetricsHandler metrics = {});

// A kind derived from other objects: whenever one of the sources changes, every served object
// is derived again and the differences become the kind's events.
struct DerivedSource {
  kube::ResourceType type;
  std::string ns;
  std::string label_selector;
  std::string field_selector;
  // A kind the cluster may not serve (Kueue's): while it is not served, it counts as empty.
  bool optional = false;
};
struct DerivedKind {
  std::vector<DerivedSource> sources;
  // The served objects (without resourceVersion) from each source's objects, by source.
  std::function<std::vector<Json>(const std::vector<std::vector<ObjectPtr>>& sources)> derive;
  // The writes: null for a read-only kind. `current` is the cached object (null when absent).
  std::function<https::Response(kube::Client& client, const Call& call, const ObjectPtr& current)>
      write;
  bool required_for_readiness = true;
};
std::unique_ptr<Backend> MakeDerivedBackend(kube::Client& client, Kind kind, DerivedKind derived,
                                            size_t events_kept);

// Sends `request` to the apiserver and passes the answer on (a Status that names the storage
// version is reworded to v1); any other answer goes through `convert` (storage -> served form).
https::Response Relay(kube::Client& client, kube::HttpRequest request,
                      const std::function<Json(Json)>& convert);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_BACKEND_H_
