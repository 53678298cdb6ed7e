// Which plugins run on this node, and with what settings.
//
// Each plugin is `auto` (enabled when the host's PCI inventory holds a device of one of its PCI
// vendor IDs), `on` or `off`. Settings come from, lowest precedence first: the default (auto), the
// node config file, the GPUSTACK_PLUGIN_ENABLE environment variable, the --enable flag. The
// node config file (JSON, usually from a ConfigMap) also carries each plugin's own settings, which
// the plugin reads through config_get:
//   {"default_enable": "auto",
//    "plugins": {"nvidia": {"enable": "on",
//                           "config": {"library_path": "/opt/x/libnvidia-ml.so.1"}},
//                "amd": {"enable": "off"}}}
// `library_path` is the one setting the host itself fills for every plugin, from the environment
// variable GPUSTACK_<NAME>_LIBRARY when the node config does not set it, and it passes the same
// trust rules as a plugin's own file.
#ifndef GPUSTACK_HOST_RUNTIME_NODE_CONFIG_H_
#define GPUSTACK_HOST_RUNTIME_NODE_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/pci/pci_inventory.h"
#include "host/runtime/types.h"

namespace gpustack::runtime {

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

// A node config is a few KiB; a larger file is refused rather than read.
constexpr size_t kMaxNodeConfigBytes = 1 << 20;

// Parses the node config file's text. `source` names it in reasons and errors.
Result<NodeConfig> ParseNodeConfig(std::string_view json_text, const std::string& source);

// Reads and parses the node config at `path`: it must pass the plugin trust rules (owned by root
// or `trusted_uid`, not writable by others, nor any directory above it), since it decides what
// code runs and which libraries load. Errors are kInvalidArgument (or kNotFound).
Result<NodeConfig> LoadNodeConfig(const std::filesystem::path& path, uid_t trusted_uid);

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

// The name of the variable that overrides a plugin's library: GPUSTACK_NVIDIA_LIBRARY.
std::string LibraryVariable(const std::string& plugin_name);

// The one setting the host applies for every plugin (and the Error::reason of its refusals).
inline constexpr char kLibraryPathSetting[] = "library_path";

struct ResolvedSettings {
  PluginSettings settings;
  std::string library_source;  // where library_path came from ("node config ...", the variable)
};
// A plugin's settings: its node config entries, plus library_path from LibraryVariable() (read
// through `env`) when the node config leaves it unset.
ResolvedSettings SettingsFor(const NodeConfig& config, const std::string& plugin_name,
                             const std::function<std::string(const std::string&)>& env);

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_NODE_CONFIG_H_
