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
// A card's device name in its pool: "card-<index>".
std::string DeviceName(const ledger::Accelerator& card);

// The card a device name of `manufacturer`'s pool stands for; NOT_FOUND when there is none.
Result<const ledger::Accelerator*> CardOfDevice(const ledger::DevicesSpec& spec,
                                                const std::string& manufacturer,
                                                const std::string& device);
// The manufacturer a pool name of `node` stands for; NOT_FOUND when it is another node's.
Result<std::string> ManufacturerOfPool(const std::string& node, const std::string& pool);

// The cards some owner other than a claim holds (in any mode).
std::set<std::string> CardsHeldByPods(const ledger::NodeLedger& ledger);

// One ResourceSlice per manufacturer of `spec` (those with no card to offer included, with an
// empty device list, so a card taken away is seen to go), each at `generation`.
std::vector<Json> ResourceSlices(const std::string& node, const ledger::DevicesSpec& spec,
                                 const std::set<std::string>& held_by_pods, int64_t generation);

}  // namespace gpustack::dra

#endif  // GPUSTACK_HOST_DRA_SLICES_H_
