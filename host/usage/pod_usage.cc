#include "host/usage/pod_usage.h"

#include "host/common/json_path.h"
#include "host/kube/quantity.h"

namespace gpustack::usage {
namespace {

constexpr uint64_t kMib = 1024 * 1024;

// A quantity in thousandths (millicores, milli-bytes): 0 when absent or unreadable.
int64_t MilliLimit(const Json& limits, const char* key) {
  if (!limits.is_object() || !limits.contains(key)) return 0;
  return kube::MilliOf(limits[key]).value_or(0);
}

uint64_t MibOfMilliBytes(int64_t milli_bytes) {
  return MibRoundedUp(static_cast<uint64_t>((milli_bytes + 999) / 1000));
}

std::optional<uint64_t> UnsignedAt(const Json& object, const char* section, const char* key) {
  const Json* s = object.contains(section) ? &object[section] : nullptr;
  if (s == nullptr || !s->is_object() || !s->contains(key) || !(*s)[key].is_number_unsigned())
    return std::nullopt;
  return (*s)[key].get<uint64_t>();
}

}  // namespace

Subject SubjectOf(const Json& pod) {
  const std::string instance = StringAt(pod, {"metadata", "labels", kInstanceLabel});
  const std::string part_of = StringAt(pod, {"metadata", "labels", kPartOfLabel});
  if (!instance.empty() && !part_of.empty()) return {instance, part_of};
  return {StringAt(pod, {"metadata", "name"}), StringAt(pod, {"metadata", "uid"})};
}

uint64_t MibRoundedUp(uint64_t bytes) { return bytes == 0 ? 0 : (bytes + kMib - 1) / kMib; }

PodTotals TotalsOf(const Json& pod) {
  PodTotals totals;
  const Json* containers = nullptr;
  if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers"))
    containers = &pod["spec"]["containers"];
  if (containers == nullptr || !containers->is_array()) return totals;
  int64_t memory = 0, storage = 0;
  for (const Json& c : *containers) {
    if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
    const Json limits = c["resources"].value("limits", Json::object());
    totals.cpu_millicores += MilliLimit(limits, "cpu");
    memory += MilliLimit(limits, "memory");
    storage += MilliLimit(limits, "ephemeral-storage");
  }
  totals.memory_mib = MibOfMilliBytes(memory);
  totals.storage_mib = MibOfMilliBytes(storage);
  return totals;
}

PodTotals TotalsOfInstanceSpec(const Json& instance) {
  const Json* resources = ObjectAt(instance, {"spec", "resources"});
  if (resources == nullptr) return {};
  return {MilliLimit(*resources, "cpu"), MibOfMilliBytes(MilliLimit(*resources, "ram")),
          MibOfMilliBytes(MilliLimit(*resources, "localStorage"))};
}

Result<std::map<std::string, PodUse>> UseFromSummary(const Json& summary) {
  if (!summary.is_object() || !summary.contains("pods") || !summary["pods"].is_array())
    return Error{"the kubelet's stats summary has no pods list", Code::kDataLoss};
  std::map<std::string, PodUse> out;
  for (const Json& p : summary["pods"]) {
    if (!p.is_object() || !p.contains("podRef") || !p["podRef"].is_object()) continue;
    const std::string uid = StringAt(p, {"podRef", "uid"});
    if (uid.empty()) continue;
    PodUse use;
    if (auto nano = UnsignedAt(p, "cpu", "usageNanoCores"))
      use.cpu_millicores = static_cast<int64_t>(*nano / 1'000'000);
    if (auto bytes = UnsignedAt(p, "memory", "workingSetBytes"))
      use.memory_mib = MibRoundedUp(*bytes);
    if (auto bytes = UnsignedAt(p, "ephemeral-storage", "usedBytes"))
      use.storage_mib = MibRoundedUp(*bytes);
    out[uid] = use;
  }
  return out;
}

Result<PodUse> UseFromPodMetrics(const Json& pod_metrics) {
  if (!pod_metrics.is_object() || !pod_metrics.contains("containers") ||
      !pod_metrics["containers"].is_array())
    return Error{"the PodMetrics has no containers list", Code::kDataLoss};
  int64_t cpu = 0, memory = 0;
  for (const Json& c : pod_metrics["containers"]) {
    const Json usage = c.is_object() ? c.value("usage", Json::object()) : Json::object();
    auto c_cpu = usage.contains("cpu") ? kube::MilliOf(usage["cpu"]) : std::nullopt;
    auto c_memory = usage.contains("memory") ? kube::MilliOf(usage["memory"]) : std::nullopt;
    if (!c_cpu || !c_memory)
      return Error{"a container's usage in the PodMetrics is not a quantity", Code::kDataLoss};
    cpu += *c_cpu;
    memory += *c_memory;
  }
  return PodUse{cpu, MibOfMilliBytes(memory), std::nullopt};
}

Json AcceleratorJson(const GrantSample& grant) {
  Json out = {{"id", grant.id},
              {"mode", ledger::ModeName(grant.hold.mode)},
              {"memoryTotalMiB", grant.hold.memory_total_mib}};
  auto put = [&](const char* key, const std::optional<double>& value) {
    if (value) out[key] = *value;
  };
  put("memoryUsedMiB", grant.memory_used_mib);
  put("memoryUtilizationPercent", grant.memory_utilization_percent);
  put("coresUtilizationPercent", grant.cores_utilization_percent);
  put("temperatureCelsius", grant.temperature_celsius);
  put("powerUsageWatts", grant.power_watts);
  if (grant.unhealthy) out["unhealthy"] = *grant.unhealthy;
  return out;
}

Json SampleJson(const std::string& timestamp, const PodTotals& totals, const PodUse& use,
                const std::optional<Json>& accelerators) {
  Json out = {{"timestamp", timestamp},
              {"cpuTotalMilliCores", totals.cpu_millicores},
              {"memoryTotalMiB", totals.memory_mib},
              {"storageTotalMiB", totals.storage_mib}};
  if (use.cpu_millicores) out["cpuUsedMilliCores"] = *use.cpu_millicores;
  if (use.memory_mib) out["memoryUsedMiB"] = *use.memory_mib;
  if (use.storage_mib) out["storageUsedMiB"] = *use.storage_mib;
  if (accelerators) out["accelerators"] = *accelerators;
  return out;
}

}  // namespace gpustack::usage
