// What the kubelet is shown: token counts agree with the ledger's view, cards held in another
// mode go Unhealthy (visibility exempt), and only our own ids parse.
#include "host/node/tokens.h"

#include <gtest/gtest.h>

#include "host/ledger/views.h"
#include "host/node/tests/node_fixture.h"

namespace gpustack::node {
namespace {

std::map<std::string, int64_t> Counts(const ledger::NodeLedger& ledger,
                                      const std::vector<ServedResource>& served) {
  std::map<std::string, int64_t> counts;
  for (const ServedResource& r : served) {
    counts[r.name] = static_cast<int64_t>(TokensOf(ledger, r).size());
  }
  return counts;
}

TEST(Tokens, CountsAreTheLedgersAdvertisedCounts) {
  runtime::testing::Node node;
  auto runtime = testing::AcmeRuntime(node, 3);
  ASSERT_NE(runtime, nullptr);
  const auto identity = runtime->RunningIdentities().at(0);
  const auto served = ResourcesOf(identity, {});
  ASSERT_EQ(served.size(), 4u);  // base, shared, sliced, visibility: acme does not partition
  runtime->WithLedger([&](ledger::NodeLedger& ledger) {
    auto counts = Counts(ledger, served);
    auto expected = ledger::AdvertisedCounts(
        ledger, {identity.manufacturer, identity.base_resource_name, identity.partition_kind});
    expected.erase(identity.base_resource_name + ".partitioned");  // not served
    expected["device.gpustack.ai/acme.visibility"] = 3 * kVisibilityTokensPerCard;
    EXPECT_EQ(counts, expected);
  });
}

TEST(Tokens, ModeSwitchesLeaveOutWhatTheyTurnOff) {
  runtime::PluginIdentity identity;
  identity.manufacturer = "acme";
  identity.base_resource_name = "acme.example.com/accel";
  identity.capabilities |= GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING;
  identity.capabilities |= GPUSTACK_CAP_PARTITIONING;
  std::vector<std::string> names;
  for (const ServedResource& r : ResourcesOf(identity, {false, true, false})) {
    names.push_back(r.name);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"acme.example.com/accel", "acme.example.com/accel.sliced",
                                      "device.gpustack.ai/acme.visibility"}));
}

TEST(Tokens, ACardHeldInOneModeIsUnhealthyForTheOthers) {
  runtime::testing::Node node;
  auto runtime = testing::AcmeRuntime(node);
  ASSERT_NE(runtime, nullptr);
  const auto served = ResourcesOf(runtime->RunningIdentities().at(0), {});
  runtime->WithLedger([&](ledger::NodeLedger& ledger) {
    ledger::Request whole;
    whole.manufacturer = "acme";
    whole.cards = {"acme-card-0"};
    ASSERT_TRUE(ledger.Reserve({"pod", "main"}, whole));
    for (const ServedResource& r : served) {
      for (const Token& t : TokensOf(ledger, r)) {
        const bool held_elsewhere = t.card_id == "acme-card-0" &&
                                    r.mode != ledger::Mode::kExclusive &&
                                    r.mode != ledger::Mode::kNone;
        EXPECT_EQ(t.healthy, !held_elsewhere) << r.name << " " << t.id;
      }
    }
  });
}

TEST(Tokens, OnlyOurIdsParse) {
  auto ok = ParseTokenId("h100-80gb-hbm3:7:6");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->group, "h100-80gb-hbm3");
  EXPECT_EQ(ok->card_index, 7u);
  EXPECT_EQ(ok->n, 6u);
  for (const char* bad : {"GPU-a10a0000-1111", "a10g:0", ":0:1", "a10g:x:1", "a10g:0:1x",
                          "a10g:0:", "a10g:-1:2", ""}) {
    auto parsed = ParseTokenId(bad);
    EXPECT_FALSE(parsed) << bad;
    if (!parsed) {
      EXPECT_EQ(parsed.code(), Code::kInvalidArgument);
    }
  }
  // The kubelet's limit is 63 characters: a 253-character group id would break it, ours do not.
  EXPECT_LE(TokenId("h100-80gb-hbm3", 4294967295u, 4294967295u).size(), 63u);
}

}  // namespace
}  // namespace gpustack::node
