// The seven admission rules (docs/behaviour.md §4.3): each accepted and rejected case with its
// message, and the quantity edge cases.
#include <gtest/gtest.h>

#include "host/ledger/request.h"
#include "tests/support/ledger_tables.h"

namespace gpustack::ledger {
namespace {

using nlohmann::json;

const std::vector<ResourceKind> kKinds{{"nvidia", "nvidia.com/gpu", "mig"},
                                       {"amd", "amd.com/gpu", ""}};

FoldContext H100Pool() {
  return {81920, testing::FindPartitionTable("nvidia", "NVIDIA H100 80GB HBM3")->profiles};
}

json Container(const std::string& name, json limits) {
  return {{"name", name}, {"resources", {{"limits", std::move(limits)}}}};
}

json Pod(json containers, json init = json::array()) {
  return {{"spec", {{"containers", std::move(containers)}, {"initContainers", std::move(init)}}}};
}

Result<std::vector<ContainerRequest>> Parse(const json& pod) {
  return ParsePodRequests(pod, kKinds, H100Pool());
}

void ExpectRejected(const json& pod, const std::string& message) {
  auto parsed = Parse(pod);
  ASSERT_FALSE(parsed) << "accepted: " << pod.dump();
  EXPECT_EQ(parsed.error(), message);
}

// Rule 1
TEST(Rules, OneFamilyOneGroup) {
  auto ok = Parse(
      Pod({Container("a", {{"nvidia.com/gpu", "1"}}), Container("b", {{"nvidia.com/gpu", "1"}})}));
  ASSERT_TRUE(ok) << ok.error();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].container, "b");
  EXPECT_EQ((*ok)[1].request.mode, Mode::kExclusive);

  ExpectRejected(Pod({Container("a", {{"nvidia.com/gpu", "1"}}),
                      Container("b", {{"nvidia.com/gpu.sliced", "1"},
                                      {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}),
                 "spec: Forbidden: a Pod may request only one accelerator family, found "
                 "[exclusive sliced]");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu", "1"}})},
                     {Container("warmup", {{"nvidia.com/gpu", "1"}})}),
                 "spec.initContainers: Forbidden: accelerator requests must sit in one container "
                 "group; the init containers must give up theirs (devices are held for the Pod's "
                 "lifetime and the scheduler charges max(sum of init, sum of app) once)");
  auto init_only = Parse(
      Pod({Container("main", {{"cpu", "1"}})}, {Container("warmup", {{"nvidia.com/gpu", "1"}})}));
  ASSERT_TRUE(init_only) << init_only.error();
  EXPECT_EQ(init_only->size(), 1u);
}

// Rule 2 and the slice budgets
TEST(Rules, SlicedIsExactlyOneWithOneMemoryBudget) {
  auto ok = Parse(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                          {"nvidia.com/gpu.sliced.memory-percentage", "20"},
                                          {"nvidia.com/gpu.sliced.cores-percentage", "40"}})}));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ((*ok)[0].request.units, 320000);
  EXPECT_EQ((*ok)[0].request.cores_percentage, 40u);

  auto mib = Parse(Pod({Container(
      "main", {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-mib", "10000"}})}));
  ASSERT_TRUE(mib) << mib.error();
  EXPECT_EQ((*mib)[0].request.units, 195312) << "floor(10000 x 1.6M / 81920)";
  EXPECT_EQ((*mib)[0].request.cores_percentage, 100u) << "cores default to 100";

  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "2"},
                                         {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: "
                 "\"2\": a logical slice request is always a single accelerator; "
                 "multi-accelerator logical slicing is not supported yet");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"}})}),
                 "spec.containers[0].resources.limits: Required value: a nvidia.com/gpu.sliced "
                 "request must set nvidia.com/gpu.sliced.memory-percentage or "
                 "nvidia.com/gpu.sliced.memory-mib");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                         {"nvidia.com/gpu.sliced.memory-percentage", "20"},
                                         {"nvidia.com/gpu.sliced.memory-mib", "1024"}})}),
                 "spec.containers[0].resources.limits: Forbidden: cannot set both "
                 "nvidia.com/gpu.sliced.memory-percentage and nvidia.com/gpu.sliced.memory-mib");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                         {"nvidia.com/gpu.sliced.memory-percentage", "101"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-percentage]: "
                 "Invalid value: \"101\": must be at most 100");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                         {"nvidia.com/gpu.sliced.memory-mib", "81921"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-mib]: "
                 "Invalid value: \"81921\": must be at most 81920");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                         {"nvidia.com/gpu.sliced.memory-percentage", "20"},
                                         {"nvidia.com/gpu.sliced.cores-percentage", "0"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.cores-percentage]: "
                 "Invalid value: \"0\": must be positive");
}

// Rules 3 and 5
TEST(Rules, PartitionedIsExactlyOneOfOneProfile) {
  auto ok = Parse(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                          {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})}));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ((*ok)[0].request.profile, "3g.40gb");
  EXPECT_EQ((*ok)[0].request.units, 800000);

  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "2"},
                                         {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.partitioned]: Invalid value: "
                 "\"2\": a partition request is always a single accelerator; request one Pod per "
                 "instance");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "1"}})}),
                 "spec.containers[0].resources.limits: Required value: a "
                 "nvidia.com/gpu.partitioned request must name a profile, e.g. "
                 "nvidia.com/gpu.partitioned.<kind>-<profile>");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                         {"nvidia.com/gpu.partitioned.mig-3g.40gb", "2"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.partitioned.mig-3g.40gb]: "
                 "Invalid value: \"2\": a partition profile request must be exactly 1 instance");
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                         {"nvidia.com/gpu.partitioned.mig-9g.99gb", "1"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.partitioned.mig-9g.99gb]: "
                 "Unsupported value: \"9g.99gb\": the pool offers no such partition profile; "
                 "offered: [1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb]");
}

// Rule 4
TEST(Rules, OneProfileShapePodWide) {
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                         {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"},
                                         {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})}),
                 "spec: Forbidden: a Pod may request only one partition profile, found [1g.10gb "
                 "3g.40gb]");
  ExpectRejected(Pod({Container("a", {{"nvidia.com/gpu.partitioned", "1"},
                                      {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"}}),
                      Container("b", {{"nvidia.com/gpu.partitioned", "1"},
                                      {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})}),
                 "spec: Forbidden: a Pod may request only one partition profile, found [1g.10gb "
                 "3g.40gb]");
}

// Rule 6
TEST(Rules, AtMostOneSlicingContainer) {
  auto ok = Parse(Pod({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                          {"nvidia.com/gpu.sliced.memory-percentage", "50"}}),
                       Container("sshd", {{"device.gpustack.ai/nvidia.visibility", "1"}})}));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->size(), 1u) << "visibility is not a family";
  const json slice = {{"nvidia.com/gpu.sliced", "1"},
                      {"nvidia.com/gpu.sliced.memory-percentage", "20"}};
  ExpectRejected(Pod({Container("a", slice), Container("b", slice)}),
                 "spec: Forbidden: at most one container may request a slicing family, found 2");
}

// Rule 7
TEST(Rules, NativeSidecarsHoldNoAccelerator) {
  json sidecar = Container("proxy", {{"cpu", "100m"}});
  sidecar["restartPolicy"] = "Always";
  ASSERT_TRUE(Parse(Pod({Container("main", {{"nvidia.com/gpu", "1"}})}, {sidecar})));
  sidecar = Container("proxy", {{"nvidia.com/gpu", "1"}});
  sidecar["restartPolicy"] = "Always";
  ExpectRejected(Pod({Container("main", {{"cpu", "1"}})}, {sidecar}),
                 "spec.initContainers[0].resources.limits: Forbidden: a restartable init "
                 "container (a native sidecar) may not request an accelerator; move the request "
                 "to an app container");
}

TEST(Rules, SharedTakesOneToTenSlotsOfOneCard) {
  auto ok = Parse(Pod({Container("main", {{"nvidia.com/gpu.shared", "3"}})}));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ((*ok)[0].request.count, 3u);
  ExpectRejected(Pod({Container("main", {{"nvidia.com/gpu.shared", "11"}})}),
                 "spec.containers[0].resources.limits[nvidia.com/gpu.shared]: Invalid value: "
                 "\"11\": a shared request takes 1 to 10 of one accelerator's ownership slots");
}

TEST(Rules, DerivedUnitsAreIgnoredAndOtherVendorsWork) {
  auto ok = Parse(Pod({Container("main", {{"amd.com/gpu.sliced", "1"},
                                          {"amd.com/gpu.sliced.memory-percentage", "25"},
                                          {"amd.com/gpu.sliced.units", "999"}})}));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ((*ok)[0].request.manufacturer, "amd");
  EXPECT_EQ((*ok)[0].request.units, 400000) << "client units are recomputed, never trusted";
  EXPECT_TRUE(Parse(Pod({Container("main", {{"cpu", "2"}, {"memory", "1Gi"}})}))->empty());
  auto derived_only =
      Parse(Pod({Container("main", {{"nvidia.com/gpu.sliced.units", "1"}, {"amd.com/gpu", "1"}})}));
  ASSERT_TRUE(derived_only) << derived_only.error();
  EXPECT_EQ((*derived_only)[0].request.manufacturer, "amd") << "derived keys name no family";
  ExpectRejected(Pod({Container("main", {{"amd.com/gpu", "1"}, {"nvidia.com/gpu", "1"}})}),
                 "spec.containers[0].resources.limits: Forbidden: a container may request "
                 "accelerators of one manufacturer, found amd.com/gpu and nvidia.com/gpu");
}

TEST(Rules, AManufacturerWithoutPartitionsSaysSoInsteadOfAskingForAProfile) {
  const std::string forbidden =
      "spec.containers[0].resources.limits[amd.com/gpu.partitioned]: Forbidden: amd cards are not "
      "partitioned (hardware partitions exist for manufacturers whose plugin has a partition "
      "kind); request amd.com/gpu or amd.com/gpu.sliced";
  ExpectRejected(Pod({Container("main", {{"amd.com/gpu.partitioned", "1"}})}), forbidden);
  ExpectRejected(Pod({Container("main", {{"amd.com/gpu.partitioned", "1"},
                                         {"amd.com/gpu.partitioned.mig-1g.10gb", "1"}})}),
                 forbidden);
}

TEST(Quantities, EdgeCases) {
  EXPECT_EQ(*ParseCount("3", 10), 3);
  EXPECT_EQ(*ParseCount("2000m", 10), 2);
  EXPECT_EQ(*ParseCount(json(4), 10), 4);
  const std::pair<json, std::string> bad[] = {
      {"0", "must be positive"},
      {"-1", "must be positive"},
      {"1.5", "must be a whole number"},
      {"1500m", "must be a whole number"},
      {json(1.5), "must be a whole number"},
      {"1Gi", "must be a whole number written in digits (no unit suffix)"},
      {"", "must be a whole number written in digits (no unit suffix)"},
      {"abc", "must be a whole number written in digits (no unit suffix)"},
      {"11", "must be at most 10"},
      {"99999999999999999999999", "must be at most 10"},
      {json(nullptr), "must be a quantity"},
  };
  for (const auto& [value, reason] : bad) {
    auto parsed = ParseCount(value, 10);
    ASSERT_FALSE(parsed) << value.dump();
    EXPECT_EQ(parsed.error(), reason) << value.dump();
  }
  ASSERT_FALSE(Parse(Pod({Container("main", {{"nvidia.com/gpu", "0"}})})));
  ASSERT_FALSE(ParsePodRequests(json::object(), kKinds, H100Pool()));
  // Found by the fuzzer: a non-string name used to throw out of the parser.
  auto odd = ParsePodRequests(
      json::parse(R"({"spec":{"initContainers":[{"name":{"limits":{}}}]}})"), kKinds, H100Pool());
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error(), "spec.initContainers[0].name: Invalid value: must be a string");
  ASSERT_FALSE(ParsePodRequests(json{{"spec", {{"containers", 3}}}}, kKinds, H100Pool()));
}

}  // namespace
}  // namespace gpustack::ledger
