// C++ value types mirroring the plugin ABI's structs. NOT part of the ABI: header-only helpers
// that plugin authors (through plugin.hpp) and the host both use, so the two sides describe a
// device the same way. They own their storage; the ABI structs only borrow. Every member has a
// default initializer, so designated initializers may name only what they set.
#ifndef GPUSTACK_PLUGIN_TYPES_HPP_
#define GPUSTACK_PLUGIN_TYPES_HPP_

#include <gpustack/plugin.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustack::sdk {

inline std::string_view View(gpustack_str s) {
  return s.data == nullptr ? std::string_view{} : std::string_view{s.data, s.size};
}
inline gpustack_str Str(std::string_view s) { return gpustack_str{s.data(), s.size()}; }

// Copies a struct received across the boundary into a zeroed local, honouring struct_size:
// false when `src` is NULL or smaller than `min_size` (the *_STRUCT_SIZE_V1_0 constant); a larger
// struct contributes only the prefix this side knows. Never throws.
template <class T>
bool CopyPrefix(const T* src, size_t min_size, T* out) noexcept {
  if (src == nullptr || src->struct_size < min_size) return false;
  std::memset(static_cast<void*>(out), 0, sizeof(T));
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(src),
              src->struct_size < sizeof(T) ? src->struct_size : sizeof(T));
  out->struct_size = sizeof(T);
  return true;
}

// The names of the status codes, by number: "OK" at 0 up to "INCOMPATIBLE_VERSION".
inline constexpr std::string_view kStatusNames[] = {"OK",
                                                    "CANCELLED",
                                                    "UNKNOWN",
                                                    "INVALID_ARGUMENT",
                                                    "DEADLINE_EXCEEDED",
                                                    "NOT_FOUND",
                                                    "ALREADY_EXISTS",
                                                    "PERMISSION_DENIED",
                                                    "RESOURCE_EXHAUSTED",
                                                    "FAILED_PRECONDITION",
                                                    "ABORTED",
                                                    "OUT_OF_RANGE",
                                                    "UNIMPLEMENTED",
                                                    "INTERNAL",
                                                    "UNAVAILABLE",
                                                    "DATA_LOSS",
                                                    "UNAUTHENTICATED",
                                                    "INCOMPATIBLE_VERSION"};

// The name of a status code, for messages. Unknown codes read "STATUS_<n>".
inline std::string StatusName(gpustack_status code) {
  if (code >= 0 && static_cast<size_t>(code) < std::size(kStatusNames))
    return std::string(kStatusNames[code]);
  return "STATUS_" + std::to_string(code);
}

struct PartitionProfile {
  std::string name{};
  uint64_t memory_mib = 0;
  uint32_t compute_slices = 0;
  uint32_t memory_slices = 0;
  uint32_t max_count = 0;
  std::vector<gpustack_placement> placements{};
};

struct Accelerator {
  std::string id{};
  uint32_t index = 0;
  std::vector<uint32_t> physical_indexes{};
  uint64_t memory_mib = 0;
  std::string pci_bus_id{};
  std::string pci_root_id{};
  uint32_t pci_class = 0;
  int32_t numa_affinity = -1;
  std::string cpu_affinity{};
  gpustack_health health = GPUSTACK_HEALTH_UNKNOWN;
  std::string health_reason{};
  uint32_t logical_slice_count = 0;
  bool cores_percentage_overcommit = false;
  gpustack_partition_mode partition_mode = GPUSTACK_PARTITION_MODE_UNSUPPORTED;
  std::vector<PartitionProfile> partition_profiles{};
};

struct AcceleratorGroup {
  std::string product{};
  std::string family{};
  uint64_t memory_mib = 0;
  uint64_t cores = 0;
  std::string driver_version{};
  std::string runtime_version{};
  std::string compute_capability{};
  std::vector<Accelerator> accelerators{};
};

struct Grant {
  std::string pod_uid{};
  std::string container_name{};
  gpustack_grant_mode mode = GPUSTACK_GRANT_EXCLUSIVE;
  std::vector<std::string> accelerator_ids{};
  uint64_t memory_limit_mib = 0;
  uint32_t cores_percentage = 0;
  std::string partition_id{};
  std::string slice_id{};  // SLICED on a slice-objects plugin: what PrepareSlice reported
};

struct ContainerEdit {
  gpustack_edit_kind kind = GPUSTACK_EDIT_ENV;
  std::string key{};
  std::string value{};
  std::string host_path{};
  std::string container_path{};
  std::string permissions{};
  bool read_only = false;
};

struct Partition {
  std::string accelerator_id{};
  std::string id{};
  std::string profile{};
  gpustack_placement placement{};
  std::string owner{};
};

// A device node a card's containers use, under the device directory ("nvidia0", "dri/card1");
// an empty accelerator_id means every card needs it.
struct DeviceNode {
  std::string accelerator_id{};
  std::string path{};
};

struct PrepareSliceRequest {
  std::string accelerator_id{};
  uint64_t memory_limit_mib = 0;
  uint32_t cores_percentage = 0;
  std::string owner{};
};

struct Slice {
  std::string accelerator_id{};
  std::string id{};
};

struct UnprepareSliceRequest {
  std::string accelerator_id{};
  std::string slice_id{};
  std::string owner{};
};

struct CreatePartitionRequest {
  std::string accelerator_id{};
  std::string profile{};
  gpustack_placement placement{};
  std::string owner{};
};

struct DestroyPartitionRequest {
  std::string accelerator_id{};
  std::string partition_id{};
  std::string owner{};
};

// std::nullopt = not measured (distinct from a measured zero).
using Measurement = std::optional<double>;

struct DeviceSample {
  std::string accelerator_id{};
  uint64_t timestamp_ns = 0;
  Measurement memory_total_mib{};
  Measurement memory_used_mib{};
  Measurement memory_utilization_percent{};
  Measurement cores_utilization_percent{};
  Measurement temperature_celsius{};
  Measurement power_watts{};
  gpustack_health health = GPUSTACK_HEALTH_UNKNOWN;
  // Since 1.4: why the card's processes are missing from the samples (COMPLETE: all are there).
  gpustack_process_listing process_listing = GPUSTACK_PROCESS_LISTING_COMPLETE;
};

struct ProcessSample {
  std::string accelerator_id{};
  std::string partition_id{};
  uint32_t pid = 0;
  Measurement memory_used_mib{};
  Measurement cores_utilization_percent{};
};

// Whether a host's list of card ids covers `id`: an empty list means every card.
inline bool Covers(const std::vector<std::string>& ids, std::string_view id) {
  if (ids.empty()) return true;
  for (const std::string& wanted : ids) {
    if (wanted == id) return true;
  }
  return false;
}

struct MetricsRequest {
  std::vector<std::string> accelerator_ids;  // empty = every card
  bool include_processes = false;
  bool Wants(std::string_view id) const { return Covers(accelerator_ids, id); }
};

struct HealthEvent {
  std::string accelerator_id{};
  gpustack_health health = GPUSTACK_HEALTH_UNKNOWN;
  std::string reason{};
};

inline gpustack_measurement ToC(const Measurement& m) {
  return m ? gpustack_measurement{*m, 1, 0} : gpustack_measurement{0.0, 0, 0};
}
inline Measurement FromC(const gpustack_measurement& m) {
  return m.measured != 0 ? Measurement{m.value} : std::nullopt;
}

}  // namespace gpustack::sdk

#endif  // GPUSTACK_PLUGIN_TYPES_HPP_
