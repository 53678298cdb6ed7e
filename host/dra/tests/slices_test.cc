// What a node offers the scheduler through DRA: every healthy whole card no Pod holds, one slice
// per manufacturer, and device names that lead back to the cards.
#include "host/dra/slices.h"

#include <gtest/gtest.h>

namespace gpustack::dra {
namespace {

ledger::Accelerator Card(const std::string& id, uint32_t index) {
  ledger::Accelerator card;
  card.id = id;
  card.index = index;
  return card;
}

ledger::DevicesSpec TwoManufacturers() {
  ledger::Group t4;
  t4.id = "t4";
  t4.manufacturer = "nvidia";
  t4.name = "Tesla T4";
  t4.memory = 15360;
  t4.driver_version = "535.104.05";
  t4.compute_capability = "7.5";
  for (uint32_t i = 0; i < 3; ++i) {
    t4.accelerators.push_back(Card("GPU-" + std::to_string(i), i));
    t4.accelerators.back().logical_count = 10;
  }
  t4.accelerators[2].unhealthy = true;
  ledger::Group mi;
  mi.id = "mi300x";
  mi.manufacturer = "amd";
  mi.name = "MI300X";
  mi.memory = 196608;
  mi.accelerators.push_back(Card("amd-0", 0));
  mi.accelerators.push_back(Card("amd-1", 1));
  ledger::PartitionProfile cpx;
  cpx.name = "cpx";
  cpx.memory_mib = 24576;
  cpx.count = 8;
  cpx.memory_slices = 1;
  cpx.compute_slices = 1;
  for (uint32_t i = 0; i < 8; ++i) cpx.placements.push_back({i, 1});
  mi.accelerators.back().profiles.push_back(cpx);
  ledger::DevicesSpec spec;
  spec.groups = {t4, mi};
  return spec;
}

std::vector<std::string> Names(const Json& slice) {
  std::vector<std::string> names;
  for (const Json& d : slice["spec"]["devices"]) names.push_back(d["name"]);
  return names;
}

TEST(ResourceSlices, OfferEveryHealthyWholeCardNoPodHolds) {
  const auto slices = ResourceSlices("node-a", TwoManufacturers(), {"GPU-1"}, 7);
  ASSERT_EQ(slices.size(), 2u);
  const Json& nvidia = slices[0];
  EXPECT_EQ(nvidia["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(nvidia["metadata"]["name"], "node-a-nvidia.gpustack.ai");
  EXPECT_EQ(nvidia["spec"]["driver"], "gpustack.ai");
  EXPECT_EQ(nvidia["spec"]["nodeName"], "node-a");
  EXPECT_EQ(nvidia["spec"]["pool"],
            (Json{{"name", "node-a/nvidia"}, {"generation", 7}, {"resourceSliceCount", 1}}));
  // card 1 is a Pod's, card 2 unhealthy
  EXPECT_EQ(Names(nvidia), std::vector<std::string>{"card-0"});
  const Json& card = nvidia["spec"]["devices"][0];
  EXPECT_EQ(card["attributes"]["manufacturer"], (Json{{"string", "nvidia"}}));
  EXPECT_EQ(card["attributes"]["model"], (Json{{"string", "t4"}}));
  EXPECT_EQ(card["attributes"]["uuid"], (Json{{"string", "GPU-0"}}));
  EXPECT_EQ(card["attributes"]["index"], (Json{{"int", 0}}));
  EXPECT_EQ(card["attributes"]["driverVersion"], (Json{{"string", "535.104.05"}}));
  EXPECT_EQ(card["attributes"]["type"], (Json{{"string", "card"}}));
  EXPECT_EQ(card["capacity"]["memory"], (Json{{"value", "15360Mi"}}));
  // a card in partition mode is not offered whole
  EXPECT_EQ(Names(slices[1]), std::vector<std::string>{"card-0"});
  EXPECT_EQ(slices[1]["spec"]["pool"]["name"], "node-a/amd");
}

TEST(ResourceSlices, AManufacturerWithNothingToOfferPublishesAnEmptySlice) {
  const auto slices = ResourceSlices("n", TwoManufacturers(), {"GPU-0", "GPU-1", "amd-0"}, 1);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_TRUE(slices[0]["spec"]["devices"].empty());
  EXPECT_TRUE(slices[1]["spec"]["devices"].empty());
}

TEST(ResourceSlices, CardsHeldByPodsLeaveOutClaimsHoldings) {
  ledger::NodeLedger ledger("n", TwoManufacturers());
  ledger::Request whole;
  whole.manufacturer = "nvidia";
  whole.base = "nvidia.com/gpu";
  whole.cards = {"GPU-0"};
  ASSERT_TRUE(ledger.Reserve({"pod-uid", "main"}, whole).ok());
  whole.cards = {"GPU-1"};
  ASSERT_TRUE(ledger.Reserve(ClaimOwner("claim-uid"), whole).ok());
  EXPECT_EQ(CardsHeldByPods(ledger), std::set<std::string>{"GPU-0"});
}

TEST(DeviceNames, LeadBackToTheirCardsAndPools) {
  const ledger::DevicesSpec spec = TwoManufacturers();
  auto card = CardOfDevice(spec, "nvidia", "card-1");
  ASSERT_TRUE(card.ok()) << card.error();
  EXPECT_EQ((*card)->id, "GPU-1");
  EXPECT_EQ(CardOfDevice(spec, "amd", "card-2").code(), Code::kNotFound);
  EXPECT_EQ(CardOfDevice(spec, "nvidia", "GPU-1").code(), Code::kNotFound);
  EXPECT_EQ(*ManufacturerOfPool("node-a", "node-a/nvidia"), "nvidia");
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-b/nvidia").ok());
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-a/").ok());
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-a/nvidia/x").ok());
}

}  // namespace
}  // namespace gpustack::dra
