// `device-manager monitor`: per-accelerator samples from every running plugin, one round at a
// time. Figures a plugin could not measure are absent from the output, never zero.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/device_manager/detect.h"

namespace gpustack::device_manager {

struct CardSample {
  std::string manufacturer;
  std::string product;
  uint32_t index = 0;  // the plugin's enumeration index
  sdk::DeviceSample sample;
  std::vector<sdk::ProcessSample> processes;
};

struct MonitorRound {
  std::string time;                 // RFC 3339, UTC
  std::vector<CardSample> cards;    // in plugin, then card order
  std::vector<std::string> errors;  // "<plugin>: <why>" for a plugin whose sampling failed
};

// One round over every plugin that discovered cards (DiscoverAll must have run).
MonitorRound SampleRound(NodeSession& session, bool include_processes);

nlohmann::json ToJson(const MonitorRound& round);
std::string ToText(const MonitorRound& round);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_MONITOR_H_
