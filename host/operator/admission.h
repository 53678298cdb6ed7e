// The worker's admission webhooks (docs/behaviour.md §4, §5.2 gate 1 and the Workload fit-pin,
// §5.4): AdmissionReview in, a verdict and a JSON patch out. Pure: what a webhook needs of the
// cluster (the InstanceType fronting a queue, the manufacturer table, the settings) is passed in,
// so the rules are unit-tested without a server and the server only moves bytes.
#ifndef GPUSTACK_HOST_OPERATOR_ADMISSION_H_
#define GPUSTACK_HOST_OPERATOR_ADMISSION_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/json_path.h"
#include "host/common/result.h"
#include "host/ledger/request.h"
#include "host/operator/fleet.h"
#include "host/operator/settings.h"

namespace gpustack::op {

// The webhook paths the worker serves.
inline constexpr const char* kMutatePodPath = "/mutate-pod";
inline constexpr const char* kValidatePodPath = "/validate-pod";
inline constexpr const char* kMutateWorkloadPath = "/mutate-workload";
inline constexpr const char* kMutateInstanceTypePath = "/mutate-instancetype";
inline constexpr const char* kValidateInstanceTypePath = "/validate-instancetype";
inline constexpr const char* kMutateInstancePath = "/mutate-instance";
inline constexpr const char* kValidateInstancePath = "/validate-instance";

// The Kueue label that names a Pod's LocalQueue.
inline constexpr const char* kQueueNameLabel = "kueue.x-k8s.io/queue-name";
// Fit labels the worker keeps on Nodes (docs/behaviour.md §3.7), which the affinities below select
// on.
inline constexpr const char* kSlicedFitPrefix = "sliced-max-free-units.fit.gpustack.ai/";
inline constexpr const char* kSharedFitPrefix = "shared-max-free-slots.fit.gpustack.ai/";

// admission.k8s.io/v1 AdmissionReview.request, the parts the webhooks read.
struct AdmissionRequest {
  std::string uid;
  std::string group, version, kind;  // of the object
  std::string resource, sub_resource;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string name, ns;
  Json object, old_object;  // null when absent
  bool dry_run = false;
};
// Decodes an AdmissionReview body. Refuses (with the reason) anything that is not a v1 review
// with a request uid, so a malformed or hostile body never reaches a rule.
Result<AdmissionRequest> DecodeReview(std::string_view body);

struct Verdict {
  bool allowed = true;
  int code = 200;       // on a denial: 400 for bad input, 403 for a rule, 500 for our failure
  std::string message;  // why it was denied
  Json patch = Json::array();  // RFC 6902 operations, applied by the apiserver
  std::vector<std::string> warnings;
};
Verdict Deny(int code, std::string message);

// The AdmissionReview answer for `uid` (patch base64-encoded as the API wants).
std::string EncodeReview(const std::string& uid, const Verdict& verdict);

// What the webhooks read of the cluster (the worker's caches).
struct AdmissionView {
  ManufacturerTable manufacturers;
  Settings settings;
  // The InstanceType whose entrance is `queue` (label schedule.gpustack.ai/queue-entrance), or
  // null when no InstanceType fronts it.
  std::function<std::shared_ptr<const Json>(const std::string& queue)> instance_type_by_entrance;
  // The InstanceType named `name`, or null.
  std::function<std::shared_ptr<const Json>(const std::string& name)> instance_type_by_name;
  // Whether a pool of this accelerator group (aKey) exists; unset: not asked.
  std::function<bool(const std::string& akey)> accelerator_group_known;
  // Gate 3 (the gpustack-node-devices check) pins every admitted Pod to the node it counted it
  // on. Then a Pod carries no fit affinity: the fit labels change as cards fill, and the kubelet
  // checks a Pod's required affinity again when it restarts, which would turn running Pods away
  // (docs/decisions.md D20). Without gate 3 the affinity is the only guard, and is added.
  bool nodes_pinned = false;
};

// The manufacturer whose cards an accelerated InstanceType pools ("" for a CPU-only one).
std::string ManufacturerOf(const Json& instance_type, const ManufacturerTable& table);

// An Instance's spec.resources with the defaults filled in (docs/behaviour.md §4.4, §7): an
// accelerated type's Instance asks for 1 card when it names none, a slice's compute defaults to
// 100 %, and cpu/ram default to the type's unit scaled by what the Instance takes of a card.
Json DefaultedInstanceResources(const Json& resources, const Json& type);

// What folding a Pod's request needs, read from the InstanceType's status.detail.
ledger::FoldContext FoldContextOf(const Json* instance_type);

// Gate 1 (docs/behaviour.md §4): the seven rules on a Pod that names a queue, and the patch that
// writes the derived `.units` and default cores percentage into every requesting container and,
// unless gate 3 pins the node (AdmissionView::nodes_pinned), ANDs the shared (N >= 2) and sliced
// fit affinities into the Pod's required node affinity.
Verdict MutatePod(const AdmissionRequest& request, const AdmissionView& view);
// The same rules on the final Pod, and the derived keys must be exactly what MutatePod wrote
// (another mutating webhook, or a client that raced, may not change them).
Verdict ValidatePod(const AdmissionRequest& request, const AdmissionView& view);

// The Workload fit-pin (docs/behaviour.md §5.2 gate 3): ANDs the fit affinities into each PodSet of
// a Workload whose queue an accelerated InstanceType fronts; only while it holds no quota
// reservation.
Verdict MutateWorkload(const AdmissionRequest& request, const AdmissionView& view);

// InstanceType defaulting and validation (docs/behaviour.md §5.4).
Verdict MutateInstanceType(const AdmissionRequest& request, const AdmissionView& view);
Verdict ValidateInstanceType(const AdmissionRequest& request, const AdmissionView& view);

// Instance defaulting (docs/behaviour.md §4.4, §7): an accelerated type's Instance asks for 1 card
// when it names none, a slice's compute defaults to 100 %, and cpu/ram default to the type's unit
// scaled by what the Instance takes of a card (whole cards x N, a slice by its memory share, a
// partition by its profile's memory share).
Verdict MutateInstance(const AdmissionRequest& request, const AdmissionView& view);
// Instance validation (docs/behaviour.md §4.4, §7): the keys the resources map to must make sense
// on the type's pool (refused at admission, never left Pending), what a stopped-only change is, and
// the settings that allow privileged containers and host paths.
Verdict ValidateInstance(const AdmissionRequest& request, const AdmissionView& view);

// The node affinity requirement `key Gt value` ANDed into every required term of `pod_spec`
// (a new term when it has none); false when an identical requirement is already there.
bool AddRequiredGt(Json& pod_spec, const std::string& key, int64_t value);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_ADMISSION_H_
