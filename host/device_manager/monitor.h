// `device-manager monitor`: per-accelerator samples from every running plugin, one round at a
// time, as a view over the node runtime. Figures a plugin could not measure (or reported beyond
// what any card can have) are absent from the output, never zero.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/runtime/node_runtime.h"

namespace gpustack::device_manager {

struct MonitorRound {
  std::string time;  // RFC 3339, UTC
  runtime::SampleRound samples;
};

// One round over every plugin that has published cards (after a discovery pass).
MonitorRound SampleRound(runtime::NodeRuntime& node, bool include_processes);

nlohmann::json ToJson(const MonitorRound& round);
std::string ToText(const MonitorRound& round);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_
