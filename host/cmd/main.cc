// gpustack-operator: one binary, subcommands. Flags and wiring only; the work is in libraries.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "host/common/logging.h"
#include "host/common/yaml.h"
#include "host/device_manager/detect.h"
#include "host/device_manager/detect_report.h"
#include "host/device_manager/monitor.h"
#include "host/device_manager/preflight.h"

namespace {

namespace dm = gpustack::device_manager;

// Environment defaults are read with secure_getenv: ignored when the process is setuid.
std::string Env(const char* name) {
  const char* value = secure_getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The flags every device-manager subcommand shares: where plugins are, which run, and which
// node (real or fixture) they look at.
struct NodeFlags {
  dm::DetectOptions options;
  std::string class_prefixes = "02,03,0b,12";
};

void AddNodeFlags(CLI::App* command, NodeFlags& flags) {
  dm::DetectOptions& o = flags.options;
  command->add_option("--plugin-dir", o.plugin_dirs,
                      "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                      "default (repeatable)");
  command->add_option("--enable", o.enable_flag,
                      "Force plugins on or off: nvidia=on,amd=off (* for every plugin)");
  command->add_option("--node-config", o.node_config_path, "Node config file (JSON)")
      ->envname("GPUSTACK_NODE_CONFIG");
  command->add_option("--sysfs-root", o.pci.sysfs_root, "Root of the sysfs tree to scan")
      ->envname("GPUSTACK_SYSFS_ROOT")
      ->capture_default_str();
  command->add_option("--pci-classes", flags.class_prefixes, "PCI base classes to scan")
      ->envname("GPUSTACK_RUNTIME_DETECT_PCI_CLASS_PREFIXES")
      ->capture_default_str();
  command->add_option("--node-name", o.node_name, "Node name (default: the host name)")
      ->envname("NODE_NAME");
}

// Finishes the shared flags after parsing; false (with the message printed) on bad input.
bool ResolveNodeFlags(NodeFlags& flags) {
  flags.options.plugin_path_env = Env("GPUSTACK_PLUGIN_PATH");
  flags.options.enable_env = Env("GPUSTACK_PLUGIN_ENABLE");
  auto prefixes = gpustack::pci::ParseClassPrefixes(flags.class_prefixes);
  if (!prefixes) {
    std::cerr << "error: " << prefixes.error() << "\n";
    return false;
  }
  flags.options.pci.class_prefixes = *prefixes;
  return true;
}

// Vendor libraries name devices; a name that is not valid UTF-8 must not abort the output.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

// The node's running plugins after one discovery pass; nullopt (the reason printed) on bad input.
std::optional<dm::NodeSession> OpenAndDiscover(NodeFlags& flags) {
  if (!ResolveNodeFlags(flags)) return std::nullopt;
  auto session = dm::OpenNode(flags.options);
  if (!session) {
    std::cerr << "error: " << session.error() << "\n";
    return std::nullopt;
  }
  dm::DiscoverAll(*session, flags.options);
  return std::move(session).value();
}

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int RunDetect(NodeFlags& flags, const std::string& output) {
  if (!ResolveNodeFlags(flags)) return 2;
  auto report = dm::Detect(flags.options);
  if (!report) {
    std::cerr << "error: " << report.error() << "\n";
    return 2;
  }
  if (output == "json") {
    std::cout << dm::ToJson(*report).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
  } else if (output == "yaml") {
    std::cout << gpustack::ToYaml(dm::ToJson(*report));
  } else {
    std::cout << dm::ToText(*report);
  }
  // 1 tells scripts that an enabled plugin failed; the report says which and why.
  return report->ok() ? 0 : 1;
}

int RunMonitor(NodeFlags& flags, const std::string& output, double interval, int count,
               bool processes) {
  auto session = OpenAndDiscover(flags);
  if (!session) return 2;
  for (const dm::PluginReport& p : session->report.plugins) {
    if (!p.enabled) continue;
    if (!p.load_error.empty()) std::cerr << "warning: " << p.name << ": " << p.load_error << "\n";
    if (!p.discovery_message.empty()) {
      std::cerr << "warning: " << p.name << ": " << p.discovery_message << "\n";
    }
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  bool failed = false;
  for (int round = 0; !g_stop && (count == 0 || round < count); ++round) {
    if (round > 0) {
      // Sleep in short steps so Ctrl-C stops promptly; plugins shut down on the way out.
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval);
      while (!g_stop && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (g_stop) break;
    }
    const dm::MonitorRound sample = dm::SampleRound(*session, processes);
    failed = failed || !sample.errors.empty();
    if (output == "json") {
      std::cout << dm::ToJson(sample).dump(-1, ' ', false, kReplaceInvalidUtf8)
                << "\n";  // one line per round
    } else if (output == "yaml") {
      std::cout << "---\n" << gpustack::ToYaml(dm::ToJson(sample));
    } else {
      std::cout << dm::ToText(sample) << "\n";
    }
    std::cout.flush();
  }
  return failed ? 1 : 0;
}

int RunPreflight(NodeFlags& flags, const dm::PreflightOptions& preflight,
                 const std::string& output) {
  auto session = OpenAndDiscover(flags);
  if (!session) return 2;
  const auto checks = dm::RunPreflight(*session, preflight);
  if (output == "json") {
    std::cout << dm::ToJson(checks).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
  } else {
    std::cout << dm::ToText(checks);
  }
  return dm::AllPassed(checks) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPUStack Operator: share accelerators between Kubernetes workloads"};
  app.require_subcommand(1);
  std::string log_level = Env("GPUSTACK_LOG_LEVEL").empty() ? "warn" : Env("GPUSTACK_LOG_LEVEL");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("GPUSTACK_LOG_LEVEL")
      ->capture_default_str();

  CLI::App* manager = app.add_subcommand("device-manager", "The per-node device manager");
  manager->require_subcommand(1);

  CLI::App* detect = manager->add_subcommand(
      "detect", "Print this node's Devices spec, node profile and which plugins run and why");
  NodeFlags detect_flags;
  AddNodeFlags(detect, detect_flags);
  std::string detect_output = "yaml";
  detect
      ->add_option("--proc-root", detect_flags.options.proc_root,
                   "Root of the /proc tree (node profile)")
      ->envname("GPUSTACK_PROC_ROOT")
      ->capture_default_str();
  detect
      ->add_option("--data-dir", detect_flags.options.data_dir,
                   "Data directory whose disk is profiled")
      ->envname("GPUSTACK_DATA_DIR")
      ->capture_default_str();
  detect
      ->add_flag("--group-id-with-memory", detect_flags.options.spec.group_id_with_memory,
                 "Append the card's memory to group ids (tesla-t4-16g)")
      ->envname("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY");
  detect
      ->add_option("-o,--output", detect_output,
                   "yaml or json (the Devices object, node profile and plugin decisions), or "
                   "text (a summary)")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();

  CLI::App* monitor = manager->add_subcommand(
      "monitor", "Sample every accelerator: memory, utilization, temperature, power, health");
  NodeFlags monitor_flags;
  AddNodeFlags(monitor, monitor_flags);
  std::string monitor_output = "text";
  double interval = 0;
  int count = 0;
  bool processes = false;
  monitor->add_option("-i,--interval", interval, "Seconds between rounds; 0 samples once")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  monitor->add_option("-c,--count", count, "Rounds to take (0: until interrupted)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  monitor->add_flag("--processes", processes, "Also sample per-process usage");
  monitor->add_option("-o,--output", monitor_output, "text, json (a line per round) or yaml")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();

  CLI::App* preflight = manager->add_subcommand(
      "preflight", "Check what each enabled manufacturer needs on this node, and say what to fix");
  NodeFlags preflight_flags;
  AddNodeFlags(preflight, preflight_flags);
  dm::PreflightOptions preflight_options;
  std::string preflight_output = "text";
  preflight->add_option("--dev-root", preflight_options.dev_root, "Where device nodes live")
      ->envname("GPUSTACK_DEV_ROOT")
      ->capture_default_str();
  preflight
      ->add_option("--containerd-config", preflight_options.containerd_config,
                   "containerd's configuration, for runtime handlers")
      ->capture_default_str();
  preflight->add_option("-o,--output", preflight_output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  gpustack::InitLogging(log_level);

  if (detect->parsed()) return RunDetect(detect_flags, detect_output);
  if (monitor->parsed()) {
    if (interval == 0 && count == 0) count = 1;  // no interval: one round
    return RunMonitor(monitor_flags, monitor_output, interval, count, processes);
  }
  if (preflight->parsed())
    return RunPreflight(preflight_flags, preflight_options, preflight_output);
  return 0;
}
