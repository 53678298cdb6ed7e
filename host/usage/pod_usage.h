// A Pod's own figures (docs/behaviour.md §8.1): its totals from the containers' limits, what it
// uses from the kubelet's stats summary or, failing that, metrics.k8s.io, and the
// `InstanceMetrics` sample that puts them beside its accelerator grants. MiB everywhere, bytes
// rounded up (anything under a MiB is 1). Pure.
#ifndef GPUSTACK_HOST_USAGE_POD_USAGE_H_
#define GPUSTACK_HOST_USAGE_POD_USAGE_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/usage/grants.h"

namespace gpustack::usage {

using Json = nlohmann::json;

// On an Instance's Pod: the Instance's name (the controller's label) and uid (§7's part-of).
inline constexpr const char* kInstanceLabel = "worker.gpustack.ai/instance";
inline constexpr const char* kPartOfLabel = "app.kubernetes.io/part-of";

// Whom a Pod's figures are labelled with: its Instance's name and uid, or its own.
struct Subject {
  std::string name;
  std::string uid;
};
Subject SubjectOf(const Json& pod);

// Sums of the containers' limits (init containers excluded); a limit not given counts 0.
struct PodTotals {
  int64_t cpu_millicores = 0;
  uint64_t memory_mib = 0;
  uint64_t storage_mib = 0;  // ephemeral-storage
};
PodTotals TotalsOf(const Json& pod);
// An Instance without a Pod yet: what its spec.resources asks (cpu, ram, localStorage).
PodTotals TotalsOfInstanceSpec(const Json& instance);

// Measured use; unset = not measured (metrics.k8s.io has no storage).
struct PodUse {
  std::optional<int64_t> cpu_millicores;
  std::optional<uint64_t> memory_mib;   // working set
  std::optional<uint64_t> storage_mib;  // ephemeral: logs, writable layers, disk emptyDirs
};

uint64_t MibRoundedUp(uint64_t bytes);

// The kubelet's /stats/summary: each Pod's use, by uid.
Result<std::map<std::string, PodUse>> UseFromSummary(const Json& summary);
// A metrics.k8s.io PodMetrics: its containers' use summed.
Result<PodUse> UseFromPodMetrics(const Json& pod_metrics);

// A grant as an `accelerators[]` entry: id, mode, memoryTotalMiB and whatever was measured.
Json AcceleratorJson(const GrantSample& grant);

// The sample: totals always, the used figures when measured, `accelerators` when known (nullopt:
// the node daemon could not be read, so the key is left out).
Json SampleJson(const std::string& timestamp, const PodTotals& totals, const PodUse& use,
                const std::optional<Json>& accelerators);

}  // namespace gpustack::usage

#endif  // GPUSTACK_HOST_USAGE_POD_USAGE_H_
