// gpustack-operator: one binary, subcommands. Flags and wiring only; the work is in libraries.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "host/common/logging.h"
#include "host/common/yaml.h"
#include "host/device_manager/detect.h"
#include "host/device_manager/detect_report.h"

namespace {

// Environment defaults are read with secure_getenv: ignored when the process is setuid.
std::string Env(const char* name) {
  const char* value = secure_getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPUStack Operator: share accelerators between Kubernetes workloads"};
  app.require_subcommand(1);
  std::string log_level = Env("GPUSTACK_LOG_LEVEL").empty() ? "warn" : Env("GPUSTACK_LOG_LEVEL");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("GPUSTACK_LOG_LEVEL")
      ->capture_default_str();

  CLI::App* dm = app.add_subcommand("device-manager", "The per-node device manager");
  dm->require_subcommand(1);
  CLI::App* detect = dm->add_subcommand(
      "detect", "Show which plugins run on this node, why, and what they report");

  gpustack::device_manager::DetectOptions options;
  options.plugin_path_env = Env("GPUSTACK_PLUGIN_PATH");
  options.enable_env = Env("GPUSTACK_PLUGIN_ENABLE");
  std::string output = "yaml";
  std::string class_prefixes = "02,03,0b,12";
  detect->add_option("--plugin-dir", options.plugin_dirs,
                     "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                     "default (repeatable)");
  detect->add_option("--enable", options.enable_flag,
                     "Force plugins on or off: nvidia=on,amd=off (* for every plugin)");
  detect->add_option("--node-config", options.node_config_path, "Node config file (JSON)")
      ->envname("GPUSTACK_NODE_CONFIG");
  detect->add_option("--sysfs-root", options.pci.sysfs_root, "Root of the sysfs tree to scan")
      ->envname("GPUSTACK_SYSFS_ROOT")
      ->capture_default_str();
  detect->add_option("--pci-classes", class_prefixes, "PCI base classes to scan")
      ->envname("GPUSTACK_RUNTIME_DETECT_PCI_CLASS_PREFIXES")
      ->capture_default_str();
  detect->add_option("--proc-root", options.proc_root, "Root of the /proc tree (node profile)")
      ->envname("GPUSTACK_PROC_ROOT")
      ->capture_default_str();
  detect->add_option("--data-dir", options.data_dir, "Data directory whose disk is profiled")
      ->envname("GPUSTACK_DATA_DIR")
      ->capture_default_str();
  detect->add_option("--node-name", options.node_name, "Node name (default: the host name)")
      ->envname("NODE_NAME");
  detect->add_flag("--group-id-with-memory", options.spec.group_id_with_memory,
                   "Append the card's memory to group ids (tesla-t4-16g)")
      ->envname("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY");
  detect->add_option("-o,--output", output,
                     "yaml or json (the Devices object, node profile and plugin decisions), or "
                     "text (a summary)")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  gpustack::InitLogging(log_level);

  if (detect->parsed()) {
    auto prefixes = gpustack::pci::ParseClassPrefixes(class_prefixes);
    if (!prefixes) {
      std::cerr << "error: " << prefixes.error() << "\n";
      return 2;
    }
    options.pci.class_prefixes = *prefixes;
    auto report = gpustack::device_manager::Detect(options);
    if (!report) {
      std::cerr << "error: " << report.error() << "\n";
      return 2;
    }
    if (output == "json") {
      std::cout << gpustack::device_manager::ToJson(*report).dump(2) << "\n";
    } else if (output == "yaml") {
      std::cout << gpustack::ToYaml(gpustack::device_manager::ToJson(*report));
    } else {
      std::cout << gpustack::device_manager::ToText(*report);
    }
    // 1 tells scripts that an enabled plugin failed; the report says which and why.
    return report->ok() ? 0 : 1;
  }
  return 0;
}
