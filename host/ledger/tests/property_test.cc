// Property tests over seeded random request streams: no card is ever over capacity, the
// incremental ledger equals a brute-force recomputation from its allocations, release restores
// the ledger exactly, and JSON round-trips.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "host/ledger/tests/fixtures.h"
#include "host/ledger/views.h"

namespace gpustack::ledger {
namespace {

using namespace testing;

// Per-card totals recomputed from the allocations alone, not from the ledger's card state.
struct Brute {
  int64_t credits = 0;
  uint32_t slots = 0, slices = 0, cores = 0;
  std::set<Mode> modes;
  std::vector<Placement> placements;
};

std::map<std::string, Brute> Recompute(const NodeLedger& node) {
  std::map<std::string, Brute> cards;
  for (const auto& [owner, allocation] : node.allocations()) {
    for (const Charge& c : allocation.charges) {
      Brute& b = cards[c.accelerator_id];
      b.credits += c.credits;
      b.slots += c.shared_slots;
      if (c.mode == Mode::kSliced) {
        ++b.slices;
        b.cores += c.cores_percentage;
      }
      b.modes.insert(c.mode);
      if (c.mode == Mode::kPartitioned) b.placements.push_back(c.placement);
    }
  }
  return cards;
}

void CheckInvariants(const NodeLedger& node) {
  const auto brute = Recompute(node);
  for (const CardState& c : node.cards()) {
    auto it = brute.find(c.card->id);
    const Brute b = it == brute.end() ? Brute{} : it->second;
    ASSERT_LE(b.credits, kCardCredits) << c.card->id << " over capacity";
    ASSERT_LE(b.slots, static_cast<uint32_t>(kSharedSlots)) << c.card->id;
    ASSERT_LE(b.modes.size(), 1u) << c.card->id << " held in two modes";
    if (c.card->sliceable()) {
      ASSERT_LE(b.slices, c.card->logical_count) << c.card->id;
    }
    if (!c.card->cores_percentage_overcommit) {
      ASSERT_LE(b.cores, 100u) << c.card->id;
    }
    for (size_t i = 0; i < b.placements.size(); ++i) {
      for (size_t j = i + 1; j < b.placements.size(); ++j) {
        ASSERT_FALSE(b.placements[i].Overlaps(b.placements[j])) << c.card->id;
      }
    }
    // The incremental state equals the brute-force one.
    ASSERT_EQ(c.allocated, b.credits) << c.card->id;
    ASSERT_EQ(c.shared_slots, b.slots) << c.card->id;
    ASSERT_EQ(c.slices, b.slices) << c.card->id;
    ASSERT_EQ(c.mode, b.modes.empty() ? Mode::kNone : *b.modes.begin()) << c.card->id;
  }
  // A ledger rebuilt from scratch (Restore of every allocation) has the same status and views.
  NodeLedger rebuilt(node.node(), node.spec());
  for (const auto& [owner, allocation] : node.allocations()) {
    auto restored = rebuilt.Restore(allocation);
    ASSERT_TRUE(restored) << restored.error();
  }
  ASSERT_EQ(rebuilt.ToStatus(), node.ToStatus());
  const std::string group = node.spec().groups[0].id;
  ASSERT_EQ(ComputePoolViews({&rebuilt}, "nvidia", group),
            ComputePoolViews({&node}, "nvidia", group));
}

Request RandomRequest(std::mt19937& rng) {
  static const std::pair<const char*, uint64_t> kProfiles[] = {
      {"1g.10gb", 10240}, {"1g.20gb", 20480}, {"2g.20gb", 20480},
      {"3g.40gb", 40960}, {"4g.40gb", 40960}, {"7g.80gb", 81920}};
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      return Whole(Mode::kExclusive, std::uniform_int_distribution<uint32_t>(1, 3)(rng));
    case 1:
      return Whole(Mode::kShared, std::uniform_int_distribution<uint32_t>(1, 10)(rng));
    case 2:
      return Sliced(std::uniform_int_distribution<uint32_t>(1, 100)(rng), 81920,
                    std::uniform_int_distribution<uint32_t>(1, 100)(rng));
    default: {
      const auto& [name, mib] = kProfiles[std::uniform_int_distribution<int>(0, 5)(rng)];
      return Partition(name, mib);
    }
  }
}

class RandomStreams : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RandomStreams, LedgerInvariantsHold) {
  std::mt19937 rng(GetParam());
  DevicesSpec spec = H100Node(static_cast<int>(GetParam() % 9));  // 0..8 partitioned cards
  // Some seeds use a non-overcommitting, few-slot manufacturer shape on the sliceable cards.
  if (GetParam() % 3 == 0) {
    for (Accelerator& a : spec.groups[0].accelerators) {
      if (!a.partitioned()) {
        a.logical_count = 4;
        a.cores_percentage_overcommit = false;
      }
    }
  }
  NodeLedger node("n", spec);
  const DevicesStatus idle = node.ToStatus();
  std::vector<Owner> held;
  int granted = 0, refused = 0;
  for (int step = 0; step < 400; ++step) {
    if (!held.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      const size_t i = std::uniform_int_distribution<size_t>(0, held.size() - 1)(rng);
      if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
        node.ReleaseTerminated(held[i]);
      } else {
        ASSERT_TRUE(node.Release(held[i]) || !node.allocations().count(held[i]));
      }
      if (!node.allocations().count(held[i])) held.erase(held.begin() + static_cast<long>(i));
    } else {
      const Owner owner{"pod-" + std::to_string(step), "c"};
      auto reserved = node.Reserve(owner, RandomRequest(rng));
      if (reserved) {
        held.push_back(owner);
        ++granted;
        // JSON round-trip of what was granted.
        auto back = AllocationFromJson(ToJson(*reserved));
        ASSERT_TRUE(back) << back.error();
        ASSERT_EQ(*back, *reserved);
      } else {
        ++refused;
        ASSERT_FALSE(reserved.error().empty());
      }
    }
    CheckInvariants(node);
    if (::testing::Test::HasFatalFailure()) return;
    auto status = StatusFromJson(ToJson(node.ToStatus()));
    ASSERT_TRUE(status) << status.error();
    ASSERT_EQ(*status, node.ToStatus());
  }
  EXPECT_GT(granted, 20);
  EXPECT_GT(refused, 0) << "the stream never filled the node";
  for (const Owner& owner : held) node.Release(owner);
  EXPECT_EQ(node.ToStatus(), idle) << "releasing everything restores the idle ledger";
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomStreams, ::testing::Range(1u, 31u));

TEST(Json, SpecRoundTripsAndErrorsNameTheField) {
  const DevicesSpec spec = H100Node(2);
  auto back = SpecFromJson(ToJson(spec));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, spec);
  nlohmann::json j = ToJson(spec);
  EXPECT_EQ(j["groups"][0]["acceleratorSlicedDetail"]["physical"]["count"], 14);
  EXPECT_EQ(j["groups"][0]["accelerators"][0]["status"]["physicalSliced"]["profiles"][3]["name"],
            "3g.40gb");
  j["groups"][0]["accelerators"][1]["status"]["logicalSliced"]["count"] = -3;
  auto bad = SpecFromJson(j);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(),
            "spec.groups[0].accelerators[1].status.logicalSliced.count: must be a "
            "non-negative integer, got -3");
  j = ToJson(spec);
  j["groups"][0].erase("id");
  EXPECT_EQ(SpecFromJson(j).error(), "spec.groups[0].id: is required");
  auto mode = StatusFromJson(
      {{"groups",
        {{{"id", "g"}, {"manufacturer", "m"}, {"accelerators", {{{"id", "a"}, {"mode", 9u}}}}}}}});
  ASSERT_FALSE(mode);
  EXPECT_EQ(mode.error(),
            "status.groups[0].accelerators[0].mode: 9 is not 0..4 (None..Partitioned)");
}

}  // namespace
}  // namespace gpustack::ledger
