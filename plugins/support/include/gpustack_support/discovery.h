// Pieces every plugin's discovery shares: a card's topology from the host's PCI inventory,
// cards grouped by product in the order they were found, and a sink that discards (for a plugin
// that must re-enumerate before it can sample or partition).
#ifndef GPUSTACK_SUPPORT_DISCOVERY_H_
#define GPUSTACK_SUPPORT_DISCOVERY_H_

#include <gpustack/plugin.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace gpustack::support {

// Sets pci_bus_id and, when the host's inventory has the function, its class, NUMA node, CPU
// affinity and root port. Returns the inventory entry (nullptr when absent: logged, topology
// left unknown).
const gpustack_pci_device* FillTopology(const sdk::Host& host, const std::string& bus_id,
                                        sdk::Accelerator& card);

class GroupBuilder {
 public:
  // Appends `card` to the group of `product`, made by `make` the first time the product is seen.
  // The card's index is its position among all cards added so far.
  void Add(const std::string& product, const std::function<sdk::AcceleratorGroup()>& make,
           sdk::Accelerator card);
  uint32_t next_index() const { return next_index_; }
  // Reports every group, only now: a failure earlier reports nothing (the host keeps its last
  // good result).
  void Report(sdk::DiscoverySink& sink) const;

 private:
  std::vector<sdk::AcceleratorGroup> groups_;
  uint32_t next_index_ = 0;
};

// A discovery sink that accepts and drops everything.
class DiscardingSink {
 public:
  DiscardingSink();
  sdk::DiscoverySink& sink() { return sink_; }

 private:
  gpustack_discovery_sink raw_;
  sdk::DiscoverySink sink_;
};

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

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_DISCOVERY_H_
