// Optional header-only C++ helper for writing a plugin. NOT part of the ABI: it compiles into the
// plugin and turns a C++ class into the C function table of plugin.h.
//
//   class MyPlugin : public gpustack::sdk::Plugin {
//    public:
//     static const gpustack::sdk::Identity& GetIdentity();   // static storage
//     explicit MyPlugin(const gpustack::sdk::Host& host);    // init; may throw; copy host
//     void Discover(gpustack::sdk::DiscoverySink& sink) override;
//   };
//   GPUSTACK_PLUGIN_DEFINE(MyPlugin)
//
// Every exception stops at the boundary: gpustack::sdk::Error becomes its status and message, any
// other exception becomes GPUSTACK_STATUS_INTERNAL with its what(). A hook the class does not
// override (anywhere below sdk::Plugin) is left NULL in the function table, so the host and the
// conformance suite see exactly what the plugin implements; override hooks as public members.
// Struct sizes are checked before any field is read. Needs C++20.
#ifndef GPUSTACK_PLUGIN_HPP_
#define GPUSTACK_PLUGIN_HPP_

#include <gpustack/plugin.h>
#include <gpustack/plugin_types.hpp>

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpustack::sdk {

// Throw to return a specific status and message from any hook.
class Error : public std::exception {
 public:
  Error(gpustack_status code, std::string message) : code_(code), message_(std::move(message)) {}
  gpustack_status code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  gpustack_status code_;
  std::string message_;
};

// The library that binds the plugin's logical slices (ABI 1.3; gpustack_enforcer says what each
// field means).
struct Enforcer {
  std::string_view name{};
  std::vector<std::string_view> files{};
  std::vector<std::string_view> preload{};
  std::string_view package_dir{};
  gpustack_enforcer_variant variant = GPUSTACK_ENFORCER_VARIANT_NONE;
  std::string_view variant_prefix{};
  std::string_view workdir_env{};
  std::vector<std::string_view> default_env{};  // "KEY=value"
};

// Everything the plugin says about itself. Must have static storage duration.
struct Identity {
  std::string_view manufacturer{};
  std::string_view display_name{};
  std::string_view base_resource_name{};
  std::string_view plugin_version{};
  std::vector<uint16_t> pci_vendor_ids{};
  gpustack_capabilities capabilities = 0;
  std::string_view partition_kind{};
  // What the node needs besides the plugin (ABI 1.1): the vendor runtime, and what to install.
  std::string_view runtime_class{};
  gpustack_runtime_flags runtime_flags = 0;
  std::string_view install_hint{};
  // Admission constraints (ABI 1.2): GPUSTACK_ADMIT_* bits, the smallest slice in percent.
  gpustack_admission_flags admission_flags = 0;
  uint32_t min_slice_memory_percentage = 0;
  // The library enforcer of its slices (ABI 1.3); none: they bind otherwise, or not at all.
  std::optional<Enforcer> enforcer{};
};

namespace detail {

inline std::string& LastError() {
  thread_local std::string message;
  return message;
}

// Copies min(src->struct_size, sizeof(T)) bytes of a received struct into a zeroed T, after
// checking the sender's size covers at least `min_size` (the V1_0 constant).
template <class T>
T ReadStruct(const T* src, size_t min_size, const char* what) {
  T local;
  if (!CopyPrefix(src, min_size, &local)) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT,
                src == nullptr
                    ? std::string(what) + " is NULL"
                    : std::string(what) + ".struct_size " + std::to_string(src->struct_size) +
                          " is smaller than its minimum " + std::to_string(min_size));
  }
  return local;
}

// Writes `value` into a field of a struct the OTHER side allocated, only if it fits.
template <class S, class F>
void SetIfFits(S* s, F S::*field, const F& value) {
  const auto offset = static_cast<size_t>(reinterpret_cast<const char*>(&(s->*field)) -
                                          reinterpret_cast<const char*>(s));
  if (offset + sizeof(F) <= s->struct_size) s->*field = value;
}

// An Enforcer as the ABI's struct, with the string arrays it points to.
struct EnforcerTable {
  static std::vector<gpustack_str> Strs(const std::vector<std::string_view>& views) {
    std::vector<gpustack_str> out;
    for (std::string_view v : views) out.push_back({v.data(), v.size()});
    return out;
  }
  explicit EnforcerTable(const Enforcer& e)
      : files(Strs(e.files)), preload(Strs(e.preload)), default_env(Strs(e.default_env)) {
    raw.struct_size = sizeof(raw);
    raw.name = {e.name.data(), e.name.size()};
    raw.files = files.data();
    raw.file_count = files.size();
    raw.preload = preload.data();
    raw.preload_count = preload.size();
    raw.package_dir = {e.package_dir.data(), e.package_dir.size()};
    raw.variant = e.variant;
    raw.variant_prefix = {e.variant_prefix.data(), e.variant_prefix.size()};
    raw.workdir_env = {e.workdir_env.data(), e.workdir_env.size()};
    raw.default_env = default_env.data();
    raw.default_env_count = default_env.size();
  }
  std::vector<gpustack_str> files, preload, default_env;
  gpustack_enforcer raw{};
};

// Records the message; if even that cannot allocate, the message is left empty rather than letting
// an exception escape a noexcept boundary.
inline void SetLastError(const char* a, const char* b = "") noexcept {
  try {
    LastError().assign(a).append(b);
  } catch (...) {
    LastError().clear();
  }
}

// A host array of `count` elements must not be NULL.
template <class T>
std::span<const T> HostArray(const T* data, size_t count, const char* what) {
  if (count > 0 && data == nullptr) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, std::string(what) + " is NULL with a count");
  }
  return {data, count};
}

template <class Fn>
gpustack_status Guard(Fn&& fn) noexcept {
  try {
    LastError().clear();
    std::forward<Fn>(fn)();
    return GPUSTACK_STATUS_OK;
  } catch (const Error& e) {
    SetLastError(e.what());
    return e.code() == GPUSTACK_STATUS_OK ? GPUSTACK_STATUS_UNKNOWN : e.code();
  } catch (const std::bad_alloc&) {
    SetLastError("out of memory");
    return GPUSTACK_STATUS_RESOURCE_EXHAUSTED;
  } catch (const std::exception& e) {
    SetLastError("unhandled exception in plugin: ", e.what());
    return GPUSTACK_STATUS_INTERNAL;
  } catch (...) {
    SetLastError("unhandled non-standard exception in plugin");
    return GPUSTACK_STATUS_INTERNAL;
  }
}

// Calls a host sink; a refusal becomes an Error carrying the host's status.
inline void CheckSink(gpustack_status status, const char* sink) {
  if (status != GPUSTACK_STATUS_OK) {
    throw Error(status, std::string("host ") + sink + " sink returned " + StatusName(status));
  }
}

// Reads a host sink, which must carry its callback.
template <class SinkT, class Fn>
SinkT ReadSink(const SinkT* sink, size_t min_size, Fn SinkT::*callback, const char* what) {
  SinkT local = ReadStruct(sink, min_size, what);
  if (local.*callback == nullptr) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, std::string(what) + " has no callback");
  }
  return local;
}

}  // namespace detail

// The host services, as given to init. Valid until the plugin instance is destroyed.
class Host {
 public:
  explicit Host(const gpustack_init_args& args)
      : services_(detail::ReadStruct(args.host, GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0,
                                     "init_args.host")),
        abi_major_(args.abi_major == 0 ? GPUSTACK_PLUGIN_ABI_MAJOR : args.abi_major),
        abi_minor_(args.abi_major == 0 ? 0 : args.abi_minor) {
    for (const gpustack_pci_device* device :
         detail::HostArray(args.pci_devices, args.pci_device_count, "init_args.pci_devices")) {
      if (device != nullptr && device->struct_size >= GPUSTACK_PCI_DEVICE_STRUCT_SIZE_V1_0) {
        pci_devices_.push_back(device);
      }
    }
  }

  bool LogEnabled(gpustack_log_level level) const {
    return services_.log_enabled == nullptr || services_.log_enabled(services_.host_data, level);
  }
  void Log(gpustack_log_level level, std::string_view message,
           std::source_location where = std::source_location::current()) const {
    if (services_.log != nullptr) {
      services_.log(services_.host_data, level, Str(message), Str(where.file_name()), where.line());
    }
  }
  uint64_t NowNs() const {
    return services_.monotonic_time_ns == nullptr
               ? 0
               : services_.monotonic_time_ns(services_.host_data);
  }
  std::optional<std::string_view> Config(std::string_view key) const {
    gpustack_str value{};
    if (services_.config_get == nullptr ||
        services_.config_get(services_.host_data, Str(key), &value) != GPUSTACK_STATUS_OK) {
      return std::nullopt;
    }
    return View(value);
  }
  // The ABI version negotiation agreed on (a 1.0 host leaves abi_major 0: read as 1.0).
  uint32_t AbiMajor() const { return abi_major_; }
  uint32_t AbiMinor() const { return abi_minor_; }
  // The host's PCI inventory (structs too small to be valid are dropped).
  std::span<const gpustack_pci_device* const> PciDevices() const { return pci_devices_; }

 private:
  gpustack_host_services services_;
  uint32_t abi_major_;
  uint32_t abi_minor_;
  std::vector<const gpustack_pci_device*> pci_devices_;
};

// Sinks: each Add converts the C++ value to the ABI struct and hands it to the host.
class DiscoverySink {
 public:
  explicit DiscoverySink(const gpustack_discovery_sink& sink) : sink_(sink) {}
  void Add(const AcceleratorGroup& group) {
    std::vector<std::vector<gpustack_partition_profile>> profiles(group.accelerators.size());
    std::vector<std::vector<const gpustack_partition_profile*>> profile_ptrs(
        group.accelerators.size());
    std::vector<gpustack_accelerator> accelerators(group.accelerators.size());
    std::vector<const gpustack_accelerator*> accelerator_ptrs;
    for (size_t i = 0; i < group.accelerators.size(); ++i) {
      const Accelerator& a = group.accelerators[i];
      for (const PartitionProfile& p : a.partition_profiles) {
        profiles[i].push_back(
            gpustack_partition_profile{sizeof(gpustack_partition_profile), nullptr, Str(p.name),
                                       p.memory_mib, p.compute_slices, p.memory_slices, p.max_count,
                                       p.placements.data(), p.placements.size()});
      }
      for (const gpustack_partition_profile& p : profiles[i]) profile_ptrs[i].push_back(&p);
      accelerators[i] = gpustack_accelerator{sizeof(gpustack_accelerator),
                                             nullptr,
                                             Str(a.id),
                                             a.index,
                                             a.physical_indexes.data(),
                                             a.physical_indexes.size(),
                                             a.memory_mib,
                                             Str(a.pci_bus_id),
                                             Str(a.pci_root_id),
                                             a.pci_class,
                                             a.numa_affinity,
                                             Str(a.cpu_affinity),
                                             a.health,
                                             Str(a.health_reason),
                                             a.logical_slice_count,
                                             a.cores_percentage_overcommit ? 1 : 0,
                                             a.partition_mode,
                                             profile_ptrs[i].data(),
                                             profile_ptrs[i].size()};
      accelerator_ptrs.push_back(&accelerators[i]);
    }
    const gpustack_accelerator_group c{sizeof(gpustack_accelerator_group),
                                       nullptr,
                                       Str(group.product),
                                       Str(group.family),
                                       group.memory_mib,
                                       group.cores,
                                       Str(group.driver_version),
                                       Str(group.runtime_version),
                                       Str(group.compute_capability),
                                       accelerator_ptrs.data(),
                                       accelerator_ptrs.size()};
    detail::CheckSink(sink_.add_group(sink_.host_data, &c), "discovery");
  }

 private:
  gpustack_discovery_sink sink_;
};

class ContainerEditSink {
 public:
  explicit ContainerEditSink(const gpustack_container_edit_sink& sink) : sink_(sink) {}
  void Add(const ContainerEdit& e) {
    const gpustack_container_edit c{sizeof(gpustack_container_edit),
                                    nullptr,
                                    e.kind,
                                    Str(e.key),
                                    Str(e.value),
                                    Str(e.host_path),
                                    Str(e.container_path),
                                    Str(e.permissions),
                                    e.read_only ? 1 : 0,
                                    0};
    detail::CheckSink(sink_.add_edit(sink_.host_data, &c), "container edit");
  }
  void Env(std::string_view name, std::string_view value) {
    Add({GPUSTACK_EDIT_ENV, std::string(name), std::string(value), {}, {}, {}, false});
  }
  // A device node at the same path in the container unless told otherwise.
  void DeviceNode(std::string_view host_path, std::string_view container_path = {},
                  std::string_view permissions = "rw") {
    Add({GPUSTACK_EDIT_DEVICE_NODE,
         {},
         {},
         std::string(host_path),
         std::string(container_path.empty() ? host_path : container_path),
         std::string(permissions),
         false});
  }
  void Mount(std::string_view host_path, std::string_view container_path, bool read_only = true) {
    Add({GPUSTACK_EDIT_MOUNT,
         {},
         {},
         std::string(host_path),
         std::string(container_path),
         {},
         read_only});
  }
  void Annotation(std::string_view key, std::string_view value) {
    Add({GPUSTACK_EDIT_ANNOTATION, std::string(key), std::string(value), {}, {}, {}, false});
  }

 private:
  gpustack_container_edit_sink sink_;
};

class PartitionSink {
 public:
  explicit PartitionSink(const gpustack_partition_sink& sink) : sink_(sink) {}
  void Add(const Partition& p) {
    const gpustack_partition c{sizeof(gpustack_partition),
                               nullptr,
                               Str(p.accelerator_id),
                               Str(p.id),
                               Str(p.profile),
                               p.placement,
                               Str(p.owner)};
    detail::CheckSink(sink_.add_partition(sink_.host_data, &c), "partition");
  }

 private:
  gpustack_partition_sink sink_;
};

class MetricsSink {
 public:
  explicit MetricsSink(const gpustack_metrics_sink& sink) : sink_(sink) {}
  void Add(const DeviceSample& s) {
    const gpustack_device_sample c{sizeof(gpustack_device_sample),
                                   nullptr,
                                   Str(s.accelerator_id),
                                   s.timestamp_ns,
                                   ToC(s.memory_total_mib),
                                   ToC(s.memory_used_mib),
                                   ToC(s.memory_utilization_percent),
                                   ToC(s.cores_utilization_percent),
                                   ToC(s.temperature_celsius),
                                   ToC(s.power_watts),
                                   s.health,
                                   s.process_listing};
    detail::CheckSink(sink_.add_device_sample(sink_.host_data, &c), "device sample");
  }
  void Add(const ProcessSample& s) {
    if (sink_.add_process_sample == nullptr) {
      throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "metrics sink takes no process samples");
    }
    const gpustack_process_sample c{sizeof(gpustack_process_sample),
                                    nullptr,
                                    Str(s.accelerator_id),
                                    Str(s.partition_id),
                                    s.pid,
                                    ToC(s.memory_used_mib),
                                    ToC(s.cores_utilization_percent)};
    detail::CheckSink(sink_.add_process_sample(sink_.host_data, &c), "process sample");
  }

 private:
  gpustack_metrics_sink sink_;
};

class DeviceNodeSink {
 public:
  explicit DeviceNodeSink(const gpustack_device_node_sink& sink) : sink_(sink) {}
  void Add(const sdk::DeviceNode& node) {
    const gpustack_device_node c{sizeof(gpustack_device_node), nullptr, Str(node.accelerator_id),
                                 Str(node.path)};
    detail::CheckSink(sink_.add_device_node(sink_.host_data, &c), "device node");
  }

 private:
  gpustack_device_node_sink sink_;
};

class SliceSink {
 public:
  explicit SliceSink(const gpustack_slice_sink& sink) : sink_(sink) {}
  void Add(const Slice& slice) {
    const gpustack_slice c{sizeof(gpustack_slice), nullptr, Str(slice.accelerator_id),
                           Str(slice.id)};
    detail::CheckSink(sink_.add_slice(sink_.host_data, &c), "slice");
  }

 private:
  gpustack_slice_sink sink_;
};

class HealthSink {
 public:
  explicit HealthSink(const gpustack_health_sink& sink) : sink_(sink) {}
  void Add(const HealthEvent& e) {
    const gpustack_health_event c{sizeof(gpustack_health_event), nullptr, Str(e.accelerator_id),
                                  e.health, Str(e.reason)};
    detail::CheckSink(sink_.add_event(sink_.host_data, &c), "health");
  }

 private:
  gpustack_health_sink sink_;
};

// Base class of a C++ plugin. Override what the plugin supports.
class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual void Discover(DiscoverySink& /*sink*/) { Unimplemented("discover"); }
  virtual void Grant(const sdk::Grant& /*grant*/, ContainerEditSink& /*sink*/) {
    Unimplemented("grant");
  }
  virtual void ListPartitions(std::string_view /*accelerator_id*/, PartitionSink& /*sink*/) {
    Unimplemented("list_partitions");
  }
  virtual void CreatePartition(const CreatePartitionRequest& /*request*/, PartitionSink& /*sink*/) {
    Unimplemented("create_partition");
  }
  virtual void DestroyPartition(const DestroyPartitionRequest& /*request*/) {
    Unimplemented("destroy_partition");
  }
  virtual void SampleMetrics(const MetricsRequest& /*request*/, MetricsSink& /*sink*/) {
    Unimplemented("sample_metrics");
  }
  virtual void PollHealthEvents(uint32_t /*timeout_ms*/, HealthSink& /*sink*/) {
    Unimplemented("poll_health_events");
  }
  // The device nodes of the cards named (every card when none is), see gpustack_device_node.
  virtual void ListDeviceNodes(const std::vector<std::string>& /*accelerator_ids*/,
                               DeviceNodeSink& /*sink*/) {
    Unimplemented("list_device_nodes");
  }
  virtual void PrepareSlice(const PrepareSliceRequest& /*request*/, SliceSink& /*sink*/) {
    Unimplemented("prepare_slice");
  }
  virtual void UnprepareSlice(const UnprepareSliceRequest& /*request*/) {
    Unimplemented("unprepare_slice");
  }

 protected:
  [[noreturn]] static void Unimplemented(const char* hook) {
    throw Error(GPUSTACK_STATUS_UNIMPLEMENTED,
                std::string(hook) + " is not implemented by this plugin");
  }
};

// Builds the C function table for Impl. Used through GPUSTACK_PLUGIN_DEFINE.
template <class Impl>
class Adapter {
 public:
  static gpustack_status Negotiate(gpustack_negotiate_args* args) noexcept {
    if (args == nullptr || args->struct_size < GPUSTACK_NEGOTIATE_ARGS_STRUCT_SIZE_V1_0) {
      return GPUSTACK_STATUS_INVALID_ARGUMENT;
    }
    args->plugin_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
    args->plugin_abi_minor = GPUSTACK_PLUGIN_ABI_MINOR;
    if (args->host_abi_major != GPUSTACK_PLUGIN_ABI_MAJOR) {
      args->api = nullptr;
      return GPUSTACK_STATUS_INCOMPATIBLE_VERSION;
    }
    args->api = &kApi;
    return GPUSTACK_STATUS_OK;
  }

 private:
  static Plugin* Self(gpustack_plugin_instance* instance) {
    if (instance == nullptr) throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "instance is NULL");
    return reinterpret_cast<Plugin*>(instance);
  }

  static gpustack_str LastErrorMessage() noexcept { return Str(detail::LastError()); }

  static gpustack_status Identify(gpustack_plugin_identity* out) noexcept {
    return detail::Guard([&] {
      if (out == nullptr || out->struct_size < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0) {
        throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "identity struct missing or too small");
      }
      const Identity& id = Impl::GetIdentity();
      using I = gpustack_plugin_identity;
      detail::SetIfFits(out, &I::manufacturer, Str(id.manufacturer));
      detail::SetIfFits(out, &I::display_name, Str(id.display_name));
      detail::SetIfFits(out, &I::base_resource_name, Str(id.base_resource_name));
      detail::SetIfFits(out, &I::plugin_version, Str(id.plugin_version));
      detail::SetIfFits(out, &I::pci_vendor_ids, id.pci_vendor_ids.data());
      detail::SetIfFits(out, &I::pci_vendor_id_count, id.pci_vendor_ids.size());
      // A 1.0 host (a 1.0-sized identity) is sent only the capability bits 1.0 defines.
      const bool v1_1 = out->struct_size >= GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1;
      detail::SetIfFits(out, &I::capabilities,
                        v1_1
                            ? id.capabilities
                            : id.capabilities & ~gpustack_capabilities{GPUSTACK_CAP_SLICE_OBJECTS});
      detail::SetIfFits(out, &I::partition_kind, Str(id.partition_kind));
      detail::SetIfFits(out, &I::runtime_class, Str(id.runtime_class));
      detail::SetIfFits(out, &I::runtime_flags, id.runtime_flags);
      detail::SetIfFits(out, &I::install_hint, Str(id.install_hint));
      detail::SetIfFits(out, &I::admission_flags, id.admission_flags);
      detail::SetIfFits(out, &I::min_slice_memory_percentage, id.min_slice_memory_percentage);
      if (id.enforcer) {
        // Built once from the static identity: what it points to stays valid while loaded.
        static const detail::EnforcerTable table(*id.enforcer);
        detail::SetIfFits(out, &I::enforcer, &table.raw);
      }
    });
  }

  static gpustack_status Init(const gpustack_init_args* args,
                              gpustack_plugin_instance** instance) noexcept {
    return detail::Guard([&] {
      if (instance == nullptr)
        throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "instance out is NULL");
      *instance = nullptr;
      const gpustack_init_args local =
          detail::ReadStruct(args, GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0, "init_args");
      Plugin* plugin = new Impl(Host(local));
      *instance = reinterpret_cast<gpustack_plugin_instance*>(plugin);
    });
  }

  static gpustack_status CreateInstance(gpustack_init_args* args) noexcept {
    if (args == nullptr || args->struct_size < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1) {
      detail::SetLastError("init_args is NULL or smaller than ABI 1.1 (use init)");
      return GPUSTACK_STATUS_INVALID_ARGUMENT;
    }
    args->instance = nullptr;
    return Init(args, &args->instance);
  }

  static void Shutdown(gpustack_plugin_instance* instance) noexcept {
    (void)detail::Guard([&] { delete reinterpret_cast<Plugin*>(instance); });
  }

  static gpustack_status Discover(gpustack_plugin_instance* instance,
                                  const gpustack_discover_args* args) noexcept {
    return detail::Guard([&] {
      const auto a =
          detail::ReadStruct(args, GPUSTACK_DISCOVER_ARGS_STRUCT_SIZE_V1_0, "discover_args");
      DiscoverySink sink(detail::ReadSink(a.sink, GPUSTACK_DISCOVERY_SINK_STRUCT_SIZE_V1_0,
                                          &gpustack_discovery_sink::add_group, "discovery sink"));
      Self(instance)->Discover(sink);
    });
  }

  static gpustack_status GrantHook(gpustack_plugin_instance* instance,
                                   const gpustack_grant_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0, "grant_args");
      ContainerEditSink sink(detail::ReadSink(a.sink, GPUSTACK_CONTAINER_EDIT_SINK_STRUCT_SIZE_V1_0,
                                              &gpustack_container_edit_sink::add_edit,
                                              "container edit sink"));
      sdk::Grant grant{std::string(View(a.pod_uid)),
                       std::string(View(a.container_name)),
                       a.mode,
                       {},
                       a.memory_limit_mib,
                       a.cores_percentage,
                       std::string(View(a.partition_id)),
                       std::string(View(a.slice_id))};
      for (gpustack_str id :
           detail::HostArray(a.accelerator_ids, a.accelerator_id_count, "accelerator_ids")) {
        grant.accelerator_ids.emplace_back(View(id));
      }
      Self(instance)->Grant(grant, sink);
    });
  }

  static gpustack_status ListPartitions(gpustack_plugin_instance* instance,
                                        const gpustack_list_partitions_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_LIST_PARTITIONS_ARGS_STRUCT_SIZE_V1_0,
                                        "list_partitions_args");
      PartitionSink sink(detail::ReadSink(a.sink, GPUSTACK_PARTITION_SINK_STRUCT_SIZE_V1_0,
                                          &gpustack_partition_sink::add_partition,
                                          "partition sink"));
      Self(instance)->ListPartitions(View(a.accelerator_id), sink);
    });
  }

  static gpustack_status CreatePartition(gpustack_plugin_instance* instance,
                                         const gpustack_create_partition_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_CREATE_PARTITION_ARGS_STRUCT_SIZE_V1_0,
                                        "create_partition_args");
      PartitionSink sink(detail::ReadSink(a.sink, GPUSTACK_PARTITION_SINK_STRUCT_SIZE_V1_0,
                                          &gpustack_partition_sink::add_partition,
                                          "partition sink"));
      Self(instance)->CreatePartition(
          {std::string(View(a.accelerator_id)), std::string(View(a.profile)), a.placement,
           std::string(View(a.owner))},
          sink);
    });
  }

  static gpustack_status DestroyPartition(gpustack_plugin_instance* instance,
                                          const gpustack_destroy_partition_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_DESTROY_PARTITION_ARGS_STRUCT_SIZE_V1_0,
                                        "destroy_partition_args");
      Self(instance)->DestroyPartition({std::string(View(a.accelerator_id)),
                                        std::string(View(a.partition_id)),
                                        std::string(View(a.owner))});
    });
  }

  static gpustack_status SampleMetrics(gpustack_plugin_instance* instance,
                                       const gpustack_sample_metrics_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_SAMPLE_METRICS_ARGS_STRUCT_SIZE_V1_0,
                                        "sample_metrics_args");
      MetricsSink sink(detail::ReadSink(a.sink, GPUSTACK_METRICS_SINK_STRUCT_SIZE_V1_0,
                                        &gpustack_metrics_sink::add_device_sample, "metrics sink"));
      MetricsRequest request;
      request.include_processes = a.include_processes != 0;
      for (gpustack_str id :
           detail::HostArray(a.accelerator_ids, a.accelerator_id_count, "accelerator_ids")) {
        request.accelerator_ids.emplace_back(View(id));
      }
      Self(instance)->SampleMetrics(request, sink);
    });
  }

  static gpustack_status PollHealthEvents(gpustack_plugin_instance* instance,
                                          const gpustack_poll_health_args* args) noexcept {
    return detail::Guard([&] {
      const auto a =
          detail::ReadStruct(args, GPUSTACK_POLL_HEALTH_ARGS_STRUCT_SIZE_V1_0, "poll_health_args");
      HealthSink sink(detail::ReadSink(a.sink, GPUSTACK_HEALTH_SINK_STRUCT_SIZE_V1_0,
                                       &gpustack_health_sink::add_event, "health sink"));
      Self(instance)->PollHealthEvents(a.timeout_ms, sink);
    });
  }

  static gpustack_status ListDeviceNodes(gpustack_plugin_instance* instance,
                                         const gpustack_list_device_nodes_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_LIST_DEVICE_NODES_ARGS_STRUCT_SIZE_V1_1,
                                        "list_device_nodes_args");
      DeviceNodeSink sink(detail::ReadSink(a.sink, GPUSTACK_DEVICE_NODE_SINK_STRUCT_SIZE_V1_1,
                                           &gpustack_device_node_sink::add_device_node,
                                           "device node sink"));
      std::vector<std::string> ids;
      for (gpustack_str id :
           detail::HostArray(a.accelerator_ids, a.accelerator_id_count, "accelerator_ids")) {
        ids.emplace_back(View(id));
      }
      Self(instance)->ListDeviceNodes(ids, sink);
    });
  }

  static gpustack_status PrepareSlice(gpustack_plugin_instance* instance,
                                      const gpustack_prepare_slice_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_PREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1,
                                        "prepare_slice_args");
      SliceSink sink(detail::ReadSink(a.sink, GPUSTACK_SLICE_SINK_STRUCT_SIZE_V1_1,
                                      &gpustack_slice_sink::add_slice, "slice sink"));
      Self(instance)->PrepareSlice({std::string(View(a.accelerator_id)), a.memory_limit_mib,
                                    a.cores_percentage, std::string(View(a.owner))},
                                   sink);
    });
  }

  static gpustack_status UnprepareSlice(gpustack_plugin_instance* instance,
                                        const gpustack_unprepare_slice_args* args) noexcept {
    return detail::Guard([&] {
      const auto a = detail::ReadStruct(args, GPUSTACK_UNPREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1,
                                        "unprepare_slice_args");
      Self(instance)->UnprepareSlice({std::string(View(a.accelerator_id)),
                                      std::string(View(a.slice_id)), std::string(View(a.owner))});
    });
  }

  // A hook's slot is filled only when some class between sdk::Plugin and Impl overrides it:
  // &Impl::Hook then names that class, not sdk::Plugin. Overrides must be public.
  template <auto kImplHook, auto kBaseHook, auto kAdapterHook>
  static constexpr auto Slot() {
    if constexpr (std::is_same_v<decltype(kImplHook), decltype(kBaseHook)>) {
      return static_cast<decltype(kAdapterHook)>(nullptr);
    } else {
      // A member of the same name but another signature (say, const) hides the hook instead of
      // overriding it: the slot would be filled and every call answer UNIMPLEMENTED.
      static_assert(std::is_convertible_v<decltype(kBaseHook), decltype(kImplHook)>,
                    "a hook method's signature differs from sdk::Plugin's: declare it 'override'");
      return kAdapterHook;
    }
  }

  static constexpr gpustack_plugin_api kApi{
      sizeof(gpustack_plugin_api),
      nullptr,
      GPUSTACK_PLUGIN_ABI_MAJOR,
      GPUSTACK_PLUGIN_ABI_MINOR,
      &LastErrorMessage,
      &Identify,
      &Init,
      &Shutdown,
      Slot<&Impl::Discover, &Plugin::Discover, &Discover>(),
      Slot<&Impl::Grant, &Plugin::Grant, &GrantHook>(),
      Slot<&Impl::ListPartitions, &Plugin::ListPartitions, &ListPartitions>(),
      Slot<&Impl::CreatePartition, &Plugin::CreatePartition, &CreatePartition>(),
      Slot<&Impl::DestroyPartition, &Plugin::DestroyPartition, &DestroyPartition>(),
      Slot<&Impl::SampleMetrics, &Plugin::SampleMetrics, &SampleMetrics>(),
      Slot<&Impl::PollHealthEvents, &Plugin::PollHealthEvents, &PollHealthEvents>(),
      &CreateInstance,
      Slot<&Impl::ListDeviceNodes, &Plugin::ListDeviceNodes, &ListDeviceNodes>(),
      Slot<&Impl::PrepareSlice, &Plugin::PrepareSlice, &PrepareSlice>(),
      Slot<&Impl::UnprepareSlice, &Plugin::UnprepareSlice, &UnprepareSlice>()};
};

}  // namespace gpustack::sdk

// Exports the plugin's one entry symbol for the C++ class Impl.
#define GPUSTACK_PLUGIN_DEFINE(Impl)                                           \
  extern "C" GPUSTACK_PLUGIN_EXPORT gpustack_status gpustack_plugin_negotiate( \
      gpustack_negotiate_args* args) {                                         \
    return ::gpustack::sdk::Adapter<Impl>::Negotiate(args);                    \
  }

#endif  // GPUSTACK_PLUGIN_HPP_
