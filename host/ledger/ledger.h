// One node's ledger: its Devices spec plus every allocation charged against it, and the fit
// arithmetic that the AdmissionCheck (gate 3), the device-plugin allocator (gate 5) and the
// capacity views all share. Pure and single-threaded: callers serialize (the allocator holds a
// per-node mutex around identify, fit and reserve).
//
// Invariants, checked by the property tests: no card is charged past 1,600,000 credits, 10 shared
// slots, its logical slice count, 100 % compute (unless it overcommits) or overlapping partition
// placements; no card is held in two modes; releasing an allocation restores the ledger exactly.
#ifndef GPUSTACK_HOST_LEDGER_LEDGER_H_
#define GPUSTACK_HOST_LEDGER_LEDGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"
#include "host/ledger/request.h"

namespace gpustack::ledger {

// The live state of one card, derived from the allocations charged to it.
struct CardState {
  const Group* group = nullptr;
  const Accelerator* card = nullptr;
  Mode mode = Mode::kNone;
  int64_t allocated = 0;
  uint32_t shared_slots = 0;
  uint32_t slices = 0;
  uint32_t cores_percentage = 0;
  std::vector<std::pair<std::string, Placement>> partitions;  // profile, placement

  int64_t remaining() const { return kCardCredits - allocated; }
  // How many more instances of `profile` fit in the free placements (0 if not offered).
  uint32_t RemainingInstances(const PartitionProfile& profile) const;
  uint32_t AllocatedInstances(const std::string& profile) const;
};

// The first of `nodes` (in the caller's order, e.g. the scheduler's) that fits `request`, with
// its charges; when none does, the error gives each node's explanation (the first few).
struct NodeFit {
  size_t node = 0;
  std::vector<Charge> charges;
};
class NodeLedger;
Result<NodeFit> FitOnNodes(const std::vector<const NodeLedger*>& nodes, const Request& request);

class NodeLedger {
 public:
  NodeLedger(std::string node, DevicesSpec spec);
  NodeLedger(const NodeLedger& other);
  NodeLedger& operator=(const NodeLedger&) = delete;

  const std::string& node() const { return node_; }
  const DevicesSpec& spec() const { return spec_; }
  const std::vector<CardState>& cards() const { return cards_; }
  const std::map<Owner, Allocation>& allocations() const { return allocations_; }

  // Where `request` would go, without charging it: deterministic, and when nothing fits the error
  // names each card and the limit that stopped it.
  Result<std::vector<Charge>> Fit(const Request& request) const;

  // Charges `request` to `owner`. Idempotent: an owner that already holds an allocation gets it
  // back unchanged (a retried Allocate is never charged twice).
  Result<Allocation> Reserve(const Owner& owner, const Request& request);

  // Adopts an allocation recorded elsewhere (a Pod annotation, after a restart). Refused, with the
  // reason, when it names an unknown card or would over-charge one: never over-admit.
  gpustack::Status Restore(const Allocation& allocation);

  // Releases what `owner` holds; false when it holds nothing (idempotent).
  bool Release(const Owner& owner);
  // A Pod that Succeeded or Failed gives back exclusive, shared and sliced charges at once;
  // partitions stay charged until the Pod is deleted (their hardware instance still exists), and
  // so do slices where `slices_are_objects(manufacturer)` says the slice is a driver object (its
  // plugin claims GPUSTACK_CAP_SLICE_OBJECTS): the ledger itself knows no manufacturer.
  void ReleaseTerminated(const Owner& owner,
                         const std::function<bool(const std::string&)>& slices_are_objects = {});

  DevicesStatus ToStatus() const;

 private:
  friend Result<NodeFit> FitOnNodes(const std::vector<const NodeLedger*>&, const Request&);
  Result<std::vector<Charge>> FitImpl(const Request& request, bool explain) const;
  CardState* FindCard(const std::string& accelerator_id);
  gpustack::Status Check(const Charge& charge, const CardState& card) const;
  void Apply(const Charge& charge, int sign);

  std::string node_;
  DevicesSpec spec_;
  std::vector<CardState> cards_;  // spec order: group by group, card by card
  // cards_' indexes ordered by card id, for FindCard: 4 bytes a card where a hash map of the
  // ids took about 110 (docs/footprint.md).
  std::vector<uint32_t> by_id_;
  std::map<Owner, Allocation> allocations_;
};

// Counts a promise (gate 3's count of a Pod that holds nothing yet) on the cards it was counted on
// while they still take it, else where the same request fits now: the kubelet may have given
// those cards to another Pod first, and a promise dropped would let the next one be counted on
// room this Pod will take. Partitions refit at any free placement. An error, naming both tries,
// when it fits nowhere.
gpustack::Status RestoreOrRefit(NodeLedger& ledger, const Allocation& promised);

// The ledger a node published (its Devices spec and status), for readers that see only the object
// (the worker's capacity views): each card's published charge is restored as one synthetic owner,
// partitions at the lowest free placements of their profile. A status that over-charges a card or
// names a card the spec lacks is refused, naming it. Compute percentages are not published, so each
// slice is read as holding 1 %.
Result<std::shared_ptr<const NodeLedger>> PublishedLedger(std::string node, DevicesSpec spec,
                                                          const DevicesStatus& status);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_LEDGER_H_
