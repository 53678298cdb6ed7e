// What the worker keeps of a bound Pod: the CPU view's and gate 3's inputs, as a record of a few
// hundred bytes. A fleet binds tens of thousands of Pods, and the same Pod as a JSON object of
// map nodes costs ten times more (docs/footprint.md).
#ifndef GPUSTACK_HOST_OPERATOR_BOUND_POD_H_
#define GPUSTACK_HOST_OPERATOR_BOUND_POD_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpustack::op {

struct BoundPod {
  std::string key;  // namespace/name
  std::string uid;
  std::string resource_version;
  std::string node;                      // spec.nodeName
  std::string phase;                     // status.phase
  int64_t cpu_millicores = 0;            // PodCpuMillicores (fleet.h)
  std::optional<std::string> chosen;     // gate 3's chosen cards (ledger/chosen.h)
  std::optional<std::string> allocated;  // the node's allocation record (ledger/allocated.h)
  // A Failed Pod's projection (TrimPodForWorkerCache) as it is: the requeue judges it whole.
  std::shared_ptr<const nlohmann::json> failed;

  bool Finished() const { return phase == "Succeeded" || phase == "Failed"; }
};

// Pure: the record of `pod`, a Pod object or its projection.
BoundPod BoundPodOf(nlohmann::json pod);

// The informer's key and version of a record (host/kube/informer.h).
inline std::string CacheKey(const BoundPod& pod) { return pod.key; }
inline std::string CacheVersion(const BoundPod& pod) { return pod.resource_version; }

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_BOUND_POD_H_
