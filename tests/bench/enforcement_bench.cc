// What slice enforcement and CDI injection add to an Allocate, and to a discovery pass
// (docs/enforcement.md): the edits of a slice with a staged enforcer (its working directory made),
// an unchanged enforcer staged again, the CDI specs read and auto's rules decided.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host/cdi/cdi.h"
#include "host/enforcement/enforcement.h"

namespace {

namespace fs = std::filesystem;
using gpustack::enforcement::SliceEnforcement;

struct Node {
  Node() {
    root = fs::temp_directory_path() / ("enforcement-bench-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "source");
    fs::create_directories(root / "data");
    fs::permissions(root, fs::perms(0755));
    std::ofstream(root / "source/libvgpu.so") << std::string(1 << 20, 'x');  // ~HAMi-core's size
    fs::permissions(root / "source/libvgpu.so", fs::perms(0755));
    plugin.name = "nvidia";
    plugin.state = gpustack::runtime::PluginState::kRunning;
    gpustack::runtime::PluginIdentity id;
    id.manufacturer = "nvidia";
    id.capabilities = GPUSTACK_CAP_LOGICAL_SLICING;
    gpustack::client::EnforcerDeclaration e;
    e.name = "hami-core";
    e.files = {"libvgpu.so"};
    e.preload = {"libvgpu.so"};
    e.variant = GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR;
    e.variant_prefix = "cuda-";
    e.default_env = {{"LIBCUDA_LOG_LEVEL", "0"}};
    id.enforcer = e;
    plugin.identity = id;
    gpustack::sdk::AcceleratorGroup group;
    group.runtime_version = "12.4";
    for (int i = 0; i < 8; ++i) group.accelerators.push_back({.id = "GPU-" + std::to_string(i)});
    plugin.groups = {group};
    plugin.settings["enforcer_dir"] = (root / "source").string();
  }
  ~Node() { fs::remove_all(root); }
  fs::path root;
  gpustack::runtime::PluginStatus plugin;
};

void BM_EditsForASlice(benchmark::State& state) {
  Node node;
  SliceEnforcement enforcement({.data_dir = node.root / "data", .host_data_dir = "/host"});
  enforcement.Prepare({node.plugin});
  nlohmann::json pod = {{"metadata", {{"uid", "u"}}},
                        {"spec", {{"containers", nlohmann::json::array({{{"name", "main"}}})}}}};
  int64_t n = 0;
  for (auto _ : state) {
    pod["metadata"]["uid"] = "uid-" + std::to_string(n++);  // a new Pod: a new directory
    auto edits = enforcement.EditsForSlice("nvidia", "GPU-3", pod, "main", {});
    benchmark::DoNotOptimize(edits);
    if (n % 1000 == 0) {
      state.PauseTiming();
      enforcement.Reclaim([](const std::string&) { return false; });
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_EditsForASlice);

void BM_PrepareWithNothingChanged(benchmark::State& state) {
  Node node;
  SliceEnforcement enforcement({.data_dir = node.root / "data", .host_data_dir = "/host"});
  enforcement.Prepare({node.plugin});  // the first copies 1 MiB
  for (auto _ : state) enforcement.Prepare({node.plugin});
}
BENCHMARK(BM_PrepareWithNothingChanged);

void BM_CdiSpecsReadAndDecided(benchmark::State& state) {
  Node node;
  std::string spec = "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n";
  for (int i = 0; i < 8; ++i) {
    spec += "  - name: GPU-" + std::to_string(i) +
            "\n    containerEdits: {deviceNodes: [{path: /dev/nvidia" + std::to_string(i) + "}]}\n";
  }
  fs::create_directories(node.root / "cdi");
  std::ofstream(node.root / "cdi/nvidia.yaml") << spec;
  gpustack::cdi::Engine engine{.runtime_version = "containerd://2.4.2"};
  gpustack::cdi::ReadContainerdConfig("version = 3\n", engine);
  const gpustack::cdi::Grant grant{.kind = "nvidia.com/gpu", .cards = {"GPU-3"}};
  for (auto _ : state) {
    auto specs = gpustack::cdi::ReadSpecs({node.root / "cdi"});
    auto decision = gpustack::cdi::Decide(gpustack::cdi::Strategy::kAuto, grant, engine, specs);
    benchmark::DoNotOptimize(decision);
  }
}
BENCHMARK(BM_CdiSpecsReadAndDecided);

}  // namespace

BENCHMARK_MAIN();
