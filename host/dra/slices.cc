#include "host/dra/slices.h"

#include <algorithm>
#include <map>
#include <optional>

#include "host/kube/quantity.h"
#include "host/ledger/request.h"

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
  Json device = {{"name", DeviceName(card)}, {"attributes", attributes}, {"capacity", capacity}};
  if (card.sliceable() && group.memory > 0) {
    // A claim that names no capacity consumes every default: the whole card.
    auto consumable = [](const std::string& total, const std::string& min,
                         const std::string& step) {
      return Json{
          {"value", total},
          {"requestPolicy", {{"default", total}, {"validRange", {{"min", min}, {"step", step}}}}}};
    };
    device["allowMultipleAllocations"] = true;
    device["capacity"]["memory"] = consumable(std::to_string(group.memory) + "Mi", "1Mi", "1Mi");
    device["capacity"]["cores"] = consumable("100", "1", "1");
    device["capacity"]["slices"] = {
        {"value", std::to_string(card.logical_count)},
        {"requestPolicy", {{"default", "1"}, {"validValues", Json::array({"1"})}}}};
  }
  return device;
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

Result<CardRef> CardOfDevice(const ledger::DevicesSpec& spec, const std::string& manufacturer,
                             const std::string& device) {
  for (const ledger::Group& group : spec.groups) {
    if (group.manufacturer != manufacturer) continue;
    for (const ledger::Accelerator& card : group.accelerators) {
      if (DeviceName(card) == device) return CardRef{&group, &card};
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

Result<ClaimRequest> LedgerRequestFor(const std::vector<AllocatedDevice>& devices,
                                      const ledger::DevicesSpec& spec, const std::string& node,
                                      const ClaimRef& ref) {
  const std::string claim = "ResourceClaim " + ref.Key();
  auto fail = [&](const std::string& why) {
    return Error{claim + ": " + why, Code::kFailedPrecondition};
  };
  ClaimRequest out;
  std::vector<std::string> whole;
  std::optional<ledger::Request> share;
  for (const AllocatedDevice& d : devices) {
    auto manufacturer = ManufacturerOfPool(node, d.pool);
    if (!manufacturer) return fail(manufacturer.error());
    if (!out.manufacturer.empty() && *manufacturer != out.manufacturer) {
      return fail("it holds cards of " + out.manufacturer + " and " + *manufacturer +
                  ": one claim is served one manufacturer's cards");
    }
    out.manufacturer = *manufacturer;
    if (auto partition = PartitionOfDevice(spec, out.manufacturer, d.device)) {
      if (devices.size() != 1) {
        return fail("it holds a partition and more: a claim is served one partition of one card");
      }
      out.card_memory_mib = partition->card.group->memory;
      out.request.mode = ledger::Mode::kPartitioned;
      out.request.profile = partition->profile->name;
      out.request.placement = partition->placement;
      out.request.units =
          ledger::PartitionUnits(partition->profile->memory_mib, partition->card.group->memory);
      out.request.cards = {partition->card.card->id};
      out.request.manufacturer = out.manufacturer;
      return out;
    }
    auto ref_of = CardOfDevice(spec, out.manufacturer, d.device);
    if (!ref_of) return fail(ref_of.error());
    const auto [group, card] = *ref_of;
    out.card_memory_mib = group->memory;
    // What the share consumes; a share of everything is the whole card.
    std::optional<uint64_t> memory_mib;
    uint32_t cores = 100;
    for (const auto& [capacity, text] : d.consumed) {
      auto quantity = kube::Quantity::Parse(text);
      std::optional<int64_t> whole_units = quantity ? quantity->Whole() : std::nullopt;
      if (!whole_units || *whole_units < 0) {
        return fail("its consumed " + capacity + " \"" + text + "\" is not a whole quantity");
      }
      if (capacity == "memory") memory_mib = static_cast<uint64_t>(*whole_units) >> 20;
      if (capacity == "cores") cores = static_cast<uint32_t>(std::min<int64_t>(*whole_units, 100));
    }
    // No consumed capacity: a device allocated whole (a card that does not slice, or a cluster
    // without consumable capacity). A capacity the share does not name is the whole of it.
    const uint64_t memory = memory_mib.value_or(group->memory);
    if (d.consumed.empty() || (memory >= group->memory && cores >= 100)) {
      if (std::find(whole.begin(), whole.end(), card->id) == whole.end()) whole.push_back(card->id);
      continue;
    }
    if (!card->sliceable()) {
      return fail("it holds a share of " + d.device + ", which is not sliced on this node");
    }
    if (share || memory == 0 || cores == 0) {
      return fail(share ? "it holds more than one share: a claim is served one slice of one card"
                        : "its share of " + d.device + " consumes no memory or no cores");
    }
    ledger::Request slice;
    slice.mode = ledger::Mode::kSliced;
    slice.memory_mib = memory;
    slice.cores_percentage = cores;
    slice.units = ledger::SliceUnits(0, memory, group->memory);
    slice.cards = {card->id};
    share = slice;
  }
  if (share && !whole.empty()) {
    return fail("it holds whole cards and a share: a claim is served one or the other");
  }
  if (share) {
    out.request = *share;
  } else {
    out.request.mode = ledger::Mode::kExclusive;
    out.request.count = static_cast<uint32_t>(whole.size());
    out.request.cards = whole;
  }
  out.request.manufacturer = out.manufacturer;
  return out;
}

std::string PartitionDeviceName(const ledger::Accelerator& card,
                                const ledger::PartitionProfile& profile,
                                const ledger::Placement& placement) {
  std::string name = DeviceName(card) + "-";
  for (char c : profile.name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    name += plain ? c : (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : '-');
  }
  return name + "-at-" + std::to_string(placement.start);
}

std::optional<PartitionRef> PartitionOfDevice(const ledger::DevicesSpec& spec,
                                              const std::string& manufacturer,
                                              const std::string& device) {
  for (const ledger::Group& group : spec.groups) {
    if (group.manufacturer != manufacturer) continue;
    for (const ledger::Accelerator& card : group.accelerators) {
      if (!device.starts_with(DeviceName(card) + "-")) continue;
      for (const ledger::PartitionProfile& profile : card.profiles) {
        for (const ledger::Placement& placement : profile.placements) {
          if (PartitionDeviceName(card, profile, placement) == device)
            return PartitionRef{{&group, &card}, &profile, placement};
        }
      }
    }
  }
  return std::nullopt;
}

HeldByPods HeldByPodsOf(const ledger::NodeLedger& ledger) {
  HeldByPods held;
  for (const auto& [owner, allocation] : ledger.allocations()) {
    if (IsClaimOwner(owner)) continue;
    for (const ledger::Charge& charge : allocation.charges) {
      held.cards.insert(charge.accelerator_id);
      if (charge.mode == ledger::Mode::kPartitioned)
        held.partitions[charge.accelerator_id].push_back(charge.placement);
    }
  }
  return held;
}

namespace {

constexpr size_t kCounterSetsPerSlice = 8;  // the API's limit

std::string CounterSetName(const ledger::Accelerator& card) { return DeviceName(card); }
std::string MemorySliceCounter(uint32_t slice) { return "memory-slice-" + std::to_string(slice); }

// The memory slices a partitioned card offers: every slice any placement covers.
uint32_t MemorySlices(const ledger::Accelerator& card) {
  uint32_t end = 0;
  for (const ledger::PartitionProfile& p : card.profiles) {
    for (const ledger::Placement& pl : p.placements) end = std::max(end, pl.start + pl.length);
  }
  return end;
}

Json PartitionDevice(const ledger::Group& group, const ledger::Accelerator& card,
                     const ledger::PartitionProfile& profile, const ledger::Placement& placement) {
  Json counters = Json::object();
  for (uint32_t s = placement.start; s < placement.start + placement.length; ++s)
    counters[MemorySliceCounter(s)] = {{"value", "1"}};
  return {{"name", PartitionDeviceName(card, profile, placement)},
          {"attributes",
           {{"type", StringAttribute("partition")},
            {"manufacturer", StringAttribute(group.manufacturer)},
            {"model", StringAttribute(group.id)},
            {"productName", StringAttribute(group.name)},
            {"profile", StringAttribute(profile.name)},
            {"parentUUID", StringAttribute(card.id)},
            {"parentIndex", Json{{"int", card.index}}},
            {"placementStart", Json{{"int", placement.start}}}}},
          {"capacity", {{"memory", {{"value", std::to_string(profile.memory_mib) + "Mi"}}}}},
          {"consumesCounters",
           Json::array({{{"counterSet", CounterSetName(card)}, {"counters", counters}}})}};
}

Json SliceObject(const std::string& name, const std::string& node, const std::string& pool,
                 int64_t generation, Json body) {
  Json spec = {{"driver", kDriverName},
               {"nodeName", node},
               {"pool", {{"name", pool}, {"generation", generation}, {"resourceSliceCount", 0}}}};
  for (auto& [key, value] : body.items()) spec[key] = std::move(value);
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata",
       {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "gpustack-device-manager"}}}}},
      {"spec", spec}};
}

}  // namespace

std::vector<Json> ResourceSlices(const std::string& node, const ledger::DevicesSpec& spec,
                                 const HeldByPods& held, int64_t generation,
                                 bool offer_partitions) {
  std::vector<std::string> manufacturers;
  for (const ledger::Group& group : spec.groups) {
    if (std::find(manufacturers.begin(), manufacturers.end(), group.manufacturer) ==
        manufacturers.end())
      manufacturers.push_back(group.manufacturer);
  }
  std::vector<Json> slices;
  for (const std::string& manufacturer : manufacturers) {
    const std::string pool = PoolName(node, manufacturer);
    const std::string base = node + "-" + manufacturer;
    std::vector<Json> pool_slices;
    Json whole = Json::array(), counter_sets = Json::array();
    std::vector<std::pair<const ledger::Accelerator*, Json>> partitions;
    for (const ledger::Group& group : spec.groups) {
      if (group.manufacturer != manufacturer) continue;
      for (const ledger::Accelerator& card : group.accelerators) {
        if (card.unhealthy) continue;
        if (!card.partitioned()) {
          if (!held.cards.contains(card.id)) whole.push_back(DeviceOf(group, card));
          continue;
        }
        if (!offer_partitions) continue;
        Json counters = Json::object();
        for (uint32_t s = 0; s < MemorySlices(card); ++s)
          counters[MemorySliceCounter(s)] = {{"value", "1"}};
        counter_sets.push_back({{"name", CounterSetName(card)}, {"counters", counters}});
        const auto taken = held.partitions.find(card.id);
        Json devices = Json::array();
        for (const ledger::PartitionProfile& profile : card.profiles) {
          for (const ledger::Placement& placement : profile.placements) {
            const bool overlaps =
                taken != held.partitions.end() &&
                std::any_of(taken->second.begin(), taken->second.end(),
                            [&](const ledger::Placement& p) { return p.Overlaps(placement); });
            if (!overlaps) devices.push_back(PartitionDevice(group, card, profile, placement));
          }
        }
        partitions.emplace_back(&card, std::move(devices));
      }
    }
    pool_slices.push_back(
        SliceObject(SliceName(node, manufacturer), node, pool, generation, {{"devices", whole}}));
    for (size_t k = 0; k * kCounterSetsPerSlice < counter_sets.size(); ++k) {
      Json sets = Json::array();
      for (size_t i = k * kCounterSetsPerSlice;
           i < std::min(counter_sets.size(), (k + 1) * kCounterSetsPerSlice); ++i)
        sets.push_back(counter_sets[i]);
      pool_slices.push_back(SliceObject(base + "-counters-" + std::to_string(k) + "." + kDriverName,
                                        node, pool, generation, {{"sharedCounters", sets}}));
    }
    for (auto& [card, devices] : partitions) {
      pool_slices.push_back(SliceObject(base + "-" + DeviceName(*card) + "." + kDriverName, node,
                                        pool, generation, {{"devices", std::move(devices)}}));
    }
    for (Json& slice : pool_slices) {
      slice["spec"]["pool"]["resourceSliceCount"] = pool_slices.size();
      slices.push_back(std::move(slice));
    }
  }
  return slices;
}

}  // namespace gpustack::dra
