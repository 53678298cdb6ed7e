#include "host/api/cache.h"

#include <charconv>

#include "host/common/json_path.h"

namespace gpustack::api {

uint64_t VersionOf(const nlohmann::json& object) {
  const std::string text = StringAt(object, {"metadata", "resourceVersion"});
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() ? value : 0;
}

std::string KeyOf(const nlohmann::json& object) {
  return KeyOf(StringAt(object, {"metadata", "namespace"}), StringAt(object, {"metadata", "name"}));
}

std::string KeyOf(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string ServedObject::key() const { return KeyOf(selectable.ns, selectable.name); }

// The text is this cache's own serialization of a parsed object: it parses.
nlohmann::json ServedObject::Parse() const { return nlohmann::json::parse(text.Text()); }

ServedObject ServedObjectOf(const nlohmann::json& served) {
  return {Selectable::Of(served), VersionOf(served), PackedText::Of(served.dump())};
}

void ServedCache::AppendLocked(const WatchEvent& event) {
  if (event.resource_version <= version_ && synced_) {
    // Out of order: the informer listed again and is replaying differences. What came before
    // can no longer be replayed faithfully.
    horizon_ = std::max(horizon_, version_);
    events_.clear();
  }
  version_ = std::max(version_, event.resource_version);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    const Watcher& w = it->second;
    if (w.wants && !w.wants(*event.object)) {
      ++it;
      continue;
    }
    it = w.deliver(event) ? std::next(it) : watchers_.erase(it);
  }
  if (!synced_) return;  // the initial list is state, not history
  events_.push_back({event.type, event.object});
  while (events_.size() > capacity_) {
    horizon_ = events_.front().object->resource_version;
    events_.pop_front();
  }
}

void ServedCache::Upsert(ServedPtr object) {
  std::lock_guard lock(mutex_);
  ServedPtr& slot = objects_[object->key()];
  const bool existed = slot != nullptr;
  slot = object;
  AppendLocked({existed ? "MODIFIED" : "ADDED", object, object->resource_version});
}

void ServedCache::Remove(ServedPtr final_state) {
  std::lock_guard lock(mutex_);
  objects_.erase(final_state->key());
  AppendLocked({"DELETED", final_state, final_state->resource_version});
}

void ServedCache::Upsert(const nlohmann::json& object) {
  Upsert(std::make_shared<const ServedObject>(ServedObjectOf(object)));
}

void ServedCache::Remove(const nlohmann::json& final_state) {
  Remove(std::make_shared<const ServedObject>(ServedObjectOf(final_state)));
}

void ServedCache::MarkSynced(uint64_t list_version) {
  std::lock_guard lock(mutex_);
  version_ = std::max(version_, list_version);
  horizon_ = version_;
  synced_ = true;
}

void ServedCache::Advance(uint64_t resource_version) {
  std::lock_guard lock(mutex_);
  if (!synced_ || resource_version <= version_) return;
  version_ = resource_version;
  if (events_.empty()) horizon_ = version_;  // nothing in between to replay
}

ServedCache::Snapshot ServedCache::List() const {
  std::lock_guard lock(mutex_);
  Snapshot s;
  s.objects.reserve(objects_.size());
  for (const auto& [key, object] : objects_) s.objects.push_back(object);
  s.resource_version = version_;
  return s;
}

ServedPtr ServedCache::Get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  return found == objects_.end() ? nullptr : found->second;
}

uint64_t ServedCache::resource_version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

bool ServedCache::synced() const {
  std::lock_guard lock(mutex_);
  return synced_;
}

Result<uint64_t> ServedCache::Watch(uint64_t from, Watcher watcher, bool initial_events_end) {
  std::lock_guard lock(mutex_);
  if (from == 0) {
    for (const auto& [key, object] : objects_) {
      if (watcher.wants && !watcher.wants(*object)) continue;
      if (!watcher.deliver({"ADDED", object, object->resource_version})) return uint64_t{0};
    }
    if (initial_events_end && !watcher.deliver({"BOOKMARK", nullptr, version_, true}))
      return uint64_t{0};
  } else if (from < horizon_) {
    Error e{"too old resource version: " + std::to_string(from) + " (" +
                std::to_string(horizon_) + ")",
            Code::kOutOfRange};
    e.http_status = 410;
    e.reason = "Expired";
    return e;
  } else {
    for (const KeptEvent& kept : events_) {
      if (kept.object->resource_version <= from) continue;
      if (watcher.wants && !watcher.wants(*kept.object)) continue;
      if (!watcher.deliver({kept.type, kept.object, kept.object->resource_version}))
        return uint64_t{0};
    }
  }
  const uint64_t id = next_id_++;
  watchers_.emplace(id, std::move(watcher));
  return id;
}

void ServedCache::Unwatch(uint64_t id) {
  std::lock_guard lock(mutex_);
  watchers_.erase(id);
}

void ServedCache::Bookmark() {
  std::lock_guard lock(mutex_);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    WatchEvent bookmark{"BOOKMARK", nullptr, version_};
    it = it->second.deliver(bookmark) ? std::next(it) : watchers_.erase(it);
  }
}

size_t ServedCache::watchers() const {
  std::lock_guard lock(mutex_);
  return watchers_.size();
}

}  // namespace gpustack::api
