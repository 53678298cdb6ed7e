// Reading what a plugin reports: every struct size, string, array, enum value and figure checked,
// and the value copied into an owned sdk:: type. Each Read* records the first problem and returns
// a value anyway, so one pass validates and copies; the caller checks `problem` at the end.
// Figures of a metrics sample that no card can have are dropped (left unmeasured) and named in
// `warnings`, so one broken sensor never hides a card's other figures.
#ifndef GPUSTACK_CLIENT_SRC_READER_H_
#define GPUSTACK_CLIENT_SRC_READER_H_

#include <gpustack/plugin.h>
#include <gpustack/plugin_types.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpustack::client {

// Bounds past which a value is a driver bug or garbage, never a real card.
constexpr size_t kMaxString = 1 << 20;                 // no sane plugin string is a megabyte long
constexpr size_t kMaxArray = 1 << 16;                  // nor an array of 65,536 entries
constexpr uint64_t kMaxMemoryMib = uint64_t{1} << 24;  // 16 TiB of VRAM on one card
constexpr uint64_t kMaxCores = uint64_t{1} << 24;
constexpr uint32_t kMaxSliceCount = 1 << 16;
constexpr uint32_t kMaxPartitionSlices = 64;
constexpr int32_t kMaxNumaNode = 1 << 16;
constexpr double kMinCelsius = -60.0;  // what a sensor on a running card can read
constexpr double kMaxCelsius = 200.0;
constexpr double kMaxWatts = 10000.0;
// What one hook call may hand back through its sink (documented in plugin.h, "Bounds"): a plugin
// that reports two million groups is refused at the bound, not after the host has copied them.
constexpr size_t kMaxStructsPerCall = 1 << 16;
constexpr size_t kMaxBytesPerCall = size_t{16} << 20;

struct Reader {
  std::string problem;
  std::vector<std::string> warnings;
  size_t structs_read = 0;  // in this call, against kMaxStructsPerCall
  size_t bytes_read = 0;    // of strings and arrays in this call, against kMaxBytesPerCall
  uint32_t minor = GPUSTACK_PLUGIN_ABI_MINOR;  // negotiated: fields of a later minor are not read

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
    bytes_read += s.size;
    if (bytes_read > kMaxBytesPerCall) {
      Fail("more than " + std::to_string(kMaxBytesPerCall >> 20) +
           " MiB in one call (the most a hook may hand back)");
      return {};
    }
    std::string text(sdk::View(s));
    if (text.find('\0') != std::string::npos) {  // it would cut the string short further on
      Fail(std::string(field) + " contains a NUL byte");
      return {};
    }
    return text;
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
    bytes_read += count * sizeof(T);  // copied too: counts against the call's bound
    if (bytes_read > kMaxBytesPerCall) {
      Fail("more than " + std::to_string(kMaxBytesPerCall >> 20) +
           " MiB in one call (the most a hook may hand back)");
      return false;
    }
    return true;
  }
  template <class T>
  bool Struct(const T* src, size_t min_size, T* out, const char* what) {
    if (++structs_read > kMaxStructsPerCall) {
      Fail("more than " + std::to_string(kMaxStructsPerCall) +
           " values in one call (the most a hook may hand back)");
      return false;
    }
    if (sdk::CopyPrefix(src, min_size, out)) return true;
    Fail(src == nullptr ? std::string(what) + " is NULL"
                        : std::string(what) + ".struct_size " + std::to_string(src->struct_size) +
                              " is smaller than its minimum " + std::to_string(min_size));
    return false;
  }
  template <class T>
  T Bounded(T value, T max, const std::string& field) {
    if (value > max) {
      Fail(field + " " + std::to_string(value) + " is implausible (more than " +
           std::to_string(max) + ")");
    }
    return value;
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
    if (out.product.empty()) Fail("group.product is empty");
    out.family = Str(g.family, "group.family");
    out.memory_mib = Bounded(g.memory_mib, kMaxMemoryMib, out.product + ": group.memory_mib");
    out.cores = Bounded(g.cores, kMaxCores, out.product + ": group.cores");
    out.driver_version = Str(g.driver_version, "group.driver_version");
    out.runtime_version = Str(g.runtime_version, "group.runtime_version");
    out.compute_capability = Str(g.compute_capability, "group.compute_capability");
    if (!Array(g.accelerators, g.accelerator_count, "group.accelerators")) return out;
    for (size_t i = 0; i < g.accelerator_count; ++i) {
      out.accelerators.push_back(Accel(g.accelerators[i]));
    }
    return out;
  }

  sdk::Accelerator Accel(const gpustack_accelerator* src) {
    gpustack_accelerator a;
    sdk::Accelerator out;
    if (!Struct(src, GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0, &a, "accelerator")) return out;
    out.id = Str(a.id, "accelerator.id");
    if (out.id.empty()) Fail("accelerator.id is empty");
    const std::string card = "accelerator " + out.id;
    out.index = a.index;
    if (Array(a.physical_indexes, a.physical_index_count, "accelerator.physical_indexes")) {
      out.physical_indexes.assign(a.physical_indexes, a.physical_indexes + a.physical_index_count);
    }
    out.memory_mib = Bounded(a.memory_mib, kMaxMemoryMib, card + " memory_mib");
    out.pci_bus_id = Str(a.pci_bus_id, "accelerator.pci_bus_id");
    out.pci_root_id = Str(a.pci_root_id, "accelerator.pci_root_id");
    out.pci_class = a.pci_class;
    out.numa_affinity = a.numa_affinity;
    if (a.numa_affinity < -1 || a.numa_affinity > kMaxNumaNode) {
      Fail(card + " numa_affinity " + std::to_string(a.numa_affinity) + " is not a NUMA node");
    }
    out.cpu_affinity = Str(a.cpu_affinity, "accelerator.cpu_affinity");
    out.health = Health(a.health, "accelerator.health");
    out.health_reason = Str(a.health_reason, "accelerator.health_reason");
    out.logical_slice_count =
        Bounded(a.logical_slice_count, kMaxSliceCount, card + " logical_slice_count");
    out.cores_percentage_overcommit = a.cores_percentage_overcommit != 0;
    out.partition_mode = a.partition_mode;
    if (a.partition_mode < GPUSTACK_PARTITION_MODE_UNSUPPORTED ||
        a.partition_mode > GPUSTACK_PARTITION_MODE_PENDING) {
      Fail(card + " partition_mode " + std::to_string(a.partition_mode) + " is not known");
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
    const std::string where = "profile " + out.name;
    out.memory_mib = Bounded(p.memory_mib, kMaxMemoryMib, where + " memory_mib");
    out.compute_slices = Bounded(p.compute_slices, kMaxPartitionSlices, where + " compute_slices");
    out.memory_slices = Bounded(p.memory_slices, kMaxPartitionSlices, where + " memory_slices");
    out.max_count = Bounded(p.max_count, kMaxPartitionSlices, where + " max_count");
    if (Array(p.placements, p.placement_count, "profile.placements")) {
      out.placements.assign(p.placements, p.placements + p.placement_count);
      for (const gpustack_placement& at : out.placements) Place(at, where);
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
    Place(out.placement, "partition " + out.id);
    out.owner = Str(p.owner, "partition.owner");
    return out;
  }

  // A placement lies within a card's memory slices.
  void Place(const gpustack_placement& at, const std::string& where) {
    if (at.length == 0 || uint64_t{at.start} + uint64_t{at.length} > kMaxPartitionSlices) {
      Fail(where + " placement {start " + std::to_string(at.start) + ", length " +
           std::to_string(at.length) + "} is outside the card's " +
           std::to_string(kMaxPartitionSlices) + " memory slices");
    }
  }

  // A figure no card can have is dropped (unmeasured) and named in `warnings`.
  sdk::Measurement Figure(const gpustack_measurement& m, double min, double max,
                          const std::string& card, const char* what) {
    const sdk::Measurement value = sdk::FromC(m);
    if (value && (!std::isfinite(*value) || *value < min || *value > max)) {
      char text[64];
      std::snprintf(text, sizeof text, "%g", *value);
      warnings.push_back(card + ": " + what + " " + text + " is implausible; left unmeasured");
      return std::nullopt;
    }
    return value;
  }

  sdk::DeviceSample Device(const gpustack_device_sample* src) {
    gpustack_device_sample s;
    sdk::DeviceSample out;
    if (!Struct(src, GPUSTACK_DEVICE_SAMPLE_STRUCT_SIZE_V1_0, &s, "device_sample")) return out;
    out.accelerator_id = Str(s.accelerator_id, "sample.accelerator_id");
    const std::string& card = out.accelerator_id;
    const auto max_mib = static_cast<double>(kMaxMemoryMib);
    out.timestamp_ns = s.timestamp_ns;
    out.memory_total_mib = Figure(s.memory_total_mib, 0, max_mib, card, "memory total (MiB)");
    out.memory_used_mib = Figure(s.memory_used_mib, 0, max_mib, card, "memory used (MiB)");
    if (out.memory_used_mib && out.memory_total_mib &&
        *out.memory_used_mib > *out.memory_total_mib) {
      char text[96];
      std::snprintf(text, sizeof text, "memory used %g MiB is more than the total %g MiB",
                    *out.memory_used_mib, *out.memory_total_mib);
      warnings.push_back(card + ": " + text + "; left unmeasured");
      out.memory_used_mib = std::nullopt;
    }
    out.memory_utilization_percent =
        Figure(s.memory_utilization_percent, 0, 100, card, "memory utilization (%)");
    out.cores_utilization_percent =
        Figure(s.cores_utilization_percent, 0, 100, card, "core utilization (%)");
    out.temperature_celsius =
        Figure(s.temperature_celsius, kMinCelsius, kMaxCelsius, card, "temperature (°C)");
    out.power_watts = Figure(s.power_watts, 0, kMaxWatts, card, "power (W)");
    out.health = Health(s.health, "sample.health");
    // Reserved before 1.4: an older plugin's sample reads as COMPLETE, whatever it left there.
    if (minor >= 4) {
      if (s.process_listing < GPUSTACK_PROCESS_LISTING_COMPLETE ||
          s.process_listing > GPUSTACK_PROCESS_LISTING_TRUNCATED) {
        Fail("sample.process_listing " + std::to_string(s.process_listing) +
             " is not a known value");
      }
      out.process_listing = s.process_listing;
    }
    return out;
  }

  sdk::ProcessSample Process(const gpustack_process_sample* src) {
    gpustack_process_sample s;
    sdk::ProcessSample out;
    if (!Struct(src, GPUSTACK_PROCESS_SAMPLE_STRUCT_SIZE_V1_0, &s, "process_sample")) return out;
    out.accelerator_id = Str(s.accelerator_id, "sample.accelerator_id");
    out.partition_id = Str(s.partition_id, "sample.partition_id");
    out.pid = s.pid;
    const std::string where = out.accelerator_id + " pid " + std::to_string(s.pid);
    out.memory_used_mib = Figure(s.memory_used_mib, 0, static_cast<double>(kMaxMemoryMib), where,
                                 "memory used (MiB)");
    out.cores_utilization_percent =
        Figure(s.cores_utilization_percent, 0, 100, where, "core utilization (%)");
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

  sdk::DeviceNode Node(const gpustack_device_node* src) {
    gpustack_device_node n;
    sdk::DeviceNode out;
    if (!Struct(src, GPUSTACK_DEVICE_NODE_STRUCT_SIZE_V1_1, &n, "device_node")) return out;
    out.accelerator_id = Str(n.accelerator_id, "device_node.accelerator_id");
    out.path = Str(n.path, "device_node.path");
    // Under the device directory: no absolute path, no way out of it.
    if (out.path.empty() || out.path.front() == '/' || out.path.find("..") != std::string::npos) {
      Fail("device_node.path \"" + out.path + "\" is not a path under the device directory");
    }
    return out;
  }

  sdk::Slice SliceOf(const gpustack_slice* src) {
    gpustack_slice s;
    sdk::Slice out;
    if (!Struct(src, GPUSTACK_SLICE_STRUCT_SIZE_V1_1, &s, "slice")) return out;
    out.accelerator_id = Str(s.accelerator_id, "slice.accelerator_id");
    out.id = Str(s.id, "slice.id");
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
    // Refused already: a plugin that keeps calling gets the refusal, and the host copies nothing.
    if (!self->reader.problem.empty()) return self->reader.Verdict();
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

// Two cards of one discovery with the same id or PCI bus id, named; empty when there are none.
inline std::string DuplicateCards(const std::vector<sdk::AcceleratorGroup>& groups) {
  std::map<std::string, std::string> ids;
  std::map<std::string, std::string> buses;
  for (const sdk::AcceleratorGroup& g : groups) {
    for (const sdk::Accelerator& a : g.accelerators) {
      const std::string where = g.product + " card " + std::to_string(a.index);
      if (auto [it, fresh] = ids.emplace(a.id, where); !fresh) {
        return "accelerator id " + a.id + " is reported twice (" + it->second + " and " + where +
               ")";
      }
      if (a.pci_bus_id.empty()) continue;
      if (auto [it, fresh] = buses.emplace(a.pci_bus_id, a.id); !fresh) {
        return "PCI bus id " + a.pci_bus_id + " is reported for two cards (" + it->second +
               " and " + a.id + ")";
      }
    }
  }
  return {};
}

}  // namespace gpustack::client

#endif  // GPUSTACK_CLIENT_SRC_READER_H_
