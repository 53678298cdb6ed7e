// An informer: lists a resource, then watches it, into a thread-safe cache with indexers, and
// tells event handlers what changed. A watch the server ends is resumed from the last
// resourceVersion seen (bookmarks included); a 410 Gone (too old, e.g. after an etcd
// compaction) lists again and turns the difference into events; other failures are retried
// with capped exponential backoff. Handlers run on the informer's thread, in event order.
//
// Two halves, as client-go has them: InformerBase is the list-then-watch loop (its Reflector),
// BasicInformer<Object> the cache of what it saw. An informer caches JSON objects (`Informer`),
// or a typed record projected from each (a fleet's bound Pods: a few hundred bytes each instead
// of a few kilobytes of JSON map nodes, docs/footprint.md). A record type provides, found by
// argument-dependent lookup, `std::string CacheKey(const Record&)` (the object's
// namespace/name) and `std::string CacheVersion(const Record&)` (its resourceVersion).
//
// Informers of the same objects (one Client, type, namespace, selectors, page size and watch
// timeout) share one list and watch, as client-go's shared informers do: the first started runs
// it and feeds every such cache, each with its own transform, projection and handlers; one started
// later joins at a list it asks for, so its cache starts whole. Their handlers all run on the
// running one's thread, one after another: a handler must not start or stop an informer, and a
// slow one delays every cache of its feed. When the running one stops, another takes over
// (docs/footprint.md).
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
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "host/kube/client.h"

namespace gpustack::kube {

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

// The list-then-watch loop, on its own thread; what it sees goes to the cache's hooks.
class InformerBase {
 public:
  virtual ~InformerBase();
  InformerBase(const InformerBase&) = delete;
  InformerBase& operator=(const InformerBase&) = delete;

  // Runs the list and watch, or joins the informer of the same objects that already does.
  void Start();
  void Stop();
  // Asks the thread to end without waiting for it (Stop waits): many informers end in the time
  // of the slowest, not of their sum. The caches it feeds get nothing more until its Stop hands
  // them over; an informer fed by another leaves it at its Stop.
  void RequestStop();
  // True once the first list is in the cache (and its add events delivered).
  bool WaitForSync(std::chrono::milliseconds timeout);
  bool HasSynced() const { return synced_; }
  InformerStats Stats() const;
  virtual size_t Size() const = 0;

 protected:
  InformerBase(Client& client, ResourceType type, std::string ns, InformerOptions options);
  const InformerOptions& options() const { return options_; }

  // The cache's side, called on the informer's thread. A list hands over its items one by one
  // as its pages arrive (Stage), then either all at once (CommitStaged: the difference becomes
  // events) or none (DropStaged: the list failed or was stopped).
  virtual void Stage(Json& item) = 0;
  virtual void CommitStaged() = 0;
  virtual void DropStaged() = 0;
  virtual void Apply(WatchEventType type, Json& object) = 0;

 private:
  struct FeedKey;
  FeedKey Key() const;
  static std::map<FeedKey, InformerBase*>& Running();  // the informer that runs each feed
  void StartThread();
  void RequestStopLocked();
  void Run(std::stop_token stop);
  Status ListAndReplace(std::stop_token stop);
  bool SleepFor(std::chrono::milliseconds delay, std::stop_token stop);
  // The running informer's side of sharing: a joiner is fed from the next list on, which it asks
  // for by ending the current watch; each hook goes to the fed caches (a copy each), then to
  // this one's.
  void Join(InformerBase* joiner);
  void StageAll(Json& item);
  void DropAll();
  void CommitAll(const InformerStats& stats);
  void ApplyAll(WatchEventType type, Json& object, const InformerStats& stats);
  void Synced(const InformerStats& stats);  // a fed cache's state, as the running one's

  // Sharing, under the registry's mutex: the informer that feeds this one (null if none).
  InformerBase* feeder_ = nullptr;
  // The caches this one feeds, and those fed from its next list on; under feed_mutex_, which a
  // delivery holds, so a cache that leaves is never called after it left.
  std::mutex feed_mutex_;
  std::vector<InformerBase*> fed_;
  std::vector<InformerBase*> joining_;
  std::stop_source* current_watch_ = nullptr;  // under feed_mutex_
  std::atomic<bool> relist_{false};

  Client& client_;
  ResourceType type_;
  std::string namespace_;
  InformerOptions options_;

  mutable std::mutex state_mutex_;
  std::condition_variable_any state_changed_;
  InformerStats stats_;
  std::atomic<bool> synced_{false};
  std::jthread thread_;
};

// The cache key and resourceVersion of a JSON object.
inline std::string CacheKey(const Json& object) { return ObjectKey(object); }
std::string CacheVersion(const Json& object);

template <typename Object>
struct BasicEventHandler {
  using Ptr = std::shared_ptr<const Object>;
  std::function<void(const Ptr&)> on_add = {};
  std::function<void(const Ptr& before, const Ptr& after)> on_update = {};
  std::function<void(const Ptr&)> on_delete = {};
};

template <typename Object>
class BasicInformer final : public InformerBase {
 public:
  using Ptr = std::shared_ptr<const Object>;
  // Index values of an object (e.g. its node name); an object may have several or none.
  using IndexFunc = std::function<std::vector<std::string>(const Object&)>;
  // A record from an object already transformed (records only).
  using Projection = std::function<Object(Json&&)>;

  BasicInformer(Client& client, ResourceType type, std::string ns = {},
                InformerOptions options = {}) requires std::is_same_v<Object, Json>
      : InformerBase(client, std::move(type), std::move(ns), std::move(options)) {}
  // A record informer cannot be made without its projection.
  BasicInformer(Client& client, ResourceType type, std::string ns, InformerOptions options,
                Projection project) requires(!std::is_same_v<Object, Json>)
      : InformerBase(client, std::move(type), std::move(ns), std::move(options)),
        project_(std::move(project)) {}
  ~BasicInformer() override { Stop(); }

  // Before Start().
  void AddIndexer(const std::string& name, IndexFunc index) { indexers_[name] = std::move(index); }
  void AddEventHandler(BasicEventHandler<Object> handler) {
    handlers_.push_back(std::move(handler));
  }

  Ptr Get(const std::string& key) const {  // null when absent
    std::shared_lock lock(cache_mutex_);
    auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second;
  }
  std::vector<Ptr> List() const {
    std::shared_lock lock(cache_mutex_);
    std::vector<Ptr> out;
    out.reserve(objects_.size());
    for (const auto& [key, object] : objects_) out.push_back(object);
    return out;
  }
  std::vector<Ptr> ByIndex(const std::string& index, const std::string& value) const {
    std::shared_lock lock(cache_mutex_);
    std::vector<Ptr> out;
    auto by_value = indices_.find(index);
    if (by_value == indices_.end()) return out;
    auto keys = by_value->second.find(value);
    if (keys == by_value->second.end()) return out;
    for (const auto& key : keys->second)
      if (auto it = objects_.find(key); it != objects_.end()) out.push_back(it->second);
    return out;
  }
  size_t Size() const override {
    std::shared_lock lock(cache_mutex_);
    return objects_.size();
  }

 private:
  Ptr Cached(Json& object) const {
    if (options().transform) options().transform(object);
    if constexpr (std::is_same_v<Object, Json>) {
      return std::make_shared<const Json>(std::move(object));
    } else {
      return std::make_shared<const Object>(project_(std::move(object)));
    }
  }

  void Stage(Json& item) override { staged_.push_back(Cached(item)); }
  void DropStaged() override { staged_ = {}; }

  // Objects gone while we were not watching are deletions; changed ones are updates.
  void CommitStaged() override {
    std::set<std::string> listed;
    for (Ptr& object : staged_) {
      std::string key = CacheKey(*object);
      listed.insert(key);
      Ptr current = Get(key);
      if (current == nullptr || CacheVersion(*current) != CacheVersion(*object))
        Upsert(std::move(object));
    }
    staged_ = {};
    std::vector<std::string> vanished;
    {
      std::shared_lock lock(cache_mutex_);
      for (const auto& [key, object] : objects_)
        if (!listed.contains(key)) vanished.push_back(key);
    }
    for (const auto& key : vanished) Remove(key, nullptr);
  }

  void Apply(WatchEventType type, Json& object) override {
    if (type == WatchEventType::kAdded || type == WatchEventType::kModified) {
      Upsert(Cached(object));
    } else if (type == WatchEventType::kDeleted) {
      Ptr deleted = Cached(object);
      Remove(CacheKey(*deleted), deleted);
    }
  }

  void IndexLocked(const std::string& key, const Object* before, const Object* after) {
    for (const auto& [name, index] : indexers_) {
      auto& by_value = indices_[name];
      if (before != nullptr) {
        for (const auto& value : index(*before)) {
          auto it = by_value.find(value);
          if (it == by_value.end()) continue;
          it->second.erase(key);
          if (it->second.empty()) by_value.erase(it);
        }
      }
      if (after != nullptr)
        for (const auto& value : index(*after)) by_value[value].insert(key);
    }
  }

  void Upsert(Ptr object) {
    std::string key = CacheKey(*object);
    Ptr before;
    {
      std::unique_lock lock(cache_mutex_);
      auto& slot = objects_[key];
      before = slot;
      IndexLocked(key, before.get(), object.get());
      slot = object;
    }
    for (const auto& handler : handlers_) {
      if (before == nullptr) {
        if (handler.on_add) handler.on_add(object);
      } else if (handler.on_update) {
        handler.on_update(before, object);
      }
    }
  }

  void Remove(const std::string& key, Ptr final_state) {
    Ptr before;
    {
      std::unique_lock lock(cache_mutex_);
      auto it = objects_.find(key);
      if (it == objects_.end()) return;
      before = it->second;
      IndexLocked(key, before.get(), nullptr);
      objects_.erase(it);
    }
    // Handlers see the object as it was deleted (finalizers, last status) when the watch said so.
    const Ptr& deleted = final_state ? final_state : before;
    for (const auto& handler : handlers_)
      if (handler.on_delete) handler.on_delete(deleted);
  }

  Projection project_;
  std::vector<BasicEventHandler<Object>> handlers_;
  std::map<std::string, IndexFunc> indexers_;
  std::vector<Ptr> staged_;  // a list in progress, on the informer's thread

  mutable std::shared_mutex cache_mutex_;
  std::unordered_map<std::string, Ptr> objects_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indices_;
};

// Most informers cache the JSON objects themselves.
extern template class BasicInformer<Json>;
using Informer = BasicInformer<Json>;
using ObjectPtr = Informer::Ptr;
using EventHandler = BasicEventHandler<Json>;
using IndexFunc = Informer::IndexFunc;

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_INFORMER_H_
