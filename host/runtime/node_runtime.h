// The node runtime: what the device manager stands on. It owns the node's plugins (found through
// a PluginSource, enabled by the node config, every one behind a watchdog), the last-good
// discovery of each, the node's Devices spec and ledger under one mutex, and the health loop.
// `detect`, `monitor` and `preflight` are views over it, and so are the node daemon's kubelet
// servers and allocator (docs/decisions.md D11).
//
// Nothing a plugin does takes the runtime down: a plugin that fails to load or initialize is
// reported and skipped, a hung one is abandoned, one that crashed an earlier process is
// quarantined until its file changes, and a failed discovery keeps the last good one.
#ifndef GPUSTACK_HOST_RUNTIME_NODE_RUNTIME_H_
#define GPUSTACK_HOST_RUNTIME_NODE_RUNTIME_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/ledger.h"
#include "host/pci/pci_inventory.h"
#include "host/runtime/crash_journal.h"
#include "host/runtime/devices_spec.h"
#include "host/runtime/last_good.h"
#include "host/runtime/node_config.h"
#include "host/runtime/plugin_source.h"
#include "host/runtime/quarantine.h"
#include "host/runtime/watchdog.h"

namespace gpustack::runtime {

struct RuntimeOptions {
  std::string node_name;
  pci::ScanOptions pci;
  NodeConfig config;  // enable policy and per-plugin settings, overrides applied
  SpecOptions spec;
  // Where the crash journal and the quarantine list live; empty: neither is kept.
  std::filesystem::path state_dir;
  std::chrono::milliseconds hook_deadline{30'000};
  uid_t trusted_uid = ::geteuid();  // besides root, who may own plugin and library files
  // Environment lookups (GPUSTACK_<NAME>_LIBRARY); none when empty.
  std::function<std::string(const std::string&)> env;
};

enum class PluginState {
  kRefused,      // unusable before any of its code ran: manifest, trust, a conflict
  kDisabled,     // the enable policy left it off
  kQuarantined,  // it crashed an earlier process, and its file has not changed since
  kFailed,       // enabled, but it did not load or initialize
  kRunning,
  kHung,  // a call missed its deadline: never called again in this process
};
std::string_view StateName(PluginState state);  // "running"

struct PluginStatus {
  std::string name;  // empty when the manifest could not be read
  std::string origin;
  std::string library_path;
  bool enabled = false;
  std::string decision;  // why it is enabled or not
  PluginState state = PluginState::kDisabled;
  std::optional<Error> error;  // why it is refused, failed, quarantined or hung
  std::optional<PluginIdentity> identity;
  PluginSettings settings;  // as it was started with (node config, library_path's variable)
  // Discovery, once a pass ran.
  bool discovery_ran = false;
  std::optional<Error> discovery_error;       // the latest pass's failure
  std::vector<sdk::AcceleratorGroup> groups;  // what is published: the last good pass
  bool stale = false;                         // published groups are from an earlier pass
  std::vector<std::string> warnings;
  // Published as they are, but wrong: none of the plugin's accelerators could be read (every
  // card lost, or no driver bound). The node then offers none of them, and ok() says so.
  std::vector<std::string> faults;
};

struct NodeReport {
  std::string node_name;
  std::vector<std::string> plugin_places;
  std::vector<SourceProblem> problems;
  std::vector<pci::PciDevice> pci_devices;
  std::vector<PluginStatus> plugins;
  Result<ledger::DevicesSpec> spec = ledger::DevicesSpec{};
  std::string crash_journal;  // the journal's path, or why crashes are not recorded

  // False when something asked for is not working: a fatal problem, an enabled plugin that is not
  // running, a discovery that failed, a plugin none of whose cards could be read, or a spec that
  // could not be formed.
  bool ok() const;
};

struct CardSample {
  std::string manufacturer;
  std::string product;
  uint32_t index = 0;
  sdk::DeviceSample sample;
  // The plugin was asked for the card's processes, can list them and did (the sample's
  // process_listing is COMPLETE): no row means none run. When false, `processes` is empty.
  bool processes_listed = false;
  std::vector<sdk::ProcessSample> processes;
};

struct SampleRound {
  std::vector<CardSample> cards;      // in plugin, then card order
  std::vector<std::string> errors;    // "<plugin>: <why>" per plugin not sampled
  std::vector<std::string> warnings;  // implausible figures dropped
};

class NodeRuntime {
 public:
  // Scans PCI, finds the source's plugins, decides which run, and starts them. Fails only when
  // the node itself cannot be read (PCI); every per-plugin failure is in the report instead.
  static Result<std::unique_ptr<NodeRuntime>> Open(RuntimeOptions options,
                                                   std::unique_ptr<PluginSource> source);
  // Stops the health loop and shuts the plugins down (never waiting on a hung one).
  ~NodeRuntime();
  NodeRuntime(const NodeRuntime&) = delete;
  NodeRuntime& operator=(const NodeRuntime&) = delete;

  NodeReport Report() const;

  // One discovery pass over every running plugin: each result is checked against the PCI
  // inventory, kept under the last-good rule, and the spec and ledger are rebuilt from it.
  void Discover();

  // One metrics round over every plugin that has published cards.
  SampleRound Sample(bool include_processes);

  // The device nodes a running plugin's containers use.
  Result<std::vector<sdk::DeviceNode>> DeviceNodes(const std::string& plugin);

  // The running plugin that serves `manufacturer`, behind its watchdog: grants, partitions and
  // slices go through it. FAILED_PRECONDITION when none runs (hung plugins included). The pointer
  // lives as long as the runtime.
  Result<PluginBackend*> BackendFor(const std::string& manufacturer);
  // The identities of the running plugins, in load order.
  std::vector<PluginIdentity> RunningIdentities() const;

  // Runs `fn(ledger::NodeLedger&)` under the runtime's mutex.
  template <class Fn>
  auto WithLedger(Fn&& fn) {
    std::lock_guard lock(mutex_);
    return fn(*ledger_);
  }

  // Polls every plugin with health events on its poll lane; a change updates the published card
  // and calls `on_change` (from that lane's thread). Nothing waits for a poll: the owner calls
  // CheckHealthPolls by the time it names, which reports a plugin whose poll overran hung.
  void StartHealthLoop(std::chrono::milliseconds poll_timeout, std::function<void()> on_change);
  std::optional<std::chrono::steady_clock::time_point> CheckHealthPolls();
  void StopHealthLoop();

 private:
  struct Running {
    size_t status;  // index into report_.plugins
    std::unique_ptr<GuardedBackend> backend;
  };

  explicit NodeRuntime(RuntimeOptions options);
  void Start(std::vector<PluginCandidate> candidates);
  Status StartOne(const PluginCandidate& candidate, PluginStatus& status);
  void RecoverCrashes();
  void RebuildSpecLocked();  // from the last-good entries; mutex_ held
  // Warnings (and faults) from comparing a plugin's report with the PCI inventory.
  void CheckAgainstInventory(PluginStatus& status, const std::vector<sdk::AcceleratorGroup>& groups,
                             bool* refuse) const;

  RuntimeOptions options_;
  std::shared_ptr<PluginSource> source_;  // shared with a load that may hang
  std::shared_ptr<CrashJournal> journal_;
  std::optional<QuarantineStore> quarantine_;

  mutable std::mutex mutex_;  // everything below
  NodeReport report_;
  LastGoodDiscovery last_good_;
  std::unique_ptr<ledger::NodeLedger> ledger_;
  std::vector<Running> running_;

  std::vector<size_t> health_polled_;  // indices into running_; their owner's thread only
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_NODE_RUNTIME_H_
