// From what the plugins discovered to the node's `Devices` spec and the labels the device manager
// publishes (docs/behaviour.md §2.1, §3.4). Pure.
#ifndef GPUSTACK_HOST_RUNTIME_DEVICES_SPEC_H_
#define GPUSTACK_HOST_RUNTIME_DEVICES_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "host/ledger/model.h"
#include "host/runtime/types.h"

namespace gpustack::runtime {

struct Discovered {
  std::string manufacturer;  // the plugin's key: "nvidia"
  std::vector<sdk::AcceleratorGroup> groups;
};

struct SpecOptions {
  bool group_id_with_memory = false;  // GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY
};

// One Devices group per (manufacturer, product), its memory the card's as the plugin reports it; a
// card offers partition profiles only while its partition mode is enabled. Fails, naming both
// plugins and the card, when two plugins report the same card id or PCI function: a ledger could
// not tell them apart, and one card must never be allocated twice.
Result<ledger::DevicesSpec> BuildDevicesSpec(const std::vector<Discovered>& discovered,
                                             const SpecOptions& options);

// The NodeFeature labels of docs/behaviour.md §3.4 for a spec (values sanitised to label rules).
std::map<std::string, std::string> DeviceLabels(const ledger::DevicesSpec& spec);

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_DEVICES_SPEC_H_
