#include "host/kube/informer.h"

#include <algorithm>

#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::kube {

template class BasicInformer<Json>;

std::string CacheVersion(const Json& object) {
  const Json& metadata = object.contains("metadata") ? object["metadata"] : Json::object();
  return metadata.value("resourceVersion", "");
}

InformerBase::InformerBase(Client& client, ResourceType type, std::string ns,
                           InformerOptions options)
    : client_(client),
      type_(std::move(type)),
      namespace_(std::move(ns)),
      options_(std::move(options)) {}

// A cache stops its thread in its own destructor, while its hooks still exist.
InformerBase::~InformerBase() { Stop(); }

struct InformerBase::FeedKey {
  const Client* client;
  std::string group, version, plural, ns, label_selector, field_selector;
  int64_t page_size;
  int watch_timeout_seconds;
  auto operator<=>(const FeedKey&) const = default;
};

InformerBase::FeedKey InformerBase::Key() const {
  return {&client_,
          type_.group,
          type_.version,
          type_.plural,
          namespace_,
          options_.label_selector,
          options_.field_selector,
          options_.page_size,
          options_.watch_timeout_seconds};
}

namespace {

// The informer that runs each list and watch: a registry of the process, as informers of the same
// objects may belong to components that do not know each other (the worker, the v1 API).
std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

std::map<InformerBase::FeedKey, InformerBase*>& InformerBase::Running() {
  static std::map<FeedKey, InformerBase*> running;  // under RegistryMutex()
  return running;
}

void InformerBase::Start() {
  std::lock_guard lock(RegistryMutex());
  if (feeder_ != nullptr || thread_.joinable()) return;  // started already
  auto [it, added] = Running().try_emplace(Key(), this);
  if (!added && it->second != this) {
    it->second->Join(this);
    return;
  }
  // Under the registry's lock: a registered informer always has its thread.
  StartThread();
}

void InformerBase::StartThread() {
  thread_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("watch-" + type_.plural);
    Run(stop);
  });
}

void InformerBase::Join(InformerBase* joiner) {
  joiner->feeder_ = this;
  std::lock_guard lock(feed_mutex_);
  joining_.push_back(joiner);
  relist_ = true;
  if (current_watch_ != nullptr) current_watch_->request_stop();
}

void InformerBase::RequestStop() {
  std::lock_guard registry(RegistryMutex());  // thread_ may be started by a hand-over
  RequestStopLocked();
}

void InformerBase::RequestStopLocked() {
  thread_.request_stop();
  state_changed_.notify_all();
}

void InformerBase::Stop() {
  {
    std::lock_guard registry(RegistryMutex());
    if (feeder_ != nullptr) {  // fed by another: leave it
      std::lock_guard lock(feeder_->feed_mutex_);
      std::erase(feeder_->fed_, this);
      std::erase(feeder_->joining_, this);
      DropStaged();  // part of a list it will not see the end of
      feeder_ = nullptr;
      return;
    }
    if (!thread_.joinable()) return;
    RequestStopLocked();
    // The caches this one fed go on: the first runs its own list and watch from now, and feeds
    // the others from its first list (a list turns what changed meanwhile into events). It starts
    // here, under the registry's lock, so that its own Stop cannot come between.
    std::vector<InformerBase*> fed;
    {
      std::lock_guard lock(feed_mutex_);
      fed = std::move(fed_);
      fed.insert(fed.end(), joining_.begin(), joining_.end());
      fed_.clear();
      joining_.clear();
      // A list under way here would leave its first pages staged in them, and their next list
      // would count objects deleted meanwhile as listed.
      for (InformerBase* cache : fed) cache->DropStaged();
    }
    InformerBase* heir = fed.empty() ? nullptr : fed.front();
    if (auto it = Running().find(Key()); it != Running().end() && it->second == this) {
      if (heir != nullptr) {
        it->second = heir;
      } else {
        Running().erase(it);
      }
    }
    if (heir != nullptr) {
      heir->feeder_ = nullptr;
      for (size_t i = 1; i < fed.size(); ++i) {
        fed[i]->feeder_ = heir;
        heir->joining_.push_back(fed[i]);  // not yet running: no lock to take
      }
      heir->StartThread();
    }
  }
  thread_.join();
}

bool InformerBase::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_mutex_);
  return state_changed_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

InformerStats InformerBase::Stats() const {
  std::lock_guard lock(state_mutex_);
  return stats_;
}

Status InformerBase::ListAndReplace(std::stop_token stop) {
  {
    std::lock_guard lock(feed_mutex_);  // those who joined are fed from this list on
    fed_.insert(fed_.end(), joining_.begin(), joining_.end());
    joining_.clear();
    relist_ = false;
  }
  // Each item goes to the cache as it is parsed: a list never holds its whole objects.
  const ListOptions list_options{.label_selector = options_.label_selector,
                                 .field_selector = options_.field_selector,
                                 .page_size = options_.page_size,
                                 .each = [this](Json& item) { StageAll(item); }};
  auto list = client_.List(type_, namespace_, list_options);
  if (!list) {
    DropAll();
    return list.failure();  // an expired continue token is a 410 too: the next try lists anew
  }
  if (stop.stop_requested()) {
    DropAll();
    return Ok{};
  }
  // Every cache commits the list before its version says it holds it (the v1 API reads that
  // version to know how far its cache is).
  InformerStats stats;
  {
    std::lock_guard lock(state_mutex_);
    stats = stats_;
  }
  stats.lists++;
  stats.resource_version = list->resource_version;
  CommitAll(stats);
  return Ok{};
}

void InformerBase::StageAll(Json& item) {
  std::lock_guard lock(feed_mutex_);
  for (InformerBase* cache : fed_) {
    Json copy = item;
    cache->Stage(copy);
  }
  Stage(item);
}

void InformerBase::DropAll() {
  std::lock_guard lock(feed_mutex_);
  for (InformerBase* cache : fed_) cache->DropStaged();
  DropStaged();
}

void InformerBase::CommitAll(const InformerStats& stats) {
  std::lock_guard lock(feed_mutex_);
  for (InformerBase* cache : fed_) {
    cache->CommitStaged();
    cache->Synced(stats);
  }
  CommitStaged();
  Synced(stats);
}

void InformerBase::ApplyAll(WatchEventType type, Json& object, const InformerStats& stats) {
  std::lock_guard lock(feed_mutex_);
  for (InformerBase* cache : fed_) {
    Json copy = object;
    cache->Apply(type, copy);
    std::lock_guard state(cache->state_mutex_);
    cache->stats_ = stats;
  }
  Apply(type, object);
}

void InformerBase::Synced(const InformerStats& stats) {
  {
    std::lock_guard lock(state_mutex_);
    stats_ = stats;
    synced_ = true;  // under the lock, so WaitForSync cannot miss the notification
  }
  state_changed_.notify_all();
}

bool InformerBase::SleepFor(std::chrono::milliseconds delay, std::stop_token stop) {
  std::unique_lock lock(state_mutex_);
  return !state_changed_.wait_for(lock, stop, delay, [] { return false; });
}

void InformerBase::Run(std::stop_token stop) {
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
    // Ends with the thread, or early when a cache joins and asks for a list (Join).
    std::stop_source watch_stop;
    std::stop_callback forward(stop, [&] { watch_stop.request_stop(); });
    {
      std::lock_guard lock(feed_mutex_);
      current_watch_ = &watch_stop;
      if (relist_) watch_stop.request_stop();
    }
    Status watched = client_.Watch(
        type_, namespace_, watch,
        [&](WatchEvent& event) {
          std::string rv = EventResourceVersion(event);
          InformerStats after;
          {
            std::lock_guard lock(state_mutex_);
            after = stats_;
          }
          after.events++;
          if (!rv.empty()) after.resource_version = rv;
          // Bookmarks and errors change nothing cached; the versions move once caches have it.
          ApplyAll(event.type, event.object, after);
          {
            std::lock_guard lock(state_mutex_);
            stats_ = std::move(after);
          }
          backoff = options_.initial_backoff;  // the stream works again
          return !watch_stop.stop_requested();
        },
        watch_stop.get_token());
    {
      std::lock_guard lock(feed_mutex_);
      current_watch_ = nullptr;
    }
    if (stop.stop_requested()) {
      break;
    }
    if (relist_) {
      need_list = true;  // a cache joined: it starts from a whole list, the others see no change
      continue;
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
