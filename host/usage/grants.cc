#include "host/usage/grants.h"

#include <algorithm>
#include <map>

#include "host/kube/quantity.h"
#include "host/usage/cgroup.h"

namespace gpustack::usage {
namespace {

constexpr const char* kUnsupported = "unsupported";

// The rows of one Pod on one card, summed; unset when any row's figure is unmeasured.
struct PodRows {
  std::optional<double> memory_used_mib = 0.0;
  std::optional<double> cores_percent = 0.0;
  std::string partition_id;
};

void AddTo(std::optional<double>& sum, const std::optional<double>& value) {
  if (sum && value) {
    *sum += *value;
  } else {
    sum.reset();
  }
}

}  // namespace

uint64_t SliceBudgetMib(uint32_t memory_percentage, uint64_t memory_mib, uint64_t card_memory_mib) {
  if (memory_percentage > 0) return card_memory_mib * memory_percentage / 100;
  return std::min(memory_mib, card_memory_mib);
}

uint64_t SliceBudgetOfLimits(const nlohmann::json& limits, uint64_t card_memory_mib) {
  if (!limits.is_object()) return 0;
  uint32_t percentage = 0;
  uint64_t mib = 0;
  for (const auto& [key, value] : limits.items()) {
    const auto whole = kube::WholeOf(value);
    if (!whole || *whole <= 0) continue;
    if (key.ends_with(".sliced.memory-percentage")) percentage = static_cast<uint32_t>(*whole);
    if (key.ends_with(".sliced.memory-mib")) mib = static_cast<uint64_t>(*whole);
  }
  if (percentage == 0 && mib == 0) return 0;
  return SliceBudgetMib(percentage, mib, card_memory_mib);
}

uint64_t SliceBudgetOfCredits(int64_t credits, uint64_t card_memory_mib) {
  if (credits <= 0) return 0;
  if (credits % ledger::kCreditsPerPercent == 0)
    return SliceBudgetMib(static_cast<uint32_t>(credits / ledger::kCreditsPerPercent), 0,
                          card_memory_mib);
  const auto product = static_cast<unsigned __int128>(credits) * card_memory_mib;
  return static_cast<uint64_t>((product + ledger::kCardCredits - 1) / ledger::kCardCredits);
}

Hold HoldOf(const std::vector<HeldCharge>& charges_on_card, uint64_t card_memory_mib,
            const ledger::Accelerator& card) {
  Hold hold;
  if (charges_on_card.empty()) return hold;
  hold.card_id = charges_on_card.front().charge.accelerator_id;
  hold.mode = charges_on_card.front().charge.mode;
  hold.grants = static_cast<int>(charges_on_card.size());
  hold.memory_total_mib = 0;
  hold.cores_allowance_percent = 0;
  for (const auto& [c, budget] : charges_on_card) {
    switch (c.mode) {
      case ledger::Mode::kSliced:
        hold.memory_total_mib +=
            budget > 0 ? budget : SliceBudgetOfCredits(c.credits, card_memory_mib);
        hold.cores_allowance_percent += c.cores_percentage;
        break;
      case ledger::Mode::kPartitioned: {
        const ledger::PartitionProfile* profile = card.FindProfile(c.profile);
        hold.memory_total_mib += profile != nullptr ? profile->memory_mib : 0;
        // A partition's processes are read against the partition itself (its own engines).
        hold.cores_allowance_percent = 100;
        break;
      }
      default:  // exclusive, and shared slots: the whole card, time-shared
        hold.memory_total_mib = card_memory_mib;
        hold.cores_allowance_percent = 100;
    }
  }
  return hold;
}

Attribution Attribute(const std::vector<CardReading>& cards, const std::vector<Hold>& holds,
                      const std::set<std::string>& node_pods, const PodOfPid& pod_of) {
  Attribution out;
  std::map<std::string, const CardReading*> by_id;
  // Per card: each holding Pod's rows, and whether every row could be placed.
  std::map<std::string, std::map<std::string, PodRows>> rows;
  std::set<std::string> blanked;
  for (const CardReading& card : cards) {
    by_id[card.id] = &card;
    bool memory_ok = card.processes_listed, cores_ok = card.processes_listed;
    std::set<std::string> holders;
    for (const Hold& h : holds)
      if (h.card_id == card.id) holders.insert(h.pod_uid);
    for (const ProcessReading& p : card.processes) {
      memory_ok = memory_ok && p.memory_used_mib.has_value();
      cores_ok = cores_ok && p.cores_percent.has_value();
      Result<std::string> uid = pod_of(p.pid);
      std::string reason, why;
      if (!uid) {
        reason = uid.failure().reason.empty() ? kExited : uid.failure().reason;
        why = uid.error();
      } else if (!holders.contains(*uid)) {
        reason = node_pods.contains(*uid) ? kMediated : kUnknownPod;
        why = "Pod " + *uid +
              (reason == kMediated ? " holds no grant on this card" : " is not one the node runs");
      }
      if (!reason.empty()) {
        out.unplaced.push_back(card.id + ": pid " + std::to_string(p.pid) + ": " + reason + ": " +
                               why);
        blanked.insert(card.id);
        continue;
      }
      PodRows& sum = rows[card.id][*uid];
      AddTo(sum.memory_used_mib, p.memory_used_mib);
      AddTo(sum.cores_percent, p.cores_percent);
      if (sum.partition_id.empty()) sum.partition_id = p.partition_id;
    }
    const std::string failed =
        card.processes_listed || card.unlisted_reason.empty() ? kUnsupported : card.unlisted_reason;
    for (const char* entry : {"memory", "cores"}) {
      const bool ok = entry == std::string("memory") ? memory_ok : cores_ok;
      out.capabilities.push_back({card.id, card.manufacturer, entry, ok, ok ? "" : failed});
    }
    if (!card.unlisted_reason.empty())
      out.unlisted.push_back(card.id + ": " + card.unlisted_reason);
  }

  for (const Hold& h : holds) {
    auto card = by_id.find(h.card_id);
    if (card == by_id.end()) continue;  // its plugin was not sampled this round
    const CardReading& c = *card->second;
    GrantSample g;
    g.hold = h;
    g.id = h.card_id;
    g.index = c.index;
    g.manufacturer = c.manufacturer;
    g.temperature_celsius = c.temperature_celsius;
    g.power_watts = c.power_watts;
    g.unhealthy = c.unhealthy;
    if (h.grants == 1 && !blanked.contains(h.card_id)) {
      if (c.processes_listed) {
        PodRows sum;
        if (auto r = rows[h.card_id].find(h.pod_uid); r != rows[h.card_id].end()) sum = r->second;
        if (!sum.partition_id.empty()) g.id = sum.partition_id;
        g.memory_used_mib = sum.memory_used_mib;
        if (sum.cores_percent && h.cores_allowance_percent > 0)
          g.cores_utilization_percent = *sum.cores_percent * 100.0 / h.cores_allowance_percent;
      } else if (h.mode == ledger::Mode::kExclusive) {
        // One Pod holds the whole card: the card's own figures are that Pod's.
        g.memory_used_mib = c.memory_used_mib;
        g.cores_utilization_percent = c.cores_percent;
      }
      if (g.memory_used_mib && h.memory_total_mib > 0)
        g.memory_utilization_percent = *g.memory_used_mib * 100.0 / h.memory_total_mib;
    }
    out.grants.push_back(std::move(g));
  }
  return out;
}

}  // namespace gpustack::usage
