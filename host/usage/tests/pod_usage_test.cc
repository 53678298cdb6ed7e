#include "host/usage/pod_usage.h"

#include <gtest/gtest.h>

namespace gpustack::usage {
namespace {

TEST(PodUsage, TotalsAreTheContainersLimitsWithoutInitContainers) {
  const Json pod = Json::parse(R"({"spec": {
    "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "8", "memory": "8Gi"}}}],
    "containers": [
      {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "4Gi",
                                                "ephemeral-storage": "10Gi"}}},
      {"name": "ssh", "resources": {"limits": {"cpu": "250m", "memory": "1500Ki"}}},
      {"name": "bare"}]}})");
  const PodTotals t = TotalsOf(pod);
  EXPECT_EQ(t.cpu_millicores, 2250);
  EXPECT_EQ(t.memory_mib, 4096u + 2u);  // 1500 KiB rounds up to 2 MiB, after summing bytes
  EXPECT_EQ(t.storage_mib, 10240u);
  EXPECT_EQ(TotalsOf(Json::object()).cpu_millicores, 0);
}

TEST(PodUsage, AnInstanceWithoutAPodHasWhatItsSpecAsks) {
  const PodTotals t = TotalsOfInstanceSpec(Json::parse(R"({"spec": {"resources": {
    "cpu": "1500m", "ram": "4Gi", "localStorage": "1536Ki", "accelerator": "1"}}})"));
  EXPECT_EQ(t.cpu_millicores, 1500);
  EXPECT_EQ(t.memory_mib, 4096u);
  EXPECT_EQ(t.storage_mib, 2u);
  EXPECT_EQ(TotalsOfInstanceSpec(Json::parse(R"({"spec": {"resources": 7}})")).cpu_millicores, 0);
}

TEST(PodUsage, AnInstancesPodIsLabelledWithTheInstance) {
  const Json instance_pod = Json::parse(R"({"metadata": {"name": "dev", "uid": "pod-uid",
    "labels": {"worker.gpustack.ai/instance": "dev", "app.kubernetes.io/part-of": "inst-uid"}}})");
  EXPECT_EQ(SubjectOf(instance_pod).uid, "inst-uid");
  EXPECT_EQ(SubjectOf(instance_pod).name, "dev");
  // part-of alone is common to many charts: not an Instance's Pod.
  const Json plain = Json::parse(R"({"metadata": {"name": "web", "uid": "pod-uid",
    "labels": {"app.kubernetes.io/part-of": "shop"}}})");
  EXPECT_EQ(SubjectOf(plain).uid, "pod-uid");
  EXPECT_EQ(SubjectOf(plain).name, "web");
}

TEST(PodUsage, MibRoundUpAndASubMibFigureIsOne) {
  EXPECT_EQ(MibRoundedUp(0), 0u);
  EXPECT_EQ(MibRoundedUp(1), 1u);
  EXPECT_EQ(MibRoundedUp(1024 * 1024), 1u);
  EXPECT_EQ(MibRoundedUp(1024 * 1024 + 1), 2u);
}

TEST(PodUsage, TheKubeletsSummaryByPodUid) {
  const Json summary = Json::parse(R"({"node": {"nodeName": "n"}, "pods": [
    {"podRef": {"name": "a", "namespace": "t", "uid": "u1"},
     "cpu": {"usageNanoCores": 123456789}, "memory": {"workingSetBytes": 10485761},
     "ephemeral-storage": {"usedBytes": 4096}},
    {"podRef": {"name": "b", "namespace": "t", "uid": "u2"}, "cpu": {}},
    {"podRef": {"name": "c"}}]})");
  auto use = UseFromSummary(summary);
  ASSERT_TRUE(use) << use.error();
  ASSERT_EQ(use->size(), 2u);
  EXPECT_EQ(*use->at("u1").cpu_millicores, 123);
  EXPECT_EQ(*use->at("u1").memory_mib, 11u);
  EXPECT_EQ(*use->at("u1").storage_mib, 1u);
  EXPECT_FALSE(use->at("u2").cpu_millicores.has_value()) << "not measured, not zero";
  EXPECT_FALSE(use->at("u2").memory_mib.has_value());
  EXPECT_FALSE(UseFromSummary(Json::parse(R"({"node": {}})")));
}

TEST(PodUsage, MetricsApiSumsContainersAndHasNoStorage) {
  auto use = UseFromPodMetrics(Json::parse(R"({"containers": [
    {"name": "main", "usage": {"cpu": "250m", "memory": "100Mi"}},
    {"name": "ssh", "usage": {"cpu": "1500000n", "memory": "512Ki"}}]})"));
  ASSERT_TRUE(use) << use.error();
  EXPECT_EQ(*use->cpu_millicores, 252);
  EXPECT_EQ(*use->memory_mib, 101u);
  EXPECT_FALSE(use->storage_mib.has_value());
  EXPECT_FALSE(UseFromPodMetrics(Json::parse(R"({"containers": [{"usage": {"cpu": "x"}}]})")));
}

TEST(PodUsage, TheSampleLeavesOutWhatWasNotMeasured) {
  const Json sample = SampleJson("2026-12-05T10:00:00Z", {2000, 4096, 10240},
                                 PodUse{10, 0, std::nullopt}, std::nullopt);
  EXPECT_EQ(sample["cpuTotalMilliCores"], 2000);
  EXPECT_EQ(sample["cpuUsedMilliCores"], 10);
  EXPECT_EQ(sample["memoryUsedMiB"], 0) << "measured idle is zero";
  EXPECT_FALSE(sample.contains("storageUsedMiB"));
  EXPECT_FALSE(sample.contains("accelerators")) << "the node daemon was not read";
  GrantSample g;
  g.hold.card_id = "GPU-0";
  g.hold.mode = ledger::Mode::kSliced;
  g.hold.grants = 1;
  g.hold.memory_total_mib = 3072;
  g.id = "GPU-0";
  g.memory_used_mib = 1500;
  const Json entry = AcceleratorJson(g);
  EXPECT_EQ(entry, Json::parse(R"({"id": "GPU-0", "mode": "Sliced", "memoryTotalMiB": 3072,
                                   "memoryUsedMiB": 1500.0})"));
}

}  // namespace
}  // namespace gpustack::usage
