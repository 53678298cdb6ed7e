#include "host/device_manager/detect_report.h"

#include <gpustack/client/manifest.hpp>

#include <cstdio>
#include <sstream>

#include "host/common/text.h"
#include "host/runtime/devices_spec.h"

namespace gpustack::device_manager {
namespace {

using nlohmann::json;
using runtime::PluginState;
using runtime::PluginStatus;

json ErrorJson(const Error& e) { return {{"code", CodeName(e.code)}, {"message", e.message}}; }

json PluginJson(const PluginStatus& p) {
  json entry{{"manifest", p.origin}, {"name", p.name},         {"library", p.library_path},
             {"enabled", p.enabled}, {"decision", p.decision}, {"state", StateName(p.state)}};
  if (p.error) entry["error"] = ErrorJson(*p.error);
  if (p.identity) {
    const runtime::PluginIdentity& id = *p.identity;
    json ids = json::array();
    for (uint16_t v : id.pci_vendor_ids) ids.push_back(client::FormatVendorId(v));
    entry["identity"] = {{"manufacturer", id.manufacturer},
                         {"displayName", id.display_name},
                         {"baseResourceName", id.base_resource_name},
                         {"version", id.plugin_version},
                         {"pciVendorIds", ids},
                         {"capabilities", runtime::CapabilitiesText(id.capabilities)},
                         {"partitionKind", id.partition_kind},
                         {"runtimeClass", id.runtime_class}};
    entry["abi"] = id.abi;
  }
  if (p.discovery_ran) {
    json unhealthy = json::array();
    for (const sdk::AcceleratorGroup& g : p.groups) {
      for (const sdk::Accelerator& c : g.accelerators) {
        if (c.health == GPUSTACK_HEALTH_UNHEALTHY) {
          unhealthy.push_back({{"id", c.id}, {"index", c.index}, {"reason", c.health_reason}});
        }
      }
    }
    entry["discovery"] = {{"status", p.discovery_error ? CodeName(p.discovery_error->code) : "OK"},
                          {"accelerators", runtime::CardCount(p.groups)},
                          {"stale", p.stale}};
    if (p.discovery_error) entry["discovery"]["message"] = p.discovery_error->message;
    if (!unhealthy.empty()) entry["discovery"]["unhealthy"] = unhealthy;
  }
  if (!p.warnings.empty()) entry["warnings"] = p.warnings;
  if (!p.faults.empty()) entry["faults"] = p.faults;
  return entry;
}

}  // namespace

json ToJson(const DetectReport& report) {
  const runtime::NodeReport& node = report.node;
  json pci = json::array();
  for (const pci::PciDevice& d : node.pci_devices) {
    char klass[16];
    std::snprintf(klass, sizeof klass, "0x%06x", d.class_code);
    pci.push_back({{"busId", d.bus_id},
                   {"vendorId", client::FormatVendorId(d.vendor_id)},
                   {"deviceId", client::FormatVendorId(d.device_id)},
                   {"class", klass},
                   {"numaNode", d.numa_node}});
  }
  json plugins = json::array();
  for (const PluginStatus& p : node.plugins) plugins.push_back(PluginJson(p));
  json problems = json::array();
  for (const runtime::SourceProblem& p : node.problems) {
    problems.push_back({{"message", p.message}, {"fatal", p.fatal}});
  }
  json devices;
  if (node.spec) {
    json labels = json::object();
    for (const auto& [key, value] : runtime::DeviceLabels(*node.spec)) labels[key] = value;
    devices = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
               {"kind", "Devices"},
               {"metadata", {{"name", node.node_name}, {"labels", labels}}},
               {"spec", ledger::ToJson(*node.spec)}};
  } else {
    devices = {{"error", ErrorJson(node.spec.failure())}};
  }
  json profile = report.node_profile ? node_profile::ToJson(*report.node_profile)
                                     : json{{"error", report.node_profile.error()}};
  return {{"devices", devices},
          {"nodeProfile", profile},
          {"plugins", plugins},
          {"pciDevices", pci},
          {"pluginDirs", node.plugin_places},
          {"problems", problems},
          {"crashJournal", node.crash_journal},
          {"ok", report.ok()}};
}

std::string ToText(const DetectReport& report) {
  const runtime::NodeReport& node = report.node;
  std::ostringstream out;
  out << "Plugin directories:\n";
  for (const std::string& dir : node.plugin_places) out << "  " << Printable(dir) << "\n";
  for (const runtime::SourceProblem& p : node.problems) {
    out << "  " << (p.fatal ? "error: " : "note: ") << Printable(p.message) << "\n";
  }

  out << "\nPCI devices (" << node.pci_devices.size() << " of the scanned classes):\n";
  if (node.pci_devices.empty()) out << "  none\n";
  for (const pci::PciDevice& d : node.pci_devices) {
    char line[128];
    std::snprintf(line, sizeof line, "  %s  vendor 0x%04x device 0x%04x class 0x%06x numa %d\n",
                  Printable(d.bus_id).c_str(), d.vendor_id, d.device_id, d.class_code, d.numa_node);
    out << line;
  }

  out << "\nPlugins (" << node.plugins.size() << " found):\n";
  size_t accelerators = 0;
  size_t unhealthy = 0;
  for (const PluginStatus& p : node.plugins) {
    out << "  " << Printable(p.name.empty() ? p.origin : p.name) << ": " << StateName(p.state)
        << " - " << Printable(p.decision) << "\n";
    if (p.identity) {
      out << "      " << Printable(p.identity->display_name) << ", resource "
          << Printable(p.identity->base_resource_name) << ", capabilities "
          << runtime::CapabilitiesText(p.identity->capabilities) << ", ABI " << p.identity->abi
          << "\n";
    }
    if (p.error) out << "      error: " << Printable(p.error->message) << "\n";
    if (p.discovery_ran) {
      out << "      discovery: "
          << (p.discovery_error ? std::string(CodeName(p.discovery_error->code)) : "OK");
      if (p.discovery_error) out << " - " << Printable(p.discovery_error->message);
      if (p.stale) out << " (showing the last good result)";
      out << "\n";
    }
    for (const std::string& w : p.warnings) out << "      warning: " << Printable(w) << "\n";
    for (const std::string& f : p.faults) out << "      error: " << Printable(f) << "\n";
    for (const sdk::AcceleratorGroup& g : p.groups) {
      out << "      " << Printable(g.product) << " x" << g.accelerators.size() << " ("
          << g.memory_mib << " MiB each)\n";
      for (const sdk::Accelerator& c : g.accelerators) {
        out << "        [" << c.index << "] " << Printable(c.id) << " " << Printable(c.pci_bus_id)
            << " " << runtime::HealthName(c.health);
        if (!c.health_reason.empty()) out << ": " << Printable(c.health_reason);
        out << "\n";
        ++accelerators;
        unhealthy += c.health == GPUSTACK_HEALTH_UNHEALTHY;
      }
    }
  }
  if (!node.spec) out << "\nDevices spec: error: " << Printable(node.spec.error()) << "\n";
  if (report.node_profile) {
    const node_profile::CpuProfile& cpu = report.node_profile->cpu;
    out << "\nNode: " << Printable(cpu.name) << " (" << cpu.key << "), " << cpu.physical_cores
        << " cores, " << cpu.logical_cores << " threads, " << report.node_profile->memory_mib
        << " MiB\n";
  } else {
    out << "\nNode profile: error: " << Printable(report.node_profile.error()) << "\n";
  }
  out << "\nAccelerators: ";
  if (accelerators == 0) {
    out << (report.ok() ? "none" : "none found, but see the errors above");
  } else {
    out << accelerators;
    if (unhealthy > 0)
      out << " (" << accelerators - unhealthy << " healthy, " << unhealthy << " unhealthy)";
  }
  out << "\n";
  if (!report.ok()) out << "\nNot everything worked: see the errors above.\n";
  return out.str();
}

}  // namespace gpustack::device_manager
