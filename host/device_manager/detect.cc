#include "host/device_manager/detect.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "host/common/logging.h"
#include "host/loader/enable_policy.h"

namespace gpustack::device_manager {
namespace {

Result<loader::NodeConfig> LoadNodeConfig(const DetectOptions& options) {
  loader::NodeConfig config;
  config.default_setting.source = "default";
  if (!options.node_config_path.empty()) {
    std::ifstream file(options.node_config_path);
    if (!file) return Error{"node config " + options.node_config_path + " cannot be read"};
    std::ostringstream text;
    text << file.rdbuf();
    auto parsed = loader::ParseNodeConfig(text.str(), "node config " + options.node_config_path);
    if (!parsed) return parsed;
    config = std::move(parsed).value();
  }
  if (auto s = loader::ApplyEnableOverrides(config, options.enable_env, "GPUSTACK_PLUGIN_ENABLE");
      !s) {
    return Error{s.error()};
  }
  if (auto s = loader::ApplyEnableOverrides(config, options.enable_flag, "--enable"); !s) {
    return Error{s.error()};
  }
  return config;
}

// Loads and initializes one enabled plugin; nullptr (and the reason in the report) on failure.
std::unique_ptr<loader::Plugin> StartPlugin(const loader::Manifest& manifest,
                                            const loader::NodeConfig& config,
                                            const DetectOptions& options,
                                            const std::vector<pci::PciDevice>& inventory,
                                            PluginReport& report) {
  auto log = Logger("detect");
  auto loaded = loader::Load(manifest, options.loader);
  if (!loaded) {
    report.load_error = loaded.error();
    log->error("plugin {} skipped: {}", manifest.name, loaded.error());
    return nullptr;
  }
  std::unique_ptr<loader::Plugin> plugin = std::move(loaded).value();
  report.identity = plugin->identity();
  report.negotiated = plugin->negotiated();

  std::map<std::string, std::string> settings;
  if (auto it = config.plugin_settings.find(manifest.name); it != config.plugin_settings.end()) {
    settings = it->second;
  }
  if (auto init = plugin->Init(std::move(settings), inventory); !init) {
    report.load_error = manifest.library_path.string() + ": " + init.error();
    log->error("plugin {} skipped: {}", manifest.name, init.error());
    return nullptr;
  }
  return plugin;
}

void DiscoverInto(loader::Plugin& plugin, PluginReport& report) {
  auto groups = plugin.Discover();
  if (groups) {
    report.discovery_status = "OK";
    report.groups = std::move(groups).value();
  } else {
    const int32_t code = groups.failure().code;
    report.discovery_status = code >= 0 ? sdk::StatusName(code) : "INVALID_OUTPUT";
    report.discovery_message = groups.error();
  }
}

}  // namespace

bool DetectReport::ok() const {
  for (const PluginReport& p : plugins) {
    if (!p.enabled) continue;
    if (!p.load_error.empty()) return false;
    if (p.discovery_status != "OK" && p.discovery_status != "UNIMPLEMENTED") return false;
  }
  return spec.ok();
}

Result<NodeSession> OpenNode(const DetectOptions& options) {
  auto config = LoadNodeConfig(options);
  if (!config) return Error{config.error()};
  auto inventory = pci::Scan(options.pci);
  if (!inventory) return Error{inventory.error()};

  NodeSession session;
  DetectReport& report = session.report;
  report.node_name = options.node_name;
  if (report.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) report.node_name = host;
  }
  report.pci_devices = *inventory;
  const auto dirs = loader::PluginSearchPath(options.plugin_dirs, options.plugin_path_env,
                                             options.default_plugin_dir);
  for (const auto& dir : dirs) report.plugin_dirs.push_back(dir.string());

  for (loader::ManifestCandidate& candidate :
       loader::FindManifests(dirs, options.loader, &report.problems)) {
    PluginReport plugin;
    plugin.manifest_path = candidate.path.string();
    if (!candidate.manifest) {
      // A broken manifest cannot be matched to this node: report it, never load it.
      plugin.load_error = candidate.manifest.error();
      plugin.decision = "not considered: its manifest is unusable";
      report.plugins.push_back(std::move(plugin));
      continue;
    }
    const loader::Manifest& manifest = *candidate.manifest;
    plugin.name = manifest.name;
    plugin.library_path = manifest.library_path.string();
    const loader::EnableDecision decision =
        loader::Decide(*config, manifest.name, manifest.pci_vendor_ids, *inventory);
    plugin.enabled = decision.enabled;
    plugin.decision = decision.reason;
    Logger("detect")->info("plugin {}: {} ({})", manifest.name,
                           decision.enabled ? "enabled" : "disabled", decision.reason);
    if (decision.enabled) {
      if (auto started = StartPlugin(manifest, *config, options, *inventory, plugin)) {
        session.running.emplace(manifest.name, std::move(started));
      }
    }
    report.plugins.push_back(std::move(plugin));
  }
  return session;
}

void DiscoverAll(NodeSession& session, const DetectOptions& options) {
  std::vector<Discovered> discovered;
  for (PluginReport& p : session.report.plugins) {
    auto running = session.running.find(p.name);
    if (!p.enabled || running == session.running.end()) continue;
    DiscoverInto(*running->second, p);
    if (p.discovery_status == "OK") discovered.push_back({p.name, p.groups});
  }
  session.report.spec = BuildDevicesSpec(discovered, options.spec);
}

Result<DetectReport> Detect(const DetectOptions& options) {
  auto session = OpenNode(options);
  if (!session) return Error{session.error()};
  DiscoverAll(*session, options);
  session->report.node_profile =
      node_profile::ReadNodeProfile({options.proc_root, options.pci.sysfs_root, options.data_dir});
  return std::move(session->report);
}

}  // namespace gpustack::device_manager
