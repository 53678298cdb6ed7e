// The fit engine's speed: fit on one node of 8 cards, choose a node among 1,000 nodes x 8 cards,
// and pool views over 8,000 cards. Figures go in notes and docs, never into test assertions.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "host/ledger/ledger.h"
#include "host/ledger/views.h"
#include "tests/support/ledger_tables.h"

namespace {

using namespace gpustack::ledger;
using gpustack::ledger::testing::FindPartitionTable;
using gpustack::ledger::testing::PartitionTable;

DevicesSpec EightH100(int partitioned) {
  Group g{"h100-80gb-hbm3", "nvidia", "NVIDIA H100 80GB HBM3", 81920, 16896, "", "", "9.0",
          "Hopper",         {}};
  const PartitionTable* table = FindPartitionTable("nvidia", g.name);
  for (uint32_t i = 0; i < 8; ++i) {
    Accelerator a;
    a.id = "GPU-" + std::to_string(i);
    a.index = i;
    a.logical_count = 128;
    a.cores_percentage_overcommit = true;
    if (static_cast<int>(i) < partitioned) {
      a.profiles = table->profiles;
      a.logical_count = 0;
    }
    g.accelerators.push_back(a);
  }
  return {{g}};
}

Request Slice(uint32_t percent) {
  Request r;
  r.manufacturer = "nvidia";
  r.mode = Mode::kSliced;
  r.memory_percentage = percent;
  r.units = SliceUnits(percent, 0, 81920);
  return r;
}

// Setup reservations must succeed, or the figures measure something else.
void Must(const gpustack::Result<Allocation>& reserved) {
  if (!reserved) {
    std::fprintf(stderr, "benchmark setup failed: %s\n", reserved.error().c_str());
    std::abort();
  }
}

// A node of 8 cards, 3 partitioned, with a few slices and a partition already placed.
std::unique_ptr<NodeLedger> BusyNode(const std::string& name) {
  auto node = std::make_unique<NodeLedger>(name, EightH100(3));
  for (int i = 0; i < 6; ++i)
    Must(node->Reserve({name + "-s" + std::to_string(i), "c"}, Slice(30)));
  Request mig;
  mig.manufacturer = "nvidia";
  mig.mode = Mode::kPartitioned;
  mig.profile = "3g.40gb";
  mig.units = PartitionUnits(40960, 81920);
  Must(node->Reserve({name + "-m", "c"}, mig));
  return node;
}

void BM_FitSliceOnOneNode(benchmark::State& state) {
  auto node = BusyNode("n");
  const Request r = Slice(20);
  for (auto _ : state) benchmark::DoNotOptimize(node->Fit(r));
}
BENCHMARK(BM_FitSliceOnOneNode);

void BM_FitPartitionOnOneNode(benchmark::State& state) {
  auto node = BusyNode("n");
  Request r;
  r.manufacturer = "nvidia";
  r.mode = Mode::kPartitioned;
  r.profile = "1g.10gb";
  r.units = PartitionUnits(10240, 81920);
  for (auto _ : state) benchmark::DoNotOptimize(node->Fit(r));
}
BENCHMARK(BM_FitPartitionOnOneNode);

// 1,000 nodes of which only the last has room for a whole card: the worst case of the scan.
void BM_ChooseNodeAmong1000(benchmark::State& state) {
  std::vector<std::unique_ptr<NodeLedger>> nodes;
  std::vector<const NodeLedger*> view;
  Request whole;
  whole.manufacturer = "nvidia";
  whole.mode = Mode::kExclusive;
  whole.count = 1;
  for (int i = 0; i < 1000; ++i) {
    nodes.push_back(BusyNode("n" + std::to_string(i)));
    if (i < 999) {
      // Fill the free whole cards (the 3 sliced and 3 partitioned ones stay as they are).
      for (int j = 0; j < 3; ++j)
        Must(nodes.back()->Reserve({"w" + std::to_string(j), "c"}, whole));
    }
    view.push_back(nodes.back().get());
  }
  for (auto _ : state) benchmark::DoNotOptimize(FitOnNodes(view, whole));
}
BENCHMARK(BM_ChooseNodeAmong1000)->Unit(benchmark::kMicrosecond);

void BM_PoolViewsOver8000Cards(benchmark::State& state) {
  std::vector<std::unique_ptr<NodeLedger>> nodes;
  std::vector<const NodeLedger*> view;
  for (int i = 0; i < 1000; ++i) {
    nodes.push_back(BusyNode("n" + std::to_string(i)));
    view.push_back(nodes.back().get());
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(ComputePoolViews(view, "nvidia", "h100-80gb-hbm3"));
  }
}
BENCHMARK(BM_PoolViewsOver8000Cards)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
