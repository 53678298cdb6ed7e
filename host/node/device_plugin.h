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
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "host/kubelet_rpc/socket.h"
#include "host/node/allocator.h"
#include "host/node/tokens.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::node {

// The latest tokens of every served resource, and a version that moves when any changes, so
// ListAndWatch streams push exactly on change.
class TokenBoard {
 public:
  TokenBoard(runtime::NodeRuntime& runtime, std::vector<ServedResource> resources);

  const std::vector<ServedResource>& resources() const { return resources_; }
  // Recomputes every resource's tokens from the ledger; calls the listener when one changed.
  void Refresh();
  // The version now and the tokens of `resource` in it.
  std::pair<uint64_t, std::vector<Token>> Current(const std::string& resource);
  // Called after each change, on the thread that refreshed, outside the board's lock. Setting
  // another waits for a call in progress, so a listener cleared is never called again.
  void set_on_change(std::function<void()> on_change);

 private:
  runtime::NodeRuntime& runtime_;
  const std::vector<ServedResource> resources_;
  std::mutex mutex_;
  uint64_t version_ = 1;
  std::map<std::string, std::vector<Token>> tokens_;
  std::mutex listener_mutex_;  // held while the listener runs
  std::function<void()> on_change_;
};

struct KubeletOptions {
  // Fixed by the kubelet whatever its --root-dir.
  std::filesystem::path device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";  // in device_plugin_dir
  std::chrono::milliseconds register_retry{1000};
};

// Serves every resource of a TokenBoard to the kubelet for as long as it lives: one socket per
// resource, every socket served by one thread (host/kubelet_rpc, docs/footprint.md).
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
  // Waits until a generation has registered every resource, `until` passes or `stop` is asked;
  // true when one has.
  bool WaitUntilRegistered(std::chrono::steady_clock::time_point until, std::stop_token stop);
  // Milliseconds the latest generation took from start to the last resource registered.
  int64_t last_registration_ms() const { return last_registration_ms_.load(); }

  struct Generation;
  struct Streams;

 private:
  void Serve();  // one generation
  void PushTokens();  // to every open ListAndWatch stream whose tokens are out of date
  std::unique_ptr<Generation> TakeGeneration();
  void DirectoryChanged(Generation* g);  // the kubelet's socket created again, or ours removed
  void Restart();                        // a new generation, from a thread of its own
  // A restart asked by generation `g` (its serving thread or its registrar): at once if `g` is
  // current, when it becomes current if it is not yet (Serve checks), not at all if it is gone.
  void RestartFrom(Generation* g);

  TokenBoard& board_;
  Allocator& allocator_;
  KubeletOptions options_;
  std::unique_ptr<Generation> generation_;
  std::shared_ptr<Streams> streams_;  // the current generation's
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> registered_{0};
  std::mutex registered_mutex_;  // for registered_changed_
  std::condition_variable_any registered_changed_;
  std::atomic<int64_t> last_registration_ms_{0};
  kubelet_rpc::FileDescriptor directory_watch_;  // inotify on the directory, or none
  std::mutex restart_mutex_;  // stop_ (written), restarter_, restarting_, restart_again_
  std::thread restarter_;
  bool restarting_ = false;
  bool restart_again_ = false;  // asked while restarting: the generation it serves is stale too
  std::mutex generation_mutex_;
};

// The socket file name for a resource: "gpustack-nvidia.com_gpu.sliced.sock".
std::string SocketName(const std::string& resource);

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_DEVICE_PLUGIN_H_
