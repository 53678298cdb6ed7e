// `device-manager detect`: the administrator's first look at a node, as a view over the node
// runtime: which plugins were found, which run and why, what each discovered, the Devices spec
// the device manager would publish, and the node profile. Nothing is published.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/loader/dlopen_source.h"
#include "host/node_profile/profile.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::device_manager {

// What opening a node takes, from flags and environment.
struct NodeOptions {
  std::vector<std::string> plugin_dirs;  // --plugin-dir, searched first
  std::string plugin_path_env;           // GPUSTACK_PLUGIN_PATH
  std::filesystem::path default_plugin_dir = loader::DefaultPluginDir();
  pci::ScanOptions pci;
  std::string node_config_path;  // --node-config / GPUSTACK_NODE_CONFIG; empty = none
  std::string enable_env;        // GPUSTACK_PLUGIN_ENABLE
  std::string enable_flag;       // --enable
  // The Node's plugins.gpustack.ai/<name> labels (serve reads them; the CLI commands do not).
  std::vector<std::pair<std::string, std::string>> label_overrides;
  loader::LoaderOptions loader;
  std::string node_name;  // --node-name / NODE_NAME; the host name when empty
  std::filesystem::path state_dir = "/var/lib/gpustack/device-manager";  // --state-dir
  std::chrono::milliseconds hook_deadline{30'000};                       // --hook-timeout
  runtime::SpecOptions spec;
  // Environment lookups for per-plugin variables (GPUSTACK_<NAME>_LIBRARY).
  std::function<std::string(const std::string&)> env;
};

// Opens the node runtime over the installed plugins. Fails (kInvalidArgument, the message naming
// the input) only on bad input: the node config, the enable overrides, an unreadable sysfs tree.
Result<std::unique_ptr<runtime::NodeRuntime>> OpenNode(const NodeOptions& options);

struct DetectOptions {
  NodeOptions node;
  std::string proc_root = "/proc";             // --proc-root: the node profile's /proc
  std::string data_dir = "/var/lib/gpustack";  // --data-dir: whose filesystem is measured
};

struct DetectReport {
  runtime::NodeReport node;
  Result<node_profile::NodeProfile> node_profile = Error{"not read"};
  bool ok() const { return node.ok(); }
};

// OpenNode + one discovery pass + the node profile.
Result<DetectReport> Detect(const DetectOptions& options);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_DETECT_H_
