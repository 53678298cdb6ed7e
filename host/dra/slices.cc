#include "host/dra/slices.h"

#include <map>

namespace gpustack::dra {
namespace {

Json StringAttribute(const std::string& value) { return Json{{"string", value}}; }

Json DeviceOf(const ledger::Group& group, const ledger::Accelerator& card) {
  Json attributes = {
      {"type", StringAttribute("card")},    {"manufacturer", StringAttribute(group.manufacturer)},
      {"model", StringAttribute(group.id)}, {"productName", StringAttribute(group.name)},
      {"uuid", StringAttribute(card.id)},   {"index", Json{{"int", card.index}}}};
  // Free-form text: a driver's "535.104.05" is not semantic versioning, so no version attribute.
  if (!group.driver_version.empty())
    attributes["driverVersion"] = StringAttribute(group.driver_version);
  if (!group.compute_capability.empty())
    attributes["computeCapability"] = StringAttribute(group.compute_capability);
  if (!group.family.empty()) attributes["family"] = StringAttribute(group.family);
  if (!card.topology.pci_bus_id.empty())
    attributes["pciBusID"] = StringAttribute(card.topology.pci_bus_id);
  Json capacity = Json::object();
  if (group.memory > 0) capacity["memory"] = {{"value", std::to_string(group.memory) + "Mi"}};
  return {{"name", DeviceName(card)}, {"attributes", attributes}, {"capacity", capacity}};
}

}  // namespace

std::string PoolName(const std::string& node, const std::string& manufacturer) {
  return node + "/" + manufacturer;
}

std::string SliceName(const std::string& node, const std::string& manufacturer) {
  return node + "-" + manufacturer + "." + kDriverName;
}

std::string DeviceName(const ledger::Accelerator& card) {
  return "card-" + std::to_string(card.index);
}

Result<const ledger::Accelerator*> CardOfDevice(const ledger::DevicesSpec& spec,
                                                const std::string& manufacturer,
                                                const std::string& device) {
  for (const ledger::Group& group : spec.groups) {
    if (group.manufacturer != manufacturer) continue;
    for (const ledger::Accelerator& card : group.accelerators) {
      if (DeviceName(card) == device) return &card;
    }
  }
  return Error{"no device " + device + " among this node's " + manufacturer + " cards",
               Code::kNotFound};
}

Result<std::string> ManufacturerOfPool(const std::string& node, const std::string& pool) {
  const std::string prefix = node + "/";
  if (!pool.starts_with(prefix) || pool.size() == prefix.size() ||
      pool.find('/', prefix.size()) != std::string::npos) {
    return Error{"pool " + pool + " is not one of node " + node + "'s", Code::kNotFound};
  }
  return pool.substr(prefix.size());
}

std::set<std::string> CardsHeldByPods(const ledger::NodeLedger& ledger) {
  std::set<std::string> cards;
  for (const auto& [owner, allocation] : ledger.allocations()) {
    if (IsClaimOwner(owner)) continue;
    for (const ledger::Charge& charge : allocation.charges) cards.insert(charge.accelerator_id);
  }
  return cards;
}

std::vector<Json> ResourceSlices(const std::string& node, const ledger::DevicesSpec& spec,
                                 const std::set<std::string>& held_by_pods, int64_t generation) {
  std::vector<std::string> manufacturers;
  std::map<std::string, Json> devices;
  for (const ledger::Group& group : spec.groups) {
    auto [it, added] = devices.try_emplace(group.manufacturer, Json::array());
    if (added) manufacturers.push_back(group.manufacturer);
    for (const ledger::Accelerator& card : group.accelerators) {
      if (card.unhealthy || card.partitioned() || held_by_pods.contains(card.id)) continue;
      it->second.push_back(DeviceOf(group, card));
    }
  }
  std::vector<Json> slices;
  for (const std::string& manufacturer : manufacturers) {
    slices.push_back({{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceSlice"},
                      {"metadata",
                       {{"name", SliceName(node, manufacturer)},
                        {"labels", {{"app.kubernetes.io/managed-by", "gpustack-device-manager"}}}}},
                      {"spec",
                       {{"driver", kDriverName},
                        {"nodeName", node},
                        {"pool",
                         {{"name", PoolName(node, manufacturer)},
                          {"generation", generation},
                          {"resourceSliceCount", 1}}},
                        {"devices", devices.at(manufacturer)}}}});
  }
  return slices;
}

}  // namespace gpustack::dra
