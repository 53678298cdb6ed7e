// What makes a logical slice's budgets bind inside its container (docs/behaviour.md §6.3,
// docs/decisions.md D57). A plugin's grant carries the budgets as its enforcer's environment
// contract; this component adds what the enforcer needs to read them:
//   - its library files, staged from their source (the node setting `enforcer_dir`, else the
//     plugin's package) into <data dir>/operator/lib/<manufacturer>[/<variant>], and mounted
//     read-only at /usr/local/gpustack/<manufacturer> with an /etc/ld.so.preload naming them;
//   - the container's own working directory (<data dir>/operator/pods/<pod uid>/<container>,
//     mounted at /var/run/gpustack/enforcer), removed once the Pod is gone, restarts included;
//   - the declaration's default env, only where the container's own `env:` lacks the key.
// The pure rules (which variant, which env, what the preload file says) are separate from the
// staging and the directories, which are the only I/O.
#ifndef GPUSTACK_HOST_ENFORCEMENT_ENFORCEMENT_H_
#define GPUSTACK_HOST_ENFORCEMENT_ENFORCEMENT_H_

#include <sys/types.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gpustack/client/plugin.hpp>
#include <gpustack/plugin_types.hpp>

#include "host/common/files.h"
#include "host/common/result.h"
#include "host/enforcement/mps.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::enforcement {

using Json = nlohmann::json;

// Container paths: fixed, so a plugin's default env may name a file in the working directory.
inline constexpr char kLibraryMountRoot[] = "/usr/local/gpustack";  // + /<manufacturer>
inline constexpr char kWorkdirMount[] = "/var/run/gpustack/enforcer";
inline constexpr char kPreloadMount[] = "/etc/ld.so.preload";

// The node setting (plugins.config.<name>.enforcer_dir) naming the directory the enforcer's
// files are staged from; the chart fills it from plugins.config.<name>.enforcer.
inline constexpr char kEnforcerDirSetting[] = "enforcer_dir";

// A staged file larger than this is refused (HAMi-core's libvgpu.so is about 1 MiB).
inline constexpr uint64_t kMaxEnforcerFileBytes = 256ull << 20;

// --- pure rules ---

// The stage's subdirectory for a group whose runtime is `runtime_version`: "" without variants,
// "<prefix><major>" ("cuda-12" from "12.4") with GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR. An
// error when the version has no leading number to choose by.
Result<std::string> VariantOf(const client::EnforcerDeclaration& enforcer,
                              const std::string& runtime_version);

// What /etc/ld.so.preload says: the preloaded files at their container path, one per line.
std::string PreloadText(const std::string& manufacturer,
                        const client::EnforcerDeclaration& enforcer);

// The declaration's default env that `container` of `pod` gets: every KEY its own `env:` does not
// set (envFrom cannot be seen, docs/behaviour.md §6.3) and `granted` (the plugin's edits) does
// not set either; in the declaration's order.
std::vector<std::pair<std::string, std::string>> DefaultEnvFor(
    const client::EnforcerDeclaration& enforcer, const Json& pod, const std::string& container,
    const std::vector<sdk::ContainerEdit>& granted);

// The uid and gid a container runs as when its Pod says (container securityContext over the
// Pod's); nullopt when the image decides.
struct RunAs {
  uid_t uid = 0;
  std::optional<gid_t> gid;
};
std::optional<RunAs> RunAsOf(const Json& pod, const std::string& container);

// --- the node's enforcers ---

struct Options {
  std::filesystem::path data_dir = "/var/lib/gpustack";       // as this process sees it
  std::filesystem::path host_data_dir = "/var/lib/gpustack";  // as the kubelet sees it
  uid_t trusted_uid = ::geteuid();  // besides root, who may own an enforcer's source files
  std::filesystem::path proc_root = "/proc";  // the host's /proc: is this the host's IPC?
};

// Whether a manufacturer's slice budgets bind in their containers.
enum class Binding {
  kBound,        // its declared enforcer is staged and mounted into every slice
  kCountedOnly,  // it declares one, and this node cannot provide it: nothing binds the budgets
  kUnknown,      // it declares none: only its grant and the manufacturer's runtime can bind them
};

// Where one manufacturer's slices stand, for the node's Devices condition and the log.
struct State {
  std::string manufacturer{};
  std::string enforcer{};  // the declaration's name; empty: none declared
  Binding binding = Binding::kUnknown;
  std::string message{};  // how, or why not
  bool operator==(const State&) const = default;
};

// A slice's budgets, as the allocator granted them.
struct SliceBudget {
  uint64_t memory_mib = 0;
  uint32_t cores_percentage = 0;
};

class SliceEnforcement {
 public:
  explicit SliceEnforcement(Options options);

  // Stages the enforcer of every running plugin that has logical slicing, one variant per runtime
  // its groups report, and records each one's state. Idempotent and cheap when nothing changed
  // (a source file is copied again only when its size or time differs): run after discovery.
  void Prepare(const std::vector<runtime::PluginStatus>& plugins);

  // What a sliced container of `manufacturer` on card `accelerator_id` gets besides the plugin's
  // `granted` edits: the staged files and preload file (when staged), its working directory
  // (created now), and the default env. Nothing for a manufacturer whose plugin declares no
  // enforcer. An error when the working directory cannot be made: a slice the daemon cannot
  // bind is refused rather than run unbounded.
  // Under MPS instead: the card's control daemon (started now unless it runs), its pipe
  // directory and MPS's budget variables from `budget` (the Pod must share the host's IPC
  // namespace with the MPS server: refused otherwise).
  Result<std::vector<sdk::ContainerEdit>> EditsForSlice(
      const std::string& manufacturer, const std::string& accelerator_id, const Json& pod,
      const std::string& container, const std::vector<sdk::ContainerEdit>& granted,
      SliceBudget budget = SliceBudget());

  // Runs an MPS control daemon on exactly the cards `sliced_cards` names (by manufacturer) for
  // the plugins whose slices MPS binds: the first slice on a card started one, and this stops it
  // once the last is gone; after a restart it adopts the running ones. Called with the node's
  // lock order (this component's lock, then the ledger's inside `sliced_cards`).
  void SyncMps(const std::function<std::map<std::string, std::set<std::string>>()>& sliced_cards);

  // Removes the working directories of every Pod `keep` says no to (by uid); how many went.
  // The daemon keeps the Pods of a fresh list and those holding an allocation.
  size_t Reclaim(const std::function<bool(const std::string& pod_uid)>& keep);
  // Removes the working directories of Pods the apiserver said were deleted.
  void Forget(const std::set<std::string>& pod_uids);

  std::vector<State> States() const;
  std::filesystem::path StageDir(const std::string& manufacturer, const std::string& variant) const;
  std::filesystem::path WorkdirOf(const std::string& pod_uid, const std::string& container) const;

 private:
  struct Plugin {
    client::EnforcerDeclaration enforcer;
    Slicing slicing = Slicing::kNone;             // resolved: preload, mps or none
    std::optional<MpsDaemons> mps;                // with Slicing::kMps
    std::optional<std::filesystem::path> source;  // none: nothing to stage
    std::string source_origin;                    // "node setting enforcer_dir", "its package"
    std::map<std::string, std::string> variant_of_card;  // accelerator id -> variant
    std::set<std::string> staged;                        // variants staged
  };
  // Copies one variant's files (when changed) and writes its preload file.
  Status Stage(const std::string& manufacturer, const Plugin& plugin, const std::string& variant);
  std::filesystem::path HostPathOf(const std::filesystem::path& local) const;

  const Options options_;
  mutable std::mutex mutex_;  // the plugins' table, and working directories made vs reclaimed
  std::map<std::string, Plugin> plugins_;  // by manufacturer, with an enforcer declared
  std::vector<State> states_;
  std::map<std::filesystem::path, FileIdentity> copied_;  // source file -> as last copied
};

}  // namespace gpustack::enforcement

#endif  // GPUSTACK_HOST_ENFORCEMENT_ENFORCEMENT_H_
