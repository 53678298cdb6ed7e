#include "host/enforcement/mps.h"

#include <thread>

#include "host/common/logging.h"
#include "host/enforcement/process.h"

namespace gpustack::enforcement {
namespace fs = std::filesystem;

Result<Slicing> ParseSlicing(std::string_view text) {
  if (text.empty() || text == "auto") return Slicing::kAuto;
  if (text == "preload") return Slicing::kPreload;
  if (text == "mps") return Slicing::kMps;
  if (text == "none") return Slicing::kNone;
  return Error{"slicing \"" + std::string(text) + "\" is none of auto, preload, mps, none",
               Code::kInvalidArgument};
}

std::string_view SlicingName(Slicing slicing) {
  switch (slicing) {
    case Slicing::kAuto:
      return "auto";
    case Slicing::kPreload:
      return "preload";
    case Slicing::kMps:
      return "mps";
    case Slicing::kNone:
      return "none";
  }
  return "auto";
}

Slicing ResolveSlicing(Slicing wanted, bool enforcer_has_source, bool mps_available) {
  if (wanted != Slicing::kAuto) return wanted;
  if (enforcer_has_source) return Slicing::kPreload;
  return mps_available ? Slicing::kMps : Slicing::kNone;
}

HostIpc HostIpcOf(const fs::path& proc_root) {
  std::error_code self_error, host_error;
  const fs::path self = fs::read_symlink("/proc/self/ns/ipc", self_error);
  if (self_error) return HostIpc::kUnknown;
  const fs::path host = fs::read_symlink(proc_root / "1" / "ns" / "ipc", host_error);
  if (!host_error) return self == host ? HostIpc::kShared : HostIpc::kSeparate;
  // The host's init cannot be looked at (that needs CAP_SYS_PTRACE): the kernel's initial IPC
  // namespace (PROC_IPC_INIT_INO) is the host's, whatever else may be.
  return self == kInitialIpcNamespace ? HostIpc::kShared : HostIpc::kUnknown;
}

std::optional<fs::path> FindMpsControl(const std::string& configured) {
  std::error_code ec;
  if (!configured.empty()) {
    if (fs::is_regular_file(configured, ec)) return fs::path(configured);
    return std::nullopt;
  }
  // Where the driver installs it, and where the NVIDIA container runtime puts it in a container.
  for (const char* place :
       {"/usr/bin/nvidia-cuda-mps-control", "/usr/local/nvidia/bin/nvidia-cuda-mps-control",
        "/usr/local/bin/nvidia-cuda-mps-control"}) {
    if (fs::is_regular_file(place, ec)) return fs::path(place);
  }
  return std::nullopt;
}

std::vector<sdk::ContainerEdit> MpsEnv(uint64_t memory_mib, uint32_t cores_percentage) {
  std::vector<sdk::ContainerEdit> edits = {
      {.kind = GPUSTACK_EDIT_ENV, .key = "CUDA_MPS_PIPE_DIRECTORY", .value = kMpsPipeMount},
      {.kind = GPUSTACK_EDIT_ENV,
       .key = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
       .value = "0=" + std::to_string(memory_mib) + "M"}};
  if (cores_percentage > 0 && cores_percentage < 100) {
    edits.push_back({.kind = GPUSTACK_EDIT_ENV,
                     .key = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                     .value = std::to_string(cores_percentage)});
  }
  return edits;
}

MpsDaemons::MpsDaemons(fs::path control, fs::path data_dir, std::chrono::milliseconds timeout)
    : control_(std::move(control)), root_(data_dir / "operator" / "mps"), timeout_(timeout) {}

fs::path MpsDaemons::PipeDir(const std::string& card) const { return root_ / card / "pipe"; }
fs::path MpsDaemons::LogDir(const std::string& card) const { return root_ / card / "log"; }

std::vector<std::string> MpsDaemons::Env(const std::string& card) const {
  // The control daemon, and the servers it starts, see this card only.
  return {"CUDA_VISIBLE_DEVICES=" + card, "CUDA_MPS_PIPE_DIRECTORY=" + PipeDir(card).string(),
          "CUDA_MPS_LOG_DIRECTORY=" + LogDir(card).string(), "PATH=/usr/bin:/bin"};
}

Result<std::string> MpsDaemons::Ask(const std::string& card, const std::string& commands) const {
  auto ran = RunProcess({control_.string()}, Env(card), commands, timeout_);
  if (!ran) return ran.failure();
  if (ran->exit_code != 0) {
    return Error{control_.string() + " (card " + card + ") exited " +
                 std::to_string(ran->exit_code) + ": " + ran->output};
  }
  return ran->output;
}

bool MpsDaemons::Running(const std::string& card) const {
  return static_cast<bool>(Ask(card, "get_server_list\n"));
}

bool MpsDaemons::RunningBecomes(const std::string& card, bool wanted) const {
  const auto until = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    if (Running(card) == wanted) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status MpsDaemons::Ensure(const std::string& card) {
  if (card.empty() || card.find('/') != std::string::npos || card == "." || card == "..")
    return Error{"card id \"" + card + "\" cannot name an MPS directory", Code::kInvalidArgument};
  if (Running(card)) return Ok{};
  std::error_code ec;
  for (const fs::path& dir : {PipeDir(card), LogDir(card)}) {
    fs::create_directories(dir, ec);
    if (ec) return Error{"cannot create " + dir.string() + ": " + ec.message()};
  }
  // Clients of any user connect through the pipe directory.
  fs::permissions(PipeDir(card), fs::perms(0755), ec);
  auto started = RunProcess({control_.string(), "-d"}, Env(card), "", timeout_);
  if (!started) return started.failure();
  if (started->exit_code != 0) {
    return Error{"cannot start the MPS control daemon of card " + card + ": " + control_.string() +
                     " -d exited " + std::to_string(started->exit_code) + ": " + started->output,
                 Code::kUnavailable};
  }
  // `-d` may return before the daemon listens.
  if (!RunningBecomes(card, true)) {
    return Error{"the MPS control daemon of card " + card + " started but does not answer",
                 Code::kUnavailable};
  }
  Logger("enforcement")
      ->info("MPS: control daemon of card {} started ({})", card, PipeDir(card).string());
  return Ok{};
}

Status MpsDaemons::Stop(const std::string& card) {
  if (!Running(card)) return Ok{};
  auto asked = Ask(card, "quit\n");
  if (!asked) return asked.failure();
  // Until it is gone, a slice arriving meanwhile would find a daemon that is on its way out.
  if (!RunningBecomes(card, false))
    return Error{"the MPS control daemon of card " + card + " still answers after quit"};
  Logger("enforcement")->info("MPS: control daemon of card {} stopped", card);
  return Ok{};
}

std::vector<std::string> MpsDaemons::Sync(const std::set<std::string>& cards) {
  std::vector<std::string> problems;
  std::set<std::string> known = cards;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    known.insert(it->path().filename().string());
  for (const std::string& card : known) {
    const Status done = cards.count(card) != 0 ? Ensure(card) : Stop(card);
    if (!done) problems.push_back(done.error());
  }
  return problems;
}

}  // namespace gpustack::enforcement
