// The exposition and the snapshot: what was not measured is absent (never zero), labels are
// escaped, a grant reads its own share of its card, and a round that failed publishes only its
// verdict.
#include "host/node/metrics.h"

#include <gtest/gtest.h>

#include "host/ledger/tests/fixtures.h"

namespace gpustack::node {
namespace {

constexpr const char* kPodUid = "0f2c6a3e-5b1d-4c7a-9e2f-1a2b3c4d5e6f";

// One T4 with one process of the Pod holding a 20 % slice with 30 % of the cores.
MetricsInput OneSlice(bool processes_listed = true) {
  MetricsInput input;
  input.node = "node-a";
  input.sampled = true;
  input.sampled_at = std::chrono::system_clock::from_time_t(1'800'000'000);
  runtime::CardSample card;
  card.manufacturer = "nvidia";
  card.index = 3;
  card.sample.accelerator_id = "GPU-1";
  card.sample.memory_total_mib = 15360;
  card.sample.memory_used_mib = 1100;
  card.sample.health = GPUSTACK_HEALTH_HEALTHY;
  card.processes_listed = processes_listed;
  sdk::ProcessSample p;
  p.accelerator_id = "GPU-1";
  p.pid = 4242;
  p.memory_used_mib = 1000;
  p.cores_utilization_percent = 15;
  if (processes_listed) card.processes.push_back(p);
  input.round.cards.push_back(card);

  ledger::Charge slice;
  slice.accelerator_id = "GPU-1";
  slice.mode = ledger::Mode::kSliced;
  slice.credits = 20 * ledger::kCreditsPerPercent;
  slice.cores_percentage = 30;
  usage::Hold hold = usage::HoldOf({{slice, 0}}, 15360, ledger::Accelerator{});
  hold.ns = "team \"a\"";
  hold.pod = "web";
  hold.pod_uid = kPodUid;
  hold.instance_name = "web";
  hold.instance_uid = "instance-uid-1";
  input.attribution =
      usage::Attribute(ReadingsOf(input.round), {hold}, {kPodUid},
                       [](uint32_t) -> Result<std::string> { return std::string(kPodUid); });
  PodFigures pod{.ns = hold.ns,
                 .pod = "web",
                 .pod_uid = kPodUid,
                 .instance_name = "web",
                 .instance_uid = "instance-uid-1",
                 .totals = {2000, 4096, 10240},
                 .use = {120, 300, std::nullopt}};
  input.pods.push_back(pod);
  input.kubelet_ok = true;
  input.kubelet_seconds = 0.25;
  return input;
}

const std::string kLabels =
    "{namespace=\"team \\\"a\\\"\",instance_name=\"web\",instance_uid=\"instance-uid-1\","
    "node=\"node-a\"";

TEST(Metrics, AGrantReadsItsOwnShareOfItsCard) {
  const std::string text = RenderMetrics(OneSlice());
  const std::string grant =
      kLabels + ",id=\"GPU-1\",index=\"3\",manufacturer=\"nvidia\",mode=\"Sliced\"}";
  EXPECT_NE(text.find("gpustack_instance_accelerator_memory_total_mib" + grant + " 3072\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustack_instance_accelerator_memory_used_mib" + grant + " 1000\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_accelerator_cores_utilization_percent" + grant + " 50\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_accelerator_unhealthy" + grant + " 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_accelerator_cores_allowance_percent" + grant + " 30\n"),
            std::string::npos);
  EXPECT_EQ(text.find("temperature"), std::string::npos) << text;  // not measured
  EXPECT_EQ(text.find("power"), std::string::npos) << text;
  EXPECT_EQ(text.find("instance=\""), std::string::npos);  // the label is instance_name
  EXPECT_NE(text.find("gpustack_accelerator_process_capability{node=\"node-a\",manufacturer="
                      "\"nvidia\",id=\"GPU-1\",entry_point=\"cores\",reason=\"\"} 1\n"),
            std::string::npos);
}

TEST(Metrics, PodFamiliesAndTheCollectorsSelfReport) {
  const std::string text = RenderMetrics(OneSlice());
  EXPECT_NE(text.find("gpustack_instance_cpu_total_millicores" + kLabels + "} 2000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustack_instance_memory_used_mib" + kLabels + "} 300\n"),
            std::string::npos);
  EXPECT_EQ(text.find("gpustack_instance_storage_used_mib"), std::string::npos) << "unmeasured";
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"snapshot\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"kubelet\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_duration_seconds{source=\"kubelet\"} "
                      "0.25\n"),
            std::string::npos);
  // Each family's header comes once, before its first series.
  EXPECT_EQ(text.find("# TYPE gpustack_instance_cpu_total_millicores gauge"),
            text.rfind("# TYPE gpustack_instance_cpu_total_millicores gauge"));
}

TEST(Metrics, APluginThatListsNoProcessesLeavesTheSlicesFiguresOutAndSaysWhy) {
  const std::string text = RenderMetrics(OneSlice(/*processes_listed=*/false));
  EXPECT_EQ(text.find("gpustack_instance_accelerator_memory_used_mib"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpustack_instance_accelerator_cores_utilization_percent"),
            std::string::npos);
  EXPECT_NE(text.find("entry_point=\"memory\",reason=\"unsupported\"} 0\n"), std::string::npos);
}

TEST(Metrics, AFailedRoundPublishesOnlyItsVerdict) {
  MetricsInput input = OneSlice();
  input.sampled = false;
  input.kubelet_ok = false;
  const std::string text = RenderMetrics(input);
  EXPECT_EQ(text.find("gpustack_instance_accelerator_"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpustack_instance_cpu_"), std::string::npos) << text;
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"snapshot\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"kubelet\"} 0"),
            std::string::npos);
  MetricsInput none;
  EXPECT_NE(RenderMetrics(none).find("collector_success{source=\"snapshot\"} 0"),
            std::string::npos);
}

TEST(Metrics, TheSnapshotCarriesCardsGrantsAndItsAge) {
  const MetricsInput input = OneSlice();
  const auto snapshot = SnapshotJson(input, input.sampled_at + std::chrono::seconds(7));
  const auto& card = snapshot["cards"][0];
  EXPECT_EQ(card["memory_total_mib"], 15360);
  EXPECT_FALSE(card.contains("temperature_celsius"));
  EXPECT_EQ(card["health"], "Healthy");
  ASSERT_EQ(snapshot["grants"].size(), 1u);
  const auto& grant = snapshot["grants"][0];
  EXPECT_EQ(grant["podUID"], kPodUid);
  EXPECT_EQ(grant["card"], "GPU-1");
  EXPECT_EQ(grant["memoryTotalMiB"], 3072);
  EXPECT_EQ(grant["memoryUsedMiB"], 1000);
  EXPECT_EQ(grant["coresUtilizationPercent"], 50);
  EXPECT_EQ(snapshot["ageSeconds"], 7);
  EXPECT_EQ(snapshot["periodSeconds"], 15);
  EXPECT_EQ(snapshot["time"], "2027-01-15T08:00:00Z");
}

TEST(Metrics, HoldsAreEachPodsChargesPerCardWithTheBudgetItsLimitsAsk) {
  ledger::NodeLedger node("node-a", ledger::testing::T4Node(2, "GPU-"));
  auto slice = [](const std::string& card, uint32_t percent) {
    ledger::Charge c;
    c.accelerator_id = card;
    c.mode = ledger::Mode::kSliced;
    c.credits = int64_t{percent} * ledger::kCreditsPerPercent;
    c.cores_percentage = 50;
    return c;
  };
  ASSERT_TRUE(node.Restore({{"uid-a", "main"}, {slice("GPU-0", 20)}}));
  ASSERT_TRUE(node.Restore({{"uid-b", "main"}, {slice("GPU-1", 10)}}));
  ASSERT_TRUE(node.Restore({{"uid-gone", "main"}, {slice("GPU-1", 10)}}));
  const usage::Json a =
      usage::Json::parse(R"({"metadata": {"name": "dev", "namespace": "t", "uid": "uid-a",
      "labels": {"worker.gpustack.ai/instance": "dev", "app.kubernetes.io/part-of": "inst-a"}},
    "spec": {"containers": [{"name": "main", "resources": {"limits": {
      "nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "20"}}}]}})");
  const usage::Json b =
      usage::Json::parse(R"({"metadata": {"name": "web", "namespace": "t", "uid": "uid-b"},
    "spec": {"containers": [{"name": "main"}]}})");
  const std::vector<usage::Hold> holds = HoldsOf(node, {{"uid-a", &a}, {"uid-b", &b}});
  ASSERT_EQ(holds.size(), 2u) << "uid-gone is no Pod of the node's";
  EXPECT_EQ(holds[0].pod_uid, "uid-a");
  EXPECT_EQ(holds[0].instance_uid, "inst-a");
  EXPECT_EQ(holds[0].memory_total_mib, 16384u * 20 / 100) << "from its limits, rounded down";
  EXPECT_EQ(holds[0].cores_allowance_percent, 50);
  EXPECT_EQ(holds[1].instance_name, "web");
  EXPECT_EQ(holds[1].memory_total_mib, 1638u) << "no limits at hand: from the credits";
}

}  // namespace
}  // namespace gpustack::node
