// What the node runtime knows about plugins and their cards, in the host's own types: the loader
// converts a plugin's ABI structs into these at its boundary, so nothing past it depends on the
// SDK's helper types, and an in-memory fake backend speaks them directly.
#ifndef GPUSTACK_HOST_RUNTIME_TYPES_H_
#define GPUSTACK_HOST_RUNTIME_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/ledger/model.h"

namespace gpustack::runtime {

// The plugin hooks the runtime calls (plugin.h names), and the lifecycle calls around them.
enum class Hook {
  kInit,
  kShutdown,
  kDiscover,
  kGrant,
  kListPartitions,
  kCreatePartition,
  kDestroyPartition,
  kSampleMetrics,
  kPollHealthEvents,
  kListDeviceNodes,
  kPrepareSlice,
  kUnprepareSlice,
  kLoad,  // not a hook: loading the library (its constructors), negotiation and identify
};
std::string_view HookName(Hook hook);  // "discover"

struct Capabilities {
  bool shared = false;           // <base>.shared ownership slots
  bool sliced = false;           // <base>.sliced: VRAM and compute budgets
  bool partitioned = false;      // <base>.partitioned: hardware instances
  bool process_metrics = false;  // per-process samples
  bool health_events = false;    // health changes pushed by the driver
  bool slice_objects = false;    // a slice is a driver object, prepared and unprepared
  bool operator==(const Capabilities&) const = default;
};
std::string ToString(const Capabilities& capabilities);  // "shared,sliced" or "-"

struct PluginIdentity {
  std::string manufacturer{};  // "nvidia"
  std::string display_name{};
  std::string base_resource_name{};  // "nvidia.com/gpu"
  std::string version{};
  std::vector<uint16_t> pci_vendor_ids{};
  Capabilities capabilities{};
  std::string partition_kind{};          // "mig"; empty unless partitioned
  std::string runtime_class{};           // the vendor runtime its containers need; empty for none
  bool runtime_injects_driver = false;   // the device manager itself runs under runtime_class
  bool runtime_injects_devices = false;  // grants only name cards; workloads need the runtime
  std::string install_hint{};
  // Admission constraints the worker's webhooks apply (ABI 1.2).
  bool one_card_per_container = false;
  uint32_t min_slice_memory_percentage = 0;  // 0: any
  std::string abi{};                         // the ABI version negotiated with the host: "1.1"
};

enum class Health { kUnknown, kHealthy, kUnhealthy };
std::string_view HealthName(Health health);  // "Healthy"

enum class PartitionMode { kUnsupported, kDisabled, kEnabled, kPending };

struct Card {
  std::string id{};  // globally unique (UUID)
  uint32_t index = 0;
  std::vector<uint32_t> physical_indexes{};
  uint64_t memory_mib = 0;
  std::string pci_bus_id{};
  std::string pci_root_id{};
  uint32_t pci_class = 0;
  int32_t numa_affinity = -1;
  std::string cpu_affinity{};
  Health health = Health::kUnknown;
  std::string health_reason{};
  uint32_t logical_slice_count = 0;
  bool cores_percentage_overcommit = false;
  PartitionMode partition_mode = PartitionMode::kUnsupported;
  std::vector<ledger::PartitionProfile> partition_profiles{};  // offered while enabled
};

struct CardGroup {
  std::string product{};  // "NVIDIA A10G"
  std::string family{};
  uint64_t memory_mib = 0;
  uint64_t cores = 0;
  std::string driver_version{};
  std::string runtime_version{};
  std::string compute_capability{};
  std::vector<Card> cards{};
};

size_t CardCount(const std::vector<CardGroup>& groups);

enum class GrantMode { kExclusive, kShared, kSliced, kPartitioned };

struct GrantRequest {
  std::string pod_uid{};
  std::string container{};
  GrantMode mode = GrantMode::kExclusive;
  std::vector<std::string> card_ids{};
  uint64_t memory_limit_mib = 0;  // sliced
  uint32_t cores_percentage = 0;  // sliced
  std::string partition_id{};     // partitioned
  std::string slice_id{};         // sliced, on a slice-objects plugin
};

enum class EditKind { kEnv, kMount, kDeviceNode, kAnnotation, kCdiDevice };

struct ContainerEdit {
  EditKind kind = EditKind::kEnv;
  std::string key{};
  std::string value{};
  std::string host_path{};
  std::string container_path{};
  std::string permissions{};
  bool read_only = false;
};

struct Partition {
  std::string card_id{};
  std::string id{};
  std::string profile{};
  ledger::Placement placement{};
  std::string owner{};
};

struct PartitionRequest {
  std::string card_id{};
  std::string profile{};
  ledger::Placement placement{};
  std::string owner{};
};

struct PartitionRef {
  std::string card_id{};
  std::string partition_id{};
  std::string owner{};
};

struct SliceRequest {
  std::string card_id{};
  uint64_t memory_limit_mib = 0;
  uint32_t cores_percentage = 0;
  std::string owner{};
};

struct Slice {
  std::string card_id{};
  std::string id{};
};

struct SliceRef {
  std::string card_id{};
  std::string slice_id{};
  std::string owner{};
};

// A figure is absent when the plugin could not measure it: never reported as zero.
using Figure = std::optional<double>;

struct DeviceSample {
  std::string card_id{};
  uint64_t timestamp_ns = 0;
  Figure memory_total_mib{};
  Figure memory_used_mib{};
  Figure memory_utilization_percent{};
  Figure cores_utilization_percent{};
  Figure temperature_celsius{};
  Figure power_watts{};
  Health health = Health::kUnknown;
};

struct ProcessSample {
  std::string card_id{};
  std::string partition_id{};
  uint32_t pid = 0;
  Figure memory_used_mib{};
  Figure cores_utilization_percent{};
};

struct Samples {
  std::vector<DeviceSample> devices{};
  std::vector<ProcessSample> processes{};
  std::vector<std::string> warnings{};  // implausible figures dropped, each named
};

struct HealthEvent {
  std::string card_id{};
  Health health = Health::kUnknown;
  std::string reason{};
};

// A device node under the device directory ("nvidia0"); an empty card_id: every card needs it.
struct DeviceNode {
  std::string card_id{};
  std::string path{};
};

using PluginSettings = std::map<std::string, std::string>;

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_TYPES_H_
