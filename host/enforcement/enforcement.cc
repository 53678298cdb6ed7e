#include "host/enforcement/enforcement.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

#include "host/common/file_trust.h"
#include "host/common/files.h"
#include "host/common/json_path.h"
#include "host/common/logging.h"

namespace gpustack::enforcement {
namespace fs = std::filesystem;
namespace {

const Json* ContainerOf(const Json& pod, const std::string& name) {
  if (!pod.contains("spec")) return nullptr;
  for (const char* list : {"containers", "initContainers"}) {
    if (!pod["spec"].contains(list) || !pod["spec"][list].is_array()) continue;
    for (const Json& c : pod["spec"][list]) {
      if (c.is_object() && c.value("name", "") == name) return &c;
    }
  }
  return nullptr;
}

Status CopyAtomically(const fs::path& from, const fs::path& to) {
  const fs::path fresh = to.string() + ".new";
  std::error_code ec;
  fs::remove(fresh, ec);
  if (!fs::copy_file(from, fresh, fs::copy_options::overwrite_existing, ec)) {
    return Error{"cannot copy " + from.string() + " to " + fresh.string() + ": " + ec.message()};
  }
  fs::permissions(fresh, fs::perms(0755), ec);
  if (ec || ::rename(fresh.c_str(), to.c_str()) != 0) {
    fs::remove(fresh, ec);
    return Error{"cannot replace " + to.string() + ": " + std::strerror(errno)};
  }
  return Ok{};
}

// "fake" path components cannot come from a uid or a container name the apiserver accepted, but
// the directory names are built from Pod data: refuse anything that could climb out.
bool SafeComponent(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

Result<std::string> VariantOf(const client::EnforcerDeclaration& enforcer,
                              const std::string& runtime_version) {
  if (enforcer.variant != GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR) return std::string{};
  unsigned major = 0;
  const char* begin = runtime_version.data();
  const char* end = begin + runtime_version.size();
  auto [stop, ec] = std::from_chars(begin, end, major);
  if (ec != std::errc{} || stop == begin) {
    return Error{"enforcer " + enforcer.name + " has one build per runtime major, and the cards' " +
                 "runtime version \"" + runtime_version + "\" names none"};
  }
  return enforcer.variant_prefix + std::to_string(major);
}

std::string PreloadText(const std::string& manufacturer,
                        const client::EnforcerDeclaration& enforcer) {
  std::string text;
  for (const std::string& file : enforcer.preload) {
    text += std::string(kLibraryMountRoot) + "/" + manufacturer + "/" + file + "\n";
  }
  return text;
}

namespace {

// What the container's own `env:` sets: a literal value, or none for one from a reference (it
// cannot be seen here; nor can envFrom).
std::map<std::string, std::optional<std::string>> OwnEnv(const Json& pod,
                                                         const std::string& container) {
  std::map<std::string, std::optional<std::string>> own;
  const Json* c = ContainerOf(pod, container);
  if (c == nullptr || !c->contains("env") || !(*c)["env"].is_array()) return own;
  for (const Json& e : (*c)["env"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    own[e["name"].get<std::string>()] =
        e.contains("valueFrom") ? std::nullopt : std::optional<std::string>(StringAt(e, {"value"}));
  }
  return own;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> DefaultEnvFor(
    const client::EnforcerDeclaration& enforcer, const Json& pod, const std::string& container,
    const std::vector<sdk::ContainerEdit>& granted) {
  std::set<std::string> set;
  for (const auto& [name, value] : OwnEnv(pod, container)) set.insert(name);
  for (const sdk::ContainerEdit& edit : granted) {
    if (edit.kind == GPUSTACK_EDIT_ENV) set.insert(edit.key);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : enforcer.default_env) {
    if (set.count(key) == 0) out.emplace_back(key, value);
  }
  return out;
}

namespace {

// A budget variable the container sets itself to another value would win over the grant's (the
// kubelet puts the Pod's `env:` after the device plugin's), and the slice would run unbounded
// while the node says its slices bind: such a slice is refused instead. The same value (say,
// CUDA_DEVICE_ORDER=PCI_BUS_ID) is harmless; a value from a reference cannot be seen, so it is
// taken as another one.
Result<std::vector<sdk::ContainerEdit>> UnlessOverridden(
    const Json& pod, const std::string& container, const std::vector<sdk::ContainerEdit>& granted,
    std::vector<sdk::ContainerEdit> edits) {
  const std::map<std::string, std::optional<std::string>> own = OwnEnv(pod, container);
  if (own.empty()) return edits;
  const std::vector<sdk::ContainerEdit>& ours = edits;
  for (const std::vector<sdk::ContainerEdit>* list : {&granted, &ours}) {
    for (const sdk::ContainerEdit& edit : *list) {
      auto it = edit.kind == GPUSTACK_EDIT_ENV ? own.find(edit.key) : own.end();
      if (it == own.end() || it->second == edit.value) continue;
      return Error{"container " + container + " sets " + edit.key +
                       " in its env:, which would override what its slice was given (" + edit.key +
                       "=" + edit.value + "): remove it (docs/enforcement.md)",
                   Code::kFailedPrecondition};
    }
  }
  return edits;
}

}  // namespace

std::optional<RunAs> RunAsOf(const Json& pod, const std::string& container) {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // The container's securityContext overrides the Pod's, field by field.
  auto read = [&](const Json& context) {
    if (!context.is_object()) return;
    if (context.contains("runAsUser") && context["runAsUser"].is_number_integer() &&
        context["runAsUser"].get<int64_t>() >= 0)
      uid = context["runAsUser"].get<uid_t>();
    if (context.contains("runAsGroup") && context["runAsGroup"].is_number_integer() &&
        context["runAsGroup"].get<int64_t>() >= 0)
      gid = context["runAsGroup"].get<gid_t>();
  };
  if (pod.contains("spec") && pod["spec"].contains("securityContext"))
    read(pod["spec"]["securityContext"]);
  if (const Json* c = ContainerOf(pod, container); c != nullptr && c->contains("securityContext"))
    read((*c)["securityContext"]);
  if (!uid) return std::nullopt;  // the image's user writes: unknown here
  return RunAs{*uid, gid};
}

SliceEnforcement::SliceEnforcement(Options options) : options_(std::move(options)) {}

fs::path SliceEnforcement::StageDir(const std::string& manufacturer,
                                    const std::string& variant) const {
  fs::path dir = options_.data_dir / "operator" / "lib" / manufacturer;
  return variant.empty() ? dir : dir / variant;
}

fs::path SliceEnforcement::WorkdirOf(const std::string& pod_uid,
                                     const std::string& container) const {
  return options_.data_dir / "operator" / "pods" / pod_uid / container;
}

fs::path SliceEnforcement::HostPathOf(const fs::path& local) const {
  return options_.host_data_dir / local.lexically_relative(options_.data_dir);
}

void SliceEnforcement::Prepare(const std::vector<runtime::PluginStatus>& plugins) {
  auto log = Logger("enforcement");
  std::lock_guard lock(mutex_);
  std::vector<State> states;
  for (const runtime::PluginStatus& status : plugins) {
    if (status.state != runtime::PluginState::kRunning || !status.identity) continue;
    const runtime::PluginIdentity& id = *status.identity;
    if (!id.Has(GPUSTACK_CAP_LOGICAL_SLICING)) continue;
    State state{.manufacturer = id.manufacturer};
    if (!id.enforcer) {
      plugins_.erase(id.manufacturer);
      state.binding = Binding::kUnknown;
      state.message =
          "the plugin declares no enforcer: its slices bind only where the manufacturer's "
          "runtime or driver reads the budgets its grant writes (docs/enforcement.md)";
      for (const char* key : {kEnforcerDirSetting, kSlicingSetting}) {
        if (status.settings.count(key) != 0)
          state.message += "; its node setting " + std::string(key) + " is ignored";
      }
      states.push_back(std::move(state));
      continue;
    }
    Plugin& plugin = plugins_[id.manufacturer];
    plugin.enforcer = *id.enforcer;
    state.enforcer = plugin.enforcer.name;
    plugin.source.reset();
    if (auto it = status.settings.find(kEnforcerDirSetting);
        it != status.settings.end() && !it->second.empty()) {
      plugin.source = fs::path(it->second);
      plugin.source_origin = std::string("the node setting ") + kEnforcerDirSetting;
    } else if (!plugin.enforcer.package_dir.empty() && !status.library_path.empty()) {
      plugin.source = fs::path(status.library_path).parent_path() / plugin.enforcer.package_dir;
      plugin.source_origin = "the plugin's package";
    }
    // Which variant each card needs: its group's runtime.
    plugin.variant_of_card.clear();
    std::set<std::string> variants;
    std::string problems;
    for (const sdk::AcceleratorGroup& group : status.groups) {
      auto variant = VariantOf(plugin.enforcer, group.runtime_version);
      if (!variant) {
        problems += (problems.empty() ? "" : "; ") + variant.error();
        continue;
      }
      variants.insert(*variant);
      for (const sdk::Accelerator& a : group.accelerators) plugin.variant_of_card[a.id] = *variant;
    }
    plugin.staged.clear();
    state.binding = Binding::kCountedOnly;
    // What binds them: the library, MPS (NVIDIA's own facility) or nothing.
    auto setting = [&](const char* key) {
      auto it = status.settings.find(key);
      return it == status.settings.end() ? std::string() : it->second;
    };
    auto wanted = ParseSlicing(setting(kSlicingSetting));
    const bool nvidia = id.manufacturer == "nvidia";
    const auto control = nvidia ? FindMpsControl(setting(kMpsControlSetting)) : std::nullopt;
    // `auto` takes MPS only where its clients can surely reach the server.
    const HostIpc ipc = control ? HostIpcOf(options_.proc_root) : HostIpc::kUnknown;
    plugin.slicing = wanted ? ResolveSlicing(*wanted, plugin.source.has_value(),
                                             control.has_value() && ipc == HostIpc::kShared)
                            : Slicing::kNone;
    if (plugin.slicing != Slicing::kMps) plugin.mps.reset();
    if (!wanted) {
      state.message = "slices are counted, not enforced: the node setting " +
                      std::string(kSlicingSetting) + " is wrong: " + wanted.error();
    } else if (plugin.slicing == Slicing::kNone) {
      state.message = *wanted == Slicing::kNone
                          ? "slices are counted, not enforced: the node setting slicing is none"
                          : "slices are counted, not enforced: the plugin's enforcer " +
                                plugin.enforcer.name +
                                " has no source on this node (set plugins.config." +
                                id.manufacturer + ".enforcer, docs/enforcement.md)" +
                                (!nvidia   ? ""
                                 : control ? ", and MPS needs the device manager in the host's "
                                             "IPC namespace (deviceManager.hostIPC)"
                                           : ", and MPS's nvidia-cuda-mps-control is not here");
    } else if (plugin.slicing == Slicing::kMps) {
      if (!nvidia || !control) {
        state.message =
            "slices are counted, not enforced: slicing is mps, and " +
            std::string(nvidia ? "nvidia-cuda-mps-control is not here" +
                                     (setting(kMpsControlSetting).empty()
                                          ? std::string()
                                          : " (mps_control " + setting(kMpsControlSetting) + ")")
                               : "MPS is NVIDIA's");
        plugin.slicing = Slicing::kNone;
      } else if (ipc == HostIpc::kSeparate) {
        state.message =
            "slices are counted, not enforced: slicing is mps, and the device manager does not "
            "share the host's IPC namespace, where sliced Pods reach the server (set "
            "deviceManager.hostIPC, docs/enforcement.md)";
        plugin.slicing = Slicing::kNone;
      } else {
        if (!plugin.mps || plugin.mps->control() != *control)
          plugin.mps.emplace(*control, options_.data_dir);
        state.binding = Binding::kBound;
        state.message = "enforced by NVIDIA MPS (" + control->string() +
                        "): one control daemon per card that holds slices";
      }
    } else if (!plugin.source) {
      state.message =
          "slices are counted, not enforced: slicing is preload, and the plugin's "
          "enforcer " +
          plugin.enforcer.name + " has no source on this node (set plugins.config." +
          id.manufacturer + ".enforcer, docs/enforcement.md)";
      plugin.slicing = Slicing::kNone;
    } else {
      for (const std::string& variant : variants) {
        if (Status staged = Stage(id.manufacturer, plugin, variant); !staged) {
          problems += (problems.empty() ? "" : "; ") + staged.error();
        } else {
          plugin.staged.insert(variant);
        }
      }
      if (problems.empty()) {
        state.binding = Binding::kBound;
        state.message = "enforced by " + plugin.enforcer.name + ", staged from " +
                        plugin.source->string() + " (" + plugin.source_origin + ")";
      } else {
        state.message = "slices are counted, not enforced: " + problems;
      }
    }
    states.push_back(std::move(state));
  }
  if (states != states_) {  // said once per change, not every discovery pass
    for (const State& s : states) {
      if (s.binding == Binding::kCountedOnly) {
        log->warn("{}: {}", s.manufacturer, s.message);
      } else {
        log->info("{}: {}", s.manufacturer, s.message);
      }
    }
  }
  states_ = std::move(states);
}

Status SliceEnforcement::Stage(const std::string& manufacturer, const Plugin& plugin,
                               const std::string& variant) {
  const client::EnforcerDeclaration& e = plugin.enforcer;
  std::error_code ec;
  // A source with one directory per variant, or the files themselves (one build for the node).
  fs::path from = *plugin.source;
  if (!variant.empty() && fs::is_directory(from / variant, ec)) from /= variant;
  const fs::path to = StageDir(manufacturer, variant);
  fs::create_directories(to, ec);
  if (ec) return Error{"cannot create " + to.string() + ": " + ec.message()};
  for (const std::string& file : e.files) {
    const fs::path source = from / file;
    auto identity = IdentifyFile(source);
    if (!identity) {
      return Error{"enforcer " + e.name + " (" + (variant.empty() ? "" : variant + ", ") + "from " +
                   plugin.source_origin + "): " + source.string() +
                   " cannot be read: " + identity.error()};
    }
    if (Status trusted = CheckTrusted(source, options_.trusted_uid); !trusted) {
      return Error{"enforcer " + e.name + ": " + trusted.error() +
                   " (it would run in every sliced container)"};
    }
    if (!fs::is_regular_file(source, ec) || identity->size > kMaxEnforcerFileBytes) {
      return Error{"enforcer " + e.name + ": " + source.string() +
                   " is not a regular file of at most 256 MiB"};
    }
    const fs::path target = to / file;
    if (auto it = copied_.find(source);
        it != copied_.end() && it->second == *identity && fs::exists(target, ec)) {
      continue;
    }
    if (Status copied = CopyAtomically(source, target); !copied) return copied;
    copied_[source] = *identity;
    Logger("enforcement")
        ->info("{}: staged {} into {}", manufacturer, source.string(), to.string());
  }
  // Rewritten only when it changes: running containers hold the file they were given.
  const std::string preload = PreloadText(manufacturer, e);
  if (auto current = ReadSmallFile(to / "ld.so.preload", 1 << 20, "preload file");
      current && *current == preload) {
    return Ok{};
  }
  return WriteFileAtomically(to / "ld.so.preload", preload, fs::perms(0644));
}

Result<std::vector<sdk::ContainerEdit>> SliceEnforcement::EditsForSlice(
    const std::string& manufacturer, const std::string& accelerator_id, const Json& pod,
    const std::string& container, const std::vector<sdk::ContainerEdit>& granted,
    SliceBudget budget) {
  std::lock_guard lock(mutex_);
  auto it = plugins_.find(manufacturer);
  if (it == plugins_.end()) return std::vector<sdk::ContainerEdit>{};
  Plugin& plugin = it->second;
  if (plugin.slicing == Slicing::kMps && plugin.mps) {
    // MPS clients reach the server through the pipe directory and shared memory in the host's
    // IPC namespace: a Pod without it would run unbounded.
    if (!pod.contains("spec") || !pod["spec"].value("hostIPC", false)) {
      return Error{"this node binds " + manufacturer +
                       " slices with MPS, whose clients need the host's IPC namespace: set "
                       "spec.hostIPC: true on the Pod (docs/enforcement.md)",
                   Code::kFailedPrecondition};
    }
    if (Status started = plugin.mps->Ensure(accelerator_id); !started) {
      return Error{started.error(), Code::kUnavailable};
    }
    std::vector<sdk::ContainerEdit> edits = {
        {.kind = GPUSTACK_EDIT_MOUNT,
         .host_path = HostPathOf(plugin.mps->PipeDir(accelerator_id)).string(),
         .container_path = kMpsPipeMount,
         .read_only = false}};
    for (sdk::ContainerEdit& e : MpsEnv(budget.memory_mib, budget.cores_percentage))
      edits.push_back(std::move(e));
    return UnlessOverridden(pod, container, granted, std::move(edits));
  }
  const std::string uid = pod["metadata"].value("uid", "");
  if (!SafeComponent(uid) || !SafeComponent(container)) {
    return Error{"pod uid \"" + uid + "\" or container \"" + container +
                     "\" cannot name a working directory",
                 Code::kInvalidArgument};
  }
  std::vector<sdk::ContainerEdit> edits;
  // The files, where this card's variant is staged.
  if (auto v = plugin.variant_of_card.find(accelerator_id);
      v != plugin.variant_of_card.end() && plugin.staged.count(v->second) != 0) {
    const fs::path stage = StageDir(manufacturer, v->second);
    edits.push_back({.kind = GPUSTACK_EDIT_MOUNT,
                     .host_path = HostPathOf(stage).string(),
                     .container_path = std::string(kLibraryMountRoot) + "/" + manufacturer,
                     .read_only = true});
    if (!plugin.enforcer.preload.empty()) {
      edits.push_back({.kind = GPUSTACK_EDIT_MOUNT,
                       .host_path = HostPathOf(stage / "ld.so.preload").string(),
                       .container_path = kPreloadMount,
                       .read_only = true});
    }
  }
  // Its own working directory: the enforcer's ledger between the container's processes.
  const fs::path workdir = WorkdirOf(uid, container);
  std::error_code ec;
  fs::create_directories(workdir, ec);
  if (ec) {
    return Error{"cannot create the working directory " + workdir.string() + " of " + manufacturer +
                     "'s enforcer: " + ec.message(),
                 Code::kUnavailable};
  }
  // Nobody but the container's user may look in. The runtime mounts it as root, so the
  // directories above it are root's alone: no user of the node can reach a 0777 directory (nor
  // run a setuid file a container left there).
  fs::permissions(workdir.parent_path().parent_path(), fs::perms(0700), ec);
  fs::permissions(workdir.parent_path(), fs::perms(0700), ec);
  if (auto run_as = RunAsOf(pod, container)) {
    if (::chown(workdir.c_str(), run_as->uid, run_as->gid.value_or(static_cast<gid_t>(-1))) != 0) {
      return Error{"cannot give " + workdir.string() + " to uid " + std::to_string(run_as->uid) +
                       ": " + std::strerror(errno),
                   Code::kUnavailable};
    }
    fs::permissions(workdir, fs::perms(0700), ec);
  } else {
    fs::permissions(workdir, fs::perms(0777), ec);
  }
  edits.push_back({.kind = GPUSTACK_EDIT_MOUNT,
                   .host_path = HostPathOf(workdir).string(),
                   .container_path = kWorkdirMount,
                   .read_only = false});
  if (!plugin.enforcer.workdir_env.empty()) {
    edits.push_back(
        {.kind = GPUSTACK_EDIT_ENV, .key = plugin.enforcer.workdir_env, .value = kWorkdirMount});
  }
  for (auto& [key, value] : DefaultEnvFor(plugin.enforcer, pod, container, granted))
    edits.push_back({.kind = GPUSTACK_EDIT_ENV, .key = key, .value = value});
  if (plugin.slicing == Slicing::kNone) return edits;  // nothing binds the budget here anyway
  return UnlessOverridden(pod, container, granted, std::move(edits));
}

size_t SliceEnforcement::Reclaim(const std::function<bool(const std::string&)>& keep) {
  std::lock_guard lock(mutex_);
  const fs::path root = options_.data_dir / "operator" / "pods";
  std::error_code ec;
  size_t removed = 0;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string uid = it->path().filename().string();
    if (keep(uid)) continue;
    std::error_code removing;
    fs::remove_all(it->path(), removing);
    if (removing) {
      Logger("enforcement")
          ->warn("cannot remove the working directories of gone pod {}: {}", uid,
                 removing.message());
      continue;
    }
    ++removed;
  }
  if (removed > 0)
    Logger("enforcement")->info("removed the working directories of {} gone pod(s)", removed);
  return removed;
}

void SliceEnforcement::Forget(const std::set<std::string>& pod_uids) {
  std::lock_guard lock(mutex_);
  for (const std::string& uid : pod_uids) {
    if (!SafeComponent(uid)) continue;
    std::error_code ec;
    fs::remove_all(options_.data_dir / "operator" / "pods" / uid, ec);
  }
}

void SliceEnforcement::SyncMps(
    const std::function<std::map<std::string, std::set<std::string>>()>& sliced_cards) {
  std::lock_guard lock(mutex_);
  bool any = false;
  for (const auto& [manufacturer, plugin] : plugins_) any |= plugin.mps.has_value();
  if (!any) return;
  const auto cards = sliced_cards();
  for (auto& [manufacturer, plugin] : plugins_) {
    if (!plugin.mps) continue;
    auto it = cards.find(manufacturer);
    for (const std::string& problem :
         plugin.mps->Sync(it == cards.end() ? std::set<std::string>{} : it->second)) {
      Logger("enforcement")->warn("MPS: {}", problem);
    }
  }
}

std::vector<State> SliceEnforcement::States() const {
  std::lock_guard lock(mutex_);
  return states_;
}

}  // namespace gpustack::enforcement
