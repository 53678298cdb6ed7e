// Which plugins run on this node, and with what settings.
//
// Each plugin is `auto` (enabled when the host's PCI inventory holds a device of one of its PCI
// vendor IDs), `on` or `off`. Settings come from, lowest precedence first: the default (auto), the
// node config file, the GPUSTACK_PLUGIN_ENABLE environment variable, the --enable flag. The
// node config file (JSON, usually from a ConfigMap) also carries each plugin's own settings, which
// the plugin reads through config_get:
//   {"version": "v1",
//    "default_enable": "auto",
//    "plugins": {"nvidia": {"enable": "on",
//                           "config": {"library_path": "/opt/x/libnvidia-ml.so.1"}},
//                "amd": {"enable": "off"}},
//    "nodes": {"gpu-node-7": {"nvidia": "off", "*": "auto"}}}
// `nodes` holds per-node enable overrides, applied by the daemon of the node named
// (ApplyNodeSection) above the plugin entries; one ConfigMap serves the whole cluster. A node label
// plugins.gpustack.ai/<name>: on|off|auto (EnableOverridesFromLabels) comes above that, the
// environment and --enable above all.
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
#include <optional>
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
  // nodes.<node>: "<plugin>=<setting>,..." as ApplyEnableOverrides reads it, already validated.
  std::map<std::string, std::string> per_node;
  std::string source;  // where the file was read, for the per-node entries' reasons
};

// A node config is a few KiB; a larger file is refused rather than read.
constexpr size_t kMaxNodeConfigBytes = 1 << 20;

// The schema version the file declares ("version"); a file without one is read as v1, the first.
inline constexpr const char* kNodeConfigVersion = "v1";

// Parses the node config file's text. `source` names it in reasons and errors.
Result<NodeConfig> ParseNodeConfig(std::string_view json_text, const std::string& source);

// Reads and parses the node config at `path`: it must pass the plugin trust rules (owned by root
// or `trusted_uid`, not writable by others, nor any directory above it), since it decides what
// code runs and which libraries load. Errors are kInvalidArgument (or kNotFound).
Result<NodeConfig> LoadNodeConfig(const std::filesystem::path& path, uid_t trusted_uid);

// Applies "nvidia=on,amd=off,*=auto" on top of `config` ("*" sets the default). Empty is a no-op.
Status ApplyEnableOverrides(NodeConfig& config, std::string_view overrides,
                            const std::string& source);

// Applies the config's own `nodes.<node_name>` section, if any, on top of its plugin entries.
Status ApplyNodeSection(NodeConfig& config, const std::string& node_name);

// The label prefix that turns a plugin on or off on one node: plugins.gpustack.ai/nvidia=off.
inline constexpr char kPluginLabelPrefix[] = "plugins.gpustack.ai/";

struct LabelOverrides {
  // (source "node label plugins.gpustack.ai/nvidia", "nvidia=off"), for ApplyEnableOverrides.
  std::vector<std::pair<std::string, std::string>> overrides;
  std::vector<std::string> problems;  // labels that were ignored, and why
};
// The enable overrides a Node's labels carry (`labels` is metadata.labels: name -> value). A
// label with a bad plugin name or value is reported and ignored, never fatal: a typo on one
// node must not stop its daemon.
LabelOverrides EnableOverridesFromLabels(const std::map<std::string, std::string>& labels);

struct EnableDecision {
  bool enabled = false;
  std::string reason;
};

EnableDecision Decide(const NodeConfig& config, const std::string& plugin_name,
                      const std::vector<uint16_t>& pci_vendor_ids,
                      const std::vector<pci::PciDevice>& inventory);

// The name of the variable that overrides a plugin's library: GPUSTACK_NVIDIA_LIBRARY.
std::string LibraryVariable(const std::string& plugin_name);

// The deploy-time overrides of a manufacturer's identity (docs/behaviour.md §10.2), read through
// `env`: GPUSTACK_<MFR>_ACCELERATABLE_RESOURCE_NAME, _PARTITION_KIND, _ACCELERATABLE_RUNTIME_NAME
// and _PCI_VENDOR_ID ("10de", "0x10de" or the upstream operator's "<class>_<vendor>",
// comma-separated), where <MFR> is the manufacturer key upper-cased with '-' as '_'. The chart fans
// global.manufacturers.<mfr>.* out as these to the worker and the device manager, so a renamed
// resource or a rebadged card needs no rebuild. A malformed value is an error naming the variable.
Status ApplyIdentityOverrides(PluginIdentity& identity,
                              const std::function<std::string(const std::string&)>& env);
// The PCI vendor ids GPUSTACK_<MFR>_PCI_VENDOR_ID names for `manufacturer` (nullopt: not set).
Result<std::optional<std::vector<uint16_t>>> VendorIdsOverride(
    const std::string& manufacturer, const std::function<std::string(const std::string&)>& env);

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
