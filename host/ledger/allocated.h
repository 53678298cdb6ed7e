// The allocation record: what each container of a Pod holds, written by the node's allocator as
// a Pod annotation before it answers the kubelet (docs/behaviour.md §6.2). It is the ledger's
// durable truth: the node daemon rebuilds its ledger from these records at every start, and gate
// 3 counts what a node's Pods hold from them. Pure JSON, beside the chosen-cards annotation
// (chosen.h) that gate 3 writes for gate 5.
#ifndef GPUSTACK_HOST_LEDGER_ALLOCATED_H_
#define GPUSTACK_HOST_LEDGER_ALLOCATED_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"

namespace gpustack::ledger {

// {"<container>": <allocation>, ...}
inline constexpr const char* kAllocatedAnnotation = "device.gpustack.ai/accelerator.allocated";

// One container's entry, or why it cannot be used.
struct RecordedAllocation {
  std::string container;
  Result<Allocation> allocation;
};

// The record of the Pod `pod_uid` from the annotation's text. An entry is refused (with the
// reason, the others kept) when it is unreadable or names another Pod or container; the whole
// record when it is not a JSON object.
Result<std::vector<RecordedAllocation>> ReadAllocatedRecord(std::string_view text,
                                                            std::string_view pod_uid);
// The record a Pod object carries; none when it has no annotation.
Result<std::vector<RecordedAllocation>> AllocatedRecordOf(const nlohmann::json& pod);

// The annotation's text for one Pod's allocations.
std::string AllocatedAnnotation(const std::vector<Allocation>& allocations);

// What ResourceClaims hold on a node (docs/dra.md): its daemon publishes them on its Devices
// object, a JSON array of allocations whose owners are "claim:<uid>", so that gate 3 counts them
// beside the Pods' records.
inline constexpr const char* kClaimsAnnotation = "device.gpustack.ai/claims.allocated";
std::string ClaimsAnnotation(const std::vector<Allocation>& allocations);
// The claims' allocations a Devices object carries (none without the annotation); an error when
// the annotation or an entry cannot be read.
Result<std::vector<Allocation>> ClaimsAllocatedOf(const nlohmann::json& devices);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_ALLOCATED_H_
