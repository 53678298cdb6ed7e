// Pieces the in-tree plugins' discovery shares beyond the SDK's helpers (gpustack/plugin_util.hpp):
// a sink that discards (for a plugin that must re-enumerate before it can sample or partition),
// the cards a request names, and what becomes of a card a pass could not read.
#ifndef GPUSTACK_SUPPORT_DISCOVERY_H_
#define GPUSTACK_SUPPORT_DISCOVERY_H_

#include <gpustack/plugin.hpp>
#include <gpustack/plugin_util.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace gpustack::support {

// A discovery sink that accepts and drops everything.
class DiscardingSink {
 public:
  DiscardingSink();
  sdk::DiscoverySink& sink() { return sink_; }

 private:
  gpustack_discovery_sink raw_;
  sdk::DiscoverySink sink_;
};

// The cards `ids` names, in discovery order (none when it names none), discovering first if the
// plugin has not yet; NOT_FOUND names an id the node does not have. For grants.
template <class Card>
std::vector<const Card*> CardsNamed(sdk::Plugin& plugin, const std::vector<Card>& cards,
                                    const std::vector<std::string>& ids);

// The cards a metrics request names, in discovery order (every card when it names none),
// discovering first if the plugin has not yet; NOT_FOUND names an id the node does not have.
// `Card` has a `uuid`; `cards` is the plugin's own list, which its Discover refreshes.
template <class Card>
std::vector<const Card*> CardsFor(sdk::Plugin& plugin, const std::vector<Card>& cards,
                                  const std::vector<std::string>& ids) {
  if (cards.empty()) {
    DiscardingSink discard;
    plugin.Discover(discard.sink());
  }
  std::vector<const Card*> out;
  for (const Card& card : cards) {
    if (ids.empty() || std::find(ids.begin(), ids.end(), card.uuid) != ids.end()) {
      out.push_back(&card);
    }
  }
  for (const std::string& id : ids) {
    if (std::none_of(out.begin(), out.end(), [&](const Card* c) { return c->uuid == id; })) {
      throw sdk::Error(GPUSTACK_STATUS_NOT_FOUND, "no accelerator " + id + " on this node");
    }
  }
  return out;
}

template <class Card>
std::vector<const Card*> CardsNamed(sdk::Plugin& plugin, const std::vector<Card>& cards,
                                    const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  return CardsFor(plugin, cards, ids);
}

// A card a discovery pass could not read (`reason`): kept, unhealthy and as it was last read,
// when it was read before, and then `keep(last_read)` adds the plugin's own entry for it;
// otherwise left out and logged, since nothing names it. `where` names it ("device 3").
template <class Keep>
void KeepUnreadable(sdk::CardBook::Pass& pass, const sdk::CardBook& book, const sdk::Host& host,
                    size_t index, const std::string& where, const std::string& reason,
                    Keep&& keep) {
  if (pass.Unreadable(index, reason)) {
    keep(book.at(index).card);
  } else {
    host.Log(GPUSTACK_LOG_ERROR,
             where + " left out: " + reason + " (never read, so it cannot be named)");
  }
}

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_DISCOVERY_H_
