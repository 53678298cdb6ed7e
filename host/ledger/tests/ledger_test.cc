// Fit, reserve and release on one node: packing, explanations, idempotence, restore.
#include <gtest/gtest.h>

#include <stdexcept>

#include "host/ledger/tests/fixtures.h"
#include "host/ledger/views.h"

namespace gpustack::ledger {
namespace {

using namespace testing;

TEST(Ledger, TwoThirtyPercentSlicesShareACardTwoSixtiesDoNot) {
  NodeLedger node("n", T4Node(2, "GPU-"));
  auto a = node.Reserve({"p1", "c"}, Sliced(30, 16384));
  auto b = node.Reserve({"p2", "c"}, Sliced(30, 16384));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->charges[0].accelerator_id, b->charges[0].accelerator_id)
      << "packed onto the fullest";
  auto c = node.Reserve({"p3", "c"}, Sliced(60, 16384));
  auto d = node.Reserve({"p4", "c"}, Sliced(60, 16384));
  ASSERT_TRUE(c) << c.error();
  ASSERT_FALSE(d) << "two 60% slices do not fit one card";
  EXPECT_EQ(d.error(),
            "no nvidia card on node n fits a sliced request of 960000 units: [0] GPU-0: 640000 "
            "credits remaining < 960000; [1] GPU-1: 640000 credits remaining < 960000");
}

TEST(Ledger, NeverTwoModesOnOneCard) {
  NodeLedger node("n", A10gNode());
  ASSERT_TRUE(node.Reserve({"p1", "c"}, Whole(Mode::kShared, 2)));
  auto exclusive = node.Reserve({"p2", "c"}, Whole(Mode::kExclusive, 1));
  ASSERT_FALSE(exclusive);
  EXPECT_EQ(exclusive.error(),
            "no nvidia card on node n fits an exclusive request for 1 card(s) (0 free): [0] "
            "GPU-a10g-0: held Shared");
  auto slice = node.Reserve({"p3", "c"}, Sliced(10, 24576));
  ASSERT_FALSE(slice);
  EXPECT_NE(slice.error().find("held Shared"), std::string::npos);
  ASSERT_TRUE(node.Reserve({"p4", "c"}, Whole(Mode::kShared, 8)));
  auto full = node.Reserve({"p5", "c"}, Whole(Mode::kShared, 1));
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().find("0 free ownership slot(s) < 1"), std::string::npos) << full.error();
}

TEST(Ledger, ExclusiveTakesWholeFreeCardsInOrder) {
  NodeLedger node("n", T4Node(4, "GPU-"));
  ASSERT_TRUE(node.Reserve({"p0", "c"}, Sliced(10, 16384)));  // lands on GPU-0
  auto three = node.Reserve({"p1", "c"}, Whole(Mode::kExclusive, 3));
  ASSERT_TRUE(three) << three.error();
  ASSERT_EQ(three->charges.size(), 3u);
  EXPECT_EQ(three->charges[0].accelerator_id, "GPU-1");
  EXPECT_EQ(three->charges[2].accelerator_id, "GPU-3");
  EXPECT_FALSE(node.Reserve({"p2", "c"}, Whole(Mode::kExclusive, 1)));
}

TEST(Ledger, ComputeBudgetsCapAt100WithoutOvercommit) {
  DevicesSpec spec{
      {{"mlu370", "cambricon", "MLU370", 24576, 0, "", "", "", "", {Card("MLU-0", 0, 16, false)}}}};
  NodeLedger node("n", spec);
  Request slice = Sliced(10, 24576, 60);
  slice.manufacturer = "cambricon";
  ASSERT_TRUE(node.Reserve({"p1", "c"}, slice));
  auto second = node.Reserve({"p2", "c"}, slice);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find("40% compute left < 60% (no overcommit)"), std::string::npos)
      << second.error();
  slice.cores_percentage = 40;
  EXPECT_TRUE(node.Reserve({"p3", "c"}, slice));
}

TEST(Ledger, SliceSlotsRunOut) {
  DevicesSpec spec{
      {{"dcu", "hygon", "K100", 65536, 0, "", "", "", "", {Card("DCU-0", 0, 4, false)}}}};
  NodeLedger node("n", spec);
  Request slice = Sliced(10, 65536, 10);
  slice.manufacturer = "hygon";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.Reserve({"p" + std::to_string(i), "c"}, slice));
  auto fifth = node.Reserve({"p4", "c"}, slice);
  ASSERT_FALSE(fifth);
  EXPECT_NE(fifth.error().find("no free slice slot (4/4)"), std::string::npos) << fifth.error();
}

TEST(Ledger, PartitionsPackOntoTheMostOccupiedCardAndRespectPlacements) {
  NodeLedger node("n", H100Node(2));
  auto first = node.Reserve({"p1", "c"}, Partition("1g.10gb", 10240));
  auto second = node.Reserve({"p2", "c"}, Partition("1g.10gb", 10240));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(second->charges[0].accelerator_id, first->charges[0].accelerator_id);
  EXPECT_EQ(second->charges[0].placement, (Placement{1, 1}));
  // The 4g.40gb's only placement (0-3) overlaps, so it goes to the other card.
  auto big = node.Reserve({"p3", "c"}, Partition("4g.40gb", 40960));
  ASSERT_TRUE(big) << big.error();
  EXPECT_NE(big->charges[0].accelerator_id, first->charges[0].accelerator_id);
  auto none = node.Reserve({"p4", "c"}, Partition("7g.80gb", 81920));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("[0] GPU-h100-0: no free placement for 7g.80gb"), std::string::npos)
      << none.error();
  EXPECT_NE(none.error().find("[2] GPU-h100-2: not in partition mode"), std::string::npos);
}

TEST(Ledger, ReserveIsIdempotentAndReleaseRestoresExactly) {
  NodeLedger node("n", H100Node(3));
  const DevicesStatus idle = node.ToStatus();
  auto a = node.Reserve({"p", "c"}, Sliced(25));
  auto again = node.Reserve({"p", "c"}, Sliced(25));
  ASSERT_TRUE(a && again);
  EXPECT_EQ(*a, *again);
  EXPECT_EQ(node.ToStatus().groups[0].accelerators[3].allocated, 400000) << "charged once";
  EXPECT_TRUE(node.Release({"p", "c"}));
  EXPECT_FALSE(node.Release({"p", "c"}));
  EXPECT_EQ(node.ToStatus(), idle);
}

TEST(Ledger, TerminatedPodsKeepTheirPartitionsUntilDeleted) {
  NodeLedger node("n", H100Node(1));
  ASSERT_TRUE(node.Reserve({"mig", "c"}, Partition("3g.40gb", 40960)));
  ASSERT_TRUE(node.Reserve({"slice", "c"}, Sliced(50)));
  node.ReleaseTerminated({"mig", "c"});
  node.ReleaseTerminated({"slice", "c"});
  EXPECT_EQ(node.allocations().size(), 1u);
  EXPECT_EQ(node.ToStatus().groups[0].accelerators[0].allocated, 800000) << "the partition stays";
  EXPECT_EQ(node.ToStatus().groups[0].accelerators[1].allocated, 0) << "the slice is freed";
  EXPECT_TRUE(node.Release({"mig", "c"}));
  EXPECT_TRUE(node.allocations().empty());
}

TEST(Ledger, DurableSlicesStayChargedUntilDeletion) {
  DevicesSpec spec{
      {{"c500", "metax", "MXC500", 65536, 0, "", "", "", "", {Card("MX-0", 0, 16, false)}}}};
  NodeLedger node("n", spec);
  Request slice = Sliced(25, 65536, 25);
  slice.manufacturer = "metax";
  ASSERT_TRUE(node.Reserve({"p", "c"}, slice));
  node.ReleaseTerminated({"p", "c"}, [](const std::string& m) { return m == "metax"; });
  EXPECT_EQ(node.cards()[0].allocated, 400000) << "the sGPU still exists until the Pod is deleted";
  node.ReleaseTerminated({"p", "c"});
  EXPECT_EQ(node.cards()[0].allocated, 0);
}

TEST(Ledger, RestoreRefusesWhatWouldOverAdmit) {
  NodeLedger node("n", A10gNode());
  ASSERT_TRUE(node.Reserve({"p1", "c"}, Sliced(70, 24576)));
  Allocation too_big{{"p2", "c"}, {{"GPU-a10g-0", Mode::kSliced, 640000, 0, 50, {}, {}}}};
  auto refused = node.Restore(too_big);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(),
            "card [0] GPU-a10g-0 on node n: 640000 credits do not fit the 480000 remaining");
  Allocation other_mode{{"p3", "c"},
                        {{"GPU-a10g-0", Mode::kExclusive, kCardCredits, 0, 0, {}, {}}}};
  EXPECT_FALSE(node.Restore(other_mode));
  Allocation unknown{{"p4", "c"}, {{"GPU-nope", Mode::kSliced, 1000, 0, 1, {}, {}}}};
  auto missing = node.Restore(unknown);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(),
            "allocation of pod p4 names card GPU-nope, which node n does not have");
  Allocation fits{{"p5", "c"}, {{"GPU-a10g-0", Mode::kSliced, 480000, 0, 30, {}, {}}}};
  ASSERT_TRUE(node.Restore(fits));
  EXPECT_TRUE(node.Restore(fits)) << "restoring the same allocation twice is a no-op";
  EXPECT_EQ(node.ToStatus().groups[0].accelerators[0].remaining, 0);
  EXPECT_EQ(node.allocations().size(), 2u);
}

// Gate 3 counted a 60 % slice on card 1 and a shared Pod on card 0; the kubelet gave card 1 to
// the shared Pod first. The slice is counted where it now fits, or the node says it is full.
TEST(Ledger, APromiseWhoseCardsWereTakenIsCountedWhereItFitsNow) {
  NodeLedger node("n", T4Node(3, "GPU-"));
  auto shared = node.Reserve({"shared", "c"}, Whole(Mode::kShared, 3));
  ASSERT_TRUE(shared) << shared.error();
  const std::string taken = shared->charges[0].accelerator_id;
  ASSERT_TRUE(node.Reserve({"whole", "c"}, Whole(Mode::kExclusive, 1)));
  const auto promised_fit = node.Fit(Sliced(60, 16384));
  ASSERT_TRUE(promised_fit);
  Allocation promise{{"slice", "c"}, *promised_fit};
  promise.charges[0].accelerator_id = taken;  // where gate 3 had counted it
  ASSERT_TRUE(RestoreOrRefit(node, promise));
  const Allocation& counted = node.allocations().at({"slice", "c"});
  EXPECT_NE(counted.charges[0].accelerator_id, taken);
  EXPECT_EQ(counted.charges[0].credits, promise.charges[0].credits);
  EXPECT_EQ(counted.charges[0].mode, Mode::kSliced);
  // A second 60 % promise fits on no card now: refused, naming both tries, and nothing kept.
  promise.owner = {"slice-2", "c"};
  auto refused = RestoreOrRefit(node, promise);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("nor elsewhere"), std::string::npos) << refused.error();
  EXPECT_EQ(node.allocations().count({"slice-2", "c"}), 0u);
  // Whole cards move as one request.
  NodeLedger two("n", T4Node(3, "GPU-"));
  ASSERT_TRUE(two.Reserve({"other", "c"}, Whole(Mode::kShared, 1)));
  const std::string first = two.allocations().at({"other", "c"}).charges[0].accelerator_id;
  Allocation cards{{"pair", "c"},
                   {{first, Mode::kExclusive, kCardCredits, 0, 0, {}, {}},
                    {"GPU-2", Mode::kExclusive, kCardCredits, 0, 0, {}, {}}}};
  ASSERT_TRUE(RestoreOrRefit(two, cards));
  EXPECT_EQ(two.allocations().at({"pair", "c"}).charges.size(), 2u);
  EXPECT_EQ(two.ToStatus().groups[0].accelerators.size(), 3u);
}

TEST(Ledger, NoCardOfTheManufacturer) {
  NodeLedger node("n", A10gNode());
  Request r = Whole(Mode::kExclusive, 1);
  r.manufacturer = "amd";
  auto fit = node.Fit(r);
  ASSERT_FALSE(fit);
  EXPECT_EQ(fit.error(),
            "no amd card on node n fits an exclusive request for 1 card(s) (0 free): "
            "the node has no amd card");
}

TEST(Ledger, UnhealthyCardsTakeNothing) {
  DevicesSpec spec = T4Node(2, "GPU-");
  spec.groups[0].accelerators[0].unhealthy = true;
  NodeLedger node("n", spec);
  auto a = node.Reserve({"p", "c"}, Whole(Mode::kExclusive, 1));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->charges[0].accelerator_id, "GPU-1");
  EXPECT_EQ(FormatViews(ComputePoolViews({&node}, "nvidia", "tesla-t4")), "0/0 0/0 0/0 0/0");
}

}  // namespace
}  // namespace gpustack::ledger

namespace gpustack::ledger {
namespace {

TEST(Ledger, FitOnNodesTakesTheFirstNodeThatFitsAndExplainsWhenNoneDoes) {
  using namespace testing;
  std::vector<NodeLedger> nodes;
  for (int i = 0; i < 5; ++i) nodes.emplace_back("n" + std::to_string(i), A10gNode());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(nodes[i].Reserve({"p", "c"}, Whole(Mode::kExclusive, 1)));
  std::vector<const NodeLedger*> all;
  for (const NodeLedger& n : nodes) all.push_back(&n);
  auto fit = FitOnNodes(all, Sliced(50, 24576));
  ASSERT_TRUE(fit) << fit.error();
  EXPECT_EQ(fit->node, 3u);
  all.resize(3);
  auto none = FitOnNodes(all, Sliced(50, 24576));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().rfind("none of 3 node(s) fits the request: no nvidia card on node n0", 0),
            0u)
      << none.error();
  nodes.emplace_back("n5", A10gNode());
  for (NodeLedger& n : nodes) {
    static_cast<void>(n.Reserve({"q", "c"}, Whole(Mode::kExclusive, 1)));  // fills n3..n5
  }
  all.clear();
  for (const NodeLedger& n : nodes) all.push_back(&n);
  auto many = FitOnNodes(all, Sliced(50, 24576));
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().find("| and 3 more node(s)"), std::string::npos) << many.error();
}

}  // namespace
}  // namespace gpustack::ledger

namespace gpustack::ledger {
namespace {

using namespace testing;

// Regressions from review.
TEST(LedgerReview, DuplicateCardIdsAreRefused) {
  DevicesSpec spec = T4Node(2, "GPU-");
  spec.groups[0].accelerators[1].id = "GPU-0";
  EXPECT_THROW(NodeLedger("n", spec), std::invalid_argument);
  auto parsed = SpecFromJson(ToJson(spec));
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(),
            "spec.groups[0].accelerators[1].id: \"GPU-0\" is also the id of "
            "spec.groups[0].accelerators[0]");
}

TEST(LedgerReview, PartitionsChargeTheirSliceShareSoEveryLegalLayoutFits) {
  DevicesSpec spec = H100Node(1);
  spec.groups[0].memory = 81559;  // what the driver reports, less than the nominal 80 GiB
  NodeLedger node("n", spec);
  const Request mig = Partition("3g.40gb", 40960, 81559);
  EXPECT_EQ(mig.units, 803540) << "the webhook's Kueue units fold through the reported memory";
  auto first = node.Reserve({"a", "c"}, mig);
  auto second = node.Reserve({"b", "c"}, mig);
  ASSERT_TRUE(first && second) << (first ? second.error() : first.error());
  EXPECT_EQ(first->charges[0].credits, 800000);
  EXPECT_EQ(node.cards()[0].allocated, kCardCredits);
  Allocation wrong{{"x", "c"},
                   {{"GPU-h100-0", Mode::kPartitioned, 300000, 0, 0, "1g.10gb", {0, 1}}}};
  ASSERT_TRUE(node.Release({"a", "c"}));
  auto refused = node.Restore(wrong);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("a 1g.10gb partition charges 200000 credits, not 300000"),
            std::string::npos)
      << refused.error();
}

TEST(LedgerReview, ViewsNeverPromiseASliceThatComputeRefuses) {
  DevicesSpec spec{
      {{"mlu370", "cambricon", "MLU370", 24576, 0, "", "", "", "", {Card("MLU-0", 0, 4, false)}}}};
  NodeLedger node("n", spec);
  Request slice = Sliced(10, 24576, 100);
  slice.manufacturer = "cambricon";
  ASSERT_TRUE(node.Reserve({"p", "c"}, slice));
  EXPECT_FALSE(node.Fit(slice));
  const PoolViews v = ComputePoolViews({&node}, "cambricon", "mlu370");
  EXPECT_EQ(v.sliced.once_max_request, 0);
  EXPECT_EQ(FitLabels(node).at("sliced-max-free-units.fit.gpustack.ai/cambricon-mlu370"), 0);
}

TEST(LedgerReview, ARequestStaysOnItsPoolsModel) {
  DevicesSpec spec = A10gNode();
  spec.groups.push_back(T4Node(1, "GPU-t4-").groups[0]);
  NodeLedger node("n", spec);
  ASSERT_TRUE(node.Reserve({"p", "c"}, Sliced(10, 16384)));  // no model: lands on the A10G (first)
  Request t4 = Sliced(50, 16384);
  t4.group_id = "tesla-t4";
  auto placed = node.Reserve({"q", "c"}, t4);
  ASSERT_TRUE(placed) << placed.error();
  EXPECT_EQ(placed->charges[0].accelerator_id, "GPU-t4-0") << "not packed onto the fuller A10G";
}

TEST(LedgerReview, BadPartitionGeometryIsRefused) {
  DevicesSpec spec = H100Node(1);
  auto& profile = spec.groups[0].accelerators[0].profiles[0];
  profile.placements = {{1, 1}, {0, 1}};
  auto unsorted = ValidateSpec(spec);
  ASSERT_FALSE(unsorted);
  EXPECT_NE(unsorted.error().find("sorted by start"), std::string::npos);
  profile.placements = {{4294967295u, 1}};
  EXPECT_FALSE(ValidateSpec(spec)) << "placements past 64 slices";
  profile.placements = {{0, 2}};
  EXPECT_FALSE(ValidateSpec(spec)) << "length differs from memorySlices";
  profile.placements = {{0, 1}};
  profile.memory_mib = 0;
  EXPECT_FALSE(ValidateSpec(spec));
}

TEST(LedgerReview, RestoreRefusesAnOutOfRangeComputeBudget) {
  NodeLedger node("n", A10gNode());
  Allocation bad{{"p", "c"}, {{"GPU-a10g-0", Mode::kSliced, 1000, 0, 0xFFFFFFF0u, {}, {}}}};
  auto refused = node.Restore(bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("compute budget must be 1..100%"), std::string::npos);
}

TEST(LedgerReview, AReservationOfNothingIsRefusedSoTheOwnerIsNotRecorded) {
  using namespace testing;
  NodeLedger node("n", T4Node(2, "GPU-t4-"));
  auto empty = node.Reserve({"p", "c"}, Whole(Mode::kExclusive, 0));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.code(), Code::kInvalidArgument);
  EXPECT_TRUE(node.allocations().empty());
  auto real = node.Reserve({"p", "c"}, Whole(Mode::kExclusive, 1));
  ASSERT_TRUE(real) << real.error();
  EXPECT_EQ(real->charges.size(), 1u) << "the later real request is charged";
}

TEST(LedgerReview, ASignedButNonNegativeIntegerReadsBack) {
  using namespace testing;
  // What a YAML round trip of detect's output gives: integers typed as signed.
  nlohmann::json spec = ToJson(A10gNode());
  spec["groups"][0]["memory"] = nlohmann::json(int64_t{24576});
  spec["groups"][0]["accelerators"][0]["physicalIndexes"][0] = nlohmann::json(int64_t{0});
  auto parsed = SpecFromJson(spec);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->groups[0].memory, 24576u);
  spec["groups"][0]["memory"] = nlohmann::json(int64_t{-1});
  EXPECT_EQ(SpecFromJson(spec).error(),
            "spec.groups[0].memory: must be a non-negative integer, got -1");
}

}  // namespace
}  // namespace gpustack::ledger
