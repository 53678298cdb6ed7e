#include "host/node/device_plugin.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <thread>

#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "host/kubelet_rpc/client.h"
#include "host/kubelet_rpc/message.h"
#include "host/kubelet_rpc/server.h"
#include "proto/deviceplugin.pb.h"

namespace gpustack::node {
namespace {

constexpr const char* kHealthy = "Healthy";
constexpr const char* kUnhealthy = "Unhealthy";
constexpr const char* kMethods = "/v1beta1.DevicePlugin/";
// The kubelet answers a registration at once; a wait this long means it is stuck.
constexpr std::chrono::seconds kRegisterTimeout{5};
constexpr std::chrono::milliseconds kRestartPause{20};

// Our socket file is no longer there (or no longer a socket): the kubelet cannot dial back into
// it, so that resource cannot register until a new generation binds it.
bool SocketGone(const std::filesystem::path& socket) {
  std::error_code ignored;
  return !std::filesystem::is_socket(socket, ignored);
}

bool OffersPreferences(const ServedResource& resource) {
  // Partitions and visibility are counts: no preference to give.
  return resource.mode != ledger::Mode::kPartitioned && resource.mode != ledger::Mode::kNone;
}

void AddEdit(const sdk::ContainerEdit& edit, v1beta1::ContainerAllocateResponse& out) {
  switch (edit.kind) {
    case GPUSTACK_EDIT_ENV:
      (*out.mutable_envs())[edit.key] = edit.value;
      break;
    case GPUSTACK_EDIT_MOUNT: {
      auto* mount = out.add_mounts();
      mount->set_host_path(edit.host_path);
      mount->set_container_path(edit.container_path);
      mount->set_read_only(edit.read_only);
      break;
    }
    case GPUSTACK_EDIT_DEVICE_NODE: {
      auto* device = out.add_devices();
      device->set_host_path(edit.host_path);
      device->set_container_path(edit.container_path.empty() ? edit.host_path
                                                             : edit.container_path);
      device->set_permissions(edit.permissions.empty() ? "rw" : edit.permissions);
      break;
    }
    case GPUSTACK_EDIT_ANNOTATION:
      (*out.mutable_annotations())[edit.key] = edit.value;
      break;
    case GPUSTACK_EDIT_CDI_DEVICE:
      out.add_cdi_devices()->set_name(edit.value.empty() ? edit.key : edit.value);
      break;
    default:  // the SDK client refuses kinds it does not know
      break;
  }
}

std::string ListAndWatchResponse(const ServedResource& resource, const std::vector<Token>& tokens) {
  v1beta1::ListAndWatchResponse response;
  for (const Token& t : tokens) {
    auto* device = response.add_devices();
    device->set_id(t.id);
    device->set_health(t.healthy ? kHealthy : kUnhealthy);
    if (t.numa >= 0 && resource.mode != ledger::Mode::kPartitioned) {
      device->mutable_topology()->add_nodes()->set_id(t.numa);
    }
  }
  return response.SerializeAsString();
}

}  // namespace

// The open ListAndWatch streams of a generation, each with the board's version it last sent.
struct KubeletFrontEnd::Streams {
  struct Open {
    const ServedResource* resource;
    uint64_t version = 0;
    std::shared_ptr<kubelet_rpc::ServerStream> stream;
  };
  std::mutex mutex;
  std::vector<Open> open;

  // Sends each open stream its resource's tokens when the board moved since its last send.
  void Push(TokenBoard& board) {
    std::lock_guard lock(mutex);
    std::erase_if(open, [](const Open& o) { return !o.stream->open(); });
    for (Open& o : open) {
      auto [version, tokens] = board.Current(o.resource->name);
      if (version == o.version) continue;
      o.version = version;
      o.stream->Send(ListAndWatchResponse(*o.resource, tokens));
    }
  }
};

namespace {

// The v1beta1 DevicePlugin service of one resource: every decision is the Allocator's.
std::shared_ptr<kubelet_rpc::Service> DevicePluginService(
    const ServedResource& resource, TokenBoard& board, Allocator& allocator,
    const std::shared_ptr<KubeletFrontEnd::Streams>& streams) {
  auto service = std::make_shared<kubelet_rpc::Service>();
  const std::string prefix = kMethods;
  service->unary[prefix + "GetDevicePluginOptions"] = [&resource](std::string_view) {
    v1beta1::DevicePluginOptions out;
    out.set_get_preferred_allocation_available(OffersPreferences(resource));
    return Result<std::string>(out.SerializeAsString());
  };
  service->streaming[prefix + "ListAndWatch"] =
      [&resource, &board, weak = std::weak_ptr(streams)](
          std::shared_ptr<kubelet_rpc::ServerStream> stream, std::string_view) {
        auto streams = weak.lock();
        if (!streams) return stream->Finish(Error{"the front end is stopping", Code::kUnavailable});
        {
          std::lock_guard lock(streams->mutex);
          streams->open.push_back({&resource, 0, std::move(stream)});
        }
        streams->Push(board);  // the first list, at once
      };
  service->unary[prefix + "GetPreferredAllocation"] =
      [&resource, &allocator](std::string_view bytes) -> Result<std::string> {
    auto request = kubelet_rpc::ParseMessage<v1beta1::PreferredAllocationRequest>(bytes);
    if (!request) return request.failure();
    v1beta1::PreferredAllocationResponse out;
    for (const auto& r : request->container_requests()) {
      const std::vector<std::string> available(r.available_deviceids().begin(),
                                               r.available_deviceids().end());
      const std::vector<std::string> must(r.must_include_deviceids().begin(),
                                          r.must_include_deviceids().end());
      auto* response = out.add_container_responses();
      for (const std::string& id :
           allocator.Prefer(resource, available, must, static_cast<size_t>(r.allocation_size())))
        response->add_deviceids(id);
    }
    return out.SerializeAsString();
  };
  service->unary[prefix + "Allocate"] =
      [&resource, &allocator](std::string_view bytes) -> Result<std::string> {
    auto request = kubelet_rpc::ParseMessage<v1beta1::AllocateRequest>(bytes);
    if (!request) return request.failure();
    v1beta1::AllocateResponse out;
    for (const auto& r : request->container_requests()) {
      const std::vector<std::string> ids(r.devices_ids().begin(), r.devices_ids().end());
      auto result = allocator.Allocate(resource, ids);
      if (!result) {
        // Enough to explain the refusal after the fact, at the default level.
        Logger("device-plugin")
            ->warn("{}: Allocate of {} device(s) refused: {} ({})", resource.name, ids.size(),
                   result.error(), allocator.ExplainOffer(resource, ids));
        return result.failure();
      }
      auto* response = out.add_container_responses();
      for (const sdk::ContainerEdit& edit : result->edits) AddEdit(edit, *response);
    }
    return out.SerializeAsString();
  };
  service->unary[prefix + "PreStartContainer"] = [](std::string_view) {
    return Result<std::string>(v1beta1::PreStartContainerResponse().SerializeAsString());
  };
  return service;
}

}  // namespace

std::string SocketName(const std::string& resource) {
  std::string name = "gpustack-" + resource + ".sock";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return name;
}

TokenBoard::TokenBoard(runtime::NodeRuntime& runtime, std::vector<ServedResource> resources)
    : runtime_(runtime), resources_(std::move(resources)) {}

void TokenBoard::Refresh() {
  std::map<std::string, std::vector<Token>> next;
  runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const ServedResource& r : resources_) next[r.name] = TokensOf(ledger, r);
  });
  {
    std::lock_guard lock(mutex_);
    if (next == tokens_) return;
    tokens_ = std::move(next);
    ++version_;
  }
  std::lock_guard listening(listener_mutex_);
  if (on_change_) on_change_();
}

std::pair<uint64_t, std::vector<Token>> TokenBoard::Current(const std::string& resource) {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(resource);
  return {version_, it == tokens_.end() ? std::vector<Token>{} : it->second};
}

void TokenBoard::set_on_change(std::function<void()> on_change) {
  std::lock_guard lock(listener_mutex_);
  on_change_ = std::move(on_change);
}

// One life of the servers: created when the daemon starts and whenever the kubelet comes back.
struct KubeletFrontEnd::Generation {
  std::atomic<bool> stopping{false};
  bool stale = false;  // a restart was asked before it was current (under generation_mutex_)
  kubelet_rpc::Server server;
  std::vector<std::filesystem::path> sockets;
  std::thread registrar;

  ~Generation() {
    stopping = true;
    if (registrar.joinable()) registrar.join();
    server.Stop();  // every stream ends; the kubelet sees its connections close
    std::error_code ignored;
    for (const auto& socket : sockets) std::filesystem::remove(socket, ignored);
  }
};

KubeletFrontEnd::KubeletFrontEnd(TokenBoard& board, Allocator& allocator, KubeletOptions options)
    : board_(board), allocator_(allocator), options_(std::move(options)) {}

KubeletFrontEnd::~KubeletFrontEnd() { Stop(); }

void KubeletFrontEnd::Start() {
  {
    std::lock_guard lock(restart_mutex_);
    stop_ = false;
  }
  board_.set_on_change([this] { PushTokens(); });
  if (!directory_watch_) {
    directory_watch_ = kubelet_rpc::FileDescriptor(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!directory_watch_ ||
        inotify_add_watch(directory_watch_.get(), options_.device_plugin_dir.c_str(),
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
      Logger("device-plugin")
          ->error("cannot watch {}: kubelet restarts go unnoticed",
                  options_.device_plugin_dir.string());
      directory_watch_ = kubelet_rpc::FileDescriptor();
    }
  }
  Serve();
}

void KubeletFrontEnd::PushTokens() {
  std::shared_ptr<Streams> streams;
  {
    std::lock_guard lock(generation_mutex_);
    streams = streams_;
  }
  if (streams) streams->Push(board_);
}

// A new generation. A restart runs it too, so it never touches stop_: a Stop() racing a restart
// must still end it.
void KubeletFrontEnd::Serve() {
  auto started = std::chrono::steady_clock::now();
  auto generation = std::make_unique<Generation>();
  auto streams = std::make_shared<Streams>();
  for (const ServedResource& resource : board_.resources()) {
    const std::filesystem::path socket = options_.device_plugin_dir / SocketName(resource.name);
    auto service = DevicePluginService(resource, board_, allocator_, streams);
    if (Status listening = generation->server.Listen(socket, std::move(service)); !listening) {
      Logger("device-plugin")->error("{}: cannot serve: {}", resource.name, listening.error());
      continue;
    }
    generation->sockets.push_back(socket);
  }
  // The directory's changes reach the serving thread's poll: no thread of their own. What is
  // queued now is mostly our own doing (the last generation's sockets, or a killed daemon's,
  // removed and ours bound in their place): dropped, or a new generation would replace this one
  // at once. A removal of ours among them is caught below, once this generation is current.
  if (directory_watch_) {
    alignas(inotify_event) char buffer[4096];
    while (read(directory_watch_.get(), buffer, sizeof(buffer)) > 0) {
    }
    (void)generation->server.Watch(directory_watch_.get(),
                                   [this, g = generation.get()] { DirectoryChanged(g); });
  }
  if (Status started = generation->server.Start("device-plugin"); !started) {
    Logger("device-plugin")->error("cannot serve the kubelet: {}", started.error());
  }
  Generation* g = generation.get();
  g->registrar = std::thread([this, g, started] {
    NameThisThread("registrar");
    const std::filesystem::path kubelet = options_.device_plugin_dir / options_.kubelet_socket;
    std::vector<bool> done(board_.resources().size(), false);
    size_t remaining = done.size();
    auto register_one = [&kubelet](const ServedResource& resource) {
      v1beta1::RegisterRequest request;
      request.set_version("v1beta1");
      request.set_endpoint(SocketName(resource.name));
      request.set_resource_name(resource.name);
      request.mutable_options()->set_get_preferred_allocation_available(
          OffersPreferences(resource));
      return kubelet_rpc::Call<v1beta1::Empty>(kubelet, "/v1beta1.Registration/Register", request,
                                               kRegisterTimeout);
    };
    bool lost = false;
    while (!g->stopping && remaining > 0) {
      // Every resource at once: the kubelet dials back into each one's socket before it answers
      // (docs/footprint.md), so one after another would add those round trips up.
      std::vector<std::future<Result<v1beta1::Empty>>> calls(done.size());
      for (size_t i = 0; i < done.size(); ++i) {
        if (done[i]) continue;
        calls[i] = std::async(remaining == 1 ? std::launch::deferred : std::launch::async,
                              register_one, std::cref(board_.resources()[i]));
      }
      for (size_t i = 0; i < done.size(); ++i) {
        if (done[i]) continue;
        const ServedResource& resource = board_.resources()[i];
        auto registered = calls[i].get();
        if (registered) {
          done[i] = true;
          --remaining;
          Logger("device-plugin")->info("{}: registered with the kubelet", resource.name);
        } else {
          Logger("device-plugin")
              ->warn("{}: registration failed (retrying): {}", resource.name, registered.error());
          // The kubelet dials back into the socket before it answers: one that is gone (its
          // removal missed, as when inotify's queue overflows) fails every retry.
          const auto socket = options_.device_plugin_dir / SocketName(resource.name);
          if (std::ranges::find(g->sockets, socket) != g->sockets.end() && SocketGone(socket)) {
            Logger("device-plugin")->info("{}: its socket is gone: serving again", resource.name);
            lost = true;
          }
        }
      }
      if (lost) {
        RestartFrom(g);
        return;
      }
      if (remaining == 0) break;
      // A kubelet coming back creates its socket: try again the moment it appears.
      const bool was_there = std::filesystem::exists(kubelet);
      const auto until = std::chrono::steady_clock::now() + options_.register_retry;
      while (!g->stopping && std::chrono::steady_clock::now() < until &&
             (was_there || !std::filesystem::exists(kubelet))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (remaining == 0) {
      last_registration_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count();
      {
        std::lock_guard lock(registered_mutex_);
        ++registered_;
      }
      registered_changed_.notify_all();
      Logger("device-plugin")
          ->info("every resource registered in {} ms, {} ms after the process started",
                 last_registration_ms_.load(), SinceProcessStart().count());
    }
  });
  bool lost = false;
  {
    // A socket removed before this generation is current goes unnoticed by DirectoryChanged (its
    // event drained above, or read while there was none): a restarting kubelet removes the files
    // it listed one by one, ours among them if we bound them in between. Checked under the lock,
    // so that a removal is either seen here or read as this generation's.
    std::lock_guard lock(generation_mutex_);
    lost = g->stale || std::ranges::any_of(g->sockets, SocketGone);
    // There is none: Start and the restarter end it first, and a generation not yet current
    // starts no restart of its own (RestartFrom).
    generation_ = std::move(generation);
    streams_ = std::move(streams);
  }
  if (lost) {
    Logger("device-plugin")
        ->info(
            "a socket was removed, or the kubelet restarted, as this generation started: "
            "serving again");
    Restart();
  }
}

std::unique_ptr<KubeletFrontEnd::Generation> KubeletFrontEnd::TakeGeneration() {
  // Taken under the lock, ended outside it: ending it joins the serving thread, which may be
  // inside an Allocate whose ledger change pushes tokens (PushTokens takes the lock).
  std::lock_guard lock(generation_mutex_);
  streams_.reset();
  return std::move(generation_);
}

void KubeletFrontEnd::Stop() {
  std::thread restarter;
  {
    std::lock_guard lock(restart_mutex_);
    stop_ = true;
    restarter = std::move(restarter_);
  }
  if (restarter.joinable()) restarter.join();
  board_.set_on_change(nullptr);
  TakeGeneration().reset();  // its thread no longer polls the directory
  directory_watch_ = kubelet_rpc::FileDescriptor();
}

bool KubeletFrontEnd::WaitUntilRegistered(std::chrono::steady_clock::time_point until,
                                          std::stop_token stop) {
  std::unique_lock lock(registered_mutex_);
  return registered_changed_.wait_until(lock, stop, until, [this] { return registered_ > 0; });
}

// On the serving thread: the kubelet's socket created again (it restarted, and forgot every
// registration), or one of ours removed. Either way a new generation serves and registers.
void KubeletFrontEnd::DirectoryChanged(Generation* g) {
  alignas(inotify_event) char buffer[4096];
  bool restart = false;
  for (;;) {
    const ssize_t n = read(directory_watch_.get(), buffer, sizeof(buffer));
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + off);
      const std::string name = event->len > 0 ? event->name : "";
      if ((event->mask & (IN_CREATE | IN_MOVED_TO)) && name == options_.kubelet_socket) {
        Logger("device-plugin")->info("the kubelet restarted: registering again");
        restart = true;
      }
      // g outlives this call: its serving thread runs it, and ending g joins that thread.
      if ((event->mask & (IN_DELETE | IN_MOVED_FROM)) && name.rfind("gpustack-", 0) == 0 &&
          !g->stopping) {
        for (const auto& socket : g->sockets) {
          if (socket.filename() != name) continue;
          Logger("device-plugin")->info("{} was removed: serving again", name);
          restart = true;
        }
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  if (restart) RestartFrom(g);
}

void KubeletFrontEnd::RestartFrom(Generation* g) {
  {
    std::lock_guard lock(generation_mutex_);
    if (generation_.get() != g) {
      g->stale = true;  // not current yet: Serve restarts once it is; or gone: read by nobody
      return;
    }
  }
  Restart();
}

// The generation being replaced owns the thread that asks: a thread of its own ends it (joining
// its serving thread) and starts the next. It runs only for that long, or once more for each
// time it is asked meanwhile (the generation it served lost a socket as it was bound).
void KubeletFrontEnd::Restart() {
  std::lock_guard lock(restart_mutex_);
  if (stop_) return;
  if (restarting_) {  // the generation it serves may be the one that asks: it goes too
    restart_again_ = true;
    return;
  }
  if (restarter_.joinable()) restarter_.join();  // the last one has ended (restarting_ is false)
  restarting_ = true;
  restarter_ = std::thread([this] {
    NameThisThread("kubelet-restart");
    for (;;) {
      TakeGeneration().reset();  // the server down, its sockets removed
      {
        // What was asked until now was about the generation just ended.
        std::lock_guard ended(restart_mutex_);
        restart_again_ = false;
      }
      if (!stop_) Serve();
      {
        std::lock_guard done(restart_mutex_);
        if (stop_ || !restart_again_) {
          restarting_ = false;
          restart_again_ = false;
          return;
        }
      }
      // The generation just served lost a socket: once more, after a pause in case whoever
      // removes them is still at it.
      std::this_thread::sleep_for(kRestartPause);
    }
  });
}

}  // namespace gpustack::node
