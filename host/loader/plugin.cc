#include "host/loader/plugin.h"

#include <exception>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "host/common/logging.h"

namespace gpustack::loader {
namespace {

using sdk::View;

constexpr size_t kMaxString = 1 << 20;  // no sane plugin string is a megabyte long
constexpr size_t kMaxArray = 1 << 16;   // nor an array of 65,536 entries

// Reads plugin output. Each Read* records the first problem and returns a value anyway, so
// one pass validates and copies; the caller checks `problem` at the end.
struct Reader {
  std::string problem;

  void Fail(const std::string& what) {
    if (problem.empty()) problem = what;
  }
  std::string Str(gpustack_str s, const char* field) {
    if (s.size > 0 && s.data == nullptr) {
      Fail(std::string(field) + " has a size but no data");
      return {};
    }
    if (s.size > kMaxString) {
      Fail(std::string(field) + " is implausibly long (" + std::to_string(s.size) + " bytes)");
      return {};
    }
    return std::string(View(s));
  }
  template <class T>
  bool Array(const T* data, size_t count, const char* field) {
    if (count > 0 && data == nullptr) {
      Fail(std::string(field) + " has a count but no data");
      return false;
    }
    if (count > kMaxArray) {
      Fail(std::string(field) + " has an implausible count " + std::to_string(count));
      return false;
    }
    return true;
  }
  template <class T>
  bool Struct(const T* src, size_t min_size, T* out, const char* what) {
    if (sdk::CopyPrefix(src, min_size, out)) return true;
    Fail(src == nullptr ? std::string(what) + " is NULL"
                        : std::string(what) + ".struct_size " + std::to_string(src->struct_size) +
                              " is smaller than the ABI 1.0 minimum " + std::to_string(min_size));
    return false;
  }
  gpustack_health Health(gpustack_health health, const char* field) {
    if (health < GPUSTACK_HEALTH_UNKNOWN || health > GPUSTACK_HEALTH_UNHEALTHY) {
      Fail(std::string(field) + " " + std::to_string(health) + " is not a known value");
    }
    return health;
  }
  // A sink answer: the status the plugin receives.
  gpustack_status Verdict() const {
    return problem.empty() ? GPUSTACK_STATUS_OK : GPUSTACK_STATUS_INVALID_ARGUMENT;
  }

  sdk::AcceleratorGroup Group(const gpustack_accelerator_group* src) {
    gpustack_accelerator_group g;
    sdk::AcceleratorGroup out;
    if (!Struct(src, GPUSTACK_ACCELERATOR_GROUP_STRUCT_SIZE_V1_0, &g, "accelerator_group")) {
      return out;
    }
    out.product = Str(g.product, "group.product");
    out.family = Str(g.family, "group.family");
    out.memory_mib = g.memory_mib;
    out.cores = g.cores;
    out.driver_version = Str(g.driver_version, "group.driver_version");
    out.runtime_version = Str(g.runtime_version, "group.runtime_version");
    out.compute_capability = Str(g.compute_capability, "group.compute_capability");
    if (!Array(g.accelerators, g.accelerator_count, "group.accelerators")) return out;
    for (size_t i = 0; i < g.accelerator_count; ++i)
      out.accelerators.push_back(Accel(g.accelerators[i]));
    return out;
  }

  sdk::Accelerator Accel(const gpustack_accelerator* src) {
    gpustack_accelerator a;
    sdk::Accelerator out;
    if (!Struct(src, GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0, &a, "accelerator")) return out;
    out.id = Str(a.id, "accelerator.id");
    if (out.id.empty()) Fail("accelerator.id is empty");
    out.index = a.index;
    if (Array(a.physical_indexes, a.physical_index_count, "accelerator.physical_indexes")) {
      out.physical_indexes.assign(a.physical_indexes, a.physical_indexes + a.physical_index_count);
    }
    out.memory_mib = a.memory_mib;
    out.pci_bus_id = Str(a.pci_bus_id, "accelerator.pci_bus_id");
    out.pci_root_id = Str(a.pci_root_id, "accelerator.pci_root_id");
    out.pci_class = a.pci_class;
    out.numa_affinity = a.numa_affinity;
    out.cpu_affinity = Str(a.cpu_affinity, "accelerator.cpu_affinity");
    out.health = Health(a.health, "accelerator.health");
    out.health_reason = Str(a.health_reason, "accelerator.health_reason");
    out.logical_slice_count = a.logical_slice_count;
    out.cores_percentage_overcommit = a.cores_percentage_overcommit != 0;
    out.partition_mode = a.partition_mode;
    if (a.partition_mode < GPUSTACK_PARTITION_MODE_UNSUPPORTED ||
        a.partition_mode > GPUSTACK_PARTITION_MODE_PENDING) {
      Fail("accelerator.partition_mode " + std::to_string(a.partition_mode) + " is not known");
    }
    if (Array(a.partition_profiles, a.partition_profile_count, "accelerator.partition_profiles")) {
      for (size_t i = 0; i < a.partition_profile_count; ++i) {
        out.partition_profiles.push_back(Profile(a.partition_profiles[i]));
      }
    }
    return out;
  }

  sdk::PartitionProfile Profile(const gpustack_partition_profile* src) {
    gpustack_partition_profile p;
    sdk::PartitionProfile out;
    if (!Struct(src, GPUSTACK_PARTITION_PROFILE_STRUCT_SIZE_V1_0, &p, "partition_profile")) {
      return out;
    }
    out.name = Str(p.name, "profile.name");
    out.memory_mib = p.memory_mib;
    out.compute_slices = p.compute_slices;
    out.memory_slices = p.memory_slices;
    out.max_count = p.max_count;
    if (Array(p.placements, p.placement_count, "profile.placements")) {
      out.placements.assign(p.placements, p.placements + p.placement_count);
    }
    return out;
  }

  sdk::ContainerEdit Edit(const gpustack_container_edit* src) {
    gpustack_container_edit e;
    sdk::ContainerEdit out;
    if (!Struct(src, GPUSTACK_CONTAINER_EDIT_STRUCT_SIZE_V1_0, &e, "container_edit")) return out;
    if (e.kind < GPUSTACK_EDIT_ENV || e.kind > GPUSTACK_EDIT_CDI_DEVICE) {
      Fail("container_edit.kind " + std::to_string(e.kind) + " is not known");
    }
    out.kind = e.kind;
    out.key = Str(e.key, "edit.key");
    out.value = Str(e.value, "edit.value");
    out.host_path = Str(e.host_path, "edit.host_path");
    out.container_path = Str(e.container_path, "edit.container_path");
    out.permissions = Str(e.permissions, "edit.permissions");
    out.read_only = e.read_only != 0;
    return out;
  }

  sdk::Partition PartitionOf(const gpustack_partition* src) {
    gpustack_partition p;
    sdk::Partition out;
    if (!Struct(src, GPUSTACK_PARTITION_STRUCT_SIZE_V1_0, &p, "partition")) return out;
    out.accelerator_id = Str(p.accelerator_id, "partition.accelerator_id");
    out.id = Str(p.id, "partition.id");
    out.profile = Str(p.profile, "partition.profile");
    out.placement = p.placement;
    out.owner = Str(p.owner, "partition.owner");
    return out;
  }

  sdk::DeviceSample Device(const gpustack_device_sample* src) {
    gpustack_device_sample s;
    sdk::DeviceSample out;
    if (!Struct(src, GPUSTACK_DEVICE_SAMPLE_STRUCT_SIZE_V1_0, &s, "device_sample")) return out;
    out.accelerator_id = Str(s.accelerator_id, "sample.accelerator_id");
    out.timestamp_ns = s.timestamp_ns;
    out.memory_total_mib = sdk::FromC(s.memory_total_mib);
    out.memory_used_mib = sdk::FromC(s.memory_used_mib);
    out.memory_utilization_percent = sdk::FromC(s.memory_utilization_percent);
    out.cores_utilization_percent = sdk::FromC(s.cores_utilization_percent);
    out.temperature_celsius = sdk::FromC(s.temperature_celsius);
    out.power_watts = sdk::FromC(s.power_watts);
    out.health = Health(s.health, "sample.health");
    return out;
  }

  sdk::ProcessSample Process(const gpustack_process_sample* src) {
    gpustack_process_sample s;
    sdk::ProcessSample out;
    if (!Struct(src, GPUSTACK_PROCESS_SAMPLE_STRUCT_SIZE_V1_0, &s, "process_sample")) return out;
    out.accelerator_id = Str(s.accelerator_id, "sample.accelerator_id");
    out.partition_id = Str(s.partition_id, "sample.partition_id");
    out.pid = s.pid;
    out.memory_used_mib = sdk::FromC(s.memory_used_mib);
    out.cores_utilization_percent = sdk::FromC(s.cores_utilization_percent);
    return out;
  }

  sdk::HealthEvent Event(const gpustack_health_event* src) {
    gpustack_health_event e;
    sdk::HealthEvent out;
    if (!Struct(src, GPUSTACK_HEALTH_EVENT_STRUCT_SIZE_V1_0, &e, "health_event")) return out;
    out.accelerator_id = Str(e.accelerator_id, "event.accelerator_id");
    out.health = Health(e.health, "event.health");
    out.reason = Str(e.reason, "event.reason");
    return out;
  }
};

// A sink that collects values of T read by `read`; `host_data` points at it.
template <class T>
struct Collector {
  Reader reader;
  std::vector<T> items;

  template <class C, T (Reader::*read)(const C*)>
  static gpustack_status Add(void* host_data, const C* value) noexcept {
    auto* self = static_cast<Collector*>(host_data);
    try {
      T item = (self->reader.*read)(value);
      if (self->reader.problem.empty()) self->items.push_back(std::move(item));
    } catch (...) {
      // Out of memory while copying: refuse the value; the failure text may not fit either.
      try {
        self->reader.Fail("host could not store the value");
      } catch (...) {
        return GPUSTACK_STATUS_RESOURCE_EXHAUSTED;
      }
    }
    return self->reader.Verdict();
  }
};

std::vector<gpustack_str> Strs(const std::vector<std::string>& strings) {
  std::vector<gpustack_str> out;
  for (const std::string& s : strings) out.push_back(sdk::Str(s));
  return out;
}

}  // namespace

Plugin::Plugin(Manifest manifest, boost::dll::shared_library library,
               const gpustack_plugin_api& api, AbiVersion negotiated, PluginIdentity identity)
    : library_(std::move(library)),
      manifest_(std::move(manifest)),
      api_(api),
      negotiated_(negotiated),
      identity_(std::move(identity)) {}

Plugin::~Plugin() { Shutdown(); }

Error Plugin::CallError(const char* hook, gpustack_status status) const {
  Reader reader;
  std::string message = reader.Str(api_.last_error_message(), "last_error_message");
  if (!reader.problem.empty()) message = "(unreadable message: " + reader.problem + ")";
  std::string code = sdk::StatusName(status);
  gpustack_status known = status;
  if (status < GPUSTACK_STATUS_OK || status > GPUSTACK_STATUS_INCOMPATIBLE_VERSION) {
    code = "UNKNOWN (the plugin returned undefined status " + std::to_string(status) + ")";
    known = GPUSTACK_STATUS_UNKNOWN;
  }
  return Error{manifest_.name + ": " + hook + " failed: " + code +
                   (message.empty() ? ": (the plugin gave no message)" : ": " + message),
               known};
}

Status Plugin::Outcome(const char* hook, gpustack_status status,
                       const std::string& output_problem) const {
  // Invalid output is reported even when the plugin ignored the sink's refusal and said OK.
  if (!output_problem.empty()) {
    return Error{manifest_.name + ": " + hook + " reported invalid output: " + output_problem,
                 GPUSTACK_STATUS_INVALID_ARGUMENT};
  }
  if (status != GPUSTACK_STATUS_OK) return CallError(hook, status);
  return Ok{};
}

Error Plugin::Missing(const char* hook) const {
  return Error{
      manifest_.name + ": " + hook + " failed: UNIMPLEMENTED: the plugin does not provide it",
      GPUSTACK_STATUS_UNIMPLEMENTED};
}

Status Plugin::RequireInstance(const char* hook) const {
  if (!initialized_) return Error{manifest_.name + ": " + hook + " called before init"};
  return Ok{};
}

Status Plugin::Init(std::map<std::string, std::string> settings,
                    const std::vector<pci::PciDevice>& inventory) {
  std::unique_lock life(lifecycle_);
  if (initialized_) return Error{manifest_.name + ": init called twice"};
  services_ = std::make_unique<HostServices>(manifest_.name, std::move(settings));
  // Two passes: the string storage must be complete before views into it are taken.
  pci_strings_.clear();
  pci_strings_.reserve(inventory.size() * 2);
  for (const pci::PciDevice& d : inventory) {
    pci_strings_.push_back(d.bus_id);
    pci_strings_.push_back(d.sysfs_path);
  }
  pci_devices_.clear();
  for (size_t i = 0; i < inventory.size(); ++i) {
    const pci::PciDevice& d = inventory[i];
    pci_devices_.push_back(
        gpustack_pci_device{sizeof(gpustack_pci_device), nullptr, sdk::Str(pci_strings_[2 * i]),
                            d.vendor_id, d.device_id, d.class_code, d.subsystem_vendor_id,
                            d.subsystem_device_id, d.numa_node, sdk::Str(pci_strings_[2 * i + 1])});
  }
  pci_device_ptrs_.clear();
  for (const gpustack_pci_device& d : pci_devices_) pci_device_ptrs_.push_back(&d);

  const gpustack_init_args args{sizeof(gpustack_init_args), nullptr,
                                negotiated_.major,          negotiated_.minor,
                                services_->table(),         pci_device_ptrs_.data(),
                                pci_device_ptrs_.size()};
  gpustack_plugin_instance* instance = nullptr;
  const gpustack_status status = api_.init(&args, &instance);
  if (status != GPUSTACK_STATUS_OK) {
    services_.reset();
    return CallError("init", status);
  }
  instance_ = instance;
  initialized_ = true;
  return Ok{};
}

void Plugin::Shutdown() {
  std::unique_lock life(lifecycle_);  // waits for every running call, a health poll included
  if (!initialized_) return;
  api_.shutdown(instance_);
  instance_ = nullptr;
  initialized_ = false;
  services_.reset();
}

Result<std::vector<sdk::AcceleratorGroup>> Plugin::Discover() {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("discover"); !ready) return Error{ready.error()};
  if (api_.discover == nullptr) return Missing("discover");
  Collector<sdk::AcceleratorGroup> collector;
  const gpustack_discovery_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::AcceleratorGroup>::Add<gpustack_accelerator_group, &Reader::Group>};
  const gpustack_discover_args args{sizeof(args), nullptr, &sink};
  const gpustack_status status = api_.discover(instance_, &args);
  if (auto outcome = Outcome("discover", status, collector.reader.problem); !outcome) {
    return Error{outcome.failure()};
  }
  return std::move(collector.items);
}

Result<std::vector<sdk::ContainerEdit>> Plugin::Grant(const sdk::Grant& grant) {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("grant"); !ready) return Error{ready.error()};
  if (api_.grant == nullptr) return Missing("grant");
  Collector<sdk::ContainerEdit> collector;
  const gpustack_container_edit_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::ContainerEdit>::Add<gpustack_container_edit, &Reader::Edit>};
  const std::vector<gpustack_str> ids = Strs(grant.accelerator_ids);
  const gpustack_grant_args args{sizeof(args),
                                 nullptr,
                                 sdk::Str(grant.pod_uid),
                                 sdk::Str(grant.container_name),
                                 grant.mode,
                                 ids.data(),
                                 ids.size(),
                                 grant.memory_limit_mib,
                                 grant.cores_percentage,
                                 sdk::Str(grant.partition_id),
                                 &sink};
  const gpustack_status status = api_.grant(instance_, &args);
  if (auto outcome = Outcome("grant", status, collector.reader.problem); !outcome) {
    return Error{outcome.failure()};
  }
  return std::move(collector.items);
}

Result<std::vector<sdk::Partition>> Plugin::ListPartitions(std::string_view accelerator_id) {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("list_partitions"); !ready) return Error{ready.error()};
  if (api_.list_partitions == nullptr) {
    return Missing("list_partitions");
  }
  Collector<sdk::Partition> collector;
  const gpustack_partition_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::Partition>::Add<gpustack_partition, &Reader::PartitionOf>};
  const gpustack_list_partitions_args args{sizeof(args), nullptr, sdk::Str(accelerator_id), &sink};
  const gpustack_status status = api_.list_partitions(instance_, &args);
  if (auto outcome = Outcome("list_partitions", status, collector.reader.problem); !outcome) {
    return Error{outcome.failure()};
  }
  return std::move(collector.items);
}

Result<sdk::Partition> Plugin::CreatePartition(const sdk::CreatePartitionRequest& request) {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("create_partition"); !ready) return Error{ready.error()};
  if (api_.create_partition == nullptr) {
    return Missing("create_partition");
  }
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
  const gpustack_status status = api_.create_partition(instance_, &args);
  if (auto outcome = Outcome("create_partition", status, collector.reader.problem); !outcome) {
    return Error{outcome.failure()};
  }
  if (collector.items.size() != 1) {
    return Error{manifest_.name + ": create_partition succeeded but reported " +
                     std::to_string(collector.items.size()) + " partitions instead of 1",
                 GPUSTACK_STATUS_INTERNAL};
  }
  return std::move(collector.items.front());
}

Status Plugin::DestroyPartition(const sdk::DestroyPartitionRequest& request) {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("destroy_partition"); !ready) return ready;
  if (api_.destroy_partition == nullptr) {
    return Missing("destroy_partition");
  }
  const gpustack_destroy_partition_args args{
      sizeof(args), nullptr, sdk::Str(request.accelerator_id), sdk::Str(request.partition_id),
      sdk::Str(request.owner)};
  const gpustack_status status = api_.destroy_partition(instance_, &args);
  if (status != GPUSTACK_STATUS_OK) return CallError("destroy_partition", status);
  return Ok{};
}

Result<MetricsSnapshot> Plugin::SampleMetrics(const sdk::MetricsRequest& request) {
  std::shared_lock life(lifecycle_);  // no shutdown while the call runs
  std::lock_guard serial(calls_);     // calls on one instance are serialized (plugin.h)
  if (auto ready = RequireInstance("sample_metrics"); !ready) return Error{ready.error()};
  if (api_.sample_metrics == nullptr) {
    return Missing("sample_metrics");
  }
  Collector<sdk::DeviceSample> devices;
  Collector<sdk::ProcessSample> processes;
  // One sink, two collectors: host_data reaches the device collector, the process collector is
  // found beside it.
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
  const gpustack_status status = api_.sample_metrics(instance_, &args);
  const std::string& problem =
      !devices.reader.problem.empty() ? devices.reader.problem : processes.reader.problem;
  if (auto outcome = Outcome("sample_metrics", status, problem); !outcome) {
    return Error{outcome.failure()};
  }
  return MetricsSnapshot{std::move(devices.items), std::move(processes.items)};
}

Result<std::vector<sdk::HealthEvent>> Plugin::PollHealthEvents(uint32_t timeout_ms) {
  std::shared_lock life(lifecycle_);  // runs beside other calls, never beside shutdown
  if (auto ready = RequireInstance("poll_health_events"); !ready) return Error{ready.error()};
  if (api_.poll_health_events == nullptr) {
    return Missing("poll_health_events");
  }
  Collector<sdk::HealthEvent> collector;
  const gpustack_health_sink sink{
      sizeof(sink), nullptr, &collector,
      &Collector<sdk::HealthEvent>::Add<gpustack_health_event, &Reader::Event>};
  const gpustack_poll_health_args args{sizeof(args), nullptr, timeout_ms, &sink};
  const gpustack_status status = api_.poll_health_events(instance_, &args);
  if (auto outcome = Outcome("poll_health_events", status, collector.reader.problem); !outcome) {
    return Error{outcome.failure()};
  }
  return std::move(collector.items);
}

}  // namespace gpustack::loader
