// The node daemon (`gpustack-operator device-manager serve`): one process per node over the node
// runtime. It rebuilds the ledger from the Pods' records, serves the kubelet, reconciles Pods
// that finish or go away, re-discovers on a period and on health events, and publishes the
// node's Devices object and labels. Leader-free: each node's daemon owns only its node.
#ifndef GPUSTACK_HOST_NODE_DAEMON_H_
#define GPUSTACK_HOST_NODE_DAEMON_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "host/https/server.h"
#include "host/kube/client.h"
#include "host/node/allocator.h"
#include "host/node/device_plugin.h"
#include "host/node/dra_plugin.h"
#include "host/node/tokens.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::node {

struct DaemonOptions {
  std::string node_name;
  ModeSwitches modes;
  AllocatorOptions allocator;
  KubeletOptions kubelet;
  // The DRA front end beside the device plugin (docs/dra.md): --dra.
  bool dra = false;
  DraOptions dra_options;
  // The kubelet's pod-resources socket (<kubelet root>/pod-resources/kubelet.sock).
  std::filesystem::path pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds discover_period{60'000};
  // A fresh list of the node's Pods, behind the watch that releases at once: a long resync, for
  // a delete the watch could have missed. A partition whose destroy failed is retried sooner.
  std::chrono::milliseconds reconcile_period{300'000};
  std::chrono::milliseconds destroy_retry_period{30'000};
  // How long one wait for driver health events lasts; an event ends it at once (docs/footprint.md).
  std::chrono::milliseconds health_poll{5'000};
  // Utilisation samples for /metrics and /monitor/snapshot (--monitor-period); latest only.
  std::chrono::milliseconds monitor_period{15'000};
  // Where the host's processes are seen (--proc-root): the plugins name processes by host pid,
  // and <proc_root>/<pid>/cgroup says which Pod each runs in.
  std::filesystem::path proc_root = "/proc";
  // The kubelet's stats summary (through the apiserver's node proxy), for the Pod-level figures.
  std::chrono::milliseconds kubelet_stats_timeout{5'000};
  // /metrics, /monitor/snapshot, /livez and /readyz (docs/behaviour.md §8.2).
  https::EndpointOptions exporter{.server = {.name = "exporter", .port = 32443, .body_limit = 4096},
                                  .cert_dir = {},
                                  .common_name = "gpustack-device-manager"};
  bool serve_https = true;
  // Where enforcer libraries are staged and working directories made (--data-dir), and where the
  // kubelet finds them (--host-data-dir): mount sources are host paths.
  enforcement::Options enforcement;
  // How each manufacturer's cards reach containers (GPUSTACK_<MFR>_DEVICE_INJECTION_STRATEGY),
  // and the container engine as read at start (the Node's runtime version, containerd's config).
  std::map<std::string, cdi::Strategy> injection;
  cdi::Engine engine;
  // The Node's plugins.gpustack.ai/ labels the plugins were enabled with: when the Node's change,
  // the daemon stops (status kPluginLabelsChanged) for its Pod to restart and apply them.
  std::map<std::string, std::string> plugin_labels;
};

// RunDaemon's status when the Node's plugin labels changed: the kubelet restarts the container and
// the ledger is rebuilt from the Pods' records, so nothing a Pod holds is lost.
inline constexpr int kPluginLabelsChanged = 3;

// The Node's labels under plugins.gpustack.ai/ (none when it has none). An error when the Node
// cannot be read: a daemon that cannot read its own Node cannot publish to it either.
Result<std::map<std::string, std::string>> PluginLabelsOf(kube::Client& client,
                                                          const std::string& node_name);
// The same, from a Node object already read.
std::map<std::string, std::string> PluginLabelsOf(const Json& node);

// One daemon per node: holds an exclusive lock on `path` for the life of the process (the fd is
// kept open on purpose). ALREADY_EXISTS, naming the holder's pid, when another daemon has it.
Result<int> LockNode(const std::filesystem::path& path);
// The same on a directory itself (the kubelet's device-plugin directory): a lock no file
// deletion there can undo, so two daemons with different state directories still cannot both
// serve one kubelet.
Result<int> LockDirectory(const std::filesystem::path& path);

// Serves until `stop` is asked; returns the process exit status (0 after a clean stop).
int RunDaemon(runtime::NodeRuntime& runtime, kube::Client& client, const DaemonOptions& options,
              std::stop_token stop);

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_DAEMON_H_
