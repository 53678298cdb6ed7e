// The node daemon on a REAL kubelet (the testbed_node fixture: containerd, runc, a real kubelet),
// with the fake NVML standing in for the hardware. Real Pods start with what was injected, the
// kubelet restarts, the daemon is killed while Pods are admitted; the tests run in order.
//
// The worker (issue 12) publishes the node counting keys that the scheduler charges slices and
// partitions against (reference §3.6); until it exists, the test writes them on the Node, as the
// worker will, and says so where it does.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
using testing::Kubectl;
using testing::WaitFor;

constexpr const char* kNode = "testbed-node";
constexpr const char* kPluginDir = "/var/lib/kubelet/device-plugins";
constexpr const char* kAnnotation = "device.gpustack.ai/accelerator.allocated";

// `device-manager serve` on the testbed node, on one fixture node's fake hardware.
class Daemon {
 public:
  explicit Daemon(std::string fixture) : fixture_(std::move(fixture)) {}
  // A test that fails half-way kills its daemon, whose sockets stay: removed here, so the next
  // run starts from a clean directory.
  ~Daemon() {
    if (Stop(SIGKILL) == -1) return;
    for (const auto& entry : std::filesystem::directory_iterator(kPluginDir)) {
      if (entry.path().filename().string().rfind("gpustack-", 0) == 0)
        std::filesystem::remove(entry.path());
    }
  }

  void Start() {
    const std::string log = std::string(GPUSTACK_E2E_DIR) + "/" + fixture_ + ".daemon.log";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string nodes = GPUSTACK_NODES_DIR;
      setenv("GPUSTACK_FAKE_FIXTURE", (nodes + "/" + fixture_ + ".json").c_str(), 1);
      setenv("GPUSTACK_NVIDIA_LIBRARY", GPUSTACK_FAKE_NVML, 1);
      setenv("GPUSTACK_STATE_DIR", (std::string(GPUSTACK_E2E_DIR) + "/state").c_str(), 1);
      const std::string sysfs = std::string(GPUSTACK_NODE_TREES_DIR) + "/" + fixture_ + "/sys";
      const std::string pod_resources =
          testing::TestbedDir() + "/node/kubelet/pod-resources/kubelet.sock";
      FILE* out = freopen(log.c_str(), "a", stdout);
      if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(126);
      execl(GPUSTACK_BINARY, GPUSTACK_BINARY, "--log-level", "info", "device-manager", "serve",
            "--node-name", kNode, "--sysfs-root", sysfs.c_str(), "--pod-resources-socket",
            pod_resources.c_str(), "--reconcile-period", "0.5", nullptr);
      _exit(127);
    }
    ASSERT_GT(pid_, 0);
  }

  // Signals the daemon and reaps it; its exit status (128 + signal when killed by one).
  int Stop(int signal = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string Log() const {
    std::ifstream in(std::string(GPUSTACK_E2E_DIR) + "/" + fixture_ + ".daemon.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string fixture_;
  pid_t pid_ = -1;
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

// The worker's counting keys (§3.6), written on the Node's capacity as the worker will.
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

  // Creates a Pod asking for `limits` that prints its environment, and waits until it runs or
  // the kubelet refuses it.
  static Json RunPod(const std::string& name, const Json& limits) {
    Json pod = {{"apiVersion", "v1"},
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
  // §6.1 on one A10G: a card, 10 ownership slots, 128 slices, no partition, 512 visibility.
  ASSERT_TRUE(AllocatableBecomes({{"nvidia.com/gpu", 1},
                                  {"nvidia.com/gpu.shared", 10},
                                  {"nvidia.com/gpu.sliced", 128},
                                  {"nvidia.com/gpu.partitioned", 0},
                                  {"device.gpustack.ai/nvidia.visibility", 512}}))
      << daemon.Log();
  // The Devices object: the spec detect prints, the plugin running, the node's §3.4 labels.
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

  // A 20 % slice: 24560 MiB x 20 % = 4912 MiB (ARCHITECTURE decision 6). The counting keys are
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

  // Over-asking: 20 % + 90 % of one card. The kubelet fails the Pod with the allocator's reason.
  Json over = RunPod(
      "over", {{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "90"}});
  EXPECT_EQ(over["status"]["phase"], "Failed") << over["status"].dump();
  EXPECT_EQ(over["status"].value("reason", ""), "UnexpectedAdmissionError");
  EXPECT_NE(over["status"].value("message", "").find("credits remaining < 1440000"),
            std::string::npos)
      << over["status"].dump();

  // The kubelet restarts: it removes our sockets; the daemon serves and registers again.
  auto registrations = [&] {
    const std::string log = daemon.Log();
    size_t count = 0;
    for (size_t at = log.find("every resource registered"); at != std::string::npos;
         at = log.find("every resource registered", at + 1)) {
      ++count;
    }
    return count;
  };
  const size_t registered_before = registrations();
  int restarted = -1;
  const std::string out = testing::Run("'" + std::string(GPUSTACK_KUBELET_SCRIPT) +
                                           "' restart --dir '" + testing::TestbedDir() + "' 2>&1",
                                       &restarted);
  ASSERT_EQ(restarted, 0) << out;
  ASSERT_TRUE(WaitFor([&] { return registrations() > registered_before; })) << daemon.Log();
  EXPECT_NE(daemon.Log().find("the kubelet restarted"), std::string::npos);
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

}  // namespace
}  // namespace gpustack::kube
