// The node daemon on a REAL kubelet (the testbed_node fixture: containerd, runc, a real kubelet),
// with the fake NVML standing in for the hardware. Real Pods start with what was injected, the
// kubelet restarts, the daemon is killed while Pods are admitted; the tests run in order.
//
// The worker publishes the node counting keys that the scheduler charges slices and partitions
// against (docs/behaviour.md §3.6); no worker runs in this fixture, so the test writes them on the
// Node as the worker does, and says so where it does.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "host/ledger/ledger.h"
#include "host/ledger/views.h"
#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

namespace fs = std::filesystem;
using testing::FreePort;
using testing::Kubectl;
using testing::WaitFor;

constexpr const char* kNode = "testbed-node";
constexpr const char* kPluginDir = "/var/lib/kubelet/device-plugins";
constexpr const char* kAnnotation = "device.gpustack.ai/accelerator.allocated";

// `device-manager serve` on the testbed node, on one fixture node's fake hardware.
class Daemon {
 public:
  explicit Daemon(std::string fixture, std::vector<std::string> extra_args = {})
      : fixture_(std::move(fixture)), extra_args_(std::move(extra_args)) {
    std::ofstream(LogPath(), std::ios::trunc);  // one log per test
    std::ofstream(EventsPath(), std::ios::trunc);
  }
  // A test that fails half-way kills its daemon, whose sockets stay: removed here, so the next
  // run starts from a clean directory.
  ~Daemon() {
    if (Stop(SIGKILL) == -1) return;
    for (const auto& entry : std::filesystem::directory_iterator(kPluginDir)) {
      if (entry.path().filename().string().rfind("gpustack-", 0) == 0)
        std::filesystem::remove(entry.path());
    }
  }

  // The fixture's NVML with these injected errors (tests/fixtures/README.md), from the next Start.
  void InjectNvmlErrors(const Json& errors) {
    std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/" + fixture_ + ".json");
    Json scenario = Json::parse(in);
    scenario["nvml"]["errors"] = errors;
    fixture_file_ = std::string(GPUSTACK_E2E_DIR) + "/" + fixture_ + ".injected.json";
    std::ofstream(fixture_file_) << scenario.dump();
  }

  void Start() {
    const std::string e2e = GPUSTACK_E2E_DIR;
    const std::string log = LogPath();
    const std::string config = e2e + "/node-config.json";
    // The NVIDIA plugin keeps its partition ownership records in the build tree.
    std::ofstream(config)
        << Json{{"plugins", {{"nvidia", {{"config", {{"state_dir", e2e + "/nvidia"}}}}}}}}.dump();
    std::vector<std::string> args = {
        GPUSTACK_BINARY,
        "--log-level",
        "info",
        "device-manager",
        "serve",
        "--node-name",
        kNode,
        "--sysfs-root",
        std::string(GPUSTACK_NODE_TREES_DIR) + "/" + fixture_ + "/sys",
        "--pod-resources-socket",
        testing::TestbedDir() + "/node/kubelet/pod-resources/kubelet.sock",
        "--node-config",
        config,
        "--secure-port",
        std::to_string(FreePort()),
        "--monitor-period",
        "1"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<std::string> env = {
        "GPUSTACK_FAKE_FIXTURE=" + (fixture_file_.empty()
                                        ? std::string(GPUSTACK_NODES_DIR) + "/" + fixture_ + ".json"
                                        : fixture_file_),
        std::string("GPUSTACK_NVIDIA_LIBRARY=") + GPUSTACK_FAKE_VENDOR_DIR + "/libnvidia-ml.so.1",
        std::string("GPUSTACK_AMD_LIBRARY=") + GPUSTACK_FAKE_VENDOR_DIR + "/librocm_smi64.so",
        "GPUSTACK_FAKE_NVML_EVENTS=" + EventsPath(),
        "GPUSTACK_STATE_DIR=" + e2e + "/state",
        "GPUSTACK_DATA_DIR=" + e2e + "/data",  // enforcers and working directories
        "KUBECONFIG=" + testing::TestbedDir() + "/kubeconfig",
        "PATH=/usr/bin:/bin"};
    process_ = std::make_unique<testing::Process>(std::move(args), std::move(env), log);
    ASSERT_TRUE(process_->Start());
  }

  // Signals the daemon and reaps it; its exit status (128 + signal when killed by one).
  int Stop(int signal = SIGTERM) { return process_ ? process_->Stop(signal) : -1; }

  std::string Log() const {
    std::ifstream in(LogPath());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // How many times a daemon of this test registered every resource with the kubelet.
  size_t Registrations() const {
    const std::string log = Log();
    size_t count = 0;
    for (size_t at = log.find("every resource registered"); at != std::string::npos;
         at = log.find("every resource registered", at + 1)) {
      ++count;
    }
    return count;
  }

  // Where the fake NVML reads driver events: "<card uuid> <xid>" lines.
  std::string EventsPath() const {
    return std::string(GPUSTACK_E2E_DIR) + "/" + fixture_ + ".nvml-events";
  }

  std::string LogPath() const {
    return std::string(GPUSTACK_E2E_DIR) + "/" + fixture_ + ".daemon.log";
  }

 private:
  std::string fixture_;
  std::string fixture_file_;  // empty: the fixture as committed
  std::vector<std::string> extra_args_;
  std::unique_ptr<testing::Process> process_;
};

Json NodeObject() { return Json::parse(Kubectl("get node testbed-node -o json")); }

// Waits until every resource shows the count in the Node's allocatable.
::testing::AssertionResult AllocatableBecomes(const std::map<std::string, int64_t>& expected) {
  std::string last;
  if (WaitFor(
          [&] {
            const Json a = NodeObject()["status"]["allocatable"];
            last = a.dump();
            for (const auto& [resource, count] : expected) {
              if (!a.contains(resource) || a[resource] != std::to_string(count)) return false;
            }
            return true;
          },
          std::chrono::seconds(60))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "allocatable is " << last;
}

// The worker's counting keys (docs/behaviour.md §3.6), written on the Node's capacity as the worker
// does.
void SetCountingKeys(const Json& capacity) {
  int status = 0;
  const std::string out = Kubectl("patch node testbed-node --subresource=status --type=merge -p '" +
                                      Json{{"status", {{"capacity", capacity}}}}.dump() + "'",
                                  &status);
  ASSERT_EQ(status, 0) << out;
}

class NodeE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A run that aborted (a crash, a timeout) leaves its daemon and sockets: gone before this one.
    testing::Run(std::string("pkill -KILL -f '^") + GPUSTACK_BINARY + " .*device-manager serve'");
    for (const auto& entry : fs::directory_iterator(kPluginDir)) {
      if (entry.path().filename().string().rfind("gpustack-", 0) == 0) fs::remove(entry.path());
    }
    client_ = testing::TestbedClient().release();
    testing::ApplyCrds(*client_, std::string(GPUSTACK_CRD_DIR) + "/worker.gpustack.ai_devices.yaml",
                       "node-e2e");
    ns_ = testing::CreateNamespace(*client_, "e2e");
    ASSERT_TRUE(testing::WaitForDefaultServiceAccount(*client_, ns_));
  }
  static void TearDownTestSuite() {
    Kubectl("delete namespace " + ns_ + " --wait=false");
    delete client_;
  }

  // A Pod for the real node whose one container asks for `limits` and prints its environment.
  static Json PodAsking(const std::string& name, const Json& limits) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"restartPolicy", "Never"},
              {"automountServiceAccountToken", false},
              {"terminationGracePeriodSeconds", 0},
              {"nodeSelector", {{"kubernetes.io/hostname", kNode}}},
              {"containers",
               Json::array({{{"name", "main"},
                             {"image", "docker.io/library/busybox:local"},
                             {"imagePullPolicy", "Never"},
                             {"command", {"/bin/sh", "-c", "env | sort; exec sleep 3600"}},
                             {"resources", {{"limits", limits}}}}})}}}};
  }

  // Creates that Pod and waits until it runs or the kubelet refuses it.
  static Json RunPod(const std::string& name, const Json& limits) {
    const Json pod = PodAsking(name, limits);
    auto created = client_->Create(resources::Pods(), pod);
    EXPECT_TRUE(created) << created.error();
    Json got;
    WaitFor(
        [&] {
          auto p = client_->Get(resources::Pods(), ns_, name);
          if (!p) return false;
          got = *p;
          const std::string phase = got["status"].value("phase", "");
          return phase == "Running" || phase == "Failed" || phase == "Succeeded";
        },
        std::chrono::seconds(90));
    return got;
  }

  static std::string Log(const std::string& pod) {
    std::string log;
    WaitFor([&] {
      auto text = client_->GetText("/api/v1/namespaces/" + ns_ + "/pods/" + pod + "/log");
      log = text ? *text : "";
      return log.find("PATH=") != std::string::npos;
    });
    return log;
  }

  static Json Record(const Json& pod) {
    const Json& a = pod["metadata"].value("annotations", Json::object());
    return a.contains(kAnnotation) ? Json::parse(a[kAnnotation].get<std::string>()) : Json();
  }

  static void DeletePod(const std::string& name) {
    ASSERT_TRUE(client_->Delete(resources::Pods(), ns_, name, {}));
    ASSERT_TRUE(WaitFor([&] { return !client_->Get(resources::Pods(), ns_, name); },
                        std::chrono::seconds(60)));
  }

  static Json DevicesStatus() {
    auto devices = client_->Get(resources::Devices(), "", kNode);
    return devices ? (*devices)["status"] : Json();
  }

  // Mode and credits of every card, from the Devices status.
  static std::map<std::string, std::pair<int, int64_t>> CardModes() {
    std::map<std::string, std::pair<int, int64_t>> modes;
    for (const Json& g : DevicesStatus().value("groups", Json::array())) {
      for (const Json& a : g["accelerators"]) {
        modes[a["id"]] = {a.value("mode", 0), a.value("allocated", int64_t{0})};
      }
    }
    return modes;
  }

  static std::vector<std::string> OurSockets() {
    std::vector<std::string> sockets;
    for (const auto& entry : fs::directory_iterator(kPluginDir)) {
      if (entry.path().filename().string().rfind("gpustack-", 0) == 0)
        sockets.push_back(entry.path().filename());
    }
    return sockets;
  }

  static Client* client_;
  static std::string ns_;
};
Client* NodeE2e::client_ = nullptr;
std::string NodeE2e::ns_;

constexpr const char* kA10g = "GPU-a10a0000-1111-2222-3333-000000000000";

TEST_F(NodeE2e, A10gWholeSlicedRestartsAndKill) {
  ASSERT_TRUE(OurSockets().empty()) << "the device-plugin directory is not clean";
  Daemon daemon("nvidia-a10g");
  daemon.Start();
  // docs/behaviour.md §6.1 on one A10G: a card, 10 ownership slots, 128 slices, no partition, 512
  // visibility.
  ASSERT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 1},
                                  {"nvidia.com/gpu.shared", 10},
                                  {"nvidia.com/gpu.sliced", 128},
                                  {"nvidia.com/gpu.partitioned", 0},
                                  {"device.gpustack.ai/nvidia.visibility", 512}}))
      << daemon.Log();
  // The Devices object: the spec detect prints, the plugin running, the node's docs/behaviour.md
  // §3.4 labels.
  ASSERT_TRUE(WaitFor([&] { return !DevicesStatus().is_null(); })) << daemon.Log();
  auto devices = client_->Get(resources::Devices(), "", kNode);
  ASSERT_TRUE(devices);
  std::ifstream expected_file(std::string(GPUSTACK_NODES_DIR) +
                              "/expected/nvidia-a10g.devices.json");
  EXPECT_EQ((*devices)["spec"], Json::parse(expected_file));
  EXPECT_EQ((*devices)["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(DevicesStatus()["conditions"][0]["status"], "True") << DevicesStatus().dump();
  EXPECT_EQ(DevicesStatus()["plugins"][0]["state"], "running");
  const Json labels = NodeObject()["metadata"]["labels"];
  EXPECT_EQ(labels.value("acceleratable.feature.gpustack.ai/nvidia-a10g.memory", ""), "24Gi");
  EXPECT_EQ(labels.value("acceleratable.feature.gpustack.ai/nvidia-a10g.count", ""), "1");

  // Whole card.
  Json whole = RunPod("whole", {{"nvidia.com/gpu", "1"}});
  ASSERT_EQ(whole["status"]["phase"], "Running") << whole["status"].dump() << daemon.Log();
  EXPECT_NE(Log("whole").find(std::string("NVIDIA_VISIBLE_DEVICES=") + kA10g), std::string::npos)
      << Log("whole");
  ASSERT_TRUE(WaitFor([&] {
    auto p = client_->Get(resources::Pods(), ns_, "whole");
    return p && Record(*p).contains("main");
  }));
  whole = *client_->Get(resources::Pods(), ns_, "whole");
  EXPECT_EQ(Record(whole)["main"]["accelerators"][0]["mode"], 1) << Record(whole).dump();
  EXPECT_EQ(Record(whole)["main"]["accelerators"][0]["id"], kA10g);
  ASSERT_TRUE(WaitFor([&] { return CardModes()[kA10g].first == 1; })) << DevicesStatus().dump();
  // The card is held whole: its slice tokens go Unhealthy, so no slice is scheduled beside it.
  EXPECT_TRUE(AllocatableBecomes({{"nvidia.com/gpu.sliced", 0}, {"nvidia.com/gpu.shared", 0}}));
  DeletePod("whole");
  ASSERT_TRUE(WaitFor([&] { return CardModes()[kA10g].first == 0; })) << DevicesStatus().dump();
  EXPECT_TRUE(AllocatableBecomes({{"nvidia.com/gpu.sliced", 128}}));

  // A 20 % slice: 24560 MiB x 20 % = 4912 MiB (docs/decisions.md D6). The counting keys are
  // generous here on purpose, so the over-asking Pod below passes the scheduler and meets gate 5.
  SetCountingKeys({{"nvidia.com/gpu.sliced.memory-percentage", "1000"},
                   {"nvidia.com/gpu.sliced.cores-percentage", "12800"}});
  Json sliced = RunPod("sliced", {{"nvidia.com/gpu.sliced", "1"},
                                  {"nvidia.com/gpu.sliced.memory-percentage", "20"}});
  ASSERT_EQ(sliced["status"]["phase"], "Running") << sliced["status"].dump() << daemon.Log();
  const std::string env = Log("sliced");
  EXPECT_NE(env.find("CUDA_DEVICE_MEMORY_LIMIT_0=4912m"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_DEVICE_SM_LIMIT=100"), std::string::npos) << env;
  EXPECT_NE(env.find(std::string("NVIDIA_VISIBLE_DEVICES=") + kA10g), std::string::npos) << env;

  // /metrics over TLS: the slice's card, labelled with its Pod, and valid for promtool.
  std::string port;
  ASSERT_TRUE(WaitFor([&] {
    const std::string log = daemon.Log();
    const size_t at = log.rfind("/monitor/snapshot on https://0.0.0.0:");
    if (at == std::string::npos) return false;
    port = log.substr(at + 37, log.find('\n', at) - at - 37);
    return true;
  })) << daemon.Log();
  std::string metrics;
  ASSERT_TRUE(WaitFor([&] {
    metrics = testing::Run("curl -sk https://127.0.0.1:" + port + "/metrics");
    return metrics.find("instance_name=\"sliced\"") != std::string::npos;
  })) << metrics;
  EXPECT_NE(metrics.find("gpustack_instance_accelerator_memory_total_mib{namespace=\"" + ns_ +
                         "\",instance_name=\"sliced\""),
            std::string::npos)
      << metrics;
  int promtool = -1;
  const std::string lint = testing::Run(
      "curl -sk https://127.0.0.1:" + port + "/metrics | promtool check metrics 2>&1", &promtool);
  EXPECT_EQ(promtool, 0) << lint << metrics;
  EXPECT_EQ(
      testing::Run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + port + "/metrics"),
      "000");  // plain HTTP is not served
  const Json snapshot =
      Json::parse(testing::Run("curl -sk https://127.0.0.1:" + port + "/monitor/snapshot"));
  EXPECT_EQ(snapshot["cards"][0]["id"], kA10g) << snapshot.dump();
  EXPECT_EQ(testing::Run("curl -sk https://127.0.0.1:" + port + "/readyz"), "ok\n");

  // Over-asking: 20 % + 90 % of one card. The kubelet fails the Pod with the allocator's reason.
  Json over = RunPod(
      "over", {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "90"}});
  EXPECT_EQ(over["status"]["phase"], "Failed") << over["status"].dump();
  EXPECT_EQ(over["status"].value("reason", ""), "UnexpectedAdmissionError");
  EXPECT_NE(over["status"].value("message", "").find("credits remaining < 1440000"),
            std::string::npos)
      << over["status"].dump();

  // The kubelet restarts: it removes our sockets; the daemon serves and registers again.
  const size_t registered_before = daemon.Registrations();
  int restarted = -1;
  const std::string out = testing::Run("'" + std::string(GPUSTACK_KUBELET_SCRIPT) +
                                           "' restart --dir '" + testing::TestbedDir() + "' 2>&1",
                                       &restarted);
  ASSERT_EQ(restarted, 0) << out;
  ASSERT_TRUE(WaitFor([&] { return daemon.Registrations() > registered_before; })) << daemon.Log();
  // Noticed either way: its socket recreated, or ours removed.
  EXPECT_TRUE(daemon.Log().find("the kubelet restarted") != std::string::npos ||
              daemon.Log().find("was removed: serving again") != std::string::npos);
  EXPECT_TRUE(AllocatableBecomes(
      {{"nvidia.com/gpu.sliced", 128}, {"device.gpustack.ai/nvidia.visibility", 512}}))
      << daemon.Log();
  EXPECT_EQ((*client_->Get(resources::Pods(), ns_, "sliced"))["status"]["phase"], "Running");

  // kill -9 while the slice is held: the ledger comes back from the Pods' records, unchanged.
  sliced = *client_->Get(resources::Pods(), ns_, "sliced");
  const Json status_before = DevicesStatus()["groups"];
  EXPECT_EQ(daemon.Stop(SIGKILL), 128 + SIGKILL);
  daemon.Start();
  ASSERT_TRUE(WaitFor([&] {
    return daemon.Log().find("1 allocation(s) restored") != std::string::npos;
  })) << daemon.Log();
  EXPECT_TRUE(WaitFor([&] { return DevicesStatus()["groups"] == status_before; }))
      << DevicesStatus().dump() << "\nbefore: " << status_before.dump();
  auto still = client_->Get(resources::Pods(), ns_, "sliced");
  ASSERT_TRUE(still);
  EXPECT_EQ((*still)["status"]["phase"], "Running");
  EXPECT_EQ((*still)["status"]["containerStatuses"][0].value("restartCount", -1), 0);
  EXPECT_EQ(Record(*still), Record(sliced));
  // ... and still refuses what does not fit.
  Json over2 = RunPod(
      "over2", {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "90"}});
  EXPECT_EQ(over2["status"]["phase"], "Failed") << over2["status"].dump();

  // SIGTERM: a clean exit that leaves no socket of ours behind.
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  EXPECT_TRUE(OurSockets().empty());
  for (const char* pod : {"sliced", "over", "over2"}) DeletePod(pod);
}

// What the node should advertise for a fixture: the ledger's own view of the spec detect prints.
std::map<std::string, int64_t> ExpectedCounts(const std::string& fixture) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/" + fixture + ".devices.json");
  auto spec = ledger::SpecFromJson(Json::parse(in));
  EXPECT_TRUE(spec) << spec.error();
  ledger::NodeLedger node(kNode, *spec);
  auto counts = ledger::AdvertisedCounts(node, {"nvidia", "nvidia.com/gpu", "mig"});
  size_t cards = 0;
  for (const ledger::Group& g : spec->groups) cards += g.accelerators.size();
  counts["device.gpustack.ai/nvidia.visibility"] = static_cast<int64_t>(cards) * 512;
  return counts;
}

TEST_F(NodeE2e, H100MigPartitionCreatedAtAllocateAndDestroyedAfterThePod) {
  Daemon daemon("nvidia-h100x8-mig-mixed");
  daemon.Start();
  const auto counts = ExpectedCounts("nvidia-h100x8-mig-mixed");
  ASSERT_GT(counts.at("nvidia.com/gpu.partitioned"), 0);
  ASSERT_TRUE(AllocatableBecomes(counts)) << daemon.Log();

  SetCountingKeys({{"nvidia.com/gpu.partitioned.mig-1g.10gb", "100"}});  // the worker's key
  Json part = RunPod("part", {{"nvidia.com/gpu.partitioned", "1"},
                              {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"}});
  ASSERT_EQ(part["status"]["phase"], "Running") << part["status"].dump() << daemon.Log();
  const std::string env = Log("part");
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=MIG-"), std::string::npos) << env;
  EXPECT_EQ(env.find("CUDA_DEVICE_MEMORY_LIMIT"), std::string::npos) << env;  // no enforcer
  ASSERT_TRUE(WaitFor([&] {
    auto p = client_->Get(resources::Pods(), ns_, "part");
    return p && Record(*p).contains("main");
  }));
  const Json record = Record(*client_->Get(resources::Pods(), ns_, "part"))["main"];
  EXPECT_EQ(record["accelerators"][0]["mode"], 4) << record.dump();
  EXPECT_EQ(record["accelerators"][0]["allocatedPhysicalProfile"], "1g.10gb") << record.dump();
  auto profiles_in_use = [&] {
    int in_use = 0;
    for (const Json& g : DevicesStatus().value("groups", Json::array())) {
      for (const Json& a : g["accelerators"]) {
        for (const Json& p : a.value("allocatedProfiles", Json::array()))
          in_use += p["count"].get<int>();
      }
    }
    return in_use;
  };
  EXPECT_TRUE(WaitFor([&] { return profiles_in_use() == 1; })) << DevicesStatus().dump();

  // The Pod goes: its partition is destroyed in the (fake) driver and the ledger frees it.
  DeletePod("part");
  EXPECT_TRUE(WaitFor([&] {
    return daemon.Log().find("destroyed partition") != std::string::npos;
  })) << daemon.Log();
  EXPECT_TRUE(WaitFor([&] { return profiles_in_use() == 0; })) << DevicesStatus().dump();
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  EXPECT_TRUE(OurSockets().empty());
}

// 50 Pods of mixed shapes on 4 T4s, created at once, while the daemon is killed twice. Pods
// admitted while it is down fail (the kubelet's rule); what matters is that every Pod that runs
// holds a record, that all records fit one ledger together (no card over-admitted or held in two
// modes), and that the published status is that ledger.
TEST_F(NodeE2e, FiftyMixedPodsRaceDaemonKills) {
  Daemon daemon("nvidia-t4x4");
  daemon.Start();
  ASSERT_TRUE(AllocatableBecomes(ExpectedCounts("nvidia-t4x4"))) << daemon.Log();
  SetCountingKeys({{"nvidia.com/gpu.sliced.memory-percentage", "10000"},
                   {"nvidia.com/gpu.sliced.cores-percentage", "51200"}});
  const std::vector<Json> shapes = {
      {{"nvidia.com/gpu", "1"}},
      {{"nvidia.com/gpu.shared", "1"}},
      {{"nvidia.com/gpu.shared", "2"}},
      {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "30"}},
      {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "15"}}};
  constexpr int kPods = 50;
  std::thread killer([&] {
    for (int round = 0; round < 2; ++round) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      daemon.Stop(SIGKILL);
      daemon.Start();
    }
  });
  for (int i = 0; i < kPods; ++i) {
    const Json pod = PodAsking("race-" + std::to_string(i), shapes[i % shapes.size()]);
    ASSERT_TRUE(client_->Create(resources::Pods(), pod));
  }
  killer.join();
  // The last daemon is up: what it publishes is what it rebuilt, not what the previous one said.
  ASSERT_TRUE(WaitFor([&] { return daemon.Registrations() == 3; }, std::chrono::seconds(60)))
      << daemon.Log();
  // Settled: no Pod of the race is still waiting for the kubelet.
  std::vector<Json> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto list = client_->List(resources::Pods(), ns_);
        if (!list) return false;
        pods = list->items;
        return std::none_of(pods.begin(), pods.end(), [](const Json& p) {
          return p["metadata"]["name"].get<std::string>().rfind("race-", 0) == 0 &&
                 p["status"].value("phase", "Pending") == "Pending";
        });
      },
      std::chrono::seconds(300)));

  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/nvidia-t4x4.devices.json");
  ledger::NodeLedger rebuilt(kNode, *ledger::SpecFromJson(Json::parse(in)));
  int running = 0;
  for (const Json& pod : pods) {
    if (pod["metadata"]["name"].get<std::string>().rfind("race-", 0) != 0) continue;
    if (pod["status"]["phase"] != "Running") continue;
    ++running;
    const Json record = Record(pod);
    ASSERT_TRUE(record.contains("main")) << pod["metadata"]["name"] << " runs without a record";
    auto allocation = ledger::AllocationFromJson(record["main"]);
    ASSERT_TRUE(allocation) << allocation.error();
    EXPECT_TRUE(rebuilt.Restore(*allocation))
        << pod["metadata"]["name"] << " over-admits: " << record.dump();
  }
  EXPECT_GT(running, 0);
  // The daemon's published ledger is exactly the running Pods' records.
  EXPECT_TRUE(WaitFor([&] {
    return DevicesStatus()["groups"] == ledger::ToJson(rebuilt.ToStatus())["groups"];
  })) << DevicesStatus().dump()
      << "\nexpected: " << ledger::ToJson(rebuilt.ToStatus()).dump();
  std::cout << running << " of " << kPods << " Pods run after two kills\n";
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  Kubectl("delete pods --all -n " + ns_ + " --grace-period=0 --wait=true");
}

// The driver reports an XID on a card (NVML event sets, through the fake): its tokens go
// Unhealthy at once; the next discovery reads it healthy and they come back.
TEST_F(NodeE2e, AnXidTakesTheCardOutAndDiscoveryBringsItBack) {
  // Discovery every 20 s: longer than the kubelet takes to publish allocatable (10 s).
  Daemon daemon("nvidia-t4x4", {"--discover-period", "20"});
  daemon.Start();
  ASSERT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 4}, {"nvidia.com/gpu.sliced", 4 * 128}}))
      << daemon.Log();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the event set is registered
  std::ofstream(daemon.EventsPath(), std::ios::app)
      << "GPU-74040002-1111-2222-3333-000000000002 79\n";
  EXPECT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 3}, {"nvidia.com/gpu.sliced", 3 * 128}}))
      << daemon.Log();
  EXPECT_NE(daemon.Log().find("XID 79"), std::string::npos) << daemon.Log();
  EXPECT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 4}, {"nvidia.com/gpu.sliced", 4 * 128}}))
      << daemon.Log();
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
}

// Two manufacturers on one node, one process: both plugins run, both advertise, both are in the
// node's Devices object. (An AMD Pod is not started: its grant names /dev/kfd and /dev/dri
// nodes, which this VM does not have, so the runtime could not create the container.)
TEST_F(NodeE2e, TwoVendorsAreServedByOneProcess) {
  Daemon daemon("mixed-nvidia-amd");
  daemon.Start();
  ASSERT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 2},
                                  {"amd.com/gpu", 1},
                                  {"device.gpustack.ai/nvidia.visibility", 2 * 512},
                                  {"device.gpustack.ai/amd.visibility", 512}}))
      << daemon.Log();
  ASSERT_TRUE(WaitFor([&] { return DevicesStatus().value("plugins", Json::array()).size() == 2; }))
      << DevicesStatus().dump();
  const Json status = DevicesStatus();  // a range-for over a temporary's member would dangle
  for (const Json& plugin : status["plugins"]) EXPECT_EQ(plugin["state"], "running");
  std::ifstream expected(std::string(GPUSTACK_NODES_DIR) +
                         "/expected/mixed-nvidia-amd.devices.json");
  EXPECT_EQ((*client_->Get(resources::Devices(), "", kNode))["spec"], Json::parse(expected));
  Json whole = RunPod("l40s", {{"nvidia.com/gpu", "2"}});
  ASSERT_EQ(whole["status"]["phase"], "Running") << whole["status"].dump() << daemon.Log();
  EXPECT_NE(Log("l40s").find("NVIDIA_VISIBLE_DEVICES=GPU-"), std::string::npos) << Log("l40s");
  DeletePod("l40s");
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  EXPECT_TRUE(OurSockets().empty());
}

// A partition still in use when its Pod goes (the driver refuses the first destroy) is destroyed
// on a retry within the destroy-retry period (30 s), not at the next 5-minute resync. Last, after
// a fixture without partitions, so that the allocatable it waits for is this daemon's.
TEST_F(NodeE2e, APartitionInUseWhenItsPodGoesIsDestroyedOnARetry) {
  Daemon daemon("nvidia-h100x8-mig-mixed");
  daemon.InjectNvmlErrors({{"GpuInstanceDestroy", {{"code", 19}, {"times", 1}}}});  // IN_USE
  daemon.Start();
  // Registered first: the Node can still show what the previous test's daemon offered.
  ASSERT_TRUE(WaitFor([&] { return daemon.Registrations() == 1; })) << daemon.Log();
  ASSERT_TRUE(AllocatableBecomes(ExpectedCounts("nvidia-h100x8-mig-mixed"))) << daemon.Log();
  SetCountingKeys({{"nvidia.com/gpu.partitioned.mig-1g.10gb", "100"}});
  Json part = RunPod("part", {{"nvidia.com/gpu.partitioned", "1"},
                              {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"}});
  ASSERT_EQ(part["status"]["phase"], "Running") << part["status"].dump() << daemon.Log();

  DeletePod("part");
  ASSERT_TRUE(WaitFor([&] {
    return daemon.Log().find("cannot destroy partition") != std::string::npos;
  })) << daemon.Log();
  EXPECT_TRUE(WaitFor([&] { return daemon.Log().find("destroyed partition") != std::string::npos; },
                      std::chrono::seconds(45)))
      << daemon.Log();
  // Destroyed by a retry, after the refusal. The retry may come at once: a pass that the Pod's
  // deletion starts retries what is pending, milliseconds after the refusal.
  const std::string log = daemon.Log();
  EXPECT_LT(log.find("cannot destroy partition"), log.find("destroyed partition")) << log;
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gpustack::kube
