#include "host/operator/bound_pod.h"

#include "host/common/json_path.h"
#include "host/kube/resource.h"
#include "host/ledger/allocated.h"
#include "host/ledger/chosen.h"
#include "host/operator/fleet.h"

namespace gpustack::op {

BoundPod BoundPodOf(Json pod) {
  BoundPod out;
  out.key = kube::ObjectKey(pod);
  out.uid = StringAt(pod, {"metadata", "uid"});
  out.resource_version = StringAt(pod, {"metadata", "resourceVersion"});
  out.node = StringAt(pod, {"spec", "nodeName"});
  out.phase = StringAt(pod, {"status", "phase"});
  out.cpu_millicores = PodCpuMillicores(pod);
  auto annotation = [&](const char* name) -> std::optional<std::string> {
    // Annotations are strings; anything else is no record.
    const Json& value = JsonAt(pod, {"metadata", "annotations", name});
    return value.is_string() ? std::optional(value.get<std::string>()) : std::nullopt;
  };
  out.chosen = annotation(ledger::kChosenAnnotation);
  out.allocated = annotation(ledger::kAllocatedAnnotation);
  if (out.phase == "Failed") out.failed = std::make_shared<const Json>(std::move(pod));
  return out;
}

}  // namespace gpustack::op
