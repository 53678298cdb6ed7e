// The exposition: what was not measured is absent (never zero), labels are escaped, and a round
// that failed publishes only its verdict.
#include "host/node/metrics.h"

#include <gtest/gtest.h>

namespace gpustack::node {
namespace {

MetricsInput OneCard() {
  MetricsInput input;
  input.node = "node-a";
  input.sampled = true;
  runtime::CardSample card;
  card.manufacturer = "nvidia";
  card.index = 3;
  card.sample.accelerator_id = "GPU-1";
  card.sample.memory_total_mib = 24560;
  card.sample.memory_used_mib = 100;
  card.sample.health = GPUSTACK_HEALTH_HEALTHY;
  input.round.cards.push_back(card);
  input.holders.push_back({"team \"a\"", "web", "uid-1", "GPU-1", ledger::Mode::kSliced});
  return input;
}

TEST(Metrics, WhatWasNotMeasuredIsAbsent) {
  const std::string text = RenderMetrics(OneCard());
  EXPECT_NE(text.find("gpustack_instance_accelerator_memory_total_mib{namespace=\"team \\\"a\\\"\","
                      "instance_name=\"web\",instance_uid=\"uid-1\",node=\"node-a\",id=\"GPU-1\","
                      "index=\"3\",manufacturer=\"nvidia\",mode=\"Sliced\"} 24560\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("temperature"), std::string::npos) << text;  // not measured
  EXPECT_EQ(text.find("power"), std::string::npos) << text;
  EXPECT_NE(text.find("gpustack_instance_accelerator_unhealthy{"), std::string::npos);
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"snapshot\"} 1"),
            std::string::npos);
  EXPECT_EQ(text.find("instance=\""), std::string::npos);  // the label is instance_name
}

TEST(Metrics, AFailedRoundPublishesOnlyItsVerdict) {
  MetricsInput input = OneCard();
  input.round.errors.push_back("nvidia: NVML_ERROR_UNKNOWN");
  input.round.cards.clear();
  const std::string text = RenderMetrics(input);
  EXPECT_EQ(text.find("gpustack_instance_accelerator_"), std::string::npos) << text;
  EXPECT_NE(text.find("gpustack_instance_metrics_collector_success{source=\"snapshot\"} 0"),
            std::string::npos);
  MetricsInput none;
  EXPECT_NE(RenderMetrics(none).find("collector_success{source=\"snapshot\"} 0"),
            std::string::npos);
}

TEST(Metrics, TheSnapshotLeavesOutWhatWasNotMeasured) {
  const auto snapshot = SnapshotJson(OneCard());
  const auto& card = snapshot["cards"][0];
  EXPECT_EQ(card["memory_total_mib"], 24560);
  EXPECT_FALSE(card.contains("temperature_celsius"));
  EXPECT_EQ(card["health"], "Healthy");
}

}  // namespace
}  // namespace gpustack::node
