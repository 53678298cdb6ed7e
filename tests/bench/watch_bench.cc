// The wire decoders. The watch stream decoder on a large event arriving in small pieces (a Devices
// object of a big node over a slow link): linear in the event's size since the decoder stopped
// rescanning the partial line on every piece. A list page parsed whole against one handed out
// item by item (list_page.h): the time each takes, and the heap each holds at its peak.
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <string>

#include "host/kube/list_page.h"
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

// A page of `n` Pod-shaped objects, each about 2 KB of text.
std::string PodPage(int n) {
  gpustack::kube::Json page = {{"kind", "PodList"},
                               {"apiVersion", "v1"},
                               {"metadata", {{"resourceVersion", "12345"}}},
                               {"items", gpustack::kube::Json::array()}};
  for (int i = 0; i < n; ++i) {
    gpustack::kube::Json pod = {
        {"metadata",
         {{"name", "pod-" + std::to_string(i)},
          {"namespace", "default"},
          {"uid", "0b0b0b0b-0000-4000-8000-" + std::to_string(100000000000 + i)},
          {"resourceVersion", std::to_string(1000 + i)},
          {"labels", {{"app", "bench"}, {"pod-template-hash", "5d8f7c9b6"}}},
          {"annotations", {{"device.gpustack.ai/allocated", "GPU-0000:1"}}}}},
        {"spec",
         {{"nodeName", "node-" + std::to_string(i % 1000)},
          {"containers",
           {{{"name", "main"},
             {"image", "registry.example/app:1.0"},
             {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}}}},
             {"env", {{{"name", "A"}, {"value", "1"}}, {{"name", "B"}, {"value", "2"}}}}}}}}},
        {"status",
         {{"phase", "Running"},
          {"conditions",
           {{{"type", "Ready"}, {"status", "True"}},
            {{"type", "PodScheduled"}, {"status", "True"}}}}}}};
    page["items"].push_back(std::move(pod));
  }
  return page.dump();
}

size_t HeapInUse() { return mallinfo2().uordblks; }

void BM_ListPageParsedWhole(benchmark::State& state) {
  const std::string text = PodPage(static_cast<int>(state.range(0)));
  size_t peak = 0;
  for (auto _ : state) {
    const size_t before = HeapInUse();
    gpustack::kube::Json page = gpustack::kube::Json::parse(text);
    peak = std::max(peak, HeapInUse() - before);
    size_t seen = 0;
    for (gpustack::kube::Json& item : page["items"]) {
      gpustack::kube::Json taken = std::move(item);
      seen += taken.size();
    }
    benchmark::DoNotOptimize(seen);
  }
  state.counters["peak_heap_KB"] = static_cast<double>(peak) / 1024;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ListPageParsedWhole)->Arg(500)->Unit(benchmark::kMillisecond);

void BM_ListPageItemByItem(benchmark::State& state) {
  const std::string text = PodPage(static_cast<int>(state.range(0)));
  size_t peak = 0;
  for (auto _ : state) {
    const size_t before = HeapInUse();
    size_t seen = 0;
    auto page = gpustack::kube::DecodeListPage(text, [&](gpustack::kube::Json& item) {
      peak = std::max(peak, HeapInUse() - before);
      gpustack::kube::Json taken = std::move(item);
      seen += taken.size();
    });
    benchmark::DoNotOptimize(seen);
    benchmark::DoNotOptimize(page);
  }
  state.counters["peak_heap_KB"] = static_cast<double>(peak) / 1024;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ListPageItemByItem)->Arg(500)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
