// Measures the Kubernetes client against a running apiserver (scripts/bench-kube.sh starts a
// testbed and runs this): list+watch of many objects into an informer (time, RSS), watch
// delivery rate to a handler, and get/apply latency percentiles. Prints figures; asserts nothing.
//
//   KUBECONFIG=... kube_bench [objects=10000] [samples=1000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "host/common/files.h"
#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "tests/bench/report.h"

using namespace gpustack::kube;
using Clock = std::chrono::steady_clock;
using gpustack::bench::Ms;
using gpustack::bench::Percentiles;

namespace {

Json ConfigMap(const std::string& ns, const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"bench", "yes"}}}}},
          {"data", {{"value", value}, {"padding", std::string(200, 'x')}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int objects = argc > 1 ? std::atoi(argv[1]) : 10000;
  int samples = argc > 2 ? std::atoi(argv[2]) : 1000;
  auto made = Client::FromEnvironment({.qps = 0});
  if (!made) {
    std::fprintf(stderr, "%s\n", made.error().c_str());
    return 1;
  }
  Client& client = **made;
  std::string ns = "bench-" + std::to_string(getpid());
  if (auto created = client.Create(
          resources::Namespaces(),
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
      !created) {
    std::fprintf(stderr, "%s\n", created.error().c_str());
    return 1;
  }
  const ResourceType configmaps = resources::ConfigMaps();
  auto before = client.List(configmaps, ns);
  std::string start_rv = before ? before->resource_version : "";

  // Fill: 8 writers.
  auto fill_start = Clock::now();
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t; i < objects; i += 8) {
        if (!client.Create(configmaps,
                           ConfigMap(ns, "cm-" + std::to_string(i), std::to_string(i)))) {
          failures++;
        }
      }
    });
  }
  for (auto& w : writers) {
    w.join();
  }
  double fill_s = Ms(Clock::now() - fill_start) / 1000;
  std::printf("created %d ConfigMaps in %.1f s (%.0f/s, 8 writers), %d failures\n", objects, fill_s,
              objects / fill_s, failures.load());

  // Watch delivery: replay every ADDED event since before the fill, from the apiserver's watch
  // cache to a handler.
  {
    int seen = 0;
    auto watch_start = Clock::now();
    auto watched = client.Watch(
        configmaps, ns, {.resource_version = start_rv, .timeout_seconds = 120},
        [&](WatchEvent& e) { return e.type != WatchEventType::kAdded || ++seen < objects; });
    double s = Ms(Clock::now() - watch_start) / 1000;
    if (watched) {
      std::printf("watch replay: %d events in %.2f s = %.0f events/s\n", seen, s, seen / s);
    } else {
      std::printf("watch replay: %s\n", watched.error().c_str());
    }
  }

  // Live watch: events/s while 8 writers patch, from the write to the handler.
  {
    long rss0 = gpustack::ProcStatusField("self", "VmRSS");
    Informer informer(client, configmaps, ns, {.page_size = 500});
    std::atomic<int> updates{0};
    informer.AddEventHandler({.on_update = [&](const ObjectPtr&, const ObjectPtr&) { updates++; }});
    auto list_start = Clock::now();
    informer.Start();
    informer.WaitForSync(std::chrono::minutes(5));
    double sync_s = Ms(Clock::now() - list_start) / 1000;
    long rss1 = gpustack::ProcStatusField("self", "VmRSS");
    std::printf(
        "informer list+watch of %zu objects: synced in %.2f s; RSS %ld -> %ld KB (+%ld KB, %.0f "
        "B/object)\n",
        informer.Size(), sync_s, rss0, rss1, rss1 - rss0,
        1024.0 * (rss1 - rss0) / std::max<size_t>(1, informer.Size()));
    auto patch_start = Clock::now();
    std::vector<std::thread> patchers;
    for (int t = 0; t < 8; ++t) {
      patchers.emplace_back([&, t] {
        for (int i = t; i < objects; i += 8) {
          (void)client.Patch(configmaps, ns, "cm-" + std::to_string(i), PatchType::kMerge,
                             {{"data", {{"value", "patched"}}}});
        }
      });
    }
    for (auto& p : patchers) {
      p.join();
    }
    while (updates.load() < objects && Clock::now() - patch_start < std::chrono::minutes(2)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    double s = Ms(Clock::now() - patch_start) / 1000;
    std::printf(
        "live: %d updates written by 8 writers and delivered to the handler in %.2f s = %.0f "
        "events/s\n",
        updates.load(), s, updates.load() / s);
    std::printf("peak RSS (VmHWM) %ld KB\n", gpustack::ProcStatusField("self", "VmHWM"));
  }

  // Latency, one request at a time.
  std::vector<double> gets, applies;
  for (int i = 0; i < samples; ++i) {
    auto t0 = Clock::now();
    auto got = client.Get(configmaps, ns, "cm-" + std::to_string(i % objects));
    gets.push_back(Ms(Clock::now() - t0));
    if (!got) {
      std::fprintf(stderr, "get: %s\n", got.error().c_str());
      return 1;
    }
  }
  for (int i = 0; i < samples; ++i) {
    auto t0 = Clock::now();
    auto applied = client.Apply(
        configmaps, ConfigMap(ns, "applied-" + std::to_string(i % 50), std::to_string(i)),
        {.field_manager = "bench"});
    applies.push_back(Ms(Clock::now() - t0));
    if (!applied) {
      std::fprintf(stderr, "apply: %s\n", applied.error().c_str());
      return 1;
    }
  }
  Percentiles("get (ConfigMap)", gets);
  Percentiles("server-side apply (ConfigMap)", applies);
  (void)client.Delete(resources::Namespaces(), "", ns);
  return 0;
}
