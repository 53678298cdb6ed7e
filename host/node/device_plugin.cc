#include "host/node/device_plugin.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <thread>

#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "proto/deviceplugin.grpc.pb.h"

namespace gpustack::node {
namespace {

constexpr const char* kHealthy = "Healthy";
constexpr const char* kUnhealthy = "Unhealthy";
// A ListAndWatch stream waits for a change this long before it looks whether the kubelet left.
constexpr std::chrono::seconds kStreamRecheck{60};

grpc::Status ToGrpc(const Error& error) {
  return grpc::Status(static_cast<grpc::StatusCode>(error.code), error.message);
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

class ResourceService final : public v1beta1::DevicePlugin::Service {
 public:
  ResourceService(ServedResource resource, TokenBoard& board, Allocator& allocator,
                  const std::atomic<bool>& stopping)
      : resource_(std::move(resource)), board_(board), allocator_(allocator), stopping_(stopping) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    // Partitions and visibility are counts: no preference to give.
    out->set_get_preferred_allocation_available(resource_.mode != ledger::Mode::kPartitioned &&
                                                resource_.mode != ledger::Mode::kNone);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    uint64_t seen = 0;
    while (!stopping_ && !context->IsCancelled()) {
      auto [version, tokens] = board_.Wait(resource_.name, seen, kStreamRecheck);
      if (version == seen) continue;
      seen = version;
      v1beta1::ListAndWatchResponse response;
      for (const Token& t : tokens) {
        auto* device = response.add_devices();
        device->set_id(t.id);
        device->set_health(t.healthy ? kHealthy : kUnhealthy);
        if (t.numa >= 0 && resource_.mode != ledger::Mode::kPartitioned) {
          device->mutable_topology()->add_nodes()->set_id(t.numa);
        }
      }
      if (!writer->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* out) override {
    for (const auto& r : request->container_requests()) {
      const std::vector<std::string> available(r.available_deviceids().begin(),
                                               r.available_deviceids().end());
      const std::vector<std::string> must(r.must_include_deviceids().begin(),
                                          r.must_include_deviceids().end());
      auto* response = out->add_container_responses();
      for (const std::string& id :
           allocator_.Prefer(resource_, available, must, static_cast<size_t>(r.allocation_size())))
        response->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* out) override {
    for (const auto& r : request->container_requests()) {
      const std::vector<std::string> ids(r.devices_ids().begin(), r.devices_ids().end());
      auto result = allocator_.Allocate(resource_, ids);
      if (!result) {
        // Enough to explain the refusal after the fact, at the default level.
        Logger("device-plugin")
            ->warn("{}: Allocate of {} device(s) refused: {} ({})", resource_.name, ids.size(),
                   result.error(), allocator_.ExplainOffer(resource_, ids));
        return ToGrpc(result.failure());
      }
      auto* response = out->add_container_responses();
      for (const sdk::ContainerEdit& edit : result->edits) AddEdit(edit, *response);
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const ServedResource resource_;
  TokenBoard& board_;
  Allocator& allocator_;
  const std::atomic<bool>& stopping_;
};

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
  std::lock_guard lock(mutex_);
  if (next == tokens_) return;
  tokens_ = std::move(next);
  ++version_;
  changed_.notify_all();
}

std::pair<uint64_t, std::vector<Token>> TokenBoard::Wait(const std::string& resource, uint64_t seen,
                                                         std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const uint64_t kicks = kicks_;
  changed_.wait_for(lock, timeout, [&] { return closed_ || version_ != seen || kicks_ != kicks; });
  if (closed_) return {seen, {}};
  auto it = tokens_.find(resource);
  return {version_, it == tokens_.end() ? std::vector<Token>{} : it->second};
}

void TokenBoard::Kick() {
  std::lock_guard lock(mutex_);
  ++kicks_;
  changed_.notify_all();
}

void TokenBoard::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

// One life of the servers: created when the daemon starts and whenever the kubelet comes back.
struct KubeletFrontEnd::Generation {
  std::atomic<bool> stopping{false};
  TokenBoard* board = nullptr;  // kicked on the way down, so streams see `stopping`
  std::vector<std::unique_ptr<ResourceService>> services;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::filesystem::path> sockets;
  std::thread registrar;

  ~Generation() {
    stopping = true;
    if (board != nullptr) board->Kick();
    if (registrar.joinable()) registrar.join();
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
    for (auto& server : servers) server->Shutdown(deadline);
    for (auto& server : servers) server->Wait();
    std::error_code ignored;
    for (const auto& socket : sockets) std::filesystem::remove(socket, ignored);
  }
};

KubeletFrontEnd::KubeletFrontEnd(TokenBoard& board, Allocator& allocator, KubeletOptions options)
    : board_(board), allocator_(allocator), options_(std::move(options)) {}

KubeletFrontEnd::~KubeletFrontEnd() { Stop(); }

void KubeletFrontEnd::Start() {
  stop_ = false;
  Serve();
  if (!watcher_.joinable()) {
    if (wakeup_fd_ < 0) wakeup_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    watcher_ = std::thread([this] {
      NameThisThread("kubelet-watch");
      Watch();
    });
  }
}

void ConfigureKubeletServer(grpc::ServerBuilder& builder) {
  using Option = grpc::ServerBuilder::SyncServerOption;
  builder.SetSyncServerOption(Option::NUM_CQS, 1);
  builder.SetSyncServerOption(Option::MIN_POLLERS, 1);
  builder.SetSyncServerOption(Option::MAX_POLLERS, 2);
  // An idle poller wakes when its wait times out (10 s by default) only to wait again.
  builder.SetSyncServerOption(Option::CQ_TIMEOUT_MSEC, 3'600'000);
}

// A new generation. The watcher calls it too, so it never touches stop_: a Stop() racing a
// restart must still end the watcher.
void KubeletFrontEnd::Serve() {
  auto started = std::chrono::steady_clock::now();
  auto generation = std::make_unique<Generation>();
  generation->board = &board_;
  for (const ServedResource& resource : board_.resources()) {
    const std::filesystem::path socket = options_.device_plugin_dir / SocketName(resource.name);
    std::error_code ignored;
    std::filesystem::remove(socket, ignored);  // a stale one from an earlier life
    auto service =
        std::make_unique<ResourceService>(resource, board_, allocator_, generation->stopping);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(service.get());
    ConfigureKubeletServer(builder);
    auto server = builder.BuildAndStart();
    if (!server) {
      Logger("device-plugin")->error("{}: cannot serve on {}", resource.name, socket.string());
      continue;
    }
    generation->services.push_back(std::move(service));
    generation->servers.push_back(std::move(server));
    generation->sockets.push_back(socket);
  }
  Generation* g = generation.get();
  g->registrar = std::thread([this, g, started] {
    NameThisThread("registrar");
    const std::string kubelet =
        "unix://" + (options_.device_plugin_dir / options_.kubelet_socket).string();
    std::vector<bool> done(board_.resources().size(), false);
    size_t remaining = done.size();
    while (!g->stopping && remaining > 0) {
      auto channel = grpc::CreateChannel(kubelet, grpc::InsecureChannelCredentials());
      auto stub = v1beta1::Registration::NewStub(channel);
      for (size_t i = 0; i < done.size() && !g->stopping; ++i) {
        if (done[i]) continue;
        const ServedResource& resource = board_.resources()[i];
        v1beta1::RegisterRequest request;
        request.set_version("v1beta1");
        request.set_endpoint(SocketName(resource.name));
        request.set_resource_name(resource.name);
        request.mutable_options()->set_get_preferred_allocation_available(
            resource.mode != ledger::Mode::kPartitioned && resource.mode != ledger::Mode::kNone);
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        v1beta1::Empty empty;
        grpc::Status status = stub->Register(&context, request, &empty);
        if (status.ok()) {
          done[i] = true;
          --remaining;
          Logger("device-plugin")->info("{}: registered with the kubelet", resource.name);
        } else {
          Logger("device-plugin")
              ->warn("{}: registration failed (retrying): {}", resource.name,
                     status.error_message());
        }
      }
      if (remaining == 0) break;
      // A kubelet coming back creates its socket: try again the moment it appears.
      const std::filesystem::path socket = options_.device_plugin_dir / options_.kubelet_socket;
      const bool was_there = std::filesystem::exists(socket);
      const auto until = std::chrono::steady_clock::now() + options_.register_retry;
      while (!g->stopping && std::chrono::steady_clock::now() < until &&
             (was_there || !std::filesystem::exists(socket))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (remaining == 0) {
      last_registration_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count();
      ++registered_;
      Logger("device-plugin")
          ->info("every resource registered in {} ms", last_registration_ms_.load());
    }
  });
  std::lock_guard lock(generation_mutex_);
  generation_ = std::move(generation);
}

void KubeletFrontEnd::Stop() {
  stop_ = true;
  if (wakeup_fd_ >= 0) (void)eventfd_write(wakeup_fd_, 1);  // the watcher's poll returns
  if (watcher_.joinable()) watcher_.join();
  if (wakeup_fd_ >= 0) close(wakeup_fd_);
  wakeup_fd_ = -1;
  std::lock_guard lock(generation_mutex_);
  generation_.reset();
}

void KubeletFrontEnd::Watch() {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, options_.device_plugin_dir.c_str(),
                                  IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
    Logger("device-plugin")
        ->error("cannot watch {}: kubelet restarts go unnoticed",
                options_.device_plugin_dir.string());
    if (fd >= 0) close(fd);
    return;
  }
  alignas(inotify_event) char buffer[4096];
  while (!stop_) {
    // Blocks until the directory changes or Stop() writes the eventfd: no timeout to wake for.
    pollfd p[2] = {{fd, POLLIN, 0}, {wakeup_fd_, POLLIN, 0}};
    if (poll(p, wakeup_fd_ >= 0 ? 2 : 1, wakeup_fd_ >= 0 ? -1 : 1000) <= 0 ||
        (p[0].revents & POLLIN) == 0)
      continue;
    bool restart = false;
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + off);
        const std::string name = event->len > 0 ? event->name : "";
        if ((event->mask & (IN_CREATE | IN_MOVED_TO)) && name == options_.kubelet_socket) {
          Logger("device-plugin")->info("the kubelet restarted: registering again");
          restart = true;
        }
        if ((event->mask & (IN_DELETE | IN_MOVED_FROM)) && name.rfind("gpustack-", 0) == 0) {
          std::lock_guard lock(generation_mutex_);
          if (generation_ != nullptr && !generation_->stopping) {
            for (const auto& socket : generation_->sockets) {
              if (socket.filename() != name) continue;
              Logger("device-plugin")->info("{} was removed: serving again", name);
              restart = true;
            }
          }
        }
        off += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    if (restart && !stop_) {
      {
        std::lock_guard lock(generation_mutex_);
        generation_.reset();  // servers down, sockets removed
      }
      // Our own socket deletions from the reset are in the queue now: drop them.
      while (read(fd, buffer, sizeof(buffer)) > 0) {
      }
      Serve();
    }
  }
  close(fd);
}

}  // namespace gpustack::node
