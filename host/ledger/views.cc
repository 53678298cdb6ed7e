#include "host/ledger/views.h"

#include <algorithm>

namespace gpustack::ledger {
namespace {

bool Usable(const CardState& c, Mode mode) {
  return !c.card->unhealthy && (c.mode == Mode::kNone || c.mode == mode);
}

// Free slots a card can still grant as shares, free VRAM percent it can still slice.
uint32_t FreeSlots(const CardState& c) {
  return Usable(c, Mode::kShared) ? kSharedSlots - c.shared_slots : 0;
}
int64_t FreePercent(const CardState& c) {
  return Usable(c, Mode::kSliced) ? c.remaining() / kCreditsPerPercent : 0;
}
// Whether the card can take another slice: the same limits Fit applies (mode, slot, credits,
// compute without overcommit), so the views never promise what Fit refuses.
bool CanSlice(const CardState& c) {
  return c.card->sliceable() && Usable(c, Mode::kSliced) && c.slices < c.card->logical_count &&
         c.remaining() > 0 && (c.card->cores_percentage_overcommit || c.cores_percentage < 100);
}
uint32_t MaxRemainingInstances(const CardState& c) {
  if (c.card->unhealthy) return 0;
  uint32_t best = 0;
  for (const PartitionProfile& p : c.card->profiles) best = std::max(best, c.RemainingInstances(p));
  return best;
}

}  // namespace

PoolViews ComputePoolViews(const std::vector<const NodeLedger*>& nodes,
                           std::string_view manufacturer, std::string_view group_id) {
  PoolViews v;
  std::map<std::string, uint32_t> allocated, remaining;
  std::vector<std::string> profile_order;
  for (const NodeLedger* node : nodes) {
    int64_t free_on_node = 0;
    for (const CardState& c : node->cards()) {
      if (c.group->manufacturer != manufacturer || c.group->id != group_id) continue;
      if (c.card->partitioned()) {
        v.partitioned.capacity += c.card->PhysicalCount();
        uint32_t free = 0;  // the card's largest free count across profiles
        for (const PartitionProfile& p : c.card->profiles) {
          const uint32_t n = c.card->unhealthy ? 0 : c.RemainingInstances(p);
          free = std::max(free, n);
          auto [it, added] = remaining.try_emplace(p.name, 0);
          if (added) profile_order.push_back(p.name);
          it->second += n;
          if (!c.partitions.empty()) allocated[p.name] += c.AllocatedInstances(p.name);
        }
        v.partitioned.remaining += free;
        if (free > 0) v.partitioned.once_max_request = 1;
        continue;
      }
      v.exclusive.capacity += 1;
      if (c.mode == Mode::kNone && !c.card->unhealthy) {
        v.exclusive.remaining += 1;
        ++free_on_node;
      }
      v.shared.capacity += kSharedSlots;
      v.shared.remaining += FreeSlots(c);
      v.shared.once_max_request = std::max<int64_t>(v.shared.once_max_request, FreeSlots(c));
      if (c.card->sliceable()) {
        v.sliced.capacity += 100;
        v.sliced.remaining += FreePercent(c);
        if (CanSlice(c))
          v.sliced.once_max_request = std::max(v.sliced.once_max_request, FreePercent(c));
      }
    }
    v.exclusive.once_max_request = std::max(v.exclusive.once_max_request, free_on_node);
  }
  for (const std::string& name : profile_order) {
    v.remaining_profiles.push_back({name, remaining[name]});
    if (allocated[name] > 0) v.allocated_profiles.push_back({name, allocated[name]});
  }
  return v;
}

std::string FormatViews(const PoolViews& v) {
  auto pair = [](const ResourceView& r) {
    return std::to_string(r.once_max_request) + "/" + std::to_string(r.remaining);
  };
  return pair(v.exclusive) + " " + pair(v.shared) + " " + pair(v.sliced) + " " +
         pair(v.partitioned);
}

ResourceView CpuView(const std::vector<CpuNode>& nodes) {
  ResourceView v;
  for (const CpuNode& n : nodes) {
    const int64_t free = std::max<int64_t>(0, n.cores - n.requested);
    v.capacity += n.cores;
    v.remaining += free;
    v.once_max_request = std::max(v.once_max_request, free);
  }
  return v;
}

std::map<std::string, int64_t> CountingKeys(const NodeLedger& node, const ResourceKind& kind) {
  int64_t sliceable = 0, cores = 0, mib = 0, partitioned = 0;
  std::map<std::string, int64_t> per_profile;
  for (const CardState& c : node.cards()) {
    if (c.group->manufacturer != kind.manufacturer) continue;
    if (c.card->sliceable()) {
      ++sliceable;
      cores += c.card->cores_percentage_overcommit ? int64_t{c.card->logical_count} * 100 : 100;
      mib += static_cast<int64_t>(c.group->memory);
    }
    if (c.card->partitioned()) {
      ++partitioned;
      for (const PartitionProfile& p : c.card->profiles) {
        per_profile[p.name] += c.AllocatedInstances(p.name) + c.RemainingInstances(p);
      }
    }
  }
  std::map<std::string, int64_t> keys;
  if (sliceable > 0) {
    keys[kind.base + ".sliced.units"] = sliceable * kCardCredits;
    keys[kind.base + ".sliced.cores-percentage"] = cores;
    keys[kind.base + ".sliced.memory-percentage"] = sliceable * 100;
    keys[kind.base + ".sliced.memory-mib"] = mib;
  }
  if (partitioned > 0) {
    keys[kind.base + ".partitioned.units"] = partitioned * kCardCredits;
    for (const auto& [name, count] : per_profile) {
      keys[kind.base + ".partitioned." + kind.partition_kind + "-" + name] = count;
    }
  }
  return keys;
}

std::map<std::string, int64_t> AdvertisedCounts(const NodeLedger& node, const ResourceKind& kind) {
  std::map<std::string, int64_t> counts{{kind.base, 0},
                                        {kind.base + ".shared", 0},
                                        {kind.base + ".sliced", 0},
                                        {kind.base + ".partitioned", 0}};
  for (const CardState& c : node.cards()) {
    if (c.group->manufacturer != kind.manufacturer) continue;
    if (c.card->partitioned()) {
      counts[kind.base + ".partitioned"] +=
          static_cast<int64_t>(c.partitions.size()) + MaxRemainingInstances(c);
      continue;
    }
    counts[kind.base] += 1;
    counts[kind.base + ".shared"] += kSharedSlots;
    if (c.card->sliceable()) counts[kind.base + ".sliced"] += c.card->logical_count;
  }
  return counts;
}

std::map<std::string, int64_t> FitLabels(const NodeLedger& node) {
  std::map<std::string, int64_t> labels;
  for (const CardState& c : node.cards()) {
    if (c.card->partitioned()) continue;
    const std::string akey = c.group->manufacturer + "-" + c.group->id;
    int64_t& units = labels["sliced-max-free-units.fit.gpustack.ai/" + akey];
    int64_t& shared = labels["shared-free-cards.fit.gpustack.ai/" + akey];
    int64_t& slots = labels["shared-max-free-slots.fit.gpustack.ai/" + akey];
    if (CanSlice(c)) units = std::max(units, c.remaining());
    if (FreeSlots(c) > 0) ++shared;
    slots = std::max<int64_t>(slots, FreeSlots(c));
  }
  return labels;
}

}  // namespace gpustack::ledger
