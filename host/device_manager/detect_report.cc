#include "host/device_manager/detect_report.h"

#include <cstdio>
#include <sstream>

#include "host/loader/manifest.h"

namespace gpustack::device_manager {
namespace {

using nlohmann::json;

std::string Capabilities(gpustack_capabilities caps) {
  std::string out;
  auto add = [&](gpustack_capabilities bit, const char* name) {
    if ((caps & bit) != 0) out += (out.empty() ? "" : ",") + std::string(name);
  };
  add(GPUSTACK_CAP_SHARED, "shared");
  add(GPUSTACK_CAP_LOGICAL_SLICING, "sliced");
  add(GPUSTACK_CAP_PARTITIONING, "partitioned");
  add(GPUSTACK_CAP_PROCESS_METRICS, "process-metrics");
  add(GPUSTACK_CAP_HEALTH_EVENTS, "health-events");
  return out.empty() ? "-" : out;
}

const char* HealthName(gpustack_health health) {
  switch (health) {
    case GPUSTACK_HEALTH_HEALTHY:
      return "Healthy";
    case GPUSTACK_HEALTH_UNHEALTHY:
      return "Unhealthy";
    default:
      return "Unknown";
  }
}

}  // namespace

json ToJson(const DetectReport& report) {
  json pci = json::array();
  for (const pci::PciDevice& d : report.pci_devices) {
    char klass[16];
    std::snprintf(klass, sizeof klass, "0x%06x", d.class_code);
    pci.push_back({{"busId", d.bus_id},
                   {"vendorId", loader::FormatVendorId(d.vendor_id)},
                   {"deviceId", loader::FormatVendorId(d.device_id)},
                   {"class", klass},
                   {"numaNode", d.numa_node}});
  }
  json plugins = json::array();
  for (const PluginReport& p : report.plugins) {
    json entry{{"manifest", p.manifest_path},
               {"name", p.name},
               {"library", p.library_path},
               {"enabled", p.enabled},
               {"decision", p.decision}};
    if (!p.load_error.empty()) entry["error"] = p.load_error;
    if (p.identity) {
      json ids = json::array();
      for (uint16_t id : p.identity->pci_vendor_ids) ids.push_back(loader::FormatVendorId(id));
      entry["identity"] = {{"manufacturer", p.identity->manufacturer},
                           {"displayName", p.identity->display_name},
                           {"baseResourceName", p.identity->base_resource_name},
                           {"version", p.identity->plugin_version},
                           {"pciVendorIds", ids},
                           {"capabilities", Capabilities(p.identity->capabilities)},
                           {"partitionKind", p.identity->partition_kind}};
      entry["abi"] = std::to_string(p.negotiated.major) + "." + std::to_string(p.negotiated.minor);
    }
    if (!p.discovery_status.empty()) {
      size_t cards = 0;
      for (const sdk::AcceleratorGroup& g : p.groups) cards += g.accelerators.size();
      entry["discovery"] = {{"status", p.discovery_status}, {"accelerators", cards}};
      if (!p.discovery_message.empty()) entry["discovery"]["message"] = p.discovery_message;
    }
    plugins.push_back(std::move(entry));
  }
  json devices;
  if (report.spec) {
    json labels = json::object();
    for (const auto& [key, value] : DeviceLabels(*report.spec)) labels[key] = value;
    devices = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
               {"kind", "Devices"},
               {"metadata", {{"name", report.node_name}, {"labels", labels}}},
               {"spec", devices::ToJson(*report.spec)}};
  } else {
    devices = {{"error", report.spec.error()}};
  }
  json profile = report.node_profile ? node_profile::ToJson(*report.node_profile)
                                     : json{{"error", report.node_profile.error()}};
  return {{"devices", devices}, {"nodeProfile", profile},           {"plugins", plugins},
          {"pciDevices", pci},  {"pluginDirs", report.plugin_dirs}, {"problems", report.problems},
          {"ok", report.ok()}};
}

std::string ToText(const DetectReport& report) {
  std::ostringstream out;
  out << "Plugin directories:\n";
  for (const std::string& dir : report.plugin_dirs) out << "  " << dir << "\n";
  for (const std::string& problem : report.problems) out << "  ! " << problem << "\n";

  out << "\nPCI devices (" << report.pci_devices.size() << " of the scanned classes):\n";
  if (report.pci_devices.empty()) out << "  none\n";
  for (const pci::PciDevice& d : report.pci_devices) {
    char line[128];
    std::snprintf(line, sizeof line, "  %s  vendor 0x%04x device 0x%04x class 0x%06x numa %d\n",
                  d.bus_id.c_str(), d.vendor_id, d.device_id, d.class_code, d.numa_node);
    out << line;
  }

  out << "\nPlugins (" << report.plugins.size() << " found):\n";
  size_t accelerators = 0;
  for (const PluginReport& p : report.plugins) {
    out << "  " << (p.name.empty() ? p.manifest_path : p.name) << ": "
        << (p.enabled ? "enabled" : "disabled") << " - " << p.decision << "\n";
    if (p.identity) {
      out << "      " << p.identity->display_name << ", resource " << p.identity->base_resource_name
          << ", capabilities " << Capabilities(p.identity->capabilities) << ", ABI "
          << p.negotiated.major << "." << p.negotiated.minor << "\n";
    }
    if (!p.load_error.empty()) out << "      error: " << p.load_error << "\n";
    if (!p.discovery_status.empty()) {
      out << "      discovery: " << p.discovery_status;
      if (!p.discovery_message.empty()) out << " - " << p.discovery_message;
      out << "\n";
    }
    for (const sdk::AcceleratorGroup& g : p.groups) {
      out << "      " << g.product << " x" << g.accelerators.size() << " (" << g.memory_mib
          << " MiB each)\n";
      for (const sdk::Accelerator& a : g.accelerators) {
        out << "        [" << a.index << "] " << a.id << " " << a.pci_bus_id << " "
            << HealthName(a.health) << "\n";
        ++accelerators;
      }
    }
  }
  if (!report.spec) out << "\nDevices spec: error: " << report.spec.error() << "\n";
  if (report.node_profile) {
    const node_profile::CpuProfile& cpu = report.node_profile->cpu;
    out << "\nNode: " << cpu.name << " (" << cpu.key << "), " << cpu.physical_cores << " cores, "
        << cpu.logical_cores << " threads, " << report.node_profile->memory_mib << " MiB\n";
  } else {
    out << "\nNode profile: error: " << report.node_profile.error() << "\n";
  }
  out << "\nAccelerators: "
      << (accelerators == 0 ? std::string("none") : std::to_string(accelerators)) << "\n";
  return out.str();
}

}  // namespace gpustack::device_manager
