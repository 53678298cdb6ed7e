// `device-manager detect`: scan PCI, decide which plugins run on this node, load them, and ask
// each what it sees. Nothing is published; this is the administrator's first look at a node.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/device_manager/devices_spec.h"
#include "host/loader/loader.h"
#include "host/loader/plugin.h"
#include "host/node_profile/profile.h"
#include "host/pci/pci_inventory.h"

namespace gpustack::device_manager {

struct DetectOptions {
  std::vector<std::string> plugin_dirs;  // --plugin-dir, searched first
  std::string plugin_path_env;           // GPUSTACK_PLUGIN_PATH
  std::filesystem::path default_plugin_dir = loader::DefaultPluginDir();
  pci::ScanOptions pci;
  std::string node_config_path;  // --node-config / GPUSTACK_NODE_CONFIG; empty = none
  std::string enable_env;        // GPUSTACK_PLUGIN_ENABLE
  std::string enable_flag;       // --enable
  loader::LoaderOptions loader;
  std::string proc_root = "/proc";             // --proc-root: the node profile's /proc
  std::string data_dir = "/var/lib/gpustack";  // --data-dir: whose filesystem is measured
  SpecOptions spec;
  std::string node_name;  // --node-name / NODE_NAME; the host name when empty
};

struct PluginReport {
  std::string manifest_path;
  std::string name;  // from the manifest; empty when the manifest itself is bad
  std::string library_path;
  bool enabled = false;
  std::string decision;    // why it is enabled or not
  std::string load_error;  // set when an enabled plugin could not be loaded or initialized
  std::optional<loader::PluginIdentity> identity;
  loader::AbiVersion negotiated;
  // Discovery: status name ("OK", "UNIMPLEMENTED", ...), message, and what it found.
  std::string discovery_status;
  std::string discovery_message;
  std::vector<sdk::AcceleratorGroup> groups;
};

struct DetectReport {
  std::string node_name;
  std::vector<std::string> plugin_dirs;
  std::vector<std::string> problems;  // directories missing or refused
  std::vector<pci::PciDevice> pci_devices;
  std::vector<PluginReport> plugins;
  Result<node_profile::NodeProfile> node_profile = Error{"not read"};
  // The node's Devices spec from every plugin that discovered; an error when the plugins'
  // results cannot form one (duplicate card ids).
  Result<devices::DevicesSpec> spec = devices::DevicesSpec{};

  // False when an enabled plugin failed to load, initialize or discover, or no spec could be
  // formed.
  bool ok() const;
};

// The enabled plugins of this node, loaded and initialized (they shut down when the session is
// destroyed), with the report of every decision so far.
struct NodeSession {
  DetectReport report;
  std::map<std::string, std::unique_ptr<loader::Plugin>> running;  // by plugin name
};

// Fails only when the node's inputs are unusable (PCI scan, node config, enable overrides);
// every per-plugin failure is recorded in the report instead.
Result<NodeSession> OpenNode(const DetectOptions& options);
// Runs discovery on every running plugin and builds the node's Devices spec.
void DiscoverAll(NodeSession& session, const DetectOptions& options);
// OpenNode + DiscoverAll + the node profile.
Result<DetectReport> Detect(const DetectOptions& options);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_
