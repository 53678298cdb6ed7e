// What a node offers the scheduler through DRA: every healthy whole card no Pod holds, one slice
// per manufacturer, and device names that lead back to the cards.
#include "host/dra/slices.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  const auto slices =
      ResourceSlices("node-a", TwoManufacturers(), {.cards = {"GPU-1"}, .partitions = {}}, 7);
  ASSERT_EQ(slices.size(), 4u);  // nvidia's cards; amd's cards, counters and card-1's partitions
  const Json& nvidia = slices[0];
  EXPECT_EQ(nvidia["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(nvidia["metadata"]["name"], "node-a-nvidia.gpustack.ai");
  EXPECT_EQ(nvidia["spec"]["driver"], "gpustack.ai");
  EXPECT_EQ(nvidia["spec"]["nodeName"], "node-a");
  EXPECT_EQ(nvidia["spec"]["pool"],
            (Json{{"name", "node-a/nvidia"}, {"generation", 7}, {"resourceSliceCount", 1}}));
  EXPECT_EQ(slices[1]["spec"]["pool"]["resourceSliceCount"], 3);
  // card 1 is a Pod's, card 2 unhealthy
  EXPECT_EQ(Names(nvidia), std::vector<std::string>{"card-0"});
  const Json& card = nvidia["spec"]["devices"][0];
  EXPECT_EQ(card["attributes"]["manufacturer"], (Json{{"string", "nvidia"}}));
  EXPECT_EQ(card["attributes"]["model"], (Json{{"string", "t4"}}));
  EXPECT_EQ(card["attributes"]["uuid"], (Json{{"string", "GPU-0"}}));
  EXPECT_EQ(card["attributes"]["index"], (Json{{"int", 0}}));
  EXPECT_EQ(card["attributes"]["driverVersion"], (Json{{"string", "535.104.05"}}));
  EXPECT_EQ(card["attributes"]["type"], (Json{{"string", "card"}}));
  // A card that slices is consumable capacity; a claim naming none consumes the whole card.
  EXPECT_EQ(card["allowMultipleAllocations"], true);
  EXPECT_EQ(card["capacity"]["memory"],
            (Json{{"value", "15360Mi"},
                  {"requestPolicy",
                   {{"default", "15360Mi"}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}));
  EXPECT_EQ(card["capacity"]["cores"]["requestPolicy"]["default"], "100");
  EXPECT_EQ(card["capacity"]["slices"],
            (Json{{"value", "10"},
                  {"requestPolicy", {{"default", "1"}, {"validValues", Json::array({"1"})}}}}));
  // a card in partition mode is not offered whole; one that does not slice is a plain device
  EXPECT_EQ(Names(slices[1]), std::vector<std::string>{"card-0"});
  const Json& plain = slices[1]["spec"]["devices"][0];
  EXPECT_FALSE(plain.contains("allowMultipleAllocations"));
  EXPECT_EQ(plain["capacity"], (Json{{"memory", {{"value", "196608Mi"}}}}));
  EXPECT_EQ(slices[1]["spec"]["pool"]["name"], "node-a/amd");
}

TEST(ResourceSlices, AManufacturerWithNothingToOfferPublishesAnEmptySlice) {
  const auto slices = ResourceSlices("n", TwoManufacturers(),
                                     {.cards = {"GPU-0", "GPU-1", "amd-0"}, .partitions = {}}, 1);
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_TRUE(slices[0]["spec"]["devices"].empty());
  EXPECT_TRUE(slices[1]["spec"]["devices"].empty());
}

TEST(ResourceSlices, PartitionsAreDevicesConsumingTheirCardsMemorySlices) {
  HeldByPods held;
  held.partitions["amd-1"] = {{2, 1}};  // a Pod holds the partition at memory slice 2
  const auto slices = ResourceSlices("n", TwoManufacturers(), held, 3);
  const Json& counters = slices[2];
  EXPECT_EQ(counters["metadata"]["name"], "n-amd-counters-0.gpustack.ai");
  EXPECT_FALSE(counters["spec"].contains("devices"));
  ASSERT_EQ(counters["spec"]["sharedCounters"].size(), 1u);
  const Json& set = counters["spec"]["sharedCounters"][0];
  EXPECT_EQ(set["name"], "card-1");
  EXPECT_EQ(set["counters"].size(), 8u);
  EXPECT_EQ(set["counters"]["memory-slice-7"], (Json{{"value", "1"}}));
  const Json& card = slices[3];
  EXPECT_EQ(card["metadata"]["name"], "n-amd-card-1.gpustack.ai");
  EXPECT_EQ(card["spec"]["pool"]["name"], "n/amd");
  std::vector<std::string> names = Names(card);
  EXPECT_EQ(names.size(), 7u);  // eight placements, one held
  EXPECT_EQ(std::count(names.begin(), names.end(), "card-1-cpx-at-2"), 0);
  const Json& first = card["spec"]["devices"][0];
  EXPECT_EQ(first["name"], "card-1-cpx-at-0");
  EXPECT_EQ(first["attributes"]["type"], (Json{{"string", "partition"}}));
  EXPECT_EQ(first["attributes"]["profile"], (Json{{"string", "cpx"}}));
  EXPECT_EQ(first["attributes"]["parentUUID"], (Json{{"string", "amd-1"}}));
  EXPECT_EQ(first["consumesCounters"],
            (Json::array({{{"counterSet", "card-1"},
                           {"counters", {{"memory-slice-0", {{"value", "1"}}}}}}})));
  // The name leads back to the card, profile and placement.
  const ledger::DevicesSpec spec = TwoManufacturers();  // the refs point into it
  auto partition = PartitionOfDevice(spec, "amd", "card-1-cpx-at-5");
  ASSERT_TRUE(partition.has_value());
  EXPECT_EQ(partition->card.card->id, "amd-1");
  EXPECT_EQ(partition->profile->name, "cpx");
  EXPECT_EQ(partition->placement.start, 5u);
  EXPECT_FALSE(PartitionOfDevice(spec, "amd", "card-1-cpx-at-9").has_value());
  auto asked = LedgerRequestFor({{"p", "n/amd", "card-1-cpx-at-5"}}, spec, "n", {});
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->request.mode, ledger::Mode::kPartitioned);
  EXPECT_EQ(asked->request.profile, "cpx");
  EXPECT_EQ(asked->request.placement->start, 5u);
  EXPECT_EQ(asked->request.cards, std::vector<std::string>{"amd-1"});
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
  EXPECT_EQ(HeldByPodsOf(ledger).cards, std::set<std::string>{"GPU-0"});
}

TEST(DeviceNames, LeadBackToTheirCardsAndPools) {
  const ledger::DevicesSpec spec = TwoManufacturers();
  auto card = CardOfDevice(spec, "nvidia", "card-1");
  ASSERT_TRUE(card.ok()) << card.error();
  EXPECT_EQ(card->card->id, "GPU-1");
  EXPECT_EQ(card->group->id, "t4");
  EXPECT_EQ(CardOfDevice(spec, "amd", "card-2").code(), Code::kNotFound);
  EXPECT_EQ(CardOfDevice(spec, "nvidia", "GPU-1").code(), Code::kNotFound);
  EXPECT_EQ(*ManufacturerOfPool("node-a", "node-a/nvidia"), "nvidia");
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-b/nvidia").ok());
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-a/").ok());
  EXPECT_FALSE(ManufacturerOfPool("node-a", "node-a/nvidia/x").ok());
}

AllocatedDevice Share(const std::string& device, const std::string& memory,
                      const std::string& cores) {
  AllocatedDevice d{"gpu", "node-a/nvidia", device};
  d.share_id = "share-" + device;
  d.consumed = {{"memory", memory}, {"cores", cores}, {"slices", "1"}};
  return d;
}

TEST(LedgerRequestFor, WholeCardsAreExclusive) {
  const ClaimRef ref{"ns", "c", "u"};
  auto asked = LedgerRequestFor({{"a", "node-a/nvidia", "card-1"},
                                 {"b", "node-a/nvidia", "card-0"},
                                 Share("card-0", "15360Mi", "100")},
                                TwoManufacturers(), "node-a", ref);
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->manufacturer, "nvidia");
  EXPECT_EQ(asked->request.mode, ledger::Mode::kExclusive);
  EXPECT_EQ(asked->request.count, 2u);  // a share of everything is the whole card, once
  EXPECT_EQ(asked->request.cards, (std::vector<std::string>{"GPU-1", "GPU-0"}));
  EXPECT_EQ(asked->card_memory_mib, 15360u);
}

TEST(LedgerRequestFor, AShareIsASliceOfItsCard) {
  auto asked =
      LedgerRequestFor({Share("card-1", "3072Mi", "40")}, TwoManufacturers(), "node-a", {});
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->request.mode, ledger::Mode::kSliced);
  EXPECT_EQ(asked->request.memory_mib, 3072u);
  EXPECT_EQ(asked->request.cores_percentage, 40u);
  EXPECT_EQ(asked->request.units, 320000);  // 3072 / 15360 of a card
  EXPECT_EQ(asked->request.cards, std::vector<std::string>{"GPU-1"});
  // A capacity the share does not name is the whole of it: all the memory at 40 % compute.
  AllocatedDevice cores_only{"gpu", "node-a/nvidia", "card-0"};
  cores_only.consumed = {{"cores", "40"}};
  asked = LedgerRequestFor({cores_only}, TwoManufacturers(), "node-a", {});
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->request.mode, ledger::Mode::kSliced);
  EXPECT_EQ(asked->request.memory_mib, 15360u);
  EXPECT_EQ(asked->request.cores_percentage, 40u);
}

TEST(LedgerRequestFor, RefusesWhatTheLedgerCannotServe) {
  const ClaimRef ref{"ns", "c", "u"};
  const auto spec = TwoManufacturers();
  auto refused = [&](const std::vector<AllocatedDevice>& devices, const std::string& why) {
    auto asked = LedgerRequestFor(devices, spec, "node-a", ref);
    ASSERT_FALSE(asked.ok()) << why;
    EXPECT_EQ(asked.code(), Code::kFailedPrecondition);
    EXPECT_NE(asked.error().find("ResourceClaim ns/c: "), std::string::npos) << asked.error();
    EXPECT_NE(asked.error().find(why), std::string::npos) << asked.error();
  };
  refused({Share("card-0", "1Gi", "10"), Share("card-1", "1Gi", "10")}, "more than one share");
  refused({Share("card-0", "1Gi", "10"), {"g", "node-a/nvidia", "card-1"}},
          "whole cards and a share");
  refused({{"g", "node-a/nvidia", "card-0"}, {"g", "node-a/amd", "card-0"}}, "nvidia and amd");
  AllocatedDevice amd = Share("card-0", "1Gi", "10");
  amd.pool = "node-a/amd";
  refused({amd}, "not sliced on this node");
  refused({Share("card-0", "lots", "10")}, "consumed memory \"lots\" is not a whole quantity");
  refused({Share("card-0", "0", "10")}, "consumes no memory");
  refused({{"g", "node-b/nvidia", "card-0"}}, "not one of node node-a's");
  refused({{"g", "node-a/nvidia", "card-9"}}, "no device card-9");
}

}  // namespace
}  // namespace gpustack::dra
