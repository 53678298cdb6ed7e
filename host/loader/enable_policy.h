// Which plugins run on this node, and why. Pure logic: no files, no environment.
//
// Each plugin is `auto` (enabled when the host's PCI inventory holds a device of one of its PCI
// vendor IDs), `on` or `off`. Settings come from, lowest precedence first: the default (auto), the
// node config file, the GPUSTACK_PLUGIN_ENABLE environment variable, the --enable flag. The
// node config file (JSON, usually from a ConfigMap) also carries each plugin's own settings:
//   {"default_enable": "auto",
//    "plugins": {"nvidia": {"enable": "on", "config": {"library_path":
//    "/opt/x/libnvidia-ml.so.1"}},
//                "amd": {"enable": "off"}}}
#ifndef GPUSTACK_HOST_LOADER_ENABLE_POLICY_H_
#define GPUSTACK_HOST_LOADER_ENABLE_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/pci/pci_inventory.h"

namespace gpustack::loader {

enum class EnableSetting { kAuto, kOn, kOff };

struct SourcedSetting {
  EnableSetting setting = EnableSetting::kAuto;
  std::string source;  // "default", "node config /etc/gpustack/node.json", "--enable", ...
};

struct NodeConfig {
  SourcedSetting default_setting;  // applies to plugins not named
  std::map<std::string, SourcedSetting> per_plugin;
  std::map<std::string, std::map<std::string, std::string>> plugin_settings;  // config_get values
};

// Parses the node config file's text. `source` names it in reasons and errors.
Result<NodeConfig> ParseNodeConfig(std::string_view json_text, const std::string& source);

// Applies "nvidia=on,amd=off,*=auto" on top of `config` ("*" sets the default). Empty is a no-op.
Status ApplyEnableOverrides(NodeConfig& config, std::string_view overrides,
                            const std::string& source);

struct EnableDecision {
  bool enabled = false;
  std::string reason;
};

EnableDecision Decide(const NodeConfig& config, const std::string& plugin_name,
                      const std::vector<uint16_t>& pci_vendor_ids,
                      const std::vector<pci::PciDevice>& inventory);

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_ENABLE_POLICY_H_
