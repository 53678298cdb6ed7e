// How a manufacturer's containers get their cards, as data: the device nodes they use, whether the
// grant carries those nodes (no vendor runtime does it), the variable that names visible cards,
// and the variables a slice's budget is written to (docs/behaviour.md §6.3). Every plugin describes
// its vendor once in an Injection; EmitGrant and EmitDeviceNodes turn grants and queries into
// edits, so positional variables always follow ascending card index and bad grants fail the same
// way.
#ifndef GPUSTACK_SUPPORT_INJECTION_H_
#define GPUSTACK_SUPPORT_INJECTION_H_

#include <gpustack/plugin.hpp>

#include "gpustack_support/discovery.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpustack::support {

// One card as injection needs it.
struct InjectedCard {
  std::string id{};                  // the accelerator id
  uint32_t index = 0;                // enumeration index: positional variables follow it
  std::string visible{};             // how the visibility variable names it (uuid, physical id)
  std::vector<std::string> nodes{};  // its device nodes under /dev: "nvidia0", "dri/renderD128"
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct Injection {
  std::vector<std::string> shared_nodes{};  // every card's containers use these: "nvidiactl"
  bool inject_nodes = false;                // the grant carries the device nodes itself
  std::string visible_env{};                // "NVIDIA_VISIBLE_DEVICES"; empty: none
  EnvList fixed_env{};                      // set on every grant: AMD_VISIBLE_DEVICES=none
  // A slice's budget.
  std::string memory_env{};  // "CUDA_DEVICE_MEMORY_LIMIT_"; empty: the budget is not written here
  bool memory_env_positional = true;     // the card's position is appended: ..._LIMIT_0
  uint64_t memory_unit_bytes = 1 << 20;  // MiB, or 1 for bytes
  std::string memory_suffix{};           // "m" after the number, or nothing
  std::string cores_env{};               // "CUDA_DEVICE_SM_LIMIT"; empty: none
  EnvList slice_env{};                   // CUDA_DEVICE_ORDER=PCI_BUS_ID
  // A partition replaces its card in the visibility variable (NVIDIA_VISIBLE_DEVICES=MIG-...);
  // false: the card's own nodes and names are what a partition's container gets.
  bool partition_in_visible_env = false;
};

// The edits of `grant` over `cards` (those granted, in any order). INVALID_ARGUMENT for a grant
// the mode does not allow (no card; a shared, sliced or partitioned grant of several cards; a
// slice without a budget).
void EmitGrant(const Injection& injection, const sdk::Grant& grant, std::vector<InjectedCard> cards,
               sdk::ContainerEditSink& sink);

// Every device node of `cards`, the shared ones once.
void EmitDeviceNodes(const Injection& injection, const std::vector<InjectedCard>& cards,
                     sdk::DeviceNodeSink& sink);

// A plugin's grant and device-node hooks over its own card list (`Card` has a `uuid`; see
// CardsFor), each card turned into an InjectedCard by `inject`.
template <class Card, class Inject>
void GrantCards(sdk::Plugin& plugin, const std::vector<Card>& cards, const Injection& injection,
                const sdk::Grant& grant, sdk::ContainerEditSink& sink, Inject inject) {
  std::vector<InjectedCard> granted;
  for (const Card* card : CardsNamed(plugin, cards, grant.accelerator_ids)) {
    granted.push_back(inject(*card));
  }
  EmitGrant(injection, grant, std::move(granted), sink);
}

template <class Card, class Inject>
void ListCardDeviceNodes(sdk::Plugin& plugin, const std::vector<Card>& cards,
                         const Injection& injection, const std::vector<std::string>& ids,
                         sdk::DeviceNodeSink& sink, Inject inject) {
  std::vector<InjectedCard> listed;
  for (const Card* card : CardsFor(plugin, cards, ids)) listed.push_back(inject(*card));
  EmitDeviceNodes(injection, listed, sink);
}

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_INJECTION_H_
