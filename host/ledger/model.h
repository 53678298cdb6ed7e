// The vendor-neutral device model: a node's `Devices` ledger (spec = what the node has, status =
// how it is allocated) and the credit arithmetic every admission gate shares. Pure: no I/O.
//
// Field names follow the Devices CRD (worker.gpustack.ai/v1alpha1) exactly, so the JSON here is
// the object's spec and status.
#ifndef GPUSTACK_HOST_LEDGER_MODEL_H_
#define GPUSTACK_HOST_LEDGER_MODEL_H_

#include <nlohmann/json.hpp>

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::ledger {

// One card is 1,600,000 credits; a shared ownership slot is a tenth of a card.
inline constexpr int64_t kCardCredits = 1'600'000;
inline constexpr int kSharedSlots = 10;
inline constexpr int64_t kSharedSlotCredits = kCardCredits / kSharedSlots;
inline constexpr int64_t kCreditsPerPercent = kCardCredits / 100;  // 16,000

// How a card is held, and what a request asks for: the host's one sharing-mode vocabulary (the
// plugin ABI's gpustack_grant_mode has the same numbers). kNone: nothing holds the card, or a
// resource that holds nothing (an SSH sidecar's view of its Pod's cards).
enum class Mode : uint32_t {
  kNone = 0,
  kExclusive = 1,
  kShared = 2,
  kSliced = 3,
  kPartitioned = 4
};
const char* ModeName(Mode mode);  // as the Devices status writes it: "Exclusive", "None"
const char* ModeKey(Mode mode);   // as resource keys and messages write it: "exclusive", "none"

struct Placement {
  uint32_t start = 0;
  uint32_t length = 0;
  bool Overlaps(const Placement& other) const {
    return start < other.start + other.length && other.start < start + length;
  }
  auto operator<=>(const Placement&) const = default;
};

struct PartitionProfile {
  std::string name;  // "3g.40gb"
  uint64_t memory_mib = 0;
  uint32_t compute_slices = 0;
  uint32_t memory_slices = 0;
  uint32_t count = 0;  // most instances on one empty card
  std::vector<Placement> placements;
  bool operator==(const PartitionProfile&) const = default;
};

struct Topology {
  std::string pci_bus_id;
  std::string pci_root_id;
  std::string pci_class;
  int32_t numa_affinity = -1;
  std::string cpu_affinity;
  bool operator==(const Topology&) const = default;
};

struct Accelerator {
  std::string id;
  uint32_t index = 0;
  std::vector<uint32_t> physical_indexes;
  Topology topology;
  bool unhealthy = false;
  uint32_t logical_count = 0;  // status.logicalSliced.count; 0 = not sliceable
  bool cores_percentage_overcommit = false;
  std::vector<PartitionProfile>
      profiles;  // status.physicalSliced.profiles; non-empty = partitioned

  bool partitioned() const { return !profiles.empty(); }
  bool sliceable() const { return !partitioned() && logical_count > 0; }
  const PartitionProfile* FindProfile(const std::string& name) const;
  uint32_t PhysicalCount() const;  // status.physicalSliced.count: max count across profiles
  bool operator==(const Accelerator&) const = default;
};

struct Group {
  std::string id;            // "a10g"
  std::string manufacturer;  // "nvidia"
  std::string name;          // "NVIDIA A10G"
  uint64_t memory = 0;       // MiB per card
  uint64_t cores = 0;
  std::string driver_version;
  std::string runtime_version;
  std::string compute_capability;
  std::string family;
  std::vector<Accelerator> accelerators;
  bool operator==(const Group&) const = default;
};

struct DevicesSpec {
  std::vector<Group> groups;
  bool operator==(const DevicesSpec&) const = default;
};

// Who holds an allocation: one container of one Pod.
struct Owner {
  std::string pod_uid;
  std::string container;
  auto operator<=>(const Owner&) const = default;
};

// What one container holds on one card.
struct Charge {
  std::string accelerator_id;
  Mode mode = Mode::kNone;
  int64_t credits = 0;  // exclusive: a card; shared: slots x 160,000; sliced/partitioned: units
  uint32_t shared_slots = 0;      // shared only
  uint32_t cores_percentage = 0;  // sliced only
  std::string profile;            // partitioned only
  Placement placement;            // partitioned only
  bool operator==(const Charge&) const = default;
};

struct Allocation {
  Owner owner;
  std::vector<Charge> charges;
  bool operator==(const Allocation&) const = default;
};

// status.groups[].accelerators[]
struct ProfileCount {
  std::string name;
  uint32_t count = 0;
  bool operator==(const ProfileCount&) const = default;
};
struct AcceleratorAllocation {
  std::string id;
  uint32_t index = 0;
  Mode mode = Mode::kNone;
  int64_t allocated = 0;
  int64_t remaining = kCardCredits;
  std::vector<ProfileCount> allocated_profiles;
  std::vector<ProfileCount> remaining_profiles;
  uint32_t allocated_slices = 0;
  bool operator==(const AcceleratorAllocation&) const = default;
};
struct AllocationGroup {
  std::string id;
  std::string manufacturer;
  std::vector<AcceleratorAllocation> accelerators;
  bool operator==(const AllocationGroup&) const = default;
};
struct DevicesStatus {
  std::vector<AllocationGroup> groups;
  bool operator==(const DevicesStatus&) const = default;
};

// What makes a spec usable by a ledger: unique card ids; partition profiles with memory, one
// placement length equal to memorySlices, placements inside 64 memory slices and sorted by start.
// SpecFromJson applies it; a NodeLedger refuses (throws std::invalid_argument on) a spec failing
// it.
Status ValidateSpec(const DevicesSpec& spec);

// JSON in the CRD's field names. From* refuse what the CRD schema would refuse, naming the field.
nlohmann::json ToJson(const DevicesSpec& spec);
nlohmann::json ToJson(const DevicesStatus& status);
nlohmann::json ToJson(const Allocation& allocation);
Result<DevicesSpec> SpecFromJson(const nlohmann::json& json);
Result<DevicesStatus> StatusFromJson(const nlohmann::json& json);
Result<Allocation> AllocationFromJson(const nlohmann::json& json);

// The spec's group-level aggregate (`acceleratorSlicedDetail` in the CRD).
struct SlicedDetail {
  bool cores_percentage_overcommit = false;
  uint32_t logical_count = 0;                   // sum of per-card logical counts
  std::vector<ProfileCount> physical_profiles;  // per profile: sum of per-card counts
  uint32_t physical_count = 0;                  // sum of per-card physical counts
};
SlicedDetail SlicedDetailOf(const Group& group);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_MODEL_H_
