// A Pod's accelerator request: the containers' resource keys parsed into one of the four modes,
// checked against the seven admission rules (the Pod webhook's logic), with the derived `.units`
// folded in. Pure: the Pod arrives as JSON, the manufacturers' resource names as input.
#ifndef GPUSTACK_HOST_LEDGER_REQUEST_H_
#define GPUSTACK_HOST_LEDGER_REQUEST_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"

namespace gpustack::ledger {

// One manufacturer's resource names, as its plugin identifies them.
struct ResourceKind {
  std::string manufacturer;    // "nvidia"
  std::string base;            // "nvidia.com/gpu"
  std::string partition_kind;  // "mig"; empty when the manufacturer does not partition
};

// What one container asks for.
struct Request {
  std::string manufacturer;
  std::string base;
  std::string group_id;  // the pool's card model ("a10g"); empty = any model of the manufacturer
  Mode mode = Mode::kExclusive;
  uint32_t count = 1;               // exclusive: cards; shared: slots of one card (1..10); else 1
  uint32_t memory_percentage = 0;   // sliced, when given
  uint64_t memory_mib = 0;          // sliced, when given instead
  uint32_t cores_percentage = 100;  // sliced
  std::string profile;              // partitioned: "3g.40gb"
  int64_t units = 0;                // sliced and partitioned: the folded credits
  // Only these cards may take it (the kubelet's chosen devices, gate 3's pinned cards); empty:
  // any card of the manufacturer and model.
  std::vector<std::string> cards;
  // Partitioned: only this placement (gate 3's choice, so gate 5 takes the same memory slices
  // whatever order the Pods start in); unset: the lowest free one.
  std::optional<Placement> placement;
};

struct ContainerRequest {
  std::string container;
  Request request;
};

// What folding needs from the InstanceType fronting the Pod's queue.
struct FoldContext {
  uint64_t card_memory_mib = 0;                    // per-card VRAM of the pool
  std::vector<PartitionProfile> offered_profiles;  // the pool's partition profiles
};

// Checks a Pod (its JSON) against the seven rules and returns each requesting container's
// request, in container order; empty when the Pod asks for no accelerator. Errors carry the
// exact field path and reason the webhook returns.
Result<std::vector<ContainerRequest>> ParsePodRequests(const nlohmann::json& pod,
                                                       const std::vector<ResourceKind>& kinds,
                                                       const FoldContext& fold);

// A resource quantity that must be a whole number in [1, max]: "2", "2000m", 2. The error is
// the reason only ("must be a whole number"), for the caller to place behind a field path.
Result<int64_t> ParseCount(const nlohmann::json& value, int64_t max);

// Units of a logical slice: P x 16,000 from a memory percentage, else floor(X x 1,600,000 / card).
int64_t SliceUnits(uint32_t memory_percentage, uint64_t memory_mib, uint64_t card_memory_mib);
// Units of a partition: its memory folded through the card's VRAM like a slice.
int64_t PartitionUnits(uint64_t profile_memory_mib, uint64_t card_memory_mib);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_REQUEST_H_
