// What the node advertises to the kubelet (docs/behaviour.md §6.1): per manufacturer, one resource
// per sharing mode its plugin offers, each a list of tokens with a health. Pure: a function of the
// ledger.
//
// Token ids are `<group>:<card index>:<n>` (at most 63 characters, the kubelet's limit, which a
// card UUID would break). A card held in another mode keeps its tokens, reported Unhealthy, so
// the kubelet cannot hand them to a second mode; visibility tokens are exempt.
#ifndef GPUSTACK_HOST_NODE_TOKENS_H_
#define GPUSTACK_HOST_NODE_TOKENS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/ledger.h"
#include "host/runtime/types.h"

namespace gpustack::node {

// The mode switches of the daemon (--no-shared, --no-sliced, --no-partitioned).
struct ModeSwitches {
  bool shared = true;
  bool sliced = true;
  bool partitioned = true;
};

struct ServedResource {
  std::string name;          // "nvidia.com/gpu.sliced"
  std::string manufacturer;  // "nvidia"
  std::string base;          // "nvidia.com/gpu"
  std::string partition_kind;
  // The mode this resource's cards are held in; kNone for the visibility resource, whose tokens
  // show an SSH sidecar its Pod's cards and hold nothing.
  ledger::Mode mode = ledger::Mode::kExclusive;
  bool visibility() const { return mode == ledger::Mode::kNone; }
  bool operator==(const ServedResource&) const = default;
};

// SSH sidecars see their owner's cards through this many tokens per card.
inline constexpr uint32_t kVisibilityTokensPerCard = 512;

// The resources a plugin serves: its base name always, the modes its capabilities and the
// switches allow, and device.gpustack.ai/<manufacturer>.visibility.
std::vector<ServedResource> ResourcesOf(const runtime::PluginIdentity& identity,
                                        const ModeSwitches& switches);

struct Token {
  std::string id;
  std::string card_id;
  bool healthy = true;
  int32_t numa = -1;  // -1: no NUMA preference
  bool operator==(const Token&) const = default;
};

// Every token of `resource` on this node, in spec order. Counts agree with
// ledger::AdvertisedCounts; a resource whose cards are gone has no tokens (its pool goes to 0).
std::vector<Token> TokensOf(const ledger::NodeLedger& ledger, const ServedResource& resource);

struct TokenRef {
  std::string group;
  uint32_t card_index = 0;
  uint32_t n = 0;
};
std::string TokenId(std::string_view group, uint32_t card_index, uint32_t n);
// INVALID_ARGUMENT for an id not of our shape (another plugin's).
Result<TokenRef> ParseTokenId(std::string_view id);

// The card a token names in the ledger's spec; nullptr when none.
const ledger::Accelerator* CardOf(const ledger::NodeLedger& ledger, const std::string& manufacturer,
                                  const TokenRef& token);

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_TOKENS_H_
