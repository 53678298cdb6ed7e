// What the host pays to find, check, load and call plugins, and what the watchdog adds per hook
// call. Run with --benchmark_repetitions=N for a median.
//
//  - BM_StartAllNinePlugins: list the manifests, check trust, read each library's exports,
//    dlopen, negotiate, identify and initialize: what the device manager does at start.
//  - BM_ExportedSymbols vs BM_BoostLibraryInfo: the bounded ELF reader against the unbounded one
//    it replaced; BM_ReadManifest / BM_CheckTrusted: the bounded reads and trust rules.
//  - BM_HookCall/{direct,guarded}: one cheap hook (sample_metrics of a fake with three cards)
//    called straight, and through the watchdog's thread hand-off.
//  - BM_PipeRoundTrip: the floor of the alternative, a plugin in a helper process (one message
//    each way over a socket pair, nothing serialized).
#include <benchmark/benchmark.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/dll/library_info.hpp>

#include <gpustack/client/elf.hpp>
#include <gpustack/client/manifest.hpp>

#include "host/common/file_trust.h"
#include "host/common/logging.h"
#include "host/loader/dlopen_source.h"
#include "host/runtime/watchdog.h"

namespace {

using namespace gpustack;

void BM_StartAllNinePlugins(benchmark::State& state) {
  for (auto _ : state) {
    loader::DlopenPluginSource source({GPUSTACK_PLUGIN_DIR}, {GPUSTACK_PLUGIN_DIR});
    std::vector<runtime::SourceProblem> problems;
    std::vector<std::unique_ptr<runtime::PluginBackend>> plugins;
    for (const runtime::PluginCandidate& candidate : source.Find(&problems)) {
      auto plugin = source.Load(candidate);
      if (!plugin || !(*plugin)->Init({}, {})) {
        state.SkipWithError("a plugin failed to load");
        return;
      }
      plugins.push_back(std::move(plugin).value());
    }
    benchmark::DoNotOptimize(plugins.data());
    state.counters["plugins"] = static_cast<double>(plugins.size());
  }
}
BENCHMARK(BM_StartAllNinePlugins)->Unit(benchmark::kMicrosecond);

const std::string kNvidiaLibrary =
    std::string(GPUSTACK_PLUGIN_DIR) + "/libgpustack_plugin_nvidia.so";

void BM_ExportedSymbols(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(client::ExportedSymbols(kNvidiaLibrary));
}
BENCHMARK(BM_ExportedSymbols)->Unit(benchmark::kMicrosecond);

void BM_BoostLibraryInfo(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(boost::dll::library_info(kNvidiaLibrary).symbols());
  }
}
BENCHMARK(BM_BoostLibraryInfo)->Unit(benchmark::kMicrosecond);

void BM_ReadManifest(benchmark::State& state) {
  const std::string path = std::string(GPUSTACK_PLUGIN_DIR) + "/nvidia.json";
  for (auto _ : state) benchmark::DoNotOptimize(client::ReadManifest(path));
}
BENCHMARK(BM_ReadManifest)->Unit(benchmark::kMicrosecond);

void BM_CheckTrusted(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(CheckTrusted(kNvidiaLibrary, ::geteuid()));
}
BENCHMARK(BM_CheckTrusted)->Unit(benchmark::kMicrosecond);

void BM_HookCall(benchmark::State& state) {
  auto loaded = loader::LoadFromManifest(std::string(GPUSTACK_FAKES_DIR) + "/full/full.json");
  if (!loaded || !(*loaded)->Init({}, {})) {
    state.SkipWithError("the full fake did not start");
    return;
  }
  std::unique_ptr<runtime::PluginBackend> backend = std::move(*loaded);
  if (state.range(0) == 1) {
    backend =
        std::make_unique<runtime::GuardedBackend>(std::move(backend), runtime::WatchdogOptions{});
  }
  state.SetLabel(state.range(0) == 1 ? "guarded" : "direct");
  for (auto _ : state) benchmark::DoNotOptimize(backend->SampleMetrics({}));
}
BENCHMARK(BM_HookCall)->Arg(0)->Arg(1)->ArgName("watchdog")->Unit(benchmark::kMicrosecond);

void BM_PipeRoundTrip(benchmark::State& state) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) != 0) {
    state.SkipWithError("socketpair failed");
    return;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    char byte;
    while (::read(fds[1], &byte, 1) == 1) {
      if (::write(fds[1], &byte, 1) != 1) break;
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  char byte = 'x';
  for (auto _ : state) {
    if (::write(fds[0], &byte, 1) != 1 || ::read(fds[0], &byte, 1) != 1) {
      state.SkipWithError("the helper went away");
      break;
    }
  }
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
}
BENCHMARK(BM_PipeRoundTrip)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  gpustack::InitLogging("off");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
