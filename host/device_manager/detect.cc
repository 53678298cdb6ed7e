#include "host/device_manager/detect.h"

#include <unistd.h>

#include <algorithm>

namespace gpustack::device_manager {

Result<std::unique_ptr<runtime::NodeRuntime>> OpenNode(const NodeOptions& options) {
  runtime::NodeConfig config;
  config.default_setting.source = "default";
  if (!options.node_config_path.empty()) {
    auto loaded = runtime::LoadNodeConfig(options.node_config_path, options.loader.trusted_uid);
    if (!loaded) return std::move(loaded).failure();
    config = std::move(*loaded);
  }
  std::string node_name = options.node_name;
  if (node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) node_name = host;
  }
  if (auto s = runtime::ApplyNodeSection(config, node_name); !s) return std::move(s).failure();
  for (const auto& [source, overrides] : options.label_overrides) {
    if (auto s = runtime::ApplyEnableOverrides(config, overrides, source); !s) {
      return std::move(s).failure();
    }
  }
  if (auto s = runtime::ApplyEnableOverrides(config, options.enable_env, "GPUSTACK_PLUGIN_ENABLE");
      !s) {
    return std::move(s).failure();
  }
  if (auto s = runtime::ApplyEnableOverrides(config, options.enable_flag, "--enable"); !s) {
    return std::move(s).failure();
  }

  const auto dirs = loader::PluginSearchPath(options.plugin_dirs, options.plugin_path_env,
                                             options.default_plugin_dir);
  // Directories someone named must exist; the install default may not (a build tree).
  std::vector<std::filesystem::path> required;
  for (const auto& dir : dirs) {
    if (dir != options.default_plugin_dir.lexically_normal()) required.push_back(dir);
  }
  runtime::RuntimeOptions runtime_options;
  runtime_options.node_name = options.node_name;
  runtime_options.pci = options.pci;
  runtime_options.config = std::move(config);
  runtime_options.spec = options.spec;
  runtime_options.state_dir = options.state_dir;
  runtime_options.hook_deadline = options.hook_deadline;
  runtime_options.trusted_uid = options.loader.trusted_uid;
  runtime_options.env = options.env;
  auto runtime = runtime::NodeRuntime::Open(
      std::move(runtime_options),
      std::make_unique<loader::DlopenPluginSource>(dirs, required, options.loader));
  if (!runtime) {
    Error error = std::move(runtime).failure();
    error.code = Code::kInvalidArgument;  // the node itself could not be read: bad input
    return error;
  }
  return std::move(*runtime);
}

Result<DetectReport> Detect(const DetectOptions& options) {
  auto runtime = OpenNode(options.node);
  if (!runtime) return std::move(runtime).failure();
  (*runtime)->Discover();
  DetectReport report;
  report.node = (*runtime)->Report();
  report.node_profile = node_profile::ReadNodeProfile(
      {options.proc_root, options.node.pci.sysfs_root, options.data_dir});
  return report;
}

}  // namespace gpustack::device_manager
