// The upstream operator's worked examples, with docs/decisions.md D1 and D2 applied
// (SH onceMax = most free slots on one card; PT onceMax is 0 or 1).
#include <gtest/gtest.h>

#include "host/ledger/tests/fixtures.h"
#include "host/ledger/views.h"

namespace gpustack::ledger {
namespace {

using namespace testing;

std::string Row(const std::vector<const NodeLedger*>& nodes, const std::string& group) {
  return FormatViews(ComputePoolViews(nodes, "nvidia", group));
}

TEST(WorkedExamples, A10gIdleThenATwentyPercentSlice) {
  NodeLedger node("node-a10g", A10gNode());
  EXPECT_EQ(Row({&node}, "a10g"), "1/1 10/10 100/100 0/0");
  auto slice = node.Reserve({"pod-1", "main"}, Sliced(20, 24576));
  ASSERT_TRUE(slice) << slice.error();
  EXPECT_EQ(slice->charges[0].credits, 320000);
  EXPECT_EQ(Row({&node}, "a10g"), "0/0 0/0 80/80 0/0");
  const auto status = node.ToStatus();
  EXPECT_EQ(status.groups[0].accelerators[0].mode, Mode::kSliced);
  EXPECT_EQ(status.groups[0].accelerators[0].remaining, 1280000);
  EXPECT_EQ(status.groups[0].accelerators[0].allocated_slices, 1u);
  ASSERT_TRUE(node.Release({"pod-1", "main"}));
  EXPECT_EQ(Row({&node}, "a10g"), "1/1 10/10 100/100 0/0");
  ASSERT_TRUE(node.Reserve({"pod-2", "main"}, Whole(Mode::kExclusive, 1)));
  EXPECT_EQ(Row({&node}, "a10g"), "0/0 0/0 0/0 0/0");
}

TEST(WorkedExamples, T4PoolOfOnePlusFourCards) {
  NodeLedger a("node-t4-a", T4Node(1, "GPU-t4a-"));
  NodeLedger b("node-t4-b", T4Node(4, "GPU-t4b-"));
  EXPECT_EQ(Row({&a, &b}, "tesla-t4"), "4/5 10/50 100/500 0/0");
  const PoolViews v = ComputePoolViews({&a, &b}, "nvidia", "tesla-t4");
  EXPECT_EQ(v.exclusive.capacity, 5);
  EXPECT_EQ(v.shared.capacity, 50);
  EXPECT_EQ(v.sliced.capacity, 500);
}

TEST(WorkedExamples, H100AllLogical) {
  NodeLedger node("node-h100", H100Node(0));
  EXPECT_EQ(Row({&node}, "h100-80gb-hbm3"), "8/8 10/80 100/800 0/0");
  const auto counts = AdvertisedCounts(node, Nvidia());
  EXPECT_EQ(counts.at("nvidia.com/gpu"), 8);
  EXPECT_EQ(counts.at("nvidia.com/gpu.partitioned"), 0);
  EXPECT_EQ(counts.at("nvidia.com/gpu.shared"), 80);
  EXPECT_EQ(counts.at("nvidia.com/gpu.sliced"), 1024);
  const auto keys = CountingKeys(node, Nvidia());
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.cores-percentage"), 102400);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.memory-mib"), 655360);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.memory-percentage"), 800);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.units"), 12800000);
  EXPECT_EQ(keys.count("nvidia.com/gpu.partitioned.units"), 0u);
  const SlicedDetail detail = SlicedDetailOf(node.spec().groups[0]);
  EXPECT_TRUE(detail.cores_percentage_overcommit);
  EXPECT_EQ(detail.logical_count, 1024u);
  EXPECT_EQ(detail.physical_count, 0u);
}

void ExpectProfiles(const std::map<std::string, int64_t>& keys,
                    const std::map<std::string, int64_t>& expected) {
  for (const auto& [profile, count] : expected) {
    EXPECT_EQ(keys.at("nvidia.com/gpu.partitioned.mig-" + profile), count) << profile;
  }
}

TEST(WorkedExamples, H100AllPartitionedThenOne3g40gb) {
  NodeLedger node("node-h100", H100Node(8));
  EXPECT_EQ(Row({&node}, "h100-80gb-hbm3"), "0/0 0/0 0/0 1/56");
  auto counts = AdvertisedCounts(node, Nvidia());
  EXPECT_EQ(counts.at("nvidia.com/gpu"), 0);
  EXPECT_EQ(counts.at("nvidia.com/gpu.partitioned"), 56);
  EXPECT_EQ(counts.at("nvidia.com/gpu.shared"), 0);
  EXPECT_EQ(counts.at("nvidia.com/gpu.sliced"), 0);
  auto keys = CountingKeys(node, Nvidia());
  ExpectProfiles(keys, {{"1g.10gb", 56},
                        {"1g.20gb", 32},
                        {"2g.20gb", 24},
                        {"3g.40gb", 16},
                        {"4g.40gb", 8},
                        {"7g.80gb", 8}});
  EXPECT_EQ(keys.at("nvidia.com/gpu.partitioned.units"), 12800000);

  auto mig = node.Reserve({"pod-mig", "main"}, Partition("3g.40gb", 40960));
  ASSERT_TRUE(mig) << mig.error();
  EXPECT_EQ(mig->charges[0].credits, 800000) << "a 3g.40gb costs what a 40 GiB slice costs";
  EXPECT_EQ(mig->charges[0].placement, (Placement{0, 4}));
  EXPECT_EQ(Row({&node}, "h100-80gb-hbm3"), "0/0 0/0 0/0 1/52");
  EXPECT_EQ(AdvertisedCounts(node, Nvidia()).at("nvidia.com/gpu.partitioned"), 53);
  ExpectProfiles(CountingKeys(node, Nvidia()), {{"1g.10gb", 52},
                                                {"1g.20gb", 30},
                                                {"2g.20gb", 22},
                                                {"3g.40gb", 16},
                                                {"4g.40gb", 7},
                                                {"7g.80gb", 7}});
  EXPECT_EQ(SlicedDetailOf(node.spec().groups[0]).physical_count, 56u);
  const PoolViews v = ComputePoolViews({&node}, "nvidia", "h100-80gb-hbm3");
  EXPECT_EQ(v.allocated_profiles, (std::vector<ProfileCount>{{"3g.40gb", 1}}));
  EXPECT_EQ(v.remaining_profiles.size(), 6u) << "every offered profile is listed, even at 0";
}

TEST(WorkedExamples, H100MixedThenA3g40gbAndAHalfSlice) {
  NodeLedger node("node-h100", H100Node(3));
  EXPECT_EQ(Row({&node}, "h100-80gb-hbm3"), "5/5 10/50 100/500 1/21");
  const auto counts = AdvertisedCounts(node, Nvidia());
  EXPECT_EQ(counts.at("nvidia.com/gpu"), 5);
  EXPECT_EQ(counts.at("nvidia.com/gpu.partitioned"), 21);
  EXPECT_EQ(counts.at("nvidia.com/gpu.shared"), 50);
  EXPECT_EQ(counts.at("nvidia.com/gpu.sliced"), 640);
  const auto keys = CountingKeys(node, Nvidia());
  ExpectProfiles(keys, {{"1g.10gb", 21},
                        {"1g.20gb", 12},
                        {"2g.20gb", 9},
                        {"3g.40gb", 6},
                        {"4g.40gb", 3},
                        {"7g.80gb", 3}});
  EXPECT_EQ(keys.at("nvidia.com/gpu.partitioned.units"), 4800000);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.cores-percentage"), 64000);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.memory-mib"), 409600);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.memory-percentage"), 500);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.units"), 8000000);

  auto mig = node.Reserve({"pod-mig", "main"}, Partition("3g.40gb", 40960));
  auto half = node.Reserve({"pod-slice", "main"}, Sliced(50));
  ASSERT_TRUE(mig) << mig.error();
  ASSERT_TRUE(half) << half.error();
  EXPECT_NE(mig->charges[0].accelerator_id, half->charges[0].accelerator_id);
  EXPECT_LT(node.ToStatus().groups[0].accelerators[0].allocated, kCardCredits);
  EXPECT_EQ(Row({&node}, "h100-80gb-hbm3"), "4/4 10/40 100/450 1/17");
  EXPECT_EQ(AdvertisedCounts(node, Nvidia()).at("nvidia.com/gpu.partitioned"), 18);
  ExpectProfiles(CountingKeys(node, Nvidia()), {{"1g.10gb", 17},
                                                {"1g.20gb", 10},
                                                {"2g.20gb", 7},
                                                {"3g.40gb", 6},
                                                {"4g.40gb", 2},
                                                {"7g.80gb", 2}});
}

TEST(WorkedExamples, GenericCpuPool) {
  EXPECT_EQ(CpuView({{16, 0}, {4, 0}, {4, 0}, {48, 0}}), (ResourceView{48, 72, 72}));
  EXPECT_EQ(CpuView({{16, 0}, {4, 0}, {48, 0}}).remaining, 68);
  EXPECT_EQ(CpuView({{16, 20}, {48, 8}}), (ResourceView{40, 40, 64}))
      << "over-requested clamps at 0";
}

TEST(WorkedExamples, FitLabelsFollowTheFreestCards) {
  NodeLedger node("node-h100", H100Node(3));
  auto labels = FitLabels(node);
  EXPECT_EQ(labels.at("sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"), kCardCredits);
  EXPECT_EQ(labels.at("shared-free-cards.fit.gpustack.ai/nvidia-h100-80gb-hbm3"), 5);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(node.Reserve({"pod-" + std::to_string(i), "main"}, Sliced(70)));
  }
  labels = FitLabels(node);
  EXPECT_EQ(labels.at("sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"), 480000);
  EXPECT_EQ(labels.at("shared-free-cards.fit.gpustack.ai/nvidia-h100-80gb-hbm3"), 0);
}

}  // namespace
}  // namespace gpustack::ledger
