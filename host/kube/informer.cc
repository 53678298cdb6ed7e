#include "host/kube/informer.h"

#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::kube {
namespace {

std::string ResourceVersion(const Json& object) {
  const Json& metadata = object.contains("metadata") ? object["metadata"] : Json::object();
  return metadata.value("resourceVersion", "");
}

}  // namespace

Informer::Informer(Client& client, ResourceType type, std::string ns, InformerOptions options)
    : client_(client),
      type_(std::move(type)),
      namespace_(std::move(ns)),
      options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddIndexer(const std::string& name, IndexFunc index) {
  indexers_[name] = std::move(index);
}

void Informer::AddEventHandler(EventHandler handler) { handlers_.push_back(std::move(handler)); }

void Informer::Start() {
  thread_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("watch-" + type_.plural);
    Run(stop);
  });
}

void Informer::RequestStop() {
  thread_.request_stop();
  state_changed_.notify_all();
}

void Informer::Stop() {
  if (thread_.joinable()) {
    RequestStop();
    thread_.join();
  }
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_mutex_);
  return state_changed_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

ObjectPtr Informer::Get(const std::string& key) const {
  std::shared_lock lock(cache_mutex_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::List() const {
  std::shared_lock lock(cache_mutex_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) {
    out.push_back(object);
  }
  return out;
}

std::vector<ObjectPtr> Informer::ByIndex(const std::string& index, const std::string& value) const {
  std::shared_lock lock(cache_mutex_);
  std::vector<ObjectPtr> out;
  auto by_value = indices_.find(index);
  if (by_value == indices_.end()) {
    return out;
  }
  auto keys = by_value->second.find(value);
  if (keys == by_value->second.end()) {
    return out;
  }
  for (const auto& key : keys->second) {
    if (auto it = objects_.find(key); it != objects_.end()) {
      out.push_back(it->second);
    }
  }
  return out;
}

size_t Informer::Size() const {
  std::shared_lock lock(cache_mutex_);
  return objects_.size();
}

InformerStats Informer::Stats() const {
  std::lock_guard lock(state_mutex_);
  return stats_;
}

void Informer::IndexLocked(const std::string& key, const Json* before, const Json* after) {
  for (const auto& [name, index] : indexers_) {
    auto& by_value = indices_[name];
    if (before != nullptr) {
      for (const auto& value : index(*before)) {
        auto it = by_value.find(value);
        if (it != by_value.end()) {
          it->second.erase(key);
          if (it->second.empty()) {
            by_value.erase(it);
          }
        }
      }
    }
    if (after != nullptr) {
      for (const auto& value : index(*after)) {
        by_value[value].insert(key);
      }
    }
  }
}

ObjectPtr Informer::Cached(Json object) const {
  if (options_.transform) options_.transform(object);
  return std::make_shared<const Json>(std::move(object));
}

void Informer::Upsert(ObjectPtr object) {
  std::string key = ObjectKey(*object);
  ObjectPtr before;
  {
    std::unique_lock lock(cache_mutex_);
    auto& slot = objects_[key];
    before = slot;
    IndexLocked(key, before.get(), object.get());
    slot = object;
  }
  for (const auto& handler : handlers_) {
    if (before == nullptr) {
      if (handler.on_add) {
        handler.on_add(object);
      }
    } else if (handler.on_update) {
      handler.on_update(before, object);
    }
  }
}

void Informer::Remove(const std::string& key, ObjectPtr final_state) {
  ObjectPtr before;
  {
    std::unique_lock lock(cache_mutex_);
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      return;
    }
    before = it->second;
    IndexLocked(key, before.get(), nullptr);
    objects_.erase(it);
  }
  // Handlers see the object as it was deleted (finalizers, last status) when the watch said so.
  const ObjectPtr& deleted = final_state ? final_state : before;
  for (const auto& handler : handlers_) {
    if (handler.on_delete) {
      handler.on_delete(deleted);
    }
  }
}

Status Informer::ListAndReplace(std::stop_token stop) {
  ListOptions list_options{options_.label_selector, options_.field_selector, options_.page_size, "",
                           options_.transform};
  auto list = client_.List(type_, namespace_, list_options);
  if (!list) {
    return list.failure();
  }
  if (stop.stop_requested()) {
    return Ok{};
  }
  // Objects gone while we were not watching are deletions; changed ones are updates.
  std::set<std::string> listed;
  for (Json& item : list->items) {
    auto object = std::make_shared<const Json>(std::move(item));  // transformed by the list
    std::string key = ObjectKey(*object);
    listed.insert(key);
    ObjectPtr current = Get(key);
    if (current == nullptr || ResourceVersion(*current) != ResourceVersion(*object)) {
      Upsert(std::move(object));
    }
  }
  std::vector<std::string> vanished;
  {
    std::shared_lock lock(cache_mutex_);
    for (const auto& [key, object] : objects_) {
      if (!listed.contains(key)) {
        vanished.push_back(key);
      }
    }
  }
  for (const auto& key : vanished) {
    Remove(key, nullptr);
  }
  {
    std::lock_guard lock(state_mutex_);
    stats_.lists++;
    stats_.resource_version = list->resource_version;
    synced_ = true;  // under the lock, so WaitForSync cannot miss the notification
  }
  state_changed_.notify_all();
  return Ok{};
}

bool Informer::SleepFor(std::chrono::milliseconds delay, std::stop_token stop) {
  std::unique_lock lock(state_mutex_);
  return !state_changed_.wait_for(lock, stop, delay, [] { return false; });
}

void Informer::Run(std::stop_token stop) {
  auto log = Logger("informer");
  bool need_list = true;
  auto backoff = options_.initial_backoff;
  auto fail = [&](const std::string& what, const Error& error) {
    {
      std::lock_guard lock(state_mutex_);
      stats_.failures++;
    }
    log->warn("{} {}: {}; retrying in {} ms", what, type_.plural, error.message, backoff.count());
    SleepFor(backoff, stop);
    backoff = std::min(backoff * 2, options_.max_backoff);
  };
  while (!stop.stop_requested()) {
    if (need_list) {
      if (Status listed = ListAndReplace(stop); !listed) {
        fail("list", listed.failure());
        continue;
      }
      need_list = false;
      backoff = options_.initial_backoff;
    }
    WatchOptions watch;
    {
      std::lock_guard lock(state_mutex_);
      watch.resource_version = stats_.resource_version;
      stats_.watches++;
    }
    watch.label_selector = options_.label_selector;
    watch.field_selector = options_.field_selector;
    watch.timeout_seconds = options_.watch_timeout_seconds;
    Status watched = client_.Watch(
        type_, namespace_, watch,
        [&](WatchEvent& event) {
          std::string rv = EventResourceVersion(event);
          switch (event.type) {
            case WatchEventType::kAdded:
            case WatchEventType::kModified:
              Upsert(Cached(std::move(event.object)));
              break;
            case WatchEventType::kDeleted: {
              ObjectPtr deleted = Cached(std::move(event.object));
              Remove(ObjectKey(*deleted), deleted);
              break;
            }
            case WatchEventType::kBookmark:
            case WatchEventType::kError:
              break;
          }
          std::lock_guard lock(state_mutex_);
          stats_.events++;
          if (!rv.empty()) {
            stats_.resource_version = rv;
          }
          backoff = options_.initial_backoff;  // the stream works again
          return !stop.stop_requested();
        },
        stop);
    if (stop.stop_requested()) {
      break;
    }
    if (watched) {
      continue;  // the server ended the watch: resume from the last resourceVersion
    }
    if (IsGone(watched.failure())) {
      log->info("watch {}: resourceVersion too old, listing again", type_.plural);
      need_list = true;
      continue;
    }
    fail("watch", watched.failure());
  }
}

}  // namespace gpustack::kube
