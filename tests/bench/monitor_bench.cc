// The cost of one monitor sample per accelerator, through the real loader, the production plugin
// and its fake management library (so this measures our code plus the ABI crossing, not a
// driver): every card of a fixture node sampled per iteration; the per-device figure is the
// iteration time divided by the card count. Also one whole discovery pass per node.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "host/common/logging.h"
#include "host/loader/dlopen_source.h"
#include "host/pci/pci_inventory.h"

namespace {

using namespace gpustack;

struct Case {
  const char* plugin;
  const char* library;
  const char* node;
};

std::unique_ptr<loader::LoadedPlugin> Start(const Case& c, benchmark::State& state) {
  ::setenv("GPUSTACK_FAKE_FIXTURE",
           (std::string(GPUSTACK_NODES_DIR) + "/" + c.node + ".json").c_str(), 1);
  auto inventory = pci::Scan({std::string(GPUSTACK_NODE_TREES_DIR) + "/" + c.node + "/sys", {}});
  if (!inventory) {
    state.SkipWithError("fixture missing");
    return nullptr;
  }
  auto loaded =
      loader::LoadFromManifest(std::string(GPUSTACK_PLUGIN_DIR) + "/" + c.plugin + ".json");
  if (!loaded ||
      !(*loaded)->Init({{"library_path", std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/" + c.library}},
                       *inventory)) {
    state.SkipWithError("plugin failed to start");
    return nullptr;
  }
  return std::move(loaded).value();
}

const Case kCases[] = {
    {"nvidia", "libnvidia-ml.so.1", "nvidia-h100x8-mig-off"},
    {"amd", "librocm_smi64.so", "amd-mi210x2"},
    {"ascend", "libdcmi.so", "ascend-910b3x8"},
    {"cambricon", "libcndev.so", "cambricon-mlu370x4"},
};

void BM_MonitorSample(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  state.SetLabel(std::string(c.plugin) + " on " + c.node);
  auto plugin = Start(c, state);
  if (!plugin) return;
  const bool processes = state.range(1) != 0;
  size_t cards = 0;
  for (auto _ : state) {
    auto snapshot = plugin->SampleMetrics({.accelerator_ids = {}, .include_processes = processes});
    if (!snapshot) {
      state.SkipWithError(snapshot.error().c_str());
      return;
    }
    cards = snapshot->devices.size();
    benchmark::DoNotOptimize(snapshot->devices.data());
  }
  state.counters["cards"] = static_cast<double>(cards);
  // Seconds per card, shown in the unit of the report.
  state.counters["per_card"] =
      benchmark::Counter(static_cast<double>(state.iterations() * cards),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MonitorSample)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->ArgNames({"node", "processes"})
    ->Unit(benchmark::kMicrosecond);

void BM_Discover(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  state.SetLabel(std::string(c.plugin) + " on " + c.node);
  auto plugin = Start(c, state);
  if (!plugin) return;
  for (auto _ : state) {
    auto groups = plugin->Discover();
    if (!groups) {
      state.SkipWithError(groups.error().c_str());
      return;
    }
    benchmark::DoNotOptimize(groups->data());
  }
}
BENCHMARK(BM_Discover)->DenseRange(0, 3)->ArgName("node")->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  InitLogging("off");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
