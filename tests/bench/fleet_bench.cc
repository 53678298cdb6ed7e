// The worker's pure part at fleet scale (1,000 nodes x 8 H100): reading nodes and their Devices
// objects, building the fleet, and rendering what one pass compares with the caches.
#include <benchmark/benchmark.h>

#include <fstream>

#include "host/ledger/views.h"
#include "host/operator/fleet.h"

using namespace gpustack;
using op::Json;

namespace {

constexpr int kNodes = 1000;

struct Objects {
  std::vector<Json> nodes, devices;
};

const Objects& Fleet1000() {
  static const Objects objects = [] {
    std::ifstream in(std::string(GPUSTACK_NODES_DIR) +
                     "/expected/nvidia-h100x8-mig-off.devices.json");
    const Json spec = Json::parse(in);
    Objects o;
    for (int i = 0; i < kNodes; ++i) {
      const std::string name = "node-" + std::to_string(i);
      o.nodes.push_back(
          {{"metadata",
            {{"name", name},
             {"labels",
              {{"kubernetes.io/os", "linux"},
               {"kubernetes.io/arch", "amd64"},
               {op::kCpuVendorLabel, "Intel"},
               {op::kManagedLabel, "true"}}},
             {"annotations", {{op::kCpuNameAnnotation, "Intel(R) Xeon(R) Platinum 8480+"}}}}},
           {"status", {{"capacity", {{"cpu", "224"}, {"nvidia.com/gpu.sliced", "1024"}}}}}});
      o.devices.push_back({{"metadata", {{"name", name}}}, {"spec", spec}});
    }
    return o;
  }();
  return objects;
}

std::vector<op::NodeFacts> Facts() {
  std::vector<op::NodeFacts> facts;
  for (int i = 0; i < kNodes; ++i)
    facts.push_back(op::NodeFactsOf(Fleet1000().nodes[i], &Fleet1000().devices[i]));
  return facts;
}

const op::ManufacturerTable kTable = {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "bench"}}};

void BM_ReadNodesAndDevices(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Facts());
}
BENCHMARK(BM_ReadNodesAndDevices)->Unit(benchmark::kMillisecond);

void BM_BuildFleet(benchmark::State& state) {
  std::vector<op::NodePtr> facts;
  for (op::NodeFacts& n : Facts()) {
    op::DecideManagement(n, {});
    facts.push_back(std::make_shared<const op::NodeFacts>(std::move(n)));
  }
  for (auto _ : state) benchmark::DoNotOptimize(op::Fleet(facts, {}, kTable));
}
BENCHMARK(BM_BuildFleet)->Unit(benchmark::kMillisecond);

void BM_RenderEveryNode(benchmark::State& state) {
  const op::Fleet fleet(Facts(), {}, kTable);
  for (auto _ : state) {
    for (const op::NodePtr& n : fleet.nodes()) {
      benchmark::DoNotOptimize(fleet.RenderNodeLabels(*n));
      benchmark::DoNotOptimize(fleet.RenderNodeCapacity(*n));
    }
  }
}
BENCHMARK(BM_RenderEveryNode)->Unit(benchmark::kMillisecond);

void BM_PoolStatusAndQueue(benchmark::State& state) {
  const op::Fleet fleet(Facts(), {}, kTable);
  const Json type =
      fleet.RenderDerivedInstanceType({true, "nvidia-h100-80gb-hbm3", "generic", "linux", "amd64"});
  for (auto _ : state) {
    benchmark::DoNotOptimize(fleet.RenderInstanceTypeStatus(type, false, ""));
    benchmark::DoNotOptimize(fleet.RenderClusterQueue(type, nullptr, false, true));
  }
}
BENCHMARK(BM_PoolStatusAndQueue)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
