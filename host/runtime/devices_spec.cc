#include "host/runtime/devices_spec.h"

#include <cctype>
#include <cstdio>

#include "host/node_profile/keys.h"

namespace gpustack::runtime {
namespace {

std::string PciClass(uint32_t code) {
  if (code == 0) return {};
  char text[16];
  std::snprintf(text, sizeof text, "0x%06x", code);
  return text;
}

ledger::PartitionProfile Convert(const sdk::PartitionProfile& p) {
  ledger::PartitionProfile out{p.name,          p.memory_mib, p.compute_slices,
                               p.memory_slices, p.max_count,  {}};
  for (const gpustack_placement& at : p.placements) out.placements.push_back({at.start, at.length});
  return out;
}

ledger::Accelerator Convert(const sdk::Accelerator& c) {
  ledger::Accelerator out;
  out.id = c.id;
  out.index = c.index;
  out.physical_indexes = c.physical_indexes;
  out.topology = {c.pci_bus_id, c.pci_root_id, PciClass(c.pci_class), c.numa_affinity,
                  c.cpu_affinity};
  out.unhealthy = c.health == GPUSTACK_HEALTH_UNHEALTHY;
  const bool partitioned = c.partition_mode == GPUSTACK_PARTITION_MODE_ENABLED;
  out.logical_count = partitioned ? 0 : c.logical_slice_count;
  out.cores_percentage_overcommit = !partitioned && c.cores_percentage_overcommit;
  if (partitioned) {
    for (const sdk::PartitionProfile& p : c.partition_profiles) out.profiles.push_back(Convert(p));
  }
  return out;
}

// A label value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric.
std::string LabelValue(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
    out += ok ? c : '-';
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && std::isalnum(static_cast<unsigned char>(out.back())) == 0) out.pop_back();
  while (!out.empty() && std::isalnum(static_cast<unsigned char>(out.front())) == 0) {
    out.erase(out.begin());
  }
  return out;
}

}  // namespace

Result<ledger::DevicesSpec> BuildDevicesSpec(const std::vector<Discovered>& discovered,
                                             const SpecOptions& options) {
  ledger::DevicesSpec spec;
  std::map<std::string, std::string> card_owner;  // card id or PCI function -> "plugin card id"
  for (const Discovered& d : discovered) {
    for (const sdk::AcceleratorGroup& g : d.groups) {
      ledger::Group group;
      group.id = node_profile::AcceleratorGroupId(d.manufacturer, g.product, g.memory_mib,
                                                  options.group_id_with_memory);
      group.manufacturer = d.manufacturer;
      group.name = g.product;
      group.memory = g.memory_mib;
      group.cores = g.cores;
      group.driver_version = g.driver_version;
      group.runtime_version = g.runtime_version;
      group.compute_capability = g.compute_capability;
      group.family = g.family;
      for (const sdk::Accelerator& c : g.accelerators) {
        for (const std::string& key :
             {"id " + c.id, c.pci_bus_id.empty() ? std::string() : "PCI " + c.pci_bus_id}) {
          if (key.empty()) continue;
          const std::string who = d.manufacturer + " card " + c.id;
          if (auto [it, fresh] = card_owner.emplace(key, who); !fresh) {
            return Error{"two plugins report one card (" + key + "): " + it->second + " and " +
                             who + "; disable one of them (--enable <name>=off)",
                         Code::kFailedPrecondition};
          }
        }
        group.accelerators.push_back(Convert(c));
      }
      spec.groups.push_back(std::move(group));
    }
  }
  if (auto valid = ledger::ValidateSpec(spec); !valid) return valid.failure();
  return spec;
}

std::map<std::string, std::string> DeviceLabels(const ledger::DevicesSpec& spec) {
  std::map<std::string, std::string> labels;
  if (spec.groups.empty()) return labels;
  const std::string prefix = "acceleratable.feature.gpustack.ai/";
  labels["feature.gpustack.ai/acceleratable"] = "true";
  for (const ledger::Group& g : spec.groups) {
    const std::string mfr = prefix + g.manufacturer;
    labels[mfr] = "true";
    if (!g.driver_version.empty()) labels[mfr + ".driver-version"] = LabelValue(g.driver_version);
    if (!g.runtime_version.empty())
      labels[mfr + ".runtime-version"] = LabelValue(g.runtime_version);
    const std::string key = prefix + node_profile::AcceleratorKey(g.manufacturer, g.id);
    labels[key] = "true";
    labels[key + ".product"] = LabelValue(g.name);
    labels[key + ".memory"] = node_profile::MemoryQuantity(g.memory);
    if (g.cores > 0) labels[key + ".cores"] = std::to_string(g.cores);  // 0: not reported
    labels[key + ".count"] = std::to_string(g.accelerators.size());
    if (!g.family.empty()) labels[key + ".family"] = LabelValue(g.family);
    if (!g.compute_capability.empty()) labels[key + ".comcap"] = LabelValue(g.compute_capability);
  }
  return labels;
}

}  // namespace gpustack::runtime
