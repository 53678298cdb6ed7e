// What one kind's v1 reads are served from: the objects in their served form, at a
// resourceVersion, and the recent events, so that a list, a get and a watch from any recent
// resourceVersion agree (k8s.io/apiserver's watch cache, small). An informer feeds it; a watch
// from a version older than what is kept gets 410 Expired and the client lists again.
// resourceVersions are etcd's revisions: compared as numbers here, opaque to clients.
// Thread-safe; no I/O.
#ifndef GPUSTACK_HOST_API_CACHE_H_
#define GPUSTACK_HOST_API_CACHE_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host/api/selectors.h"
#include "host/common/packed_text.h"
#include "host/common/result.h"

namespace gpustack::api {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// One object as the v1 API serves it: its text (what a get, a list and a watch send), and what
// selectors and resumed watches read of it. The parsed object is not kept: at 1,000 nodes the
// Devices objects as JSON were most of the worker's memory (docs/footprint.md). A table, a
// metrics read or a write parses the text again.
struct ServedObject {
  Selectable selectable;  // namespace, name, labels
  uint64_t resource_version = 0;
  // Kept packed: the texts were the largest part of the worker's heap. Unpacked for each get,
  // list item and watch event.
  PackedText text;

  std::string key() const;  // namespace/name, or name
  nlohmann::json Parse() const;
};
using ServedPtr = std::shared_ptr<const ServedObject>;

// Serializes the object once.
ServedObject ServedObjectOf(const nlohmann::json& served);
// For an informer that keeps ServedObjects (kube/informer.h finds them by argument lookup).
inline std::string CacheKey(const ServedObject& object) { return object.key(); }
inline std::string CacheVersion(const ServedObject& object) {
  return std::to_string(object.resource_version);
}

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  ServedPtr object;
  uint64_t resource_version = 0;
  // The BOOKMARK that ends a watch's initial events (sendInitialEvents, the watch-list of
  // client-go): sent whether or not the client allows bookmarks otherwise.
  bool initial_events_end = false;
};

// One watcher: where its events go and which it wants (namespace, selectors).
struct Watcher {
  std::function<bool(const ServedObject& object)> wants;
  // Gets each event in order; returns false when the watcher is gone.
  std::function<bool(const WatchEvent&)> deliver;
};

class ServedCache {
 public:
  explicit ServedCache(size_t event_capacity = 1000) : capacity_(event_capacity) {}

  // The informer's events (objects already in the served form).
  void Upsert(ServedPtr object);
  void Remove(ServedPtr final_state);
  void Upsert(const nlohmann::json& object);  // serialized here
  void Remove(const nlohmann::json& final_state);
  // The initial list is in: events before `list_version` cannot be replayed.
  void MarkSynced(uint64_t list_version);
  // The informer's newest resourceVersion (its bookmarks), which may pass the last event's.
  void Advance(uint64_t resource_version);

  struct Snapshot {
    std::vector<ServedPtr> objects;  // by key (namespace/name)
    uint64_t resource_version = 0;
  };
  Snapshot List() const;
  ServedPtr Get(const std::string& key) const;  // null when absent
  uint64_t resource_version() const;
  bool synced() const;

  // Starts a watch. From 0: every current object as ADDED first. From a version: the events
  // after it. An Error (http_status 410, reason Expired) when it is older than what is kept.
  // Returns the watcher's id (for Unwatch).
  // `initial_events_end`: from 0, a BOOKMARK marks the end of the initial events.
  Result<uint64_t> Watch(uint64_t from, Watcher watcher, bool initial_events_end = false);
  void Unwatch(uint64_t id);
  // A BOOKMARK at the current version to every watcher, on the caller's timer: a watcher sends it
  // on when its client allows bookmarks, and says it is gone once its time is up.
  void Bookmark();
  size_t watchers() const;

 private:
  // Delivers a live event and keeps it as history.
  void AppendLocked(const WatchEvent& event);

  size_t capacity_;
  mutable std::mutex mutex_;
  std::map<std::string, ServedPtr> objects_;
  // History outlives the versions it holds; each is kept as its text, shared with the cache's
  // entry while it is current, so a watch that resumes gets each version as it was.
  struct KeptEvent {
    std::string type;
    ServedPtr object;
  };
  std::deque<KeptEvent> events_;
  uint64_t version_ = 0;  // the newest version this cache is at
  uint64_t horizon_ = 0;  // events after this one are all in events_
  bool synced_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Watcher> watchers_;
};

// metadata.resourceVersion as a number; 0 when absent or not a number.
uint64_t VersionOf(const nlohmann::json& object);
std::string KeyOf(const nlohmann::json& object);
// The cache's key: namespace/name, or the name of a cluster-scoped object.
std::string KeyOf(const std::string& ns, const std::string& name);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_CACHE_H_
