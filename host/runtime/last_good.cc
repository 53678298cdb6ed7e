#include "host/runtime/last_good.h"

namespace gpustack::runtime {

const LastGoodDiscovery::Entry& LastGoodDiscovery::Update(
    const std::string& manufacturer, const Result<std::vector<CardGroup>>& pass) {
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

bool LastGoodDiscovery::SetHealth(const std::string& card_id, Health health,
                                  const std::string& reason) {
  for (auto& [manufacturer, entry] : entries_) {
    for (CardGroup& group : entry.groups) {
      for (Card& card : group.cards) {
        if (card.id != card_id) continue;
        card.health = health;
        card.health_reason = health == Health::kUnhealthy ? reason : std::string();
        return true;
      }
    }
  }
  return false;
}

}  // namespace gpustack::runtime
