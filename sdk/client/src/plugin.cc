#include <gpustack/client/plugin.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <utility>

#include "reader.h"

namespace gpustack::client {
namespace {

using sdk::View;

constexpr size_t kMaxIdentityString = 4096;
constexpr size_t kMaxVendorIds = 64;

// The capability bits each ABI minor defines: a plugin's bits past the negotiated version are
// ignored, as plugin.h requires.
gpustack_capabilities KnownCapabilities(uint32_t minor) {
  gpustack_capabilities known = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING |
                                GPUSTACK_CAP_PARTITIONING | GPUSTACK_CAP_PROCESS_METRICS |
                                GPUSTACK_CAP_HEALTH_EVENTS;
  if (minor >= 1) known |= GPUSTACK_CAP_SLICE_OBJECTS;
  return known;
}

bool IsValidResourceName(const std::string& name) {
  // <domain>/<name>: a DNS subdomain, then a name segment of [A-Za-z0-9._-].
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string::npos) return false;
  const std::string domain = name.substr(0, slash);
  if (domain.find('.') == std::string::npos) return false;
  for (char c : domain) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  for (char c : name.substr(slash + 1)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// A RuntimeClass handler name: a DNS-1123 label.
bool IsValidRuntimeClass(const std::string& name) {
  return IsValidManufacturerKey(name);  // the same rule: [a-z0-9-], 1..63, no '-' at either end
}

constexpr size_t kMaxEnforcerEntries = 64;

// A name an environment variable may have: [A-Za-z_][A-Za-z0-9_]*.
bool IsEnvName(std::string_view name) {
  if (name.empty() || name.size() > 256 || std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// One path segment the host may join under its stage: no '/', no "." or "..", printable.
bool IsFileName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '+';
  });
}

// Reads and checks identity.enforcer (1.3); the error names the field.
Result<std::optional<EnforcerDeclaration>> ReadEnforcer(const gpustack_enforcer* raw) {
  if (raw == nullptr) return std::optional<EnforcerDeclaration>();
  if (raw->struct_size < GPUSTACK_ENFORCER_STRUCT_SIZE_V1_3)
    return Error{"its enforcer struct_size " + std::to_string(raw->struct_size) +
                 " is below the 1.3 minimum"};
  auto text = [](const gpustack_str& s, const char* field) -> Result<std::string> {
    if ((s.size > 0 && s.data == nullptr) || s.size > kMaxIdentityString)
      return Error{std::string("its enforcer's ") + field + " has no data or is too long"};
    return std::string(View(s));
  };
  auto list = [&](const gpustack_str* items, size_t count,
                  const char* field) -> Result<std::vector<std::string>> {
    if ((count > 0 && items == nullptr) || count > kMaxEnforcerEntries)
      return Error{std::string("its enforcer's ") + field + " has " + std::to_string(count) +
                   " entries with no array, or more than " + std::to_string(kMaxEnforcerEntries)};
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) {
      auto item = text(items[i], field);
      if (!item) return item.failure();
      out.push_back(std::move(*item));
    }
    return out;
  };
  EnforcerDeclaration e;
  auto name = text(raw->name, "name");
  auto files = list(raw->files, raw->file_count, "files");
  auto preload = list(raw->preload, raw->preload_count, "preload");
  auto package_dir = text(raw->package_dir, "package_dir");
  auto prefix = text(raw->variant_prefix, "variant_prefix");
  auto workdir_env = text(raw->workdir_env, "workdir_env");
  auto defaults = list(raw->default_env, raw->default_env_count, "default_env");
  if (!name) return name.failure();
  if (!files) return files.failure();
  if (!preload) return preload.failure();
  if (!package_dir) return package_dir.failure();
  if (!prefix) return prefix.failure();
  if (!workdir_env) return workdir_env.failure();
  if (!defaults) return defaults.failure();
  e.name = std::move(*name);
  e.files = std::move(*files);
  e.preload = std::move(*preload);
  e.package_dir = std::move(*package_dir);
  e.variant = raw->variant;
  e.variant_prefix = std::move(*prefix);
  e.workdir_env = std::move(*workdir_env);
  if (e.name.empty()) return Error{"its enforcer has no name"};
  if (e.files.empty()) return Error{"its enforcer " + e.name + " lists no files"};
  for (const std::string& f : e.files) {
    if (!IsFileName(f))
      return Error{"its enforcer " + e.name + " lists \"" + f +
                   "\", which is not a plain file name ([A-Za-z0-9._+-], no '/')"};
  }
  for (const std::string& p : e.preload) {
    if (std::find(e.files.begin(), e.files.end(), p) == e.files.end())
      return Error{"its enforcer " + e.name + " preloads \"" + p + "\", which it does not list"};
  }
  if (e.package_dir.starts_with("/") || e.package_dir.find("..") != std::string::npos)
    return Error{"its enforcer " + e.name + "'s package_dir \"" + e.package_dir +
                 "\" is not a path inside the package"};
  if (e.variant != GPUSTACK_ENFORCER_VARIANT_NONE &&
      e.variant != GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR)
    return Error{"its enforcer " + e.name + " has unknown variant " + std::to_string(e.variant)};
  if (e.variant == GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR && !IsFileName(e.variant_prefix + "0"))
    return Error{"its enforcer " + e.name + "'s variant_prefix \"" + e.variant_prefix +
                 "\" does not make a directory name"};
  if (!e.workdir_env.empty() && !IsEnvName(e.workdir_env))
    return Error{"its enforcer " + e.name + "'s workdir_env \"" + e.workdir_env +
                 "\" is not an environment variable name"};
  for (const std::string& entry : *defaults) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || !IsEnvName(std::string_view(entry).substr(0, eq)))
      return Error{"its enforcer " + e.name + "'s default_env entry \"" + entry +
                   "\" is not KEY=value"};
    e.default_env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return std::optional<EnforcerDeclaration>(std::move(e));
}

// Checks what identify reported against the manifest and the ABI's rules.
Result<Identity> ReadIdentity(const gpustack_plugin_api& api, const Manifest& manifest,
                              AbiVersion negotiated) {
  const std::string where = manifest.library_path.string();
  auto refuse = [&](const std::string& why) {
    return Error{where + ": " + why, Code::kFailedPrecondition};
  };
  gpustack_plugin_identity raw{};
  raw.struct_size = negotiated.minor >= 3   ? GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3
                    : negotiated.minor >= 2 ? GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2
                    : negotiated.minor >= 1 ? GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1
                                            : GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0;
  const gpustack_status status = api.identify(&raw);
  if (status != GPUSTACK_STATUS_OK) {
    const gpustack_str message = api.last_error_message();
    const bool readable = message.data != nullptr && message.size <= kMaxIdentityString;
    return refuse("identify failed: " + sdk::StatusName(status) + ": " +
                  (readable ? std::string(View(message)) : "(unreadable message)"));
  }
  for (const gpustack_str* s :
       {&raw.manufacturer, &raw.display_name, &raw.base_resource_name, &raw.plugin_version,
        &raw.partition_kind, &raw.runtime_class, &raw.install_hint}) {
    if ((s->size > 0 && s->data == nullptr) || s->size > kMaxIdentityString) {
      return refuse("identify returned a string with no data or of " + std::to_string(s->size) +
                    " bytes");
    }
  }
  if ((raw.pci_vendor_id_count > 0 && raw.pci_vendor_ids == nullptr) ||
      raw.pci_vendor_id_count > kMaxVendorIds) {
    return refuse("identify returned pci_vendor_id_count " +
                  std::to_string(raw.pci_vendor_id_count) + " with no array or above " +
                  std::to_string(kMaxVendorIds));
  }
  Identity id;
  id.manufacturer = View(raw.manufacturer);
  id.display_name = View(raw.display_name);
  id.base_resource_name = View(raw.base_resource_name);
  id.plugin_version = View(raw.plugin_version);
  id.pci_vendor_ids.assign(raw.pci_vendor_ids, raw.pci_vendor_ids + raw.pci_vendor_id_count);
  id.capabilities = raw.capabilities & KnownCapabilities(negotiated.minor);
  id.partition_kind = View(raw.partition_kind);
  id.runtime_class = View(raw.runtime_class);
  id.runtime_flags = raw.runtime_flags;
  id.install_hint = View(raw.install_hint);
  id.admission_flags = raw.admission_flags;
  id.min_slice_memory_percentage = raw.min_slice_memory_percentage;
  if (id.min_slice_memory_percentage > 100) {
    return refuse("identify says its smallest slice is " +
                  std::to_string(id.min_slice_memory_percentage) + " % of a card (at most 100)");
  }

  if (negotiated.minor >= 3) {
    auto enforcer = ReadEnforcer(raw.enforcer);
    if (!enforcer) return refuse(enforcer.error());
    id.enforcer = std::move(*enforcer);
    if (id.enforcer && (id.capabilities & GPUSTACK_CAP_LOGICAL_SLICING) == 0)
      return refuse("declares an enforcer but does not claim logical slicing");
  }

  if (id.manufacturer != manifest.name) {
    return refuse("identify says manufacturer \"" + id.manufacturer +
                  "\" but its manifest says \"" + manifest.name + "\"");
  }
  if (!IsValidResourceName(id.base_resource_name)) {
    return refuse("base resource name \"" + id.base_resource_name +
                  "\" is not <domain>/<name> (e.g. nvidia.com/gpu)");
  }
  if (id.display_name.empty()) return refuse("identify returned an empty display name");
  auto sorted = [](std::vector<uint16_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (sorted(id.pci_vendor_ids) != sorted(manifest.pci_vendor_ids)) {
    return refuse("identify's PCI vendor ids differ from its manifest's");
  }
  const bool partitions = (id.capabilities & GPUSTACK_CAP_PARTITIONING) != 0;
  if (partitions == id.partition_kind.empty()) {
    return refuse(partitions ? "claims partitioning but names no partition kind"
                             : "names a partition kind but does not claim partitioning");
  }
  if (!id.runtime_class.empty() && !IsValidRuntimeClass(id.runtime_class)) {
    return refuse("runtime class \"" + id.runtime_class + "\" is not a DNS label");
  }
  if (id.runtime_class.empty() && id.runtime_flags != 0) {
    return refuse("runtime flags are set but no runtime class is named");
  }
  return id;
}

std::vector<gpustack_str> Strs(const std::vector<std::string>& strings) {
  std::vector<gpustack_str> out;
  out.reserve(strings.size());
  for (const std::string& s : strings) out.push_back(sdk::Str(s));
  return out;
}

}  // namespace

std::string_view HookName(Hook hook) {
  switch (hook) {
    case Hook::kLoad:
      return "load";
    case Hook::kInit:
      return "init";
    case Hook::kShutdown:
      return "shutdown";
    case Hook::kDiscover:
      return "discover";
    case Hook::kGrant:
      return "grant";
    case Hook::kListPartitions:
      return "list_partitions";
    case Hook::kCreatePartition:
      return "create_partition";
    case Hook::kDestroyPartition:
      return "destroy_partition";
    case Hook::kSampleMetrics:
      return "sample_metrics";
    case Hook::kPollHealthEvents:
      return "poll_health_events";
    case Hook::kListDeviceNodes:
      return "list_device_nodes";
    case Hook::kPrepareSlice:
      return "prepare_slice";
    case Hook::kUnprepareSlice:
      return "unprepare_slice";
  }
  return "unknown hook";
}

Result<AbiVersion> CheckNegotiation(AbiVersion host, uint32_t plugin_major, uint32_t plugin_minor,
                                    int32_t status) {
  const std::string versions = "host ABI " + std::to_string(host.major) + "." +
                               std::to_string(host.minor) + ", plugin ABI " +
                               std::to_string(plugin_major) + "." + std::to_string(plugin_minor);
  if (status == GPUSTACK_STATUS_INCOMPATIBLE_VERSION) {
    return Error{"the plugin refused the host's ABI (" + versions + ")", Code::kFailedPrecondition};
  }
  if (status != GPUSTACK_STATUS_OK) {
    return Error{"negotiation failed with " + sdk::StatusName(status) + " (" + versions + ")",
                 Code::kFailedPrecondition};
  }
  if (plugin_major != host.major) {
    return Error{"the plugin answered a different ABI major (" + versions + ")",
                 Code::kFailedPrecondition};
  }
  return AbiVersion{host.major, std::min(host.minor, plugin_minor)};
}

std::vector<std::string> MissingHooks(const Identity& identity, const gpustack_plugin_api& table) {
  std::vector<std::string> missing;
  auto need = [&](bool needed, const void* slot, const char* hook, const char* because) {
    if (needed && slot == nullptr) {
      missing.push_back(std::string(because) + " but provides no " + hook);
    }
  };
  auto has = [&](gpustack_capabilities cap) { return (identity.capabilities & cap) != 0; };
  const auto slot = [](auto fn) { return reinterpret_cast<const void*>(fn); };
  need(has(GPUSTACK_CAP_SHARED), slot(table.grant), "grant", "claims sharing");
  need(has(GPUSTACK_CAP_LOGICAL_SLICING), slot(table.grant), "grant", "claims logical slicing");
  for (auto [fn, name] : {std::pair{slot(table.grant), "grant"},
                          std::pair{slot(table.list_partitions), "list_partitions"},
                          std::pair{slot(table.create_partition), "create_partition"},
                          std::pair{slot(table.destroy_partition), "destroy_partition"}}) {
    need(has(GPUSTACK_CAP_PARTITIONING), fn, name, "claims partitioning");
  }
  need(has(GPUSTACK_CAP_PROCESS_METRICS), slot(table.sample_metrics), "sample_metrics",
       "claims process metrics");
  need(has(GPUSTACK_CAP_HEALTH_EVENTS), slot(table.poll_health_events), "poll_health_events",
       "claims health events");
  need(has(GPUSTACK_CAP_SLICE_OBJECTS), slot(table.prepare_slice), "prepare_slice",
       "claims slice objects");
  need(has(GPUSTACK_CAP_SLICE_OBJECTS), slot(table.unprepare_slice), "unprepare_slice",
       "claims slice objects");
  need(table.discover != nullptr, slot(table.grant), "grant",
       "discovers cards (any card can be granted whole)");
  // A hook needed for several reasons is named once, for the most specific one (listed first).
  std::vector<std::string> unique;
  std::set<std::string> hooks;
  for (const std::string& line : missing) {
    const std::string hook = line.substr(line.rfind(' ') + 1);
    if (hooks.insert(hook).second) unique.push_back(line);
  }
  return unique;
}

gpustack_capabilities ProvidedCapabilities(const gpustack_plugin_api& table) {
  gpustack_capabilities provided = ~gpustack_capabilities{0};
  auto drop_unless = [&](bool present, gpustack_capabilities caps) {
    if (!present) provided &= ~caps;
  };
  drop_unless(table.grant != nullptr,
              GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PARTITIONING);
  drop_unless(table.list_partitions != nullptr && table.create_partition != nullptr &&
                  table.destroy_partition != nullptr,
              GPUSTACK_CAP_PARTITIONING);
  drop_unless(table.sample_metrics != nullptr, GPUSTACK_CAP_PROCESS_METRICS);
  drop_unless(table.poll_health_events != nullptr, GPUSTACK_CAP_HEALTH_EVENTS);
  drop_unless(table.prepare_slice != nullptr && table.unprepare_slice != nullptr,
              GPUSTACK_CAP_SLICE_OBJECTS);
  return provided;
}

Result<std::unique_ptr<Plugin>> Plugin::Open(const Manifest& manifest, const OpenOptions& options) {
  const std::string where = manifest.library_path.string();
  auto refuse = [&](const std::string& why) {
    return Error{where + ": " + why, Code::kFailedPrecondition};
  };
  if (manifest.abi_major != options.host_abi.major) {
    // Refused from the manifest alone: the library is never opened.
    return Error{manifest.manifest_path.string() + ": manifest declares ABI major " +
                     std::to_string(manifest.abi_major) + ", this host speaks " +
                     std::to_string(options.host_abi.major) + "; rebuild the plugin against SDK " +
                     std::to_string(options.host_abi.major) + ".x",
                 Code::kFailedPrecondition};
  }
  // Read the ELF symbol table before dlopen, so a library without the entry point never gets to
  // run its constructors.
  auto symbols = ExportedSymbols(manifest.library_path, options.elf);
  if (!symbols) return symbols.failure();
  if (std::find(symbols->begin(), symbols->end(), GPUSTACK_PLUGIN_ENTRY_SYMBOL) == symbols->end()) {
    return refuse("does not export " GPUSTACK_PLUGIN_ENTRY_SYMBOL
                  " (not a GPUStack plugin, or built without the SDK's export map)");
  }

  // RTLD_NOW: a missing symbol fails here, not mid-call. RTLD_LOCAL: plugins cannot see or
  // interpose each other's symbols. RTLD_NODELETE: see the class comment.
  ::dlerror();
  void* handle = ::dlopen(manifest.library_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    const std::string message = why != nullptr ? why : "dlopen failed";
    ::dlerror();  // glibc keeps the message until asked again: free it now, on this thread
    return refuse("cannot be loaded: " + message);
  }
  auto negotiate =
      reinterpret_cast<gpustack_plugin_negotiate_fn>(::dlsym(handle, GPUSTACK_PLUGIN_ENTRY_SYMBOL));
  if (negotiate == nullptr) return refuse("the entry point cannot be resolved");

  gpustack_negotiate_args args{};
  args.struct_size = sizeof(args);
  args.host_abi_major = options.host_abi.major;
  args.host_abi_minor = options.host_abi.minor;
  const gpustack_status status = negotiate(&args);
  auto negotiated =
      CheckNegotiation(options.host_abi, args.plugin_abi_major, args.plugin_abi_minor, status);
  if (!negotiated) return refuse(negotiated.error());

  gpustack_plugin_api api;
  if (!sdk::CopyPrefix(args.api, GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0, &api)) {
    return refuse(args.api == nullptr
                      ? std::string("negotiation succeeded but returned no function table")
                      : "function table struct_size " + std::to_string(args.api->struct_size) +
                            " is smaller than the ABI 1.0 minimum " +
                            std::to_string(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0));
  }
  if (negotiated->minor < 1) {
    // A 1.0 conversation: the 1.1 slots are not there, whatever the table's size.
    api.create_instance = nullptr;
    api.list_device_nodes = nullptr;
    api.prepare_slice = nullptr;
    api.unprepare_slice = nullptr;
  }
  if (api.abi_major != args.plugin_abi_major) {
    return refuse("function table says ABI major " + std::to_string(api.abi_major) +
                  " but negotiation answered " + std::to_string(args.plugin_abi_major));
  }
  if (api.last_error_message == nullptr || api.identify == nullptr ||
      (api.init == nullptr && api.create_instance == nullptr) || api.shutdown == nullptr) {
    return refuse(
        "function table lacks a required function (last_error_message, identify, init and "
        "shutdown are required)");
  }

  auto identity = ReadIdentity(api, manifest, *negotiated);
  if (!identity) return identity.failure();
  if (negotiated->minor < 1) {
    // 1.0 let a plugin claim a capability without its hook (the 1.0 helper answered
    // UNIMPLEMENTED): such a plugin still loads, and what it cannot do is not offered.
    identity->capabilities &= ProvidedCapabilities(api);
  } else if (options.require_claimed_hooks) {
    const std::vector<std::string> missing = MissingHooks(*identity, api);
    if (!missing.empty()) return refuse(missing.front());
  }
  return std::unique_ptr<Plugin>(
      new Plugin(manifest, negotiate, api, *negotiated, std::move(identity).value()));
}

Plugin::Plugin(Manifest manifest, gpustack_plugin_negotiate_fn negotiate,
               const gpustack_plugin_api& api, AbiVersion negotiated, Identity identity)
    : manifest_(std::move(manifest)),
      negotiate_(negotiate),
      api_(api),
      negotiated_(negotiated),
      identity_(std::move(identity)) {}

Plugin::~Plugin() { Shutdown(); }

bool Plugin::Provides(Hook hook) const {
  switch (hook) {
    case Hook::kLoad:
    case Hook::kInit:
    case Hook::kShutdown:
      return true;
    case Hook::kDiscover:
      return api_.discover != nullptr;
    case Hook::kGrant:
      return api_.grant != nullptr;
    case Hook::kListPartitions:
      return api_.list_partitions != nullptr;
    case Hook::kCreatePartition:
      return api_.create_partition != nullptr;
    case Hook::kDestroyPartition:
      return api_.destroy_partition != nullptr;
    case Hook::kSampleMetrics:
      return api_.sample_metrics != nullptr;
    case Hook::kPollHealthEvents:
      return api_.poll_health_events != nullptr;
    case Hook::kListDeviceNodes:
      return api_.list_device_nodes != nullptr;
    case Hook::kPrepareSlice:
      return api_.prepare_slice != nullptr;
    case Hook::kUnprepareSlice:
      return api_.unprepare_slice != nullptr;
  }
  return false;
}

Error Plugin::CallError(std::string_view hook, gpustack_status status) const {
  Reader reader;
  std::string message = reader.Str(api_.last_error_message(), "last_error_message");
  if (!reader.problem.empty()) message = "(unreadable message: " + reader.problem + ")";
  std::string code = sdk::StatusName(status);
  Code known = CodeFromNumber(status);
  if (status == GPUSTACK_STATUS_INCOMPATIBLE_VERSION) {
    known = Code::kFailedPrecondition;
  } else if (status < GPUSTACK_STATUS_OK || status > GPUSTACK_STATUS_INCOMPATIBLE_VERSION) {
    code = "UNKNOWN (the plugin returned undefined status " + std::to_string(status) + ")";
  }
  return Error{manifest_.name + ": " + std::string(hook) + " failed: " + code +
                   (message.empty() ? ": (the plugin gave no message)" : ": " + message),
               known};
}

template <class Call>
Status Plugin::Run(Hook hook, const std::string& output_problem, Call&& call) {
  const std::string_view name = HookName(hook);
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::unique_lock serial(calls_, std::defer_lock);
  if (hook != Hook::kPollHealthEvents) serial.lock();  // health polls run beside other calls
  if (!initialized()) {
    return Error{manifest_.name + ": " + std::string(name) + " called before init",
                 Code::kFailedPrecondition};
  }
  if (!Provides(hook)) {
    return Error{manifest_.name + ": " + std::string(name) +
                     " failed: UNIMPLEMENTED: the plugin does not provide it",
                 Code::kUnimplemented};
  }
  const gpustack_status status = call();
  // `output_problem` is what the sinks found wrong during the call. Invalid output is reported
  // even when the plugin ignored the sink's refusal and said OK.
  if (!output_problem.empty()) {
    return Error{
        manifest_.name + ": " + std::string(name) + " reported invalid output: " + output_problem,
        Code::kInternal};
  }
  if (status != GPUSTACK_STATUS_OK) return CallError(name, status);
  return Ok{};
}

Status Plugin::Init(const gpustack_host_services* services,
                    std::span<const gpustack_pci_device* const> pci_devices) {
  std::unique_lock life(lifecycle_);
  if (initialized()) {
    return Error{manifest_.name + ": init called twice", Code::kFailedPrecondition};
  }
  gpustack_init_args args{};
  args.struct_size = sizeof(args);
  args.abi_major = negotiated_.major;
  args.abi_minor = negotiated_.minor;
  args.host = services;
  args.pci_devices = pci_devices.data();
  args.pci_device_count = pci_devices.size();
  gpustack_plugin_instance* instance = nullptr;
  gpustack_status status;
  if (api_.create_instance != nullptr) {
    status = api_.create_instance(&args);
    instance = args.instance;
  } else {
    status = api_.init(&args, &instance);
  }
  if (status != GPUSTACK_STATUS_OK) return CallError("init", status);
  instance_ = instance;
  initialized_.store(true, std::memory_order_release);
  return Ok{};
}

void Plugin::Shutdown() {
  std::unique_lock life(lifecycle_);  // waits for every running call, a health poll included
  if (!initialized()) return;
  api_.shutdown(instance_);
  instance_ = nullptr;
  initialized_.store(false, std::memory_order_release);
}

Result<std::vector<sdk::AcceleratorGroup>> Plugin::Discover() {
  Collector<sdk::AcceleratorGroup> collector;
  const gpustack_discovery_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::AcceleratorGroup>::Add<gpustack_accelerator_group, &Reader::Group>};
  const gpustack_discover_args args{sizeof(args), nullptr, &sink};
  auto status = Run(Hook::kDiscover, collector.reader.problem,
                    [&] { return api_.discover(instance_, &args); });
  if (!status) return std::move(status).failure();
  if (auto duplicate = DuplicateCards(collector.items); !duplicate.empty()) {
    return Error{manifest_.name + ": discover reported invalid output: " + duplicate,
                 Code::kInternal};
  }
  return std::move(collector.items);
}

Result<std::vector<sdk::ContainerEdit>> Plugin::Grant(const sdk::Grant& grant) {
  Collector<sdk::ContainerEdit> collector;
  const gpustack_container_edit_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::ContainerEdit>::Add<gpustack_container_edit, &Reader::Edit>};
  const std::vector<gpustack_str> ids = Strs(grant.accelerator_ids);
  gpustack_grant_args args{};
  args.struct_size = sizeof(args);
  args.pod_uid = sdk::Str(grant.pod_uid);
  args.container_name = sdk::Str(grant.container_name);
  args.mode = grant.mode;
  args.accelerator_ids = ids.data();
  args.accelerator_id_count = ids.size();
  args.memory_limit_mib = grant.memory_limit_mib;
  args.cores_percentage = grant.cores_percentage;
  args.partition_id = sdk::Str(grant.partition_id);
  args.sink = &sink;
  args.slice_id = sdk::Str(grant.slice_id);
  auto status =
      Run(Hook::kGrant, collector.reader.problem, [&] { return api_.grant(instance_, &args); });
  if (!status) return std::move(status).failure();
  return std::move(collector.items);
}

Result<std::vector<sdk::Partition>> Plugin::ListPartitions(std::string_view accelerator_id) {
  Collector<sdk::Partition> collector;
  const gpustack_partition_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::Partition>::Add<gpustack_partition, &Reader::PartitionOf>};
  const gpustack_list_partitions_args args{sizeof(args), nullptr, sdk::Str(accelerator_id), &sink};
  auto status = Run(Hook::kListPartitions, collector.reader.problem,
                    [&] { return api_.list_partitions(instance_, &args); });
  if (!status) return std::move(status).failure();
  return std::move(collector.items);
}

Result<sdk::Partition> Plugin::CreatePartition(const sdk::CreatePartitionRequest& request) {
  Collector<sdk::Partition> collector;
  const gpustack_partition_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::Partition>::Add<gpustack_partition, &Reader::PartitionOf>};
  const gpustack_create_partition_args args{sizeof(args),
                                            nullptr,
                                            sdk::Str(request.accelerator_id),
                                            sdk::Str(request.profile),
                                            request.placement,
                                            sdk::Str(request.owner),
                                            &sink};
  auto status = Run(Hook::kCreatePartition, collector.reader.problem,
                    [&] { return api_.create_partition(instance_, &args); });
  if (!status) return std::move(status).failure();
  if (collector.items.size() != 1) {
    return Error{manifest_.name + ": create_partition succeeded but reported " +
                     std::to_string(collector.items.size()) + " partitions instead of 1",
                 Code::kInternal};
  }
  const sdk::Partition& made = collector.items.front();
  if (made.accelerator_id != request.accelerator_id || made.owner != request.owner ||
      made.profile != request.profile) {
    return Error{manifest_.name + ": create_partition reported partition " + made.id + " (" +
                     made.profile + " on " + made.accelerator_id + " for " + made.owner +
                     "), not the " + request.profile + " on " + request.accelerator_id + " for " +
                     request.owner + " it was asked for",
                 Code::kInternal};
  }
  return std::move(collector.items.front());
}

Status Plugin::DestroyPartition(const sdk::DestroyPartitionRequest& request) {
  const gpustack_destroy_partition_args args{
      sizeof(args), nullptr, sdk::Str(request.accelerator_id), sdk::Str(request.partition_id),
      sdk::Str(request.owner)};
  static const std::string kNoOutput;
  return Run(Hook::kDestroyPartition, kNoOutput,
             [&] { return api_.destroy_partition(instance_, &args); });
}

Result<MetricsSnapshot> Plugin::SampleMetrics(const sdk::MetricsRequest& request) {
  Collector<sdk::DeviceSample> devices;
  devices.reader.minor = negotiated_.minor;
  Collector<sdk::ProcessSample> processes;
  // One sink, two collectors: host_data reaches both.
  struct Both {
    Collector<sdk::DeviceSample>* devices;
    Collector<sdk::ProcessSample>* processes;
  } both{&devices, &processes};
  const gpustack_metrics_sink sink{
      sizeof(sink), nullptr, &both,
      [](void* data, const gpustack_device_sample* s) noexcept {
        return Collector<sdk::DeviceSample>::Add<gpustack_device_sample, &Reader::Device>(
            static_cast<Both*>(data)->devices, s);
      },
      [](void* data, const gpustack_process_sample* s) noexcept {
        return Collector<sdk::ProcessSample>::Add<gpustack_process_sample, &Reader::Process>(
            static_cast<Both*>(data)->processes, s);
      }};
  const std::vector<gpustack_str> ids = Strs(request.accelerator_ids);
  const gpustack_sample_metrics_args args{
      sizeof(args), nullptr, ids.data(), ids.size(), request.include_processes ? 1 : 0, &sink};
  std::string problem;
  auto status = Run(Hook::kSampleMetrics, problem, [&] {
    const gpustack_status s = api_.sample_metrics(instance_, &args);
    problem = !devices.reader.problem.empty() ? devices.reader.problem : processes.reader.problem;
    return s;
  });
  if (!status) return std::move(status).failure();
  MetricsSnapshot snapshot{std::move(devices.items), std::move(processes.items), {}};
  snapshot.warnings = std::move(devices.reader.warnings);
  snapshot.warnings.insert(snapshot.warnings.end(), processes.reader.warnings.begin(),
                           processes.reader.warnings.end());
  return snapshot;
}

Result<std::vector<sdk::HealthEvent>> Plugin::PollHealthEvents(uint32_t timeout_ms) {
  Collector<sdk::HealthEvent> collector;
  const gpustack_health_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::HealthEvent>::Add<gpustack_health_event, &Reader::Event>};
  const gpustack_poll_health_args args{sizeof(args), nullptr, timeout_ms, &sink};
  auto status = Run(Hook::kPollHealthEvents, collector.reader.problem,
                    [&] { return api_.poll_health_events(instance_, &args); });
  if (!status) return std::move(status).failure();
  return std::move(collector.items);
}

Result<std::vector<sdk::DeviceNode>> Plugin::ListDeviceNodes(const std::vector<std::string>& ids) {
  Collector<sdk::DeviceNode> collector;
  const gpustack_device_node_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::DeviceNode>::Add<gpustack_device_node, &Reader::Node>};
  const std::vector<gpustack_str> strs = Strs(ids);
  const gpustack_list_device_nodes_args args{sizeof(args), nullptr, strs.data(), strs.size(),
                                             &sink};
  auto status = Run(Hook::kListDeviceNodes, collector.reader.problem,
                    [&] { return api_.list_device_nodes(instance_, &args); });
  if (!status) return std::move(status).failure();
  return std::move(collector.items);
}

Result<sdk::Slice> Plugin::PrepareSlice(const sdk::PrepareSliceRequest& request) {
  Collector<sdk::Slice> collector;
  const gpustack_slice_sink sink{sizeof(sink), nullptr, &collector,
                                 &Collector<sdk::Slice>::Add<gpustack_slice, &Reader::SliceOf>};
  gpustack_prepare_slice_args args{};
  args.struct_size = sizeof(args);
  args.accelerator_id = sdk::Str(request.accelerator_id);
  args.memory_limit_mib = request.memory_limit_mib;
  args.cores_percentage = request.cores_percentage;
  args.owner = sdk::Str(request.owner);
  args.sink = &sink;
  auto status = Run(Hook::kPrepareSlice, collector.reader.problem,
                    [&] { return api_.prepare_slice(instance_, &args); });
  if (!status) return std::move(status).failure();
  if (collector.items.size() != 1 || collector.items.front().id.empty()) {
    return Error{manifest_.name + ": prepare_slice succeeded but reported " +
                     std::to_string(collector.items.size()) + " slices instead of 1 named one",
                 Code::kInternal};
  }
  if (collector.items.front().accelerator_id != request.accelerator_id) {
    return Error{manifest_.name + ": prepare_slice made slice " + collector.items.front().id +
                     " on " + collector.items.front().accelerator_id + ", not on " +
                     request.accelerator_id + " as asked",
                 Code::kInternal};
  }
  return std::move(collector.items.front());
}

Status Plugin::UnprepareSlice(const sdk::UnprepareSliceRequest& request) {
  const gpustack_unprepare_slice_args args{sizeof(args), nullptr, sdk::Str(request.accelerator_id),
                                           sdk::Str(request.slice_id), sdk::Str(request.owner)};
  static const std::string kNoOutput;
  return Run(Hook::kUnprepareSlice, kNoOutput,
             [&] { return api_.unprepare_slice(instance_, &args); });
}

}  // namespace gpustack::client
