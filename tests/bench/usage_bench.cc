// The node daemon's per-Pod figures at a full node: 8 cards and 110 Pods holding slices of them,
// each Pod with one process on its card. BM_Attribute is one round's placement of every process
// row in its Pod (a real /proc/<pid>/cgroup read per row, then the per-grant sums);
// BM_RenderMetrics and BM_Snapshot are what one scrape of /metrics and one worker read of
// /monitor/snapshot cost, with the body size as a counter.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "host/node/metrics.h"
#include "host/usage/cgroup.h"

namespace {

using namespace gpustack;

constexpr int kCards = 8;
constexpr int kPods = 110;

std::string Uid(int i) {
  char text[40];
  std::snprintf(text, sizeof text, "%08x-0000-4000-8000-%012x", i, i);
  return text;
}

node::MetricsInput FullNode() {
  node::MetricsInput input;
  input.node = "gpu-node-17";
  input.sampled = true;
  for (int c = 0; c < kCards; ++c) {
    runtime::CardSample card;
    card.manufacturer = "nvidia";
    card.index = static_cast<uint32_t>(c);
    card.sample.accelerator_id = "GPU-" + std::to_string(c);
    card.sample.memory_total_mib = 81559;
    card.sample.memory_used_mib = 40000;
    card.sample.cores_utilization_percent = 80;
    card.sample.temperature_celsius = 55;
    card.sample.power_watts = 400;
    card.sample.health = GPUSTACK_HEALTH_HEALTHY;
    card.processes_listed = true;
    input.round.cards.push_back(card);
  }
  std::vector<usage::Hold> holds;
  for (int p = 0; p < kPods; ++p) {
    const int c = p % kCards;
    sdk::ProcessSample row;
    row.accelerator_id = "GPU-" + std::to_string(c);
    row.pid = static_cast<uint32_t>(p + 1000);
    row.memory_used_mib = 500 + p;
    row.cores_utilization_percent = 5;
    input.round.cards[c].processes.push_back(row);
    ledger::Charge slice;
    slice.accelerator_id = row.accelerator_id;
    slice.mode = ledger::Mode::kSliced;
    slice.credits = 7 * ledger::kCreditsPerPercent;
    slice.cores_percentage = 7;
    usage::Hold hold = usage::HoldOf({{slice, 5709}}, 81559, ledger::Accelerator{});
    hold.ns = "team-" + std::to_string(p % 7);
    hold.pod = hold.instance_name = "notebook-" + std::to_string(p);
    hold.pod_uid = hold.instance_uid = Uid(p);
    holds.push_back(hold);
    input.pods.push_back({hold.ns,
                          hold.pod,
                          hold.pod_uid,
                          hold.instance_name,
                          hold.instance_uid,
                          {2000, 8192, 20480},
                          {350, 3000, 120}});
  }
  std::set<std::string> uids;
  for (const usage::Hold& h : holds) uids.insert(h.pod_uid);
  input.attribution = usage::Attribute(
      node::ReadingsOf(input.round), holds, uids,
      [](uint32_t pid) -> Result<std::string> { return Uid(static_cast<int>(pid) - 1000); });
  input.kubelet_ok = true;
  return input;
}

void BM_Attribute(benchmark::State& state) {
  const node::MetricsInput input = FullNode();
  std::vector<usage::Hold> holds;
  std::set<std::string> uids;
  for (const usage::GrantSample& g : input.attribution.grants) {
    holds.push_back(g.hold);
    uids.insert(g.hold.pod_uid);
  }
  const std::vector<usage::CardReading> readings = node::ReadingsOf(input.round);
  for (auto _ : state) {
    auto out = usage::Attribute(readings, holds, uids, [](uint32_t pid) -> Result<std::string> {
      // The file the daemon reads per row (this process's own, always there).
      std::ifstream file("/proc/self/cgroup");
      std::ostringstream text;
      text << file.rdbuf();
      benchmark::DoNotOptimize(usage::ContainerOfCgroup(text.str()));
      return Uid(static_cast<int>(pid) - 1000);
    });
    benchmark::DoNotOptimize(out.grants.data());
  }
  state.counters["per_card"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kCards),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Attribute)->Unit(benchmark::kMicrosecond);

void BM_RenderMetrics(benchmark::State& state) {
  const node::MetricsInput input = FullNode();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = node::RenderMetrics(input);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetrics)->Unit(benchmark::kMicrosecond);

void BM_Snapshot(benchmark::State& state) {
  const node::MetricsInput input = FullNode();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = node::SnapshotJson(input).dump();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Snapshot)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
