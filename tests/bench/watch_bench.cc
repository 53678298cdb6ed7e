// The watch stream decoder on a large event arriving in small pieces (a Devices object of a big
// node over a slow link): linear in the event's size since the decoder stopped rescanning the
// partial line on every piece.
#include <benchmark/benchmark.h>

#include <string>

#include "host/kube/watch_decoder.h"

namespace {

void BM_LargeEventInSmallPieces(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const std::string event = R"({"type":"MODIFIED","object":{"metadata":{"name":"n"},"d":")" +
                            std::string(bytes, 'x') + "\"}}\n";
  for (auto _ : state) {
    gpustack::kube::WatchDecoder decoder;
    int seen = 0;
    for (size_t at = 0; at < event.size(); at += 1024) {
      (void)decoder.Feed(std::string_view(event).substr(at, 1024),
                         [&](gpustack::kube::WatchEvent&) { return ++seen > 0; });
    }
    benchmark::DoNotOptimize(seen);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * event.size()));
}
BENCHMARK(BM_LargeEventInSmallPieces)->Range(64 << 10, 16 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
