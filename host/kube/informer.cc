#include "host/kube/informer.h"

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

void InformerBase::Start() {
  thread_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("watch-" + type_.plural);
    Run(stop);
  });
}

void InformerBase::RequestStop() {
  thread_.request_stop();
  state_changed_.notify_all();
}

void InformerBase::Stop() {
  if (thread_.joinable()) {
    RequestStop();
    thread_.join();
  }
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
  // Each item goes to the cache as it is parsed: a list never holds its whole objects.
  const ListOptions list_options{.label_selector = options_.label_selector,
                                 .field_selector = options_.field_selector,
                                 .page_size = options_.page_size,
                                 .each = [this](Json& item) { Stage(item); }};
  auto list = client_.List(type_, namespace_, list_options);
  if (!list) {
    DropStaged();
    return list.failure();  // an expired continue token is a 410 too: the next try lists anew
  }
  if (stop.stop_requested()) {
    DropStaged();
    return Ok{};
  }
  CommitStaged();
  {
    std::lock_guard lock(state_mutex_);
    stats_.lists++;
    stats_.resource_version = list->resource_version;
    synced_ = true;  // under the lock, so WaitForSync cannot miss the notification
  }
  state_changed_.notify_all();
  return Ok{};
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
    Status watched = client_.Watch(
        type_, namespace_, watch,
        [&](WatchEvent& event) {
          std::string rv = EventResourceVersion(event);
          Apply(event.type, event.object);  // bookmarks and errors change nothing cached
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
