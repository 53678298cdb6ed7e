#include "host/usage/grants.h"

#include <gtest/gtest.h>

#include <map>

#include "host/usage/cgroup.h"

namespace gpustack::usage {
namespace {

using ledger::Charge;
using ledger::Mode;

constexpr uint64_t kT4 = 15360;  // MiB

Hold PodHold(const std::string& uid, const std::vector<Charge>& charges, uint64_t card = kT4) {
  std::vector<HeldCharge> held;
  for (const Charge& c : charges) held.push_back({c, 0});
  Hold h = HoldOf(held, card, ledger::Accelerator{});
  h.ns = "team";
  h.pod = "pod-" + uid;
  h.pod_uid = uid;
  return h;
}

Charge Slice(const std::string& card, uint32_t memory_percent, uint32_t cores) {
  Charge c;
  c.accelerator_id = card;
  c.mode = Mode::kSliced;
  c.credits = int64_t{memory_percent} * ledger::kCreditsPerPercent;
  c.cores_percentage = cores;
  return c;
}

ProcessReading Row(uint32_t pid, std::optional<double> memory, std::optional<double> cores,
                   std::string partition = "") {
  ProcessReading r;
  r.pid = pid;
  r.partition_id = std::move(partition);
  r.memory_used_mib = memory;
  r.cores_percent = cores;
  return r;
}

Charge Whole(const std::string& card) {
  Charge c;
  c.accelerator_id = card;
  c.mode = Mode::kExclusive;
  c.credits = ledger::kCardCredits;
  return c;
}

CardReading Card(const std::string& id, std::vector<ProcessReading> processes, bool listed = true) {
  CardReading c;
  c.id = id;
  c.manufacturer = "nvidia";
  c.memory_used_mib = 9000;
  c.cores_percent = 70;
  c.temperature_celsius = 41;
  c.power_watts = 70;
  c.unhealthy = false;
  c.processes_listed = listed;
  c.processes = std::move(processes);
  return c;
}

PodOfPid Pids(std::map<uint32_t, std::string> pods) {
  return [pods](uint32_t pid) -> Result<std::string> {
    auto it = pods.find(pid);
    if (it == pods.end()) return Error{"no such process", Code::kNotFound, 0, kExited};
    if (it->second.empty()) return Error{"in no Pod's cgroup", Code::kNotFound, 0, kNoPodComponent};
    return it->second;
  };
}

TEST(Grants, TheSliceBudgetIsWhatTheAllocatorEnforces) {
  // 20 % of a 16384 MiB card is 3276.8: rounded down, as the allocator writes the limit.
  EXPECT_EQ(SliceBudgetMib(20, 0, 16384), 3276u);
  EXPECT_EQ(SliceBudgetMib(0, 5000, 16384), 5000u);
  EXPECT_EQ(SliceBudgetMib(0, 99999, 16384), 16384u);
  EXPECT_EQ(SliceBudgetOfLimits(nlohmann::json{{"nvidia.com/gpu.sliced", "1"},
                                               {"nvidia.com/gpu.sliced.memory-percentage", "20"}},
                                16384),
            3276u);
  EXPECT_EQ(SliceBudgetOfLimits(nlohmann::json{{"amd.com/gpu.sliced.memory-mib", 5000}}, 16384),
            5000u);
  EXPECT_EQ(SliceBudgetOfLimits(nlohmann::json{{"cpu", "2"}}, 16384), 0u);
  // Without the limits: from the credits, whole percents as above, MiB back to what was asked.
  EXPECT_EQ(SliceBudgetOfCredits(20 * ledger::kCreditsPerPercent, 16384), 3276u);
  const int64_t units = 5000 * ledger::kCardCredits / kT4;
  EXPECT_EQ(SliceBudgetOfCredits(units, kT4), 5000u);
  EXPECT_EQ(SliceBudgetOfCredits(0, kT4), 0u);
  // A known budget wins over the credits.
  Charge slice = Slice("GPU-0", 20, 30);
  EXPECT_EQ(HoldOf({{slice, 3000}}, 16384, ledger::Accelerator{}).memory_total_mib, 3000u);
}

TEST(Grants, ASliceReadsItsOwnProcessesAgainstItsOwnBudgetAndAllowance) {
  const Hold a = PodHold("a", {Slice("GPU-0", 20, 30)});
  const Hold b = PodHold("b", {Slice("GPU-0", 50, 50)});
  EXPECT_EQ(a.memory_total_mib, 3072u);
  EXPECT_EQ(a.cores_allowance_percent, 30);
  const Attribution out =
      Attribute({Card("GPU-0", {Row(11, 1000, 15), Row(12, 500, 30), Row(21, 4000, 20)})}, {a, b},
                {"a", "b"}, Pids({{11, "a"}, {12, "a"}, {21, "b"}}));
  ASSERT_EQ(out.grants.size(), 2u);
  const GrantSample& ga = out.grants[0];
  EXPECT_EQ(*ga.memory_used_mib, 1500);
  EXPECT_EQ(*ga.memory_utilization_percent, 1500 * 100.0 / 3072);
  EXPECT_EQ(*ga.cores_utilization_percent, 150);  // 45 % of the card on a 30 % allowance
  EXPECT_EQ(*ga.temperature_celsius, 41);
  const GrantSample& gb = out.grants[1];
  EXPECT_EQ(*gb.memory_used_mib, 4000);
  EXPECT_EQ(*gb.cores_utilization_percent, 40);
  EXPECT_TRUE(out.unplaced.empty());
  ASSERT_EQ(out.capabilities.size(), 2u);
  EXPECT_TRUE(out.capabilities[0].ok);
  EXPECT_EQ(out.capabilities[0].entry_point, "memory");
}

TEST(Grants, AHolderWithoutProcessesIsMeasuredIdleNotAbsent) {
  const Attribution out =
      Attribute({Card("GPU-0", {})}, {PodHold("a", {Slice("GPU-0", 20, 30)})}, {"a"}, Pids({}));
  ASSERT_EQ(out.grants.size(), 1u);
  ASSERT_TRUE(out.grants[0].memory_used_mib.has_value());
  EXPECT_EQ(*out.grants[0].memory_used_mib, 0);
  EXPECT_EQ(*out.grants[0].cores_utilization_percent, 0);
}

TEST(Grants, AnUnplaceableRowBlanksEveryGrantOnItsCardOnly) {
  const Hold a = PodHold("a", {Slice("GPU-0", 20, 30)});
  const Hold c = PodHold("c", {Slice("GPU-1", 20, 30)});
  for (auto [pod, reason] : std::vector<std::pair<std::string, std::string>>{
           {"", kNoPodComponent}, {"x", kUnknownPod}, {"c", kMediated}}) {
    std::map<uint32_t, std::string> pids{{11, "a"}, {31, "c"}};
    if (!pod.empty() || reason == kNoPodComponent) pids[99] = pod;
    const Attribution out = Attribute(
        {Card("GPU-0", {Row(11, 1000, 15), Row(99, 1, 1)}), Card("GPU-1", {Row(31, 700, 3)})},
        {a, c}, {"a", "c"}, Pids(pids));
    ASSERT_EQ(out.unplaced.size(), 1u) << reason;
    EXPECT_NE(out.unplaced[0].find("GPU-0: pid 99: " + reason), std::string::npos)
        << out.unplaced[0];
    EXPECT_FALSE(out.grants[0].memory_used_mib.has_value()) << reason;
    EXPECT_FALSE(out.grants[0].cores_utilization_percent.has_value()) << reason;
    EXPECT_TRUE(out.grants[0].temperature_celsius.has_value()) << "the card's own figures stay";
    EXPECT_EQ(*out.grants[1].memory_used_mib, 700) << reason;
  }
  // A process that exited between the listing and the lookup cannot be placed either.
  const Attribution gone = Attribute({Card("GPU-0", {Row(12, 10, 1)})}, {a}, {"a"}, Pids({}));
  ASSERT_EQ(gone.unplaced.size(), 1u);
  EXPECT_NE(gone.unplaced[0].find(kExited), std::string::npos);
}

TEST(Grants, AnUnmeasuredFigureIsAbsentAndItsCapabilityNamesWhy) {
  const Attribution out =
      Attribute({Card("GPU-0", {Row(11, 1000, std::nullopt)})},
                {PodHold("a", {Slice("GPU-0", 20, 30)})}, {"a"}, Pids({{11, "a"}}));
  EXPECT_EQ(*out.grants[0].memory_used_mib, 1000);
  EXPECT_FALSE(out.grants[0].cores_utilization_percent.has_value());
  ASSERT_EQ(out.capabilities.size(), 2u);
  EXPECT_TRUE(out.capabilities[0].ok);
  EXPECT_FALSE(out.capabilities[1].ok);
  EXPECT_EQ(out.capabilities[1].reason, "unsupported");
}

TEST(Grants, WithoutProcessRowsOnlyAnExclusiveHolderGetsTheCardsFigures) {
  const Hold whole = PodHold("a", {Whole("GPU-0")});
  const Hold slice = PodHold("b", {Slice("GPU-1", 20, 30)});
  const Attribution out = Attribute({Card("GPU-0", {}, false), Card("GPU-1", {}, false)},
                                    {whole, slice}, {"a", "b"}, Pids({}));
  EXPECT_EQ(whole.memory_total_mib, kT4);
  EXPECT_EQ(*out.grants[0].memory_used_mib, 9000);
  EXPECT_EQ(*out.grants[0].cores_utilization_percent, 70);
  EXPECT_FALSE(out.grants[1].memory_used_mib.has_value());
  EXPECT_FALSE(out.grants[1].memory_utilization_percent.has_value());
  for (const Capability& c : out.capabilities) {
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.reason, "unsupported");
  }
}

// A plugin that tried and failed to list a card's processes: its slices are unmeasured (not
// idle), the capability gauge says why, and the failure is reported for the log.
TEST(Grants, AListingThePluginCouldNotReadLeavesTheSlicesUnmeasuredAndSaysWhy) {
  CardReading refused = Card("GPU-1", {}, false);
  refused.unlisted_reason = "permission";
  const Attribution out =
      Attribute({Card("GPU-0", {}), refused},
                {PodHold("a", {Slice("GPU-0", 20, 30)}), PodHold("b", {Slice("GPU-1", 20, 30)})},
                {"a", "b"}, Pids({}));
  EXPECT_EQ(*out.grants[0].memory_used_mib, 0) << "listed, and none runs: measured idle";
  EXPECT_FALSE(out.grants[1].memory_used_mib.has_value());
  EXPECT_FALSE(out.grants[1].cores_utilization_percent.has_value());
  ASSERT_EQ(out.capabilities.size(), 4u);
  EXPECT_TRUE(out.capabilities[0].ok);
  EXPECT_FALSE(out.capabilities[2].ok);
  EXPECT_EQ(out.capabilities[2].reason, "permission");
  EXPECT_EQ(out.capabilities[3].reason, "permission");
  EXPECT_EQ(out.unlisted, std::vector<std::string>{"GPU-1: permission"});
}

TEST(Grants, TwoSlicesOfOneCardInOnePodAreOneEntryWithoutFigures) {
  const Hold both = PodHold("a", {Slice("GPU-0", 20, 30), Slice("GPU-0", 10, 20)});
  EXPECT_EQ(both.grants, 2);
  EXPECT_EQ(both.memory_total_mib, 3072u + 1536u);
  const Attribution out =
      Attribute({Card("GPU-0", {Row(11, 100, 1)})}, {both}, {"a"}, Pids({{11, "a"}}));
  ASSERT_EQ(out.grants.size(), 1u);
  EXPECT_FALSE(out.grants[0].memory_used_mib.has_value());
  EXPECT_FALSE(out.grants[0].cores_utilization_percent.has_value());
}

TEST(Grants, APartitionIsNamedByItsOwnIdAndReadAgainstItsSize) {
  ledger::Accelerator a100;
  a100.profiles.resize(2);
  a100.profiles[0].name = "1g.10gb";
  a100.profiles[0].memory_mib = 9856;
  a100.profiles[1].name = "7g.80gb";
  a100.profiles[1].memory_mib = 80000;
  Charge partition;
  partition.accelerator_id = "GPU-0";
  partition.mode = Mode::kPartitioned;
  partition.credits = 1;
  partition.profile = "1g.10gb";
  Hold h = HoldOf({{partition, 0}}, 81920, a100);
  h.pod_uid = "a";
  EXPECT_EQ(h.memory_total_mib, 9856u);
  EXPECT_EQ(h.cores_allowance_percent, 100);
  const Attribution out =
      Attribute({Card("GPU-0", {Row(11, 2000, 50, "MIG-1")})}, {h}, {"a"}, Pids({{11, "a"}}));
  EXPECT_EQ(out.grants[0].id, "MIG-1");
  EXPECT_EQ(*out.grants[0].memory_used_mib, 2000);
  EXPECT_EQ(*out.grants[0].cores_utilization_percent, 50);
}

TEST(Grants, ACardNotSampledThisRoundHasNoEntry) {
  const Attribution out = Attribute({}, {PodHold("a", {Slice("GPU-0", 20, 30)})}, {"a"}, Pids({}));
  EXPECT_TRUE(out.grants.empty());
  EXPECT_TRUE(out.capabilities.empty());
}

}  // namespace
}  // namespace gpustack::usage
