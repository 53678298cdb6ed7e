// The kubelet front end (docs/behaviour.md §6.1, docs/kubelet-api.md §1): one v1beta1 DevicePlugin
// server per resource on its own unix socket in the kubelet's device-plugin directory, registered
// with the kubelet, re-served and re-registered whenever the kubelet restarts (it unlinks every
// socket in that directory). Every decision is the Allocator's; this file only translates.
#ifndef GPUSTACK_HOST_NODE_DEVICE_PLUGIN_H_
#define GPUSTACK_HOST_NODE_DEVICE_PLUGIN_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host/node/allocator.h"
#include "host/node/tokens.h"
#include "host/runtime/node_runtime.h"

namespace grpc {
class ServerBuilder;
}

namespace gpustack::node {

// The latest tokens of every served resource, and a version that moves when any changes, so
// ListAndWatch streams push exactly on change.
class TokenBoard {
 public:
  TokenBoard(runtime::NodeRuntime& runtime, std::vector<ServedResource> resources);

  const std::vector<ServedResource>& resources() const { return resources_; }
  // Recomputes every resource's tokens from the ledger; wakes the streams when one changed.
  void Refresh();
  // Waits until the version differs from `seen` or `timeout` passes; returns the version and
  // the tokens of `resource` at that moment.
  std::pair<uint64_t, std::vector<Token>> Wait(const std::string& resource, uint64_t seen,
                                               std::chrono::milliseconds timeout);
  // Wakes every wait without a change (a generation stopping).
  void Kick();
  // Ends every wait (shutdown).
  void Close();

 private:
  runtime::NodeRuntime& runtime_;
  const std::vector<ServedResource> resources_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t version_ = 1;
  uint64_t kicks_ = 0;
  bool closed_ = false;
  std::map<std::string, std::vector<Token>> tokens_;
};

struct KubeletOptions {
  // Fixed by the kubelet whatever its --root-dir.
  std::filesystem::path device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";  // in device_plugin_dir
  std::chrono::milliseconds register_retry{1000};
};

// Serves every resource of a TokenBoard to the kubelet for as long as it lives.
class KubeletFrontEnd {
 public:
  KubeletFrontEnd(TokenBoard& board, Allocator& allocator, KubeletOptions options);
  ~KubeletFrontEnd();  // stops serving and removes its sockets
  KubeletFrontEnd(const KubeletFrontEnd&) = delete;
  KubeletFrontEnd& operator=(const KubeletFrontEnd&) = delete;

  // Starts a generation: sockets, servers, registration (retried until it works or Stop).
  void Start();
  void Stop();
  // How many generations have registered every resource (tests and logs).
  uint64_t registered_generations() const { return registered_.load(); }
  // Milliseconds the latest generation took from start to the last resource registered.
  int64_t last_registration_ms() const { return last_registration_ms_.load(); }

  struct Generation;

 private:
  void Serve();  // one generation
  void Watch();  // inotify on the directory: the kubelet's socket recreated, ours removed

  TokenBoard& board_;
  Allocator& allocator_;
  KubeletOptions options_;
  std::unique_ptr<Generation> generation_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> registered_{0};
  std::atomic<int64_t> last_registration_ms_{0};
  std::thread watcher_;
  int wakeup_fd_ = -1;  // an eventfd: Stop() ends the watcher's poll
  std::mutex generation_mutex_;
};

// The sync-server options both kubelet front ends use: one completion queue, one or two pollers,
// and an idle poller that waits an hour, not gRPC's 10 s (a wakeup for nothing; docs/footprint.md).
void ConfigureKubeletServer(grpc::ServerBuilder& builder);

// The socket file name for a resource: "gpustack-nvidia.com_gpu.sliced.sock".
std::string SocketName(const std::string& resource);

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_DEVICE_PLUGIN_H_
