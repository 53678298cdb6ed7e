// What the usage figures read from outside the process: a /proc/<pid>/cgroup text, the kubelet's
// stats summary, a metrics.k8s.io PodMetrics and a Pod's limits (docs/decisions.md D56). Any
// input: an answer or an error, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "host/usage/cgroup.h"
#include "host/usage/pod_usage.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpustack::usage;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ContainerOfCgroup(text);
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  (void)UseFromSummary(json);
  (void)UseFromPodMetrics(json);
  (void)TotalsOf(json);
  (void)SubjectOf(json);
  (void)SliceBudgetOfLimits(json, 16384);
  if (json.is_object() && json.contains("limits")) (void)SliceBudgetOfLimits(json["limits"], 81920);
  return 0;
}
