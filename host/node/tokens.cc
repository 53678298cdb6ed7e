#include "host/node/tokens.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "host/dra/claims.h"
#include "host/ledger/views.h"

namespace gpustack::node {
namespace {

using ledger::Mode;

// How many tokens a card shows for a resource of `mode`.
uint32_t TokenCount(const ledger::CardState& card, Mode mode) {
  const ledger::Accelerator& a = *card.card;
  switch (mode) {
    case Mode::kExclusive:
      return a.partitioned() ? 0 : 1;
    case Mode::kShared:
      return a.partitioned() ? 0 : ledger::kSharedSlots;
    case Mode::kSliced:
      return a.sliceable() ? a.logical_count : 0;
    case Mode::kPartitioned: {
      if (!a.partitioned()) return 0;
      uint32_t most_free = 0;
      for (const ledger::PartitionProfile& p : a.profiles) {
        most_free = std::max(most_free, card.RemainingInstances(p));
      }
      return static_cast<uint32_t>(card.partitions.size()) + most_free;
    }
    case Mode::kNone:
      return kVisibilityTokensPerCard;
  }
  return 0;
}

}  // namespace

std::vector<ServedResource> ResourcesOf(const runtime::PluginIdentity& identity,
                                        const ModeSwitches& switches) {
  auto make = [&](std::string name, Mode mode) {
    return ServedResource{std::move(name), identity.manufacturer, identity.base_resource_name,
                          identity.partition_kind, mode};
  };
  const std::string& base = identity.base_resource_name;
  std::vector<ServedResource> served{make(base, Mode::kExclusive)};
  if (identity.Has(GPUSTACK_CAP_SHARED) && switches.shared)
    served.push_back(make(base + ".shared", Mode::kShared));
  if (identity.Has(GPUSTACK_CAP_LOGICAL_SLICING) && switches.sliced)
    served.push_back(make(base + ".sliced", Mode::kSliced));
  if (identity.Has(GPUSTACK_CAP_PARTITIONING) && switches.partitioned) {
    served.push_back(make(base + ".partitioned", Mode::kPartitioned));
  }
  served.push_back(
      make("device.gpustack.ai/" + identity.manufacturer + ".visibility", Mode::kNone));
  return served;
}

std::vector<Token> TokensOf(const ledger::NodeLedger& ledger, const ServedResource& resource) {
  std::vector<Token> tokens;
  const Mode mode = resource.mode;
  // A card a ResourceClaim holds is the DRA front end's: the kubelet must not offer it to a Pod.
  std::set<std::string> claimed;
  for (const auto& [owner, allocation] : ledger.allocations()) {
    if (!dra::IsClaimOwner(owner)) continue;
    for (const ledger::Charge& charge : allocation.charges) claimed.insert(charge.accelerator_id);
  }
  for (const ledger::CardState& card : ledger.cards()) {
    if (card.group->manufacturer != resource.manufacturer) continue;
    const uint32_t count = TokenCount(card, mode);
    const bool other_mode = mode != Mode::kNone && card.mode != Mode::kNone && card.mode != mode;
    const bool healthy = !card.card->unhealthy && !other_mode && !claimed.contains(card.card->id);
    for (uint32_t n = 0; n < count; ++n) {
      tokens.push_back({TokenId(card.group->id, card.card->index, n), card.card->id,
                        resource.visibility() || healthy, card.card->topology.numa_affinity});
    }
  }
  return tokens;
}

std::string TokenId(std::string_view group, uint32_t card_index, uint32_t n) {
  return std::string(group) + ":" + std::to_string(card_index) + ":" + std::to_string(n);
}

Result<TokenRef> ParseTokenId(std::string_view id) {
  const size_t second = id.rfind(':');
  const size_t first = second == std::string_view::npos ? second : id.rfind(':', second - 1);
  auto number = [](std::string_view text, uint32_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
  };
  TokenRef ref;
  if (first == std::string_view::npos || first == 0 ||
      !number(id.substr(first + 1, second - first - 1), ref.card_index) ||
      !number(id.substr(second + 1), ref.n)) {
    return Error{"device id \"" + std::string(id) + "\" is not one of this plugin's",
                 Code::kInvalidArgument};
  }
  ref.group = std::string(id.substr(0, first));
  return ref;
}

const ledger::Accelerator* CardOf(const ledger::NodeLedger& ledger, const std::string& manufacturer,
                                  const TokenRef& token) {
  for (const ledger::Group& g : ledger.spec().groups) {
    if (g.manufacturer != manufacturer || g.id != token.group) continue;
    for (const ledger::Accelerator& a : g.accelerators) {
      if (a.index == token.card_index) return &a;
    }
  }
  return nullptr;
}

}  // namespace gpustack::node
