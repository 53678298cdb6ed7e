// An informer: lists a resource, then watches it, into a thread-safe cache with indexers, and
// tells event handlers what changed. A watch the server ends is resumed from the last
// resourceVersion seen (bookmarks included); a 410 Gone (too old, e.g. after an etcd
// compaction) lists again and turns the difference into events; other failures are retried
// with capped exponential backoff. Handlers run on the informer's thread, in event order.
#ifndef GPUSTACK_HOST_KUBE_INFORMER_H_
#define GPUSTACK_HOST_KUBE_INFORMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "host/kube/client.h"

namespace gpustack::kube {

using ObjectPtr = std::shared_ptr<const Json>;

struct EventHandler {
  std::function<void(const ObjectPtr&)> on_add = {};
  std::function<void(const ObjectPtr& before, const ObjectPtr& after)> on_update = {};
  std::function<void(const ObjectPtr&)> on_delete = {};
};

// Index values of an object (e.g. its node name); an object may have several or none.
using IndexFunc = std::function<std::vector<std::string>(const Json&)>;

struct InformerOptions {
  std::string label_selector = {};
  std::string field_selector = {};
  int64_t page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{30000};
  // Trims each object before it is cached and handed to the handlers (client-go's transform):
  // a cache keeps only what its readers use, and a fleet's worth of objects fits in memory.
  std::function<void(Json&)> transform = {};
};

struct InformerStats {
  uint64_t lists = 0;
  uint64_t watches = 0;
  uint64_t events = 0;
  uint64_t failures = 0;
  std::string resource_version = {};
};

class Informer {
 public:
  Informer(Client& client, ResourceType type, std::string ns = {}, InformerOptions options = {});
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before Start().
  void AddIndexer(const std::string& name, IndexFunc index);
  void AddEventHandler(EventHandler handler);

  void Start();
  void Stop();
  // Asks the thread to end without waiting for it (Stop waits): many informers end in the time
  // of the slowest, not of their sum.
  void RequestStop();
  // True once the first list is in the cache (and its add events delivered).
  bool WaitForSync(std::chrono::milliseconds timeout);
  bool HasSynced() const { return synced_; }

  ObjectPtr Get(const std::string& key) const;  // null when absent
  std::vector<ObjectPtr> List() const;
  std::vector<ObjectPtr> ByIndex(const std::string& index, const std::string& value) const;
  size_t Size() const;
  InformerStats Stats() const;

 private:
  void Run(std::stop_token stop);
  Status ListAndReplace(std::stop_token stop);
  ObjectPtr Cached(Json object) const;  // transformed, shared
  void Upsert(ObjectPtr object);
  void Remove(const std::string& key, ObjectPtr final_state);
  void IndexLocked(const std::string& key, const Json* before, const Json* after);
  bool SleepFor(std::chrono::milliseconds delay, std::stop_token stop);

  Client& client_;
  ResourceType type_;
  std::string namespace_;
  InformerOptions options_;
  std::vector<EventHandler> handlers_;
  std::map<std::string, IndexFunc> indexers_;

  mutable std::shared_mutex cache_mutex_;
  std::unordered_map<std::string, ObjectPtr> objects_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indices_;

  mutable std::mutex state_mutex_;
  std::condition_variable_any state_changed_;
  InformerStats stats_;
  std::atomic<bool> synced_{false};
  std::jthread thread_;
};

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_INFORMER_H_
