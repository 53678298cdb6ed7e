// The fleet-wide view of InstanceTypes (docs/behaviour.md §11): one AggregatedInstanceType per
// name offered by any member cluster, its members' types as candidates grouped into tiers by the
// whole-card onceMaxRequest, each tier's best single allocation and its remaining capacity summed
// per view, and the same for the whole type. Pure: the gateway hands in what its members last
// reported and how fresh that is.
//
// Which status fields are capacity views is read from the InstanceType CRD compiled into the
// binary (every status property with a `remaining`), not listed here: a view added to the CRD is
// aggregated without a change here, and tests/aggregate_test.cc checks each view the CRD
// declares is summed.
#ifndef GPUSTACK_HOST_GATEWAY_AGGREGATE_H_
#define GPUSTACK_HOST_GATEWAY_AGGREGATE_H_

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::gateway {

using Json = nlohmann::json;

// A status property that is a capacity view: {onceMaxRequest, remaining, capacity} and, for a
// physically partitioned one, per-profile lists ({name, count} arrays).
struct View {
  std::string name;                        // "accelerator", "acceleratorPartitioned", ...
  std::vector<std::string> profile_lists;  // "remainingProfiles", "allocatedProfiles"
};

// The views of the compiled-in InstanceType CRD, and the other status properties (copied per
// candidate, not summed). An error when the CRD does not parse (a broken build).
struct StatusShape {
  std::vector<View> views;
  std::vector<std::string> others;
};
Result<StatusShape> InstanceTypeStatusShape();
// The same from any openAPIV3Schema of an InstanceType (the tests feed altered ones).
StatusShape StatusShapeOf(const Json& schema);

// Why a member's types do not count toward availability.
struct Freshness {
  bool stale = false;
  std::string since;   // RFC 3339, when it went stale
  std::string reason;  // what failed
};

// One member cluster's InstanceType (the served v1 object).
struct Candidate {
  std::string cluster;
  std::shared_ptr<const Json> type;
  Freshness freshness{};
};

// The AggregatedInstanceType of same-named candidates (in the order given: the first wins ties):
// {name, spec, status{detail, onceMaxRequest, remaining, tiers[], staleMembers[]}}.
//   tier: {key, onceMaxRequest, remaining, candidates[]}; key = the candidates' whole-card
//   (accelerator) onceMaxRequest; tiers in key order. A candidate counts toward a tier's
//   figures when its phase is Active and its cluster is not stale; it is listed either way,
//   with why it does not count.
//   A bundle has every view's figure under the view's name, and for the partition view also
//   `<view>Profiles` ({name, count}, every profile any candidate offers).
//   onceMaxRequest: every view's onceMaxRequest copied from one counted candidate (the one with
//   the largest whole-card -- for CPU types, CPU -- onceMaxRequest), profiles as count 0 or 1
//   (can one request get it), and `allocation`: that request's accelerator, CPU, RAM and local
//   storage from the type's unit. The type's is its largest tier's.
//   remaining: every view's remaining summed, remainingProfiles summed by name.
Json AggregateInstanceType(const std::string& name, const std::vector<Candidate>& candidates,
                           const StatusShape& shape);

// Every name's aggregate, accelerated types first, then by name.
std::vector<Json> AggregateInstanceTypes(const std::vector<Candidate>& candidates,
                                         const StatusShape& shape);

}  // namespace gpustack::gateway

#endif  // GPUSTACK_HOST_GATEWAY_AGGREGATE_H_
