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
  const std::string ns = StringAt(object, {"metadata", "namespace"});
  const std::string name = StringAt(object, {"metadata", "name"});
  return ns.empty() ? name : ns + "/" + name;
}

void ServedCache::AppendLocked(const WatchEvent& event, TextPtr text) {
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
  if (!text) text = std::make_shared<const std::string>(event.object->dump());
  events_.push_back({event.type, std::move(text), event.resource_version});
  while (events_.size() > capacity_) {
    horizon_ = events_.front().resource_version;
    events_.pop_front();
  }
}

void ServedCache::Upsert(ObjectPtr object) {
  std::lock_guard lock(mutex_);
  const std::string key = KeyOf(*object);
  const bool existed = objects_.contains(key);
  auto text = std::make_shared<const std::string>(object->dump());
  objects_[key] = {object, text};
  AppendLocked({existed ? "MODIFIED" : "ADDED", object, VersionOf(*object)}, std::move(text));
}

void ServedCache::Remove(ObjectPtr final_state) {
  std::lock_guard lock(mutex_);
  objects_.erase(KeyOf(*final_state));
  AppendLocked({"DELETED", final_state, VersionOf(*final_state)}, nullptr);
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
  s.texts.reserve(objects_.size());
  for (const auto& [key, entry] : objects_) {
    s.objects.push_back(entry.object);
    s.texts.push_back(entry.text);
  }
  s.resource_version = version_;
  return s;
}

ObjectPtr ServedCache::Get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  return found == objects_.end() ? nullptr : found->second.object;
}

ServedCache::TextPtr ServedCache::GetText(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  return found == objects_.end() ? nullptr : found->second.text;
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
    for (const auto& [key, entry] : objects_) {
      if (watcher.wants && !watcher.wants(*entry.object)) continue;
      if (!watcher.deliver({"ADDED", entry.object, VersionOf(*entry.object)}))
        return uint64_t{0};
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
      if (kept.resource_version <= from) continue;
      // The text is this cache's own serialization of a parsed object: it parses.
      const WatchEvent event{
          kept.type, std::make_shared<const nlohmann::json>(nlohmann::json::parse(*kept.text)),
          kept.resource_version};
      if (watcher.wants && !watcher.wants(*event.object)) continue;
      if (!watcher.deliver(event)) return uint64_t{0};
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
