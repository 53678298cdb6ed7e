// The v1 API's served texts, kept packed (host/api/cache.h, host/common/packed_text.h): what
// packing an object costs at each change, what unpacking costs at each get, watch event and list
// item, and how much smaller it is. The object is a Devices of an 8×H100 node, as the bench fleet
// serves 1,000 of.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>
#include <vector>

#include "host/api/cache.h"

namespace {

using gpustack::api::ServedObject;
using gpustack::api::ServedObjectOf;

nlohmann::json DevicesObject(int i) {
  std::ifstream in(GPUSTACK_NODES_DIR "/expected/nvidia-h100x8-mig-off.devices.json");
  static const nlohmann::json spec = nlohmann::json::parse(in);
  return {{"apiVersion", "worker.gpustack.ai/v1"},
          {"kind", "Devices"},
          {"metadata",
           {{"name", "bench-node-" + std::to_string(i)},
            {"resourceVersion", std::to_string(1000 + i)},
            {"labels", {{"worker.gpustack.ai/node", "bench-node-" + std::to_string(i)}}}}},
          {"spec", spec}};
}

void BM_ServedObjectPack(benchmark::State& state) {
  const nlohmann::json object = DevicesObject(1);
  ServedObject served;
  for (auto _ : state) {
    served = ServedObjectOf(object);
    benchmark::DoNotOptimize(served);
  }
  state.counters["text_bytes"] = static_cast<double>(served.text.size());
  state.counters["kept_bytes"] = static_cast<double>(served.text.kept_bytes());
}
BENCHMARK(BM_ServedObjectPack)->Unit(benchmark::kMicrosecond);

void BM_ServedObjectUnpack(benchmark::State& state) {
  const ServedObject served = ServedObjectOf(DevicesObject(1));
  for (auto _ : state) {
    std::string text = served.text.Text();
    benchmark::DoNotOptimize(text);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * served.text.size()));
}
BENCHMARK(BM_ServedObjectUnpack)->Unit(benchmark::kMicrosecond);

// A list of every node's Devices: the body a `kubectl get devices` at 1,000 nodes is sent.
void BM_ServedListBody(benchmark::State& state) {
  std::vector<ServedObject> objects;
  for (int i = 0; i < state.range(0); ++i) objects.push_back(ServedObjectOf(DevicesObject(i)));
  size_t size = 0;
  for (const ServedObject& o : objects) size += o.text.size() + 1;
  for (auto _ : state) {
    std::string body;
    body.reserve(size);
    for (const ServedObject& o : objects) o.text.AppendTo(body);
    benchmark::DoNotOptimize(body);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_ServedListBody)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
