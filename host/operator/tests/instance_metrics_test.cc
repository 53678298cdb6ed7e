// instances/<name>/metrics from what its sources gave (docs/behaviour.md §8.1): totals always,
// measurements only when measured, the kubelet before metrics.k8s.io, a 503 naming both when
// neither answers, and accelerators only from a fresh round and the Pod's own cards.
#include "host/operator/instance_metrics.h"

#include <gtest/gtest.h>

#include "host/ledger/allocated.h"

namespace gpustack::op {
namespace {

const auto kNow = std::chrono::system_clock::from_time_t(1'800'000'000);

Json Instance() {
  return Json::parse(R"({"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
    "metadata": {"name": "dev", "namespace": "team", "uid": "inst-1"},
    "spec": {"type": "t4", "resources": {"cpu": "2", "ram": "4Gi", "localStorage": "10Gi",
                                         "accelerator": "1"}}})");
}

Json RunningPod() {
  ledger::Charge slice;
  slice.accelerator_id = "GPU-2";
  slice.mode = ledger::Mode::kSliced;
  slice.credits = 20 * ledger::kCreditsPerPercent;
  slice.cores_percentage = 30;
  Json pod = Json::parse(R"({"metadata": {"name": "dev", "namespace": "team", "uid": "pod-1",
      "labels": {"app.kubernetes.io/part-of": "inst-1"}},
    "spec": {"nodeName": "n1", "containers": [
      {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "4Gi",
                                                "ephemeral-storage": "10Gi"}}},
      {"name": "sshd", "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}}}]},
    "status": {"phase": "Running", "containerStatuses": [
      {"name": "main", "state": {"running": {}}}]}})");
  pod["metadata"]["annotations"][ledger::kAllocatedAnnotation] =
      ledger::AllocatedAnnotation({{{"pod-1", "main"}, {slice}}});
  return pod;
}

Json Snapshot(double age = 5) {
  return Json{{"sampled", true},
              {"periodSeconds", 15},
              {"ageSeconds", age},
              {"grants",
               {{{"namespace", "team"},
                 {"pod", "dev"},
                 {"podUID", "pod-1"},
                 {"card", "GPU-2"},
                 {"id", "GPU-2"},
                 {"mode", "Sliced"},
                 {"memoryTotalMiB", 3072},
                 {"memoryUsedMiB", 1000.0},
                 {"coresUtilizationPercent", 50.0}},
                {{"namespace", "team"},
                 {"pod", "dev"},
                 {"podUID", "pod-1"},
                 {"card", "GPU-3"},
                 {"id", "GPU-3"},
                 {"mode", "Sliced"},
                 {"memoryTotalMiB", 3072}},
                {{"namespace", "other"},
                 {"pod", "x"},
                 {"podUID", "pod-9"},
                 {"card", "GPU-2"},
                 {"id", "GPU-2"},
                 {"mode", "Sliced"},
                 {"memoryTotalMiB", 1536}}}}};
}

TEST(InstanceMetrics, AStartedInstanceReadsTheKubeletAndItsOwnGrants) {
  const Json pod = RunningPod();
  MetricsSources sources;
  sources.pod = &pod;
  sources.kubelet = usage::PodUse{150, 700, 12};
  sources.snapshot = Result<Json>(Snapshot());
  auto object = InstanceMetricsObject(Instance(), sources, kNow);
  ASSERT_TRUE(object) << object.error();
  EXPECT_EQ((*object)["kind"], "InstanceMetrics");
  EXPECT_EQ((*object)["metadata"]["name"], "dev");
  const Json& sample = (*object)["sample"];
  EXPECT_EQ(sample["timestamp"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(sample["cpuTotalMilliCores"], 2100);
  EXPECT_EQ(sample["memoryTotalMiB"], 4096 + 128);
  EXPECT_EQ(sample["storageTotalMiB"], 10240);
  EXPECT_EQ(sample["cpuUsedMilliCores"], 150);
  EXPECT_EQ(sample["storageUsedMiB"], 12);
  ASSERT_EQ(sample["accelerators"].size(), 1u) << sample.dump();  // not GPU-3, not pod-9's
  EXPECT_EQ(sample["accelerators"][0],
            Json::parse(R"({"id": "GPU-2", "mode": "Sliced", "memoryTotalMiB": 3072,
                            "memoryUsedMiB": 1000.0, "coresUtilizationPercent": 50.0})"));
}

TEST(InstanceMetrics, MetricsServerStandsInForTheKubeletWithoutStorage) {
  const Json pod = RunningPod();
  MetricsSources sources;
  sources.pod = &pod;
  sources.kubelet = Result<usage::PodUse>(Error{"connection refused"});
  sources.metrics_api = usage::PodUse{90, 300, std::nullopt};
  auto object = InstanceMetricsObject(Instance(), sources, kNow);
  ASSERT_TRUE(object) << object.error();
  EXPECT_EQ((*object)["sample"]["cpuUsedMilliCores"], 90);
  EXPECT_FALSE((*object)["sample"].contains("storageUsedMiB")) << "unmeasured is absent";
  EXPECT_FALSE((*object)["sample"].contains("accelerators")) << "the daemon was not read";
}

TEST(InstanceMetrics, NeitherSourceIsA503NamingBoth) {
  const Json pod = RunningPod();
  MetricsSources sources;
  sources.pod = &pod;
  sources.kubelet = Result<usage::PodUse>(Error{"the node proxy: connection refused"});
  sources.metrics_api =
      Result<usage::PodUse>(Error{"the server could not find the requested resource"});
  auto object = InstanceMetricsObject(Instance(), sources, kNow);
  ASSERT_FALSE(object);
  EXPECT_EQ(object.failure().http_status, 503);
  EXPECT_NE(object.error().find("the kubelet's stats summary: the node proxy: connection refused"),
            std::string::npos)
      << object.error();
  EXPECT_NE(object.error().find("metrics.k8s.io: the server could not find"), std::string::npos);
}

TEST(InstanceMetrics, NeverStartedIsTotalsAndZeroes) {
  auto no_pod = InstanceMetricsObject(Instance(), {}, kNow);
  ASSERT_TRUE(no_pod) << no_pod.error();
  const Json& sample = (*no_pod)["sample"];
  EXPECT_EQ(sample["cpuTotalMilliCores"], 2000);
  EXPECT_EQ(sample["memoryTotalMiB"], 4096);
  EXPECT_EQ(sample["storageTotalMiB"], 10240);
  EXPECT_EQ(sample["cpuUsedMilliCores"], 0);
  EXPECT_EQ(sample["memoryUsedMiB"], 0);
  EXPECT_EQ(sample["storageUsedMiB"], 0);
  EXPECT_EQ(sample["accelerators"], Json::array());
  // A Pod waiting for its image has not started either: its own limits, nothing used.
  Json pulling = RunningPod();
  pulling["status"]["containerStatuses"][0]["state"] = {{"waiting", {{"reason", "ErrImagePull"}}}};
  EXPECT_FALSE(PodStarted(pulling));
  MetricsSources sources;
  sources.pod = &pulling;
  auto waiting = InstanceMetricsObject(Instance(), sources, kNow);
  ASSERT_TRUE(waiting);
  EXPECT_EQ((*waiting)["sample"]["cpuTotalMilliCores"], 2100);
  EXPECT_EQ((*waiting)["sample"]["cpuUsedMilliCores"], 0);
}

TEST(InstanceMetrics, AStaleOrUnsampledRoundGivesNoAccelerators) {
  const Json pod = RunningPod();
  EXPECT_TRUE(AcceleratorsFrom(Snapshot(45), pod).has_value());
  EXPECT_FALSE(AcceleratorsFrom(Snapshot(45.5), pod).has_value()) << "older than 3 periods";
  Json unsampled = Snapshot();
  unsampled["sampled"] = false;
  EXPECT_FALSE(AcceleratorsFrom(unsampled, pod).has_value());
  EXPECT_FALSE(AcceleratorsFrom(Json("garbage"), pod).has_value());
  // A Pod without an allocation record holds no card: an empty list, not someone else's.
  Json bare = pod;
  bare["metadata"].erase("annotations");
  EXPECT_EQ(*AcceleratorsFrom(Snapshot(), bare), Json::array());
}

}  // namespace
}  // namespace gpustack::op
