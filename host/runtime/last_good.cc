#include "host/runtime/last_good.h"

namespace gpustack::runtime {

const LastGoodDiscovery::Entry& LastGoodDiscovery::Update(
    const std::string& manufacturer, const Result<std::vector<sdk::AcceleratorGroup>>& pass) {
  Entry& entry = entries_[manufacturer];
  if (pass) {
    entry = Entry{*pass, true, false, {}, 0};
  } else {
    entry.stale = entry.discovered;  // only meaningful when something is published
    entry.last_error = pass.failure();
    ++entry.failed_passes;
  }
  return entry;
}

bool LastGoodDiscovery::SetHealth(const std::string& card_id, gpustack_health health,
                                  const std::string& reason) {
  for (auto& [manufacturer, entry] : entries_) {
    for (sdk::AcceleratorGroup& group : entry.groups) {
      for (sdk::Accelerator& card : group.accelerators) {
        if (card.id != card_id) continue;
        card.health = health;
        card.health_reason = health == GPUSTACK_HEALTH_UNHEALTHY ? reason : std::string();
        return true;
      }
    }
  }
  return false;
}

}  // namespace gpustack::runtime
