// The DRA front end's view of a node (docs/dra.md): the ResourceSlices (resource.k8s.io/v1) that
// tell the scheduler which cards it may allocate to ResourceClaims, one per manufacturer, built
// from the node ledger. Pure: the ledger in, the objects out.
//
// A card is published while it is healthy, not in partition mode, and held by no device-plugin
// Pod: a card a container holds through the device plugin is taken out of the scheduler's view,
// and a card a claim holds stays in it (the scheduler itself keeps it from a second claim), so
// the two front ends never offer one card twice. The ledger stays the arbiter: a claim the
// scheduler allocated on a card that was taken meanwhile is refused at prepare.
#ifndef GPUSTACK_HOST_DRA_SLICES_H_
#define GPUSTACK_HOST_DRA_SLICES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/dra/claims.h"
#include "host/ledger/ledger.h"

namespace gpustack::dra {

// The driver name the kubelet registers and every ResourceSlice, DeviceClass and claim result
// names; also the domain of the devices' attributes.
inline constexpr const char* kDriverName = "gpustack.ai";

// A manufacturer's pool on a node: "<node>/<manufacturer>" (pool names are slash-separated DNS
// subdomains, unique per driver across the cluster).
std::string PoolName(const std::string& node, const std::string& manufacturer);
// The ResourceSlice object's name: "<node>-<manufacturer>.gpustack.ai".
std::string SliceName(const std::string& node, const std::string& manufacturer);
// A card's device name in its pool: "card-<index>". A card that slices is offered as consumable
// capacity (allowMultipleAllocations; Kubernetes' DRAConsumableCapacity): `memory` in MiB steps,
// `cores` in percent, `slices` one per allocation up to its logical slice count; a claim that
// names no capacity consumes the defaults, the whole card.
std::string DeviceName(const ledger::Accelerator& card);

// The card a device name of `manufacturer`'s pool stands for, and its group; NOT_FOUND when
// there is none.
struct CardRef {
  const ledger::Group* group = nullptr;
  const ledger::Accelerator* card = nullptr;
};
Result<CardRef> CardOfDevice(const ledger::DevicesSpec& spec, const std::string& manufacturer,
                             const std::string& device);
// The manufacturer a pool name of `node` stands for; NOT_FOUND when it is another node's.
Result<std::string> ManufacturerOfPool(const std::string& node, const std::string& pool);

// A partition's device name: "card-<index>-<profile>-at-<start>" ("card-0-1g-10gb-at-3"), the
// profile's dots and pluses as dashes; and its card, profile and placement from the name.
std::string PartitionDeviceName(const ledger::Accelerator& card,
                                const ledger::PartitionProfile& profile,
                                const ledger::Placement& placement);
struct PartitionRef {
  CardRef card;
  const ledger::PartitionProfile* profile = nullptr;
  ledger::Placement placement;
};
std::optional<PartitionRef> PartitionOfDevice(const ledger::DevicesSpec& spec,
                                              const std::string& manufacturer,
                                              const std::string& device);

// What device-plugin Pods hold (owners other than claims): the cards, in any mode, and the
// placements of their partitions by card.
struct HeldByPods {
  std::set<std::string> cards;
  std::map<std::string, std::vector<ledger::Placement>> partitions;
};
HeldByPods HeldByPodsOf(const ledger::NodeLedger& ledger);

// What a claim's devices ask of the node ledger (docs/dra.md): whole cards (exclusive; a share
// that consumes a card's whole memory and compute is one), one share of one card (a logical
// slice: the memory and cores it consumes), or one partition device (its profile and placement).
// Errors name the claim: another node's pool, an unknown device, two manufacturers, a share of a
// card that does not slice, a share mixed with anything else, a consumed capacity that is not a
// quantity.
struct ClaimRequest {
  std::string manufacturer;
  ledger::Request request;
  uint64_t card_memory_mib = 0;  // the pool's per-card memory (a slice's budget is cut from it)
};
Result<ClaimRequest> LedgerRequestFor(const std::vector<AllocatedDevice>& devices,
                                      const ledger::DevicesSpec& spec, const std::string& node,
                                      const ClaimRef& ref);

// The ResourceSlices of each manufacturer's pool, each at `generation`:
//   <node>-<mfr>.gpustack.ai               the whole cards (empty when none is offered, so a
//                                          card taken away is seen to go);
//   <node>-<mfr>-counters-<k>.gpustack.ai  partitioned cards' memory slices as shared counters
//                                          (Kubernetes' DRAPartitionableDevices), 8 cards a slice;
//   <node>-<mfr>-card-<index>.gpustack.ai  that card's partitions, a device per profile and
//                                          placement, consuming the memory slices it covers.
// Partitions overlapping one a Pod holds are left out, and all of them without
// `offer_partitions` (a cluster that drops shared counters); every slice names the pool's count.
std::vector<Json> ResourceSlices(const std::string& node, const ledger::DevicesSpec& spec,
                                 const HeldByPods& held, int64_t generation,
                                 bool offer_partitions = true);

}  // namespace gpustack::dra

#endif  // GPUSTACK_HOST_DRA_SLICES_H_
