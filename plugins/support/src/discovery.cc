#include "gpustack_support/discovery.h"

#include <algorithm>

#include "gpustack_support/pci_topology.h"

namespace gpustack::support {

const gpustack_pci_device* FillTopology(const sdk::Host& host, const std::string& bus_id,
                                        sdk::Accelerator& card) {
  card.pci_bus_id = bus_id;
  const gpustack_pci_device* pci = FindPci(host.PciDevices(), bus_id);
  if (pci == nullptr) {
    host.Log(GPUSTACK_LOG_WARN,
             card.id + " at " + bus_id + " is not in the host's PCI inventory; topology unknown");
    return nullptr;
  }
  const std::string sysfs(sdk::View(pci->sysfs_path));
  card.pci_class = pci->class_code;
  card.numa_affinity = pci->numa_node;
  card.cpu_affinity = ReadCpuAffinity(sysfs);
  card.pci_root_id = ReadPciRootId(sysfs);
  return pci;
}

void GroupBuilder::Add(const std::string& product,
                       const std::function<sdk::AcceleratorGroup()>& make, sdk::Accelerator card) {
  auto group = std::find_if(groups_.begin(), groups_.end(),
                            [&](const sdk::AcceleratorGroup& g) { return g.product == product; });
  if (group == groups_.end()) {
    groups_.push_back(make());
    groups_.back().product = product;
    group = groups_.end() - 1;
  }
  card.index = next_index_++;
  group->accelerators.push_back(std::move(card));
}

void GroupBuilder::Report(sdk::DiscoverySink& sink) const {
  for (const sdk::AcceleratorGroup& g : groups_) sink.Add(g);
}

DiscardingSink::DiscardingSink()
    : raw_{sizeof(gpustack_discovery_sink), nullptr, nullptr,
           [](void*, const gpustack_accelerator_group*) {
             return static_cast<gpustack_status>(GPUSTACK_STATUS_OK);
           }},
      sink_(raw_) {}

}  // namespace gpustack::support
