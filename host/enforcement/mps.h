// NVIDIA MPS as the enforcer of a card's slices (docs/enforcement.md, docs/decisions.md D9): the
// host driver's nvidia-cuda-mps-control, one control daemon per card that holds slices, started
// with the first slice on the card and stopped when the last is gone. Its pipe and log
// directories live under <data dir>/operator/mps/<card id>/; a restarted node daemon finds a
// running control daemon by asking it (get_server_list) and adopts it.
#ifndef GPUSTACK_HOST_ENFORCEMENT_MPS_H_
#define GPUSTACK_HOST_ENFORCEMENT_MPS_H_

#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gpustack/plugin_types.hpp>

#include "host/common/result.h"

namespace gpustack::enforcement {

// The node setting `slicing` (plugins.config.<name>.slicing): what binds the plugin's slices.
enum class Slicing {
  kAuto,     // preload when the enforcer has a source, else MPS where the plugin is NVIDIA's and
             // the driver has it, else none
  kPreload,  // the declared library enforcer
  kMps,      // NVIDIA MPS
  kNone,     // nothing: slices are counted, not enforced (the node says so)
};
inline constexpr char kSlicingSetting[] = "slicing";
// The node setting naming the control program, where it is not at a usual place.
inline constexpr char kMpsControlSetting[] = "mps_control";

Result<Slicing> ParseSlicing(std::string_view text);  // "" is auto
std::string_view SlicingName(Slicing slicing);

// What `auto` comes to (any other setting is itself). Pure.
Slicing ResolveSlicing(Slicing wanted, bool enforcer_has_source, bool mps_available);

// Where MPS's control program is: `configured` when set, else the first of the usual places
// that exists; nullopt when none does.
std::optional<std::filesystem::path> FindMpsControl(const std::string& configured);

// Whether this process shares the host's IPC namespace (that of <proc_root>/1, the host's init
// when the host's /proc is mounted there). An MPS server started outside it cannot be reached by
// clients in the host's namespace (Pods with hostIPC), which would then run unbounded.
enum class HostIpc { kShared, kSeparate, kUnknown };
HostIpc HostIpcOf(const std::filesystem::path& proc_root);
inline constexpr char kInitialIpcNamespace[] = "ipc:[4026531839]";

// The container paths of a sliced container's MPS pipe directory.
inline constexpr char kMpsPipeMount[] = "/var/run/gpustack/mps";

// The env a sliced container gets under MPS (the card is its device 0): the pipe directory,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=<cores %>.
// Pure.
std::vector<sdk::ContainerEdit> MpsEnv(uint64_t memory_mib, uint32_t cores_percentage);

class MpsDaemons {
 public:
  MpsDaemons(std::filesystem::path control, std::filesystem::path data_dir,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const std::filesystem::path& control() const { return control_; }
  std::filesystem::path PipeDir(const std::string& card) const;
  std::filesystem::path LogDir(const std::string& card) const;

  // Whether card's control daemon answers.
  bool Running(const std::string& card) const;
  // Whether Running(card) comes to `wanted` within the timeout (asked every 100 ms).
  bool RunningBecomes(const std::string& card, bool wanted) const;
  // Starts card's control daemon unless it answers already (then it is adopted).
  Status Ensure(const std::string& card);
  // Asks card's control daemon to quit (its servers go when their clients do).
  Status Stop(const std::string& card);
  // Makes the running daemons exactly `cards`: starts the missing, stops those of other cards
  // found under the data dir (a restart adopts what still has slices). The problems, if any.
  std::vector<std::string> Sync(const std::set<std::string>& cards);

 private:
  Result<std::string> Ask(const std::string& card, const std::string& commands) const;
  std::vector<std::string> Env(const std::string& card) const;

  const std::filesystem::path control_;
  const std::filesystem::path root_;  // <data dir>/operator/mps
  const std::chrono::milliseconds timeout_;
};

}  // namespace gpustack::enforcement

#endif  // GPUSTACK_HOST_ENFORCEMENT_MPS_H_
