// From what the plugins discovered to the node's `Devices` spec and the labels the device manager
// publishes (reference §2.1, §3.4). Pure.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_DEVICES_SPEC_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_DEVICES_SPEC_H_

#include <gpustack/plugin_types.hpp>

#include <map>
#include <string>
#include <vector>

#include "host/devices/model.h"

namespace gpustack::device_manager {

struct Discovered {
  std::string manufacturer;  // the plugin's key: "nvidia"
  std::vector<sdk::AcceleratorGroup> groups;
};

struct SpecOptions {
  bool group_id_with_memory = false;  // GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY
};

// One Devices group per (manufacturer, product), its memory the card's as the plugin reports it; a
// card offers partition profiles only while its partition mode is enabled. Fails (names the card)
// when two cards share an id, which a ledger could not tell apart.
Result<devices::DevicesSpec> BuildDevicesSpec(const std::vector<Discovered>& discovered,
                                              const SpecOptions& options);

// The NodeFeature labels of §3.4 for a spec (values sanitised to label rules).
std::map<std::string, std::string> DeviceLabels(const devices::DevicesSpec& spec);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_DEVICES_SPEC_H_
