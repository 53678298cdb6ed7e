// Measures the worker against a running control plane with Kueue (scripts/bench-operator.sh
// starts one and runs this): a generated fleet of N nodes x 8 cards (Devices objects applied as
// node daemons would), then
//   - the time from the worker's start until every pool, flavor, queue and entrance is there,
//     and until every node carries its labels; the worker's RSS then;
//   - the latency from one Devices status change to the InstanceType status showing it;
//   - what the worker sends in a steady cluster;
//   - its RSS beside Kueue's controller-manager's, in the same cluster.
// The fleet has `pods_per_node` bound, running Pods on every node, shaped as a Deployment's are
// (the worker caches every bound Pod). Prints figures; asserts nothing.
//
//   KUBECONFIG=... operator_bench <gpustack-operator> [nodes=1000] [changes=200] [steady_s=60]
//                                 [pods_per_node=10]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host/common/files.h"
#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/kube/quantity.h"
#include "host/ledger/ledger.h"
#include "host/ledger/views.h"
#include "host/operator/fleet.h"
#include "tests/bench/report.h"

using namespace gpustack;
using namespace gpustack::kube;
using Clock = std::chrono::steady_clock;
using bench::Ms;
using bench::Percentiles;

namespace {

const ResourceType kClusterQueues = resources::ClusterQueues();
const ResourceType kLocalQueues = resources::LocalQueues();
constexpr const char* kPool = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";

long RssKb(pid_t pid) { return ProcStatusField(std::to_string(pid), "VmRSS"); }

// Kueue's controller-manager in this control plane (the testbed runs it as `kueue --config`).
pid_t KueuePid() {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    const std::string program = cmdline.substr(0, cmdline.find('\0'));
    if (program.ends_with("/kueue") && cmdline.find("--config") != std::string::npos)
      return std::stoi(pid);
  }
  return 0;
}

void PrintRss(const char* when, pid_t worker) {
  const pid_t kueue = KueuePid();
  std::printf(
      "RSS %s: worker %.1f MB (RssAnon %.1f MB, %ld threads); Kueue's controller-manager %s\n",
      when, RssKb(worker) / 1024.0, ProcStatusField(std::to_string(worker), "RssAnon") / 1024.0,
      ProcStatusField(std::to_string(worker), "Threads"),
      kueue == 0 ? "not found" : (std::to_string(RssKb(kueue) / 1024) + " MB").c_str());
}

// A bound, running Pod as a Deployment's looks once the kubelet reported it: an owner, a
// service-account volume, env, probes, the default tolerations (forever here: the bench's nodes
// have no kubelet, and the controller-manager would evict from them), conditions, a status per
// container.
Json BoundPod(const std::string& node, int i) {
  static const Json shape = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"namespace": "default", "labels": {"pod-template-hash": "7d9f8c6b5"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": true,
                           "blockOwnerDeletion": true}]},
    "spec": {
      "containers": [{
        "name": "app", "image": "registry.example.com/team/app:1.27.3",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                "fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "volumeMounts": [{"name": "kube-api-access", "readOnly": true,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
      "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
      "volumes": [{"name": "kube-api-access", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
    "status": {
      "phase": "Running", "hostIP": "10.0.0.1", "startTime": "2026-12-01T10:00:00Z",
      "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                     {"type": "ContainersReady", "status": "True"},
                     {"type": "PodScheduled", "status": "True"}],
      "containerStatuses": [{
        "name": "app", "ready": true, "restartCount": 0, "started": true,
        "image": "registry.example.com/team/app:1.27.3",
        "imageID": "registry.example.com/team/app@sha256:a3f1c9d2e4b5a6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1",
        "containerID": "containerd://9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
        "state": {"running": {"startedAt": "2026-12-01T10:00:02Z"}}}]}
  })");
  Json pod = shape;
  const std::string app = "bench-" + std::to_string(i % 50);
  pod["metadata"]["name"] = app + "-7d9f8c6b5-" + std::to_string(i);
  pod["metadata"]["labels"]["app"] = app;
  pod["metadata"]["ownerReferences"][0]["name"] = app + "-7d9f8c6b5";
  pod["metadata"]["ownerReferences"][0]["uid"] =
      "6f1c2b9e-6a8e-4c1e-9d0a-1f6c2d3e4b" + std::to_string(10 + i % 50);
  pod["spec"]["nodeName"] = node;
  pod["status"]["podIP"] =
      "10.244." + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250 + 2);
  return pod;
}

std::string Metrics(int port) {
  std::string out;
  FILE* p = popen(("curl -sk https://127.0.0.1:" + std::to_string(port) + "/metrics").c_str(), "r");
  if (p == nullptr) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, p)) > 0;) out.append(buffer, n);
  pclose(p);
  return out;
}

int64_t Counter(const std::string& metrics, const std::string& name) {
  int64_t sum = 0;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name, 0) == 0) sum += std::stoll(line.substr(line.rfind(' ') + 1));
  return sum;
}

// Runs `n` jobs on 8 threads.
void Parallel(int n, const std::function<void(int)>& job) {
  std::atomic<int> next{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = next++; i < n; i = next++) job(i);
    });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: operator_bench <gpustack-operator> [nodes] [changes] [steady_s] "
                 "[pods_per_node]\n");
    return 2;
  }
  const std::string binary = argv[1];
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int changes = argc > 3 ? std::atoi(argv[3]) : 200;
  const int steady_s = argc > 4 ? std::atoi(argv[4]) : 60;
  const int pods_per_node = argc > 5 ? std::atoi(argv[5]) : 10;
  auto made = Client::FromEnvironment({.qps = 0});
  if (!made) {
    std::fprintf(stderr, "%s\n", made.error().c_str());
    return 1;
  }
  Client& client = **made;

  // The fleet: N nodes like cluster B's (8 x H100, MIG off), tokens in their capacity.
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) +
                   "/expected/nvidia-h100x8-mig-off.devices.json");
  const Json spec = Json::parse(in);
  const ledger::NodeLedger empty("n", *ledger::SpecFromJson(spec));
  Json capacity = {{"cpu", "224"}, {"memory", "2Ti"}, {"pods", "110"}};
  for (const auto& [k, v] : ledger::AdvertisedCounts(empty, {"nvidia", "nvidia.com/gpu", "mig"}))
    capacity[k] = std::to_string(v);
  auto name = [](int i) { return "bench-node-" + std::to_string(i); };
  const auto made_at = Clock::now();
  Parallel(nodes, [&](int i) {
    Json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata",
                  {{"name", name(i)},
                   // What a kubelet labels its Node with at registration; without the beta
                   // ones the controller-manager adds them, node by node, for minutes.
                   {"labels",
                    {{"kubernetes.io/os", "linux"},
                     {"kubernetes.io/arch", "amd64"},
                     {"beta.kubernetes.io/os", "linux"},
                     {"beta.kubernetes.io/arch", "amd64"},
                     {"kubernetes.io/hostname", name(i)},
                     {op::kCpuVendorLabel, "Intel"}}},
                   {"annotations", {{op::kCpuNameAnnotation, "Intel(R) Xeon(R) Platinum 8480+"}}}}},
                 {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
    static_cast<void>(client.Apply(resources::Nodes(), node, {"bench", true}));
    static_cast<void>(client.Apply(resources::Nodes(), node, {"bench", true}, "status"));
    Json devices = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                    {"kind", "Devices"},
                    {"metadata", {{"name", name(i)}}},
                    {"spec", spec}};
    static_cast<void>(client.Apply(resources::Devices(), devices, {"bench", true}));
  });
  std::printf("fleet: %d nodes x 8 cards applied in %.1f s\n", nodes,
              Ms(Clock::now() - made_at) / 1000);
  const auto pods_at = Clock::now();
  std::atomic<int> failed_pods{0};
  Parallel(nodes * pods_per_node, [&](int i) {
    Json pod = BoundPod(name(i / pods_per_node), i);
    Json status = {{"status", pod["status"]}};
    auto created = client.Create(resources::Pods(), pod);
    if (!created ||
        !client.Patch(resources::Pods(), "default", pod["metadata"]["name"].get<std::string>(),
                      PatchType::kMerge, status, "status")) {
      if (failed_pods++ == 0)
        std::fprintf(stderr, "a bound Pod: %s\n",
                     created ? "its status patch failed" : created.error().c_str());
    }
  });
  std::printf("%d bound, running Pods created in %.1f s (%d failed)\n", nodes * pods_per_node,
              Ms(Clock::now() - pods_at) / 1000, failed_pods.load());

  // The worker, with its webhooks reachable on loopback (the apiserver calls them for every
  // InstanceType it creates, as in a cluster).
  const int port = 31443 + (getpid() % 1000);
  const std::string webhook_port = std::to_string(port + 1000);
  const std::string log = "/tmp/operator-bench-worker.log";
  const auto started = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    // Its own process group: a wrapper (GPUSTACK_BENCH_WORKER=heaptrack ...) that does not pass
    // SIGTERM on would otherwise leave its worker running after the bench.
    setpgid(0, 0);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(out, 2);
    const char* level = std::getenv("GPUSTACK_BENCH_LOG_LEVEL");  // trace: what starts passes
    const std::string webhook_url = "https://127.0.0.1:" + webhook_port;
    execl(binary.c_str(), binary.c_str(), "--log-level", level != nullptr ? level : "info",
          "worker", "--secure-port", std::to_string(port).c_str(), "--webhook-port",
          webhook_port.c_str(), "--webhook-url", webhook_url.c_str(), nullptr);
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  const std::string capacity_wanted = std::to_string(nodes * 8);
  const std::string quota_wanted = kube::FormatDecimal(int64_t{nodes} * 8 * ledger::kCardCredits);
  auto converged = [&] {
    auto type = client.Get(resources::InstanceTypes(), "", kPool);
    if (!type || !type->contains("status")) return false;
    if ((*type)["status"]["accelerator"]["capacity"].dump() != capacity_wanted) return false;
    auto queue = client.Get(kClusterQueues, "", kPool);
    if (!queue) return false;
    if ((*queue)["spec"].dump().find("\"" + quota_wanted + "\"") == std::string::npos) return false;
    return client.Get(kLocalQueues, "default", op::EntranceName(kPool)).ok() &&
           client.Get(kLocalQueues, "default", op::EntranceName("gpustack--generic-linux-amd64"))
               .ok();
  };
  while (!converged()) {
    // A worker that cannot start (no plugins beside a copied binary, a bad flag) ends the bench
    // at once instead of after the 600 s below.
    if (int status = 0; waitpid(pid, &status, WNOHANG) == pid) {
      std::fprintf(stderr, "the worker exited before converging (%s %d); see %s\n",
                   WIFEXITED(status) ? "status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log.c_str());
      return 1;
    }
    if (Ms(Clock::now() - started) > 600'000) {
      std::fprintf(stderr, "not converged after 600 s; see %s\n", log.c_str());
      kill(-pid, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double pools_ms = Ms(Clock::now() - started);
  std::printf("worker start -> pools, flavors, queues, entrances converged: %.2f s\n",
              pools_ms / 1000);
  ListOptions managed;
  managed.label_selector = std::string(op::kManagedLabel) + "=true";
  managed.page_size = 0;
  while (true) {
    auto list = client.List(resources::Nodes(), "", managed);
    if (list && static_cast<int>(list->items.size()) >= nodes) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::printf("worker start -> every node labelled managed: %.2f s\n",
              Ms(Clock::now() - started) / 1000);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  PrintRss("after convergence", pid);
  std::fflush(stdout);

  // One Devices change at a time: a card taken, then given back, on a different node each time.
  Informer types(client, resources::InstanceTypes());
  std::mutex mutex;
  std::condition_variable seen;
  std::string remaining;
  Clock::time_point seen_at;
  types.AddEventHandler({.on_update = [&](const ObjectPtr&, const ObjectPtr& after) {
    if ((*after)["metadata"]["name"] != kPool) return;
    std::lock_guard lock(mutex);
    remaining = (*after)["status"]["accelerator"]["remaining"].dump();
    seen_at = Clock::now();
    seen.notify_all();
  }});
  types.Start();
  types.WaitForSync(std::chrono::seconds(30));
  std::vector<double> latencies;
  int failed_applies = 0;
  const double cpu_before_changes = bench::CpuMs(std::to_string(pid));
  for (int c = 0; c < changes; ++c) {
    const bool take = c % 2 == 0;
    ledger::NodeLedger ledger(name(c / 2 % nodes), *ledger::SpecFromJson(spec));
    if (take) {
      ledger::Request whole;
      whole.manufacturer = "nvidia";
      static_cast<void>(ledger.Reserve({"bench", "main"}, whole));
    }
    Json status = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                   {"kind", "Devices"},
                   {"metadata", {{"name", ledger.node()}}},
                   {"status", ledger::ToJson(ledger.ToStatus())}};
    const std::string want = std::to_string(nodes * 8 - (take ? 1 : 0));
    const auto sent = Clock::now();
    // A change that did not reach the apiserver is said, not waited for: it would never show.
    if (auto applied = client.Apply(resources::Devices(), status, {"bench", true}, "status");
        !applied) {
      std::fprintf(stderr, "change %d (%s): the Devices status apply failed: %s\n", c,
                   ledger.node().c_str(), applied.error().c_str());
      ++failed_applies;
      continue;
    }
    std::unique_lock lock(mutex);
    if (seen.wait_for(lock, std::chrono::seconds(30), [&] { return remaining == want; })) {
      latencies.push_back(Ms(seen_at - sent));
    } else {
      std::fprintf(stderr, "change %d (%s): the pool did not show %s remaining within 30 s\n", c,
                   ledger.node().c_str(), want.c_str());
    }
  }
  types.Stop();
  Percentiles("Devices change -> InstanceType.status", latencies);
  // What the changes cost the worker: its passes, its caches' and the v1 API's handling of each
  // Devices and InstanceType event (a tail above can be the VM's; this is the worker's own).
  const double cpu_changes = bench::CpuMs(std::to_string(pid)) - cpu_before_changes;
  if (changes > 0)
    std::printf("worker CPU during the changes: %.0f ms (%.2f ms a change)\n", cpu_changes,
                cpu_changes / changes);
  if (failed_applies > 0) std::printf("%d Devices status applies failed\n", failed_applies);

  // Steady: nothing changes; what does the worker send? The controller-manager first finishes
  // its own start-up updates of the new nodes (labels, annotations), which each start a pass.
  const auto settling = Clock::now();
  int64_t last = -1;
  for (int quiet = 0; quiet < 5 && Ms(Clock::now() - settling) < 300'000;) {
    const int64_t passes = Counter(Metrics(port), "gpustack_worker_passes_total");
    quiet = passes == last ? quiet + 1 : 0;
    last = passes;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::printf("passes stopped %.0f s after the changes (the controller-manager's node updates)\n",
              Ms(Clock::now() - settling) / 1000);
  const std::string before = Metrics(port);
  std::this_thread::sleep_for(std::chrono::seconds(steady_s));
  const std::string after = Metrics(port);
  std::printf("steady %d s: %lld passes, %lld writes (the worker's reads are watches only)\n",
              steady_s,
              static_cast<long long>(Counter(after, "gpustack_worker_passes_total") -
                                     Counter(before, "gpustack_worker_passes_total")),
              static_cast<long long>(Counter(after, "gpustack_worker_writes_total") -
                                     Counter(before, "gpustack_worker_writes_total")));
  PrintRss("at the end", pid);
  std::printf("last pass %s s\n",
              [&] {
                std::istringstream m(after);
                for (std::string line; std::getline(m, line);)
                  if (line.rfind("gpustack_worker_last_pass_seconds", 0) == 0)
                    return line.substr(line.rfind(' ') + 1);
                return std::string("?");
              }()
                  .c_str());
  kill(-pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  kill(-pid, SIGKILL);  // whatever of the group outlived its leader
  std::printf("worker exit status %d; log %s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              log.c_str());
  return 0;
}
