#include "host/runtime/types.h"

namespace gpustack::runtime {

std::string_view HookName(Hook hook) {
  switch (hook) {
    case Hook::kInit:
      return "init";
    case Hook::kShutdown:
      return "shutdown";
    case Hook::kDiscover:
      return "discover";
    case Hook::kGrant:
      return "grant";
    case Hook::kListPartitions:
      return "list_partitions";
    case Hook::kCreatePartition:
      return "create_partition";
    case Hook::kDestroyPartition:
      return "destroy_partition";
    case Hook::kSampleMetrics:
      return "sample_metrics";
    case Hook::kPollHealthEvents:
      return "poll_health_events";
    case Hook::kListDeviceNodes:
      return "list_device_nodes";
    case Hook::kPrepareSlice:
      return "prepare_slice";
    case Hook::kUnprepareSlice:
      return "unprepare_slice";
    case Hook::kLoad:
      return "load";
  }
  return "unknown";
}

std::string ToString(const Capabilities& c) {
  std::string out;
  auto add = [&](bool set, const char* name) {
    if (set) out += (out.empty() ? "" : ",") + std::string(name);
  };
  add(c.shared, "shared");
  add(c.sliced, "sliced");
  add(c.partitioned, "partitioned");
  add(c.process_metrics, "process-metrics");
  add(c.health_events, "health-events");
  add(c.slice_objects, "slice-objects");
  return out.empty() ? "-" : out;
}

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kHealthy:
      return "Healthy";
    case Health::kUnhealthy:
      return "Unhealthy";
    case Health::kUnknown:
      break;
  }
  return "Unknown";
}

size_t CardCount(const std::vector<CardGroup>& groups) {
  size_t cards = 0;
  for (const CardGroup& g : groups) cards += g.cards.size();
  return cards;
}

}  // namespace gpustack::runtime
