#include "host/runtime/types.h"

namespace gpustack::runtime {

static_assert(static_cast<int>(ledger::Mode::kExclusive) == GPUSTACK_GRANT_EXCLUSIVE &&
              static_cast<int>(ledger::Mode::kShared) == GPUSTACK_GRANT_SHARED &&
              static_cast<int>(ledger::Mode::kSliced) == GPUSTACK_GRANT_SLICED &&
              static_cast<int>(ledger::Mode::kPartitioned) == GPUSTACK_GRANT_PARTITIONED);

std::string CapabilitiesText(gpustack_capabilities capabilities) {
  std::string out;
  auto add = [&](gpustack_capabilities bit, const char* name) {
    if ((capabilities & bit) != 0) out += (out.empty() ? "" : ",") + std::string(name);
  };
  add(GPUSTACK_CAP_SHARED, "shared");
  add(GPUSTACK_CAP_LOGICAL_SLICING, "sliced");
  add(GPUSTACK_CAP_PARTITIONING, "partitioned");
  add(GPUSTACK_CAP_PROCESS_METRICS, "process-metrics");
  add(GPUSTACK_CAP_HEALTH_EVENTS, "health-events");
  add(GPUSTACK_CAP_SLICE_OBJECTS, "slice-objects");
  return out.empty() ? "-" : out;
}

std::string_view HealthName(gpustack_health health) {
  switch (health) {
    case GPUSTACK_HEALTH_HEALTHY:
      return "Healthy";
    case GPUSTACK_HEALTH_UNHEALTHY:
      return "Unhealthy";
    default:
      return "Unknown";
  }
}

size_t CardCount(const std::vector<sdk::AcceleratorGroup>& groups) {
  size_t cards = 0;
  for (const sdk::AcceleratorGroup& g : groups) cards += g.accelerators.size();
  return cards;
}

gpustack_grant_mode ToGrantMode(ledger::Mode mode) {
  return mode == ledger::Mode::kNone ? GPUSTACK_GRANT_EXCLUSIVE
                                     : static_cast<gpustack_grant_mode>(mode);
}

}  // namespace gpustack::runtime
