// How long the host takes to find, load, negotiate with, identify and initialize the nine vendor
// plugins, as the device manager does at start. Run with --benchmark_repetitions=N for a median.
#include <benchmark/benchmark.h>

#include "host/common/logging.h"
#include "host/loader/loader.h"

namespace {

using namespace gpustack::loader;

void BM_LoadAllNinePlugins(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<std::string> problems;
    std::vector<std::unique_ptr<Plugin>> plugins;
    for (auto& candidate : FindManifests({GPUSTACK_PLUGIN_DIR}, {}, &problems)) {
      auto plugin = Load(*candidate.manifest, {});
      if (!plugin || !(*plugin)->Init({}, {})) {
        state.SkipWithError("a plugin failed to load");
        return;
      }
      plugins.push_back(std::move(plugin).value());
    }
    benchmark::DoNotOptimize(plugins.data());
    state.counters["plugins"] = static_cast<double>(plugins.size());
    // Destroying the vector shuts every plugin down and unloads it: part of one cycle.
  }
}
BENCHMARK(BM_LoadAllNinePlugins)->Unit(benchmark::kMicrosecond);

void BM_ReadManifest(benchmark::State& state) {
  const std::string path = std::string(GPUSTACK_PLUGIN_DIR) + "/nvidia.json";
  for (auto _ : state) benchmark::DoNotOptimize(ReadManifest(path));
}
BENCHMARK(BM_ReadManifest)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  gpustack::InitLogging("off");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
