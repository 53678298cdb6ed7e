// `gpustack-operator worker` on the testbed's real apiserver, scheduler, controller-manager, kwok
// and Kueue (fixture testbed_full). The fleet is the upstream operator's cluster A
// (docs/behaviour.md §12): four kwok nodes whose Devices objects are the detect output of the
// fixture nodes, published as the node daemon would publish them. Label operator-e2e.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "host/kube/quantity.h"
#include "host/ledger/chosen.h"
#include "host/ledger/ledger.h"
#include "host/ledger/views.h"
#include "host/operator/admission.h"
#include "host/operator/fleet.h"
#include "host/operator/requeue.h"
#include "host/runtime/devices_spec.h"
#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

namespace fs = std::filesystem;
using testing::Kubectl;
using testing::WaitFor;

const ResourceType kFlavors = resources::ResourceFlavors();
const ResourceType kClusterQueues = resources::ClusterQueues();
const ResourceType kLocalQueues = resources::LocalQueues();
const ResourceType kWorkloads = resources::Workloads();
const ResourceType kAdmissionChecks = resources::AdmissionChecks();
const ResourceType kSecrets = resources::Secrets();
constexpr const char* kSystem = "gpustack-system";
constexpr const char* kA10g = "gpustack--nvidia-a10g-linux-amd64";
constexpr const char* kT4 = "gpustack--nvidia-tesla-t4-linux-amd64";
constexpr const char* kGeneric = "gpustack--generic-linux-amd64";
constexpr const char* kExamplePool = "gpustack--example-example-accelerator-linux-amd64";

Json Expected(const std::string& fixture) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/" + fixture + ".devices.json");
  return Json::parse(in);
}

// What one kwok node of the fleet is: its CPU, and the Devices spec the node daemon would publish.
struct FleetNode {
  std::string name;
  std::string cpu_vendor, cpu_name;
  int cores;
  Json spec;  // null: a CPU-only node
};

std::vector<FleetNode> ClusterA() {
  Json t4a = Expected("nvidia-t4x4");
  t4a["groups"][0]["accelerators"].erase(t4a["groups"][0]["accelerators"].begin() + 1,
                                         t4a["groups"][0]["accelerators"].end());
  return {{"node-cpu", "AMD", "AMD EPYC 7R13 Processor", 16, nullptr},
          {"node-a10g", "AMD", "AMD EPYC 7R32", 4, Expected("nvidia-a10g")},
          {"node-t4-a", "Intel", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 4, t4a},
          {"node-t4-b", "Intel", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 48,
           Expected("nvidia-t4x4")}};
}

const std::map<std::string, ledger::ResourceKind> kKinds = {
    {"nvidia", {"nvidia", "nvidia.com/gpu", "mig"}},
    {"amd", {"amd", "amd.com/gpu", ""}},
    {"example", {"example", "example.com/accel", ""}}};

// The kwok Node: NFD's CPU labels, the device manager's labels of docs/behaviour.md §3.4, and in
// its capacity the tokens its device plugin would advertise (what a kubelet would show).
Json NodeObject(const FleetNode& n, bool allocatable_counting_keys = false) {
  Json capacity = {{"cpu", std::to_string(n.cores)}, {"memory", "64Gi"}, {"pods", "110"}};
  Json labels = {{"type", "gpustack-fleet"},          {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},     {"kubernetes.io/hostname", n.name},
                 {op::kCpuVendorLabel, n.cpu_vendor}, {op::kManagedLabel, "true"}};
  if (!n.spec.is_null()) {
    const ledger::DevicesSpec spec = *ledger::SpecFromJson(n.spec);
    for (const auto& [k, v] : runtime::DeviceLabels(spec)) labels[k] = v;
    const ledger::NodeLedger ledger(n.name, spec);
    for (const ledger::Group& g : spec.groups) {
      for (const auto& [k, v] : ledger::AdvertisedCounts(ledger, kKinds.at(g.manufacturer)))
        capacity[k] = std::to_string(v);
      // The counting keys the worker writes into the capacity, as a kubelet mirrors them into
      // the allocatable (kwok does not): the scheduler fits the derived keys on them.
      if (allocatable_counting_keys) {
        for (const auto& [k, v] : ledger::CountingKeys(ledger, kKinds.at(g.manufacturer)))
          capacity[k] = kube::FormatDecimal(v);
      }
    }
  }
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", n.name},
        {"labels", labels},
        {"annotations", {{"kwok.x-k8s.io/node", "fake"}, {op::kCpuNameAnnotation, n.cpu_name}}}}},
      {"spec",
       {{"taints",
         Json::array(
             {{{"key", "kwok.x-k8s.io/node"}, {"value", "fake"}, {"effect", "NoSchedule"}}})}}},
      {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
}

// The node's status as above with the counting keys in its allocatable only (its capacity's are
// the worker's to write).
Json NodeStatusWithCountingKeys(const FleetNode& n) {
  Json object = NodeObject(n, true);
  object["status"].erase("capacity");
  object.erase("spec");
  object["metadata"].erase("labels");
  object["metadata"].erase("annotations");
  return object;
}

Json DevicesObject(const FleetNode& n) {
  return {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
          {"kind", "Devices"},
          {"metadata", {{"name", n.name}}},
          {"spec", n.spec}};
}

// The published status of `spec` with `charge` (a request by one container) reserved on it.
Json StatusWith(const std::string& node, const Json& spec, const ledger::Request* charge) {
  ledger::NodeLedger ledger(node, *ledger::SpecFromJson(spec));
  if (charge != nullptr) {
    EXPECT_TRUE(ledger.Reserve({"pod", "main"}, *charge));
  }
  return ledger::ToJson(ledger.ToStatus());
}

class Worker {
 public:
  explicit Worker(std::string name, std::vector<std::string> plugin_dirs = {})
      : name_(std::move(name)), port_(testing::FreePort()), webhook_port_(testing::FreePort()) {
    const std::string log = std::string(GPUSTACK_E2E_DIR) + "/" + name_ + ".log";
    std::ofstream(log, std::ios::trunc);
    std::vector<std::string> args = {GPUSTACK_BINARY,
                                     "--log-level",
                                     "debug",
                                     "worker",
                                     "--identity",
                                     name_,
                                     "--secure-port",
                                     std::to_string(port_),
                                     "--kube-leader-election-lease-duration",
                                     "4",
                                     "--kube-leader-election-renew-deadline",
                                     "3",
                                     "--kube-leader-election-retry-period",
                                     "0.5",
                                     "--webhook-port",
                                     std::to_string(webhook_port_),
                                     "--webhook-url",
                                     "https://127.0.0.1:" + std::to_string(webhook_port_),
                                     "--node-devices-retry-after",
                                     "2"};
    for (const std::string& d : plugin_dirs) {
      args.push_back("--plugin-dir");
      args.push_back(d);
    }
    std::vector<std::string> env = {"KUBECONFIG=" + testing::TestbedDir() + "/kubeconfig",
                                    "GPUSTACK_NODE_MANAGEMENT_MANUAL=true", "PATH=/usr/bin:/bin"};
    // Real AdmissionReviews for the fuzz corpus (tests/fuzz/corpus), when asked for.
    if (const char* dump = std::getenv("GPUSTACK_WEBHOOK_DUMP_DIR"))
      env.push_back(std::string("GPUSTACK_WEBHOOK_DUMP_DIR=") + dump);
    process_ = std::make_unique<testing::Process>(std::move(args), std::move(env), log);
  }
  bool Start() { return process_->Start(); }
  int Stop(int signal = SIGTERM) { return process_->Stop(signal); }
  std::string Log() const { return process_->Log(); }

  // The worker's own /metrics, over TLS (a self-signed certificate).
  std::string Metrics() const {
    return testing::Run("curl -sk https://127.0.0.1:" + std::to_string(port_) + "/metrics");
  }
  // The sum of a counter's samples in /metrics.
  int64_t Counter(const std::string& name) const {
    int64_t sum = 0;
    std::istringstream in(Metrics());
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(name, 0) != 0) continue;
      const size_t space = line.rfind(' ');
      sum += std::stoll(line.substr(space + 1));
    }
    return sum;
  }
  bool Leading() const { return Metrics().find("gpustack_worker_leader 1") != std::string::npos; }
  int webhook_port() const { return webhook_port_; }

 private:
  std::string name_;
  int port_, webhook_port_;
  std::unique_ptr<testing::Process> process_;
};

class OperatorE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = testing::TestbedClient().release();
    ASSERT_NE(client_, nullptr);
    for (const char* crd :
         {"worker.gpustack.ai_devices.yaml", "worker.gpustack.ai_instancetypes.yaml",
          "worker.gpustack.ai_instances.yaml"}) {
      testing::ApplyCrds(*client_, std::string(GPUSTACK_CRD_DIR) + "/" + crd, "operator-e2e");
    }
    // A clean slate: what an earlier run left (the settings Secret seeds once).
    if (auto types = client_->List(resources::InstanceTypes(), "")) {
      for (const Json& t : types->items) {
        const std::string name = t["metadata"]["name"];
        static_cast<void>(client_->Patch(resources::InstanceTypes(), "", name, PatchType::kMerge,
                                         {{"metadata", {{"finalizers", nullptr}}}}));
        static_cast<void>(client_->Delete(resources::InstanceTypes(), "", name));
      }
    }
    Kubectl("-n " + std::string(kSystem) + " delete secret gpustack-settings --ignore-not-found");
    Kubectl("delete nodes -l type=gpustack-fleet --ignore-not-found");
    Kubectl("delete devices --all --ignore-not-found");
    for (const FleetNode& n : ClusterA()) {
      ASSERT_TRUE(client_->Apply(resources::Nodes(), NodeObject(n), {"operator-e2e", true}));
      // kwok owns a node's status from here on; the capacity must survive it.
      ASSERT_TRUE(
          client_->Apply(resources::Nodes(), NodeObject(n), {"operator-e2e", true}, "status"));
      if (!n.spec.is_null()) {
        ASSERT_TRUE(client_->Apply(resources::Devices(), DevicesObject(n), {"operator-e2e", true}));
      }
    }
    worker_ = new Worker("worker-a");
    ASSERT_TRUE(worker_->Start());
  }
  static void TearDownTestSuite() {
    if (worker_ != nullptr) {
      EXPECT_EQ(worker_->Stop(), 0) << worker_->Log();
    }
    // With no worker left to answer them, the webhooks would refuse every queued Pod of the
    // suites that follow on this control plane.
    Kubectl("delete mutatingwebhookconfiguration gpustack-worker-mutation --ignore-not-found");
    Kubectl("delete validatingwebhookconfiguration gpustack-worker-validation --ignore-not-found");
    delete worker_;
    delete client_;
  }

  static std::set<std::string> Names(const ResourceType& type, const std::string& selector) {
    std::set<std::string> names;
    auto list = client_->List(type, "", {.label_selector = selector});
    if (!list) return names;
    for (const Json& o : list->items) names.insert(o["metadata"]["name"].get<std::string>());
    return names;
  }

  // "<entrance> <unit> <EX SH SL PT> <cpu> <phase>" of one InstanceType, as kubectl prints it.
  static std::string Row(const std::string& type) {
    auto got = client_->Get(resources::InstanceTypes(), "", type);
    if (!got || !got->contains("status") || !(*got)["status"].contains("columns")) return "";
    const Json& s = (*got)["status"];
    return s.value("entrance", "") + " " + s["columns"].value("unit", "") + " " +
           s["columns"].value("accelerator", "") + " " + s["columns"].value("cpu", "") + " " +
           s.value("phase", "");
  }

  static ::testing::AssertionResult RowBecomes(
      const std::string& type, const std::string& row,
      std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::string last;
    if (WaitFor([&] { return (last = Row(type)) == row; }, timeout))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << type << ": last row '" << last << "'\n"
                                         << worker_->Log().substr(0, 20000);
  }

  // What the worker's writes change: the spec generation of the Kueue objects (Kueue writes their
  // status itself) and the resourceVersion of the InstanceTypes.
  static std::map<std::string, std::string> SpecVersions() {
    std::map<std::string, std::string> out;
    for (const ResourceType& type : {kFlavors, kClusterQueues, resources::InstanceTypes()}) {
      const ObjectList list = *client_->List(type, "");
      for (const Json& o : list.items) {
        out[type.plural + "/" + o["metadata"]["name"].get<std::string>()] =
            type.plural == "instancetypes" ? o["metadata"]["resourceVersion"].get<std::string>()
                                           : o["metadata"]["generation"].dump();
      }
    }
    return out;
  }

  static inline Client* client_ = nullptr;
  static inline Worker* worker_ = nullptr;
};

TEST_F(OperatorE2e, ClusterAPoolsFlavorsAndQueues) {
  // docs/behaviour.md §12.1: exactly seven flavors.
  const std::set<std::string> flavors = {
      "gpustack--amd-epyc-7r13-linux-amd64-16c",
      "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64-1d",
      "gpustack--amd-epyc-7r32-linux-amd64-4c",
      "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-1d",
      "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-4d",
      "gpustack--intel-xeon-platinum-8259cl-linux-amd64-48c",
      "gpustack--intel-xeon-platinum-8259cl-linux-amd64-4c"};
  EXPECT_TRUE(WaitFor([&] {
    return Names(kFlavors, "resource.gpustack.ai/type=nodes") == flavors;
  })) << worker_->Log();
  // docs/behaviour.md §12.2 and §12.3 (docs/decisions.md D1 and D3 for the SH and CPU columns).
  EXPECT_TRUE(WaitFor([&] {
    return Names(kClusterQueues, "resource.gpustack.ai/type=instancetypes") ==
           std::set<std::string>{kGeneric, kA10g, kT4};
  }));
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/72 Active"));
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  // kubectl prints the same columns.
  const std::string table = Kubectl("get instancetypes " + std::string(kA10g));
  EXPECT_NE(table.find("ENTRANCE"), std::string::npos) << table;
  EXPECT_NE(table.find("1/1 10/10 100/100 0/0"), std::string::npos) << table;

  // docs/behaviour.md §12.7: the A10G queue, its check Active.
  Json queue;
  ASSERT_TRUE(WaitFor([&] {
    auto q = client_->Get(kClusterQueues, "", kA10g);
    if (!q) return false;
    queue = *q;
    return queue["spec"].contains("admissionChecksStrategy");
  })) << queue.dump();
  EXPECT_EQ(queue["spec"]["resourceGroups"][0]["coveredResources"][0],
            "credits.gpustack.ai/nvidia");
  EXPECT_EQ(queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"],
            "1600k");
  EXPECT_EQ(queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"],
            "gpustack-node-devices");
  EXPECT_EQ(queue["spec"]["stopPolicy"], "None");
  EXPECT_FALSE(queue["spec"].contains("cohortName"));
  auto check = client_->Get(kAdmissionChecks, "", "gpustack-node-devices");
  ASSERT_TRUE(check) << check.error();
  EXPECT_EQ((*check)["spec"]["controllerName"], "worker.gpustack.ai/node-devices");
  EXPECT_NE((*check)["status"].dump().find("\"Active\""), std::string::npos) << check->dump();

  // docs/behaviour.md §12.5: the worker's labels on node-a10g; the kwok nodes the testbed made are
  // not managed.
  const Json node = *client_->Get(resources::Nodes(), "", "node-a10g");
  EXPECT_EQ(node["metadata"]["labels"]["general.feature.gpustack.ai/amd-epyc-7r32.count"], "4");
  EXPECT_EQ(node["metadata"]["labels"]["shared-free-cards.fit.gpustack.ai/nvidia-a10g"], "1");

  // docs/behaviour.md §5.1 / docs/behaviour.md §12.20: an entrance per queue in every namespace
  // that is not the system's.
  const std::string ns = testing::CreateNamespace(*client_, "entrances");
  std::set<std::string> entrances;
  EXPECT_TRUE(WaitFor([&] {
    entrances.clear();
    auto list = client_->List(kLocalQueues, ns);
    if (!list) return false;
    for (const Json& q : list->items) entrances.insert(q["metadata"]["name"].get<std::string>());
    return entrances == std::set<std::string>{"gpustack-fnv64-3b93966fd73eb9ec",
                                              "gpustack-fnv64-c4680bb149644f1c",
                                              "gpustack-fnv64-6b371caa2da0b799"};
  })) << entrances.size();
  auto system_queues = client_->List(kLocalQueues, kSystem);
  ASSERT_TRUE(system_queues);
  EXPECT_TRUE(system_queues->items.empty());
}

TEST_F(OperatorE2e, ASteadyClusterMakesNoWrites) {
  ASSERT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the last pass's writes come back
  const int64_t writes = worker_->Counter("gpustack_worker_writes_total");
  const int64_t passes = worker_->Counter("gpustack_worker_passes_total");
  const auto before = SpecVersions();
  // Something the worker watches changes, but nothing it derives: a pass, and no write.
  Kubectl("label node node-cpu gpustack-e2e/touched=" + std::to_string(time(nullptr)) +
          " --overwrite");
  ASSERT_TRUE(WaitFor([&] { return worker_->Counter("gpustack_worker_passes_total") > passes; }));
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(worker_->Counter("gpustack_worker_writes_total"), writes) << worker_->Metrics();
  EXPECT_EQ(SpecVersions(), before);
}

TEST_F(OperatorE2e, DevicesChangesMoveTheViews) {
  const FleetNode a10g = ClusterA()[1];
  ledger::Request slice;
  slice.manufacturer = "nvidia";
  slice.base = "nvidia.com/gpu";
  slice.mode = ledger::Mode::kSliced;
  slice.memory_percentage = 20;
  slice.units = 320000;
  auto publish = [&](const Json& status) {
    Json object = DevicesObject(a10g);
    object.erase("spec");
    object["status"] = status;
    auto done = client_->Apply(resources::Devices(), object, {"operator-e2e", true}, "status");
    ASSERT_TRUE(done) << done.error();
  };
  // A 20 % slice charged (docs/behaviour.md §12.9), then released.
  // The node's fit labels (docs/behaviour.md §3.7) follow its ledger too: a node the worker had
  // found needing nothing is looked at again when its Devices object changes.
  auto fit = [&](const std::string& want) {
    return WaitFor([&] {
      const Json node = *client_->Get(resources::Nodes(), "", "node-a10g");
      return node["metadata"]["labels"].value("shared-free-cards.fit.gpustack.ai/nvidia-a10g",
                                              "") == want;
    });
  };
  publish(StatusWith(a10g.name, a10g.spec, &slice));
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 0/0 0/0 80/80 0/0 0/0 Active"));
  EXPECT_TRUE(fit("0"));
  publish(StatusWith(a10g.name, a10g.spec, nullptr));
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_TRUE(fit("1"));

  // A card goes unhealthy on node-t4-b: the T4 pool loses it.
  FleetNode t4b = ClusterA()[3];
  t4b.spec["groups"][0]["accelerators"][3]["status"]["unhealthy"] = true;
  ASSERT_TRUE(client_->Apply(resources::Devices(), DevicesObject(t4b), {"operator-e2e", true}));
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 3/4 10/40 100/400 0/0 0/0 Active"));
  ASSERT_TRUE(
      client_->Apply(resources::Devices(), DevicesObject(ClusterA()[3]), {"operator-e2e", true}));
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
}

TEST_F(OperatorE2e, UnmanagingANodeEmptiesItsPoolAndBack) {
  // docs/behaviour.md §12.8.
  Kubectl("label node node-a10g gpustack.ai/managed=false --overwrite");
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 0/0 0/0 0/0 0/0 0/0 Inactive"));
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/68 Active"));
  EXPECT_TRUE(
      WaitFor([&] { return Names(kFlavors, "resource.gpustack.ai/type=nodes").size() == 5; }));
  Json queue;
  EXPECT_TRUE(WaitFor([&] {
    queue = *client_->Get(kClusterQueues, "", kA10g);
    return queue["spec"].value("stopPolicy", "") != "None" &&
           queue["spec"].value("resourceGroups", Json::array()).empty();
  })) << queue.dump();
  Kubectl("label node node-a10g gpustack.ai/managed=true --overwrite");
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/72 Active"));
}

TEST_F(OperatorE2e, ADeletedQueueIsRecreatedAndInactiveHoldsIt) {
  auto before = client_->Get(kClusterQueues, "", kT4);
  ASSERT_TRUE(before);
  Kubectl(std::string("delete clusterqueue ") + kT4 + " --wait=false");
  EXPECT_TRUE(WaitFor([&] {
    auto q = client_->Get(kClusterQueues, "", kT4);
    return q && (*q)["metadata"]["uid"] != (*before)["metadata"]["uid"] &&
           !(*q)["metadata"].contains("deletionTimestamp");
  })) << worker_->Log().substr(0, 20000);
  Kubectl(std::string("patch instancetype ") + kT4 +
          " --type merge -p '{\"spec\":{\"inactive\":true}}'");
  EXPECT_TRUE(WaitFor([&] {
    auto q = client_->Get(kClusterQueues, "", kT4);
    return q && (*q)["spec"].value("stopPolicy", "") == "Hold";
  }));
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Inactive"));
  Kubectl(std::string("patch instancetype ") + kT4 +
          " --type merge -p '{\"spec\":{\"inactive\":false}}'");
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
}

TEST_F(OperatorE2e, AQueueStoppedBySomeoneElseMakesItsTypeInactive) {
  ASSERT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  // The row and the queue are written in one phase: a queue still held by the previous test's
  // inactive=true, its start not landed yet, would take our Hold for the worker's own.
  ASSERT_TRUE(WaitFor([&] {
    return (*client_->Get(kClusterQueues, "", kT4))["spec"].value("stopPolicy", "") == "None";
  }));
  // docs/behaviour.md §5.1: stopped by any means back-fills inactive=true (sticky); the queue stays
  // held.
  Kubectl(std::string("patch clusterqueue ") + kT4 +
          " --type merge -p '{\"spec\":{\"stopPolicy\":\"Hold\"}}'");
  EXPECT_TRUE(WaitFor([&] {
    return (*client_->Get(resources::InstanceTypes(), "", kT4))["spec"].value("inactive", false);
  })) << worker_->Log().substr(0, 20000);
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Inactive"));
  EXPECT_EQ((*client_->Get(kClusterQueues, "", kT4))["spec"]["stopPolicy"], "Hold");
  // Made active again through the InstanceType, the queue starts.
  Kubectl(std::string("patch instancetype ") + kT4 +
          " --type merge -p '{\"spec\":{\"inactive\":false}}'");
  EXPECT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  // The status and the queue are written in the same phase: either may land first.
  EXPECT_TRUE(WaitFor([&] {
    return (*client_->Get(kClusterQueues, "", kT4))["spec"].value("stopPolicy", "") == "None";
  }));
}

TEST_F(OperatorE2e, KueueAdmitsPodsThroughTheEntrances) {
  const std::string ns = testing::CreateNamespace(*client_, "admit");
  ASSERT_TRUE(testing::WaitForDefaultServiceAccount(*client_, ns));
  ASSERT_TRUE(WaitFor([&] {
    return client_->Get(kLocalQueues, ns, op::EntranceName(kA10g)).ok() &&
           client_->Get(kLocalQueues, ns, op::EntranceName(kGeneric)).ok();
  }));
  auto pod = [&](const std::string& name, const std::string& queue, const Json& limits) {
    Json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", ns},
                {"labels", {{"kueue.x-k8s.io/queue-name", op::EntranceName(queue)}}}}},
              {"spec",
               {{"containers",
                 Json::array({{{"name", "main"},
                               {"image", "busybox"},
                               {"resources", {{"limits", limits}, {"requests", limits}}}}})}}}};
    auto created = client_->Create(resources::Pods(), p);
    EXPECT_TRUE(created) << created.error();
  };
  // A CPU Pod: admitted by the generic queue, placed on a managed node (the flavor's node labels
  // and toleration), run by kwok.
  pod("cpu", kGeneric, {{"cpu", "2"}});
  Json cpu;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto got = client_->Get(resources::Pods(), ns, "cpu");
        if (got) cpu = *got;
        return got && (*got)["status"].value("phase", "") == "Running";
      },
      std::chrono::seconds(60)))
      << cpu.dump();
  // Its 2 cores come off the CPU pool's remaining while it runs.
  EXPECT_TRUE(WaitFor([&] {
    auto type = client_->Get(resources::InstanceTypes(), "", kGeneric);
    return type && (*type)["status"]["cpu"]["remaining"] == 70;
  })) << client_->Get(resources::InstanceTypes(), "", kGeneric)->dump();
  const std::string node = cpu["spec"].value("nodeName", "");
  EXPECT_TRUE(node == "node-cpu" || node == "node-a10g" || node == "node-t4-a" ||
              node == "node-t4-b")
      << node;
  // A whole-card Pod: its nvidia.com/gpu folds into 1,600,000 credits of the A10G queue, which
  // reserves quota and waits on gpustack-node-devices (its controller comes with part 2).
  pod("gpu", kA10g, {{"nvidia.com/gpu", "1"}});
  Json workload;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto list = client_->List(kWorkloads, ns);
        if (!list) return false;
        for (const Json& w : list->items) {
          if (w["metadata"].value("ownerReferences", Json::array()).dump().find("\"gpu\"") ==
              std::string::npos)
            continue;
          workload = w;
          const Json admission =
              w.value("status", Json::object()).value("admission", Json::object());
          // Kueue writes the reservation, then the checks it waits on.
          return admission.value("clusterQueue", "") == kA10g &&
                 w["status"]
                         .value("admissionChecks", Json::array())
                         .dump()
                         .find("gpustack-node-devices") != std::string::npos;
        }
        return false;
      },
      std::chrono::seconds(60)))
      << workload.dump();
  EXPECT_NE(workload.dump().find("gpustack-node-devices"), std::string::npos) << workload.dump();
  EXPECT_NE(workload["status"]["admission"].dump().find("1600k"), std::string::npos)
      << workload["status"]["admission"].dump();
  // The card's quota is given back for the tests that follow (and a second run).
  static_cast<void>(client_->Delete(resources::Namespaces(), "", ns));
}

TEST_F(OperatorE2e, NodesJoiningAndLeavingMoveCapacityAndCountingKeys) {
  // Cluster B's mixed node (docs/behaviour.md §12.16: GPUs 0-2 in MIG mode) and a node with two
  // vendors.
  const FleetNode h100{"node-h100", "Intel", "Intel(R) Xeon(R) Platinum 8480+", 224,
                       Expected("nvidia-h100x8-mig-mixed")};
  const FleetNode mixed{"node-mixed", "AMD", "AMD EPYC 7763 64-Core Processor", 128,
                        Expected("mixed-nvidia-amd")};
  for (const FleetNode& n : {h100, mixed}) {
    ASSERT_TRUE(client_->Apply(resources::Nodes(), NodeObject(n), {"operator-e2e", true}));
    ASSERT_TRUE(
        client_->Apply(resources::Nodes(), NodeObject(n), {"operator-e2e", true}, "status"));
    ASSERT_TRUE(client_->Apply(resources::Devices(), DevicesObject(n), {"operator-e2e", true}));
  }
  const std::string h100_pool = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";
  EXPECT_TRUE(RowBecomes(
      h100_pool,
      "gpustack-fnv64-e4768a65ca0ce96b 12/192Gi/100Gi 5/5 10/50 100/500 1/21 0/0 Active"));
  EXPECT_TRUE(RowBecomes(
      "gpustack--nvidia-l40s-linux-amd64",
      "gpustack-fnv64-a730f1dca9e26fca 12/128Gi/100Gi 2/2 10/20 100/200 0/0 0/0 Active"));
  EXPECT_TRUE(RowBecomes("gpustack--amd-radeon-rx-7800-xt-linux-amd64",
                         op::EntranceName("gpustack--amd-radeon-rx-7800-xt-linux-amd64") +
                             " 4/16Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 224/424 Active"));
  // docs/behaviour.md §3.6 / docs/behaviour.md §12.16: the counting keys the scheduler fits on, on
  // the Node.
  const std::map<std::string, std::string> keys = {
      {"nvidia.com/gpu.sliced.units", "8M"},
      {"nvidia.com/gpu.sliced.cores-percentage", "64k"},
      {"nvidia.com/gpu.sliced.memory-percentage", "500"},
      {"nvidia.com/gpu.sliced.memory-mib", "409600"},
      {"nvidia.com/gpu.partitioned.units", "4800k"},
      {"nvidia.com/gpu.partitioned.mig-1g.10gb", "21"},
      {"nvidia.com/gpu.partitioned.mig-3g.40gb", "6"},
      {"nvidia.com/gpu.partitioned.mig-7g.80gb", "3"}};
  Json capacity;
  EXPECT_TRUE(WaitFor([&] {
    capacity = (*client_->Get(resources::Nodes(), "", "node-h100"))["status"]["capacity"];
    for (const auto& [k, v] : keys)
      if (capacity.value(k, "") != v) return false;
    return true;
  })) << capacity.dump();
  // The mixed node carries both vendors' keys.
  EXPECT_TRUE(WaitFor([&] {
    capacity = (*client_->Get(resources::Nodes(), "", "node-mixed"))["status"]["capacity"];
    return capacity.value("amd.com/gpu.sliced.units", "") == "1600k" &&
           capacity.value("nvidia.com/gpu.sliced.units", "") == "3200k";
  })) << capacity.dump();

  // Leaving: the pools empty and their queues hold; the CPU pool shrinks back.
  Kubectl("delete node node-h100 node-mixed");
  Kubectl("delete devices node-h100 node-mixed");
  EXPECT_TRUE(RowBecomes(
      h100_pool, "gpustack-fnv64-e4768a65ca0ce96b 12/192Gi/100Gi 0/0 0/0 0/0 0/0 0/0 Inactive"));
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/72 Active"));
}

TEST_F(OperatorE2e, ACustomInstanceTypeGetsAQueueAndDrainsWhenDeleted) {
  // docs/behaviour.md §12.10: an admin's type beside the derived A10G one.
  const std::string name = "a10g-12c128g";
  auto made = client_->Create(resources::InstanceTypes(), Json::parse(R"({
    "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
    "metadata": {"name": "a10g-12c128g"},
    "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-a10g", "os": "linux",
             "arch": "amd64", "unitResources": {"cpu": "12", "ram": "128Gi"},
             "localStorage": "200Gi"}})"));
  ASSERT_TRUE(made) << made.error();
  EXPECT_TRUE(RowBecomes(
      name, op::EntranceName(name) + " 12/128Gi/200Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  // The finalizer is written in the same pass as the row, by another write.
  EXPECT_TRUE(WaitFor([&] {
    Json type = *client_->Get(resources::InstanceTypes(), "", name);
    return type["metadata"]
               .value("finalizers", Json::array())
               .dump()
               .find("gpustack.ai/controlled") != std::string::npos;
  }));
  EXPECT_TRUE(WaitFor([&] { return client_->Get(kClusterQueues, "", name).ok(); }));
  // Deleting it drains and removes its queue first, then the type itself goes.
  Kubectl("delete instancetype " + name + " --wait=false");
  EXPECT_TRUE(WaitFor([&] {
    return !client_->Get(kClusterQueues, "", name).ok() &&
           !client_->Get(resources::InstanceTypes(), "", name).ok();
  })) << worker_->Log().substr(0, 20000);
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
}

TEST_F(OperatorE2e, SettingsAreReadOnline) {
  // docs/behaviour.md §12.11: flipping instance-type-aware-cpu-manufacturer in the settings Secret
  // regroups the pools without a restart; the flavors stay, the old types stay.
  auto patch = [&](const std::string& value) {
    return client_->Patch(kSecrets, kSystem, "gpustack-settings", PatchType::kMerge,
                          {{"stringData", {{"instance-type-aware-cpu-manufacturer", value}}}});
  };
  // Put back even when an assertion below ends the test, or the pools of every later test would
  // carry the CPU manufacturer in their names.
  struct Restore {
    std::function<void()> run;
    ~Restore() { run(); }
  } restore{[&] { (void)patch("false"); }};
  ASSERT_TRUE(patch("true"));
  EXPECT_TRUE(
      RowBecomes("gpustack--intel-xeon-platinum-8259cl-linux-amd64",
                 "gpustack-fnv64-c6aee2b7b5c4dc6b 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/52 Active"));
  EXPECT_TRUE(
      RowBecomes("gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64",
                 "gpustack-fnv64-029fd9550e0c70bd 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_TRUE(
      RowBecomes("gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64",
                 "gpustack-fnv64-5b59e508edc027b7 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  EXPECT_TRUE(RowBecomes(
      kA10g, "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active"));
  EXPECT_EQ(Names(kFlavors, "resource.gpustack.ai/type=nodes").size(), 7u);
  // A type's status and its queue are written in the same phase of a pass, side by side: the row
  // can land first.
  std::optional<Json> queue;
  EXPECT_TRUE(WaitFor([&] {
    auto got = client_->Get(kClusterQueues, "", "gpustack--intel-xeon-platinum-8259cl-linux-amd64");
    if (got) queue = *got;
    return got.ok();
  }));
  ASSERT_TRUE(queue);
  EXPECT_EQ((*queue)["metadata"]["labels"].value(
                "general.feature.gpustack.ai/intel-xeon-platinum-8259cl", ""),
            "true");
  // A value that is no boolean is reported and ignored, not taken.
  ASSERT_TRUE(client_->Patch(kSecrets, kSystem, "gpustack-settings", PatchType::kMerge,
                             {{"stringData", {{"instance-type-mixed-on-node", "sometimes"}}}}));
  EXPECT_TRUE(WaitFor([&] {
    return worker_->Log().find(
               "setting instance-type-mixed-on-node = 'sometimes' is not a boolean") !=
           std::string::npos;
  }));
  ASSERT_TRUE(client_->Patch(kSecrets, kSystem, "gpustack-settings", PatchType::kMerge,
                             {{"stringData", {{"instance-type-mixed-on-node", "true"}}}}));
  ASSERT_TRUE(patch("false"));
  // The aware types are create-only: they stay, and the derived generic pool is as before.
  EXPECT_TRUE(RowBecomes(
      kGeneric, "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/72 Active"));
  for (const char* aware :
       {"gpustack--amd-epyc-7r13-linux-amd64", "gpustack--amd-epyc-7r32-linux-amd64",
        "gpustack--intel-xeon-platinum-8259cl-linux-amd64",
        "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64",
        "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64"}) {
    EXPECT_TRUE(client_->Get(resources::InstanceTypes(), "", aware).ok()) << aware;
  }
}

// ---- Part 2: admission (webhooks, the gpustack-node-devices check) ----

constexpr const char* kH100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64";

FleetNode H100Mixed() {
  return {"node-h100", "Intel", "Intel(R) Xeon(R) Platinum 8480+", 224,
          Expected("nvidia-h100x8-mig-mixed")};
}

Json Container(const std::string& name, const Json& limits) {
  return {{"name", name},
          {"image", "busybox"},
          {"resources", {{"limits", limits}, {"requests", limits}}}};
}

Json QueuedPod(const std::string& ns, const std::string& name, const std::string& type,
               Json containers, Json init = Json::array()) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", ns},
                {"labels", {{"kueue.x-k8s.io/queue-name", op::EntranceName(type)}}}}},
              {"spec", {{"containers", std::move(containers)}}}};
  if (!init.empty()) pod["spec"]["initContainers"] = std::move(init);
  return pod;
}

std::string Annotation(const Json& object, const std::string& key) {
  const Json a = object["metadata"].value("annotations", Json::object());
  return a.value(key, "");
}

// The Workload Kueue made for Pod `name`, and our check's entry in it.
Json WorkloadOf(Client& client, const std::string& ns, const std::string& pod) {
  auto list = client.List(kWorkloads, ns);
  if (!list) return nullptr;
  for (const Json& w : list->items) {
    for (const Json& o : w["metadata"].value("ownerReferences", Json::array()))
      if (o.value("name", "") == pod) return w;
  }
  return nullptr;
}
Json CheckOf(const Json& workload) {
  if (workload.is_null()) return nullptr;
  for (const Json& c :
       workload.value("status", Json::object()).value("admissionChecks", Json::array()))
    if (c.value("name", "") == "gpustack-node-devices") return c;
  return nullptr;
}

// Every admitted Pod of `namespaces` charged, by the cards gate 3 chose for it, on its node's
// ledger: the first charge a card cannot take is an over-commit, returned as the reason.
std::string OverCommit(Client& client, const std::vector<std::string>& namespaces,
                       int* admitted = nullptr, int64_t* credits = nullptr) {
  std::map<std::string, std::unique_ptr<ledger::NodeLedger>> ledgers;
  int count = 0;
  for (const std::string& ns : namespaces) {
    auto pods = client.List(resources::Pods(), ns);
    if (!pods) return "cannot list Pods: " + pods.error();
    for (const Json& pod : pods->items) {
      const std::string text = Annotation(pod, ledger::kChosenAnnotation);
      // A terminating Pod has given its cards back in Kueue's eyes (kwok runs no allocator).
      if (text.empty() || pod["metadata"].contains("deletionTimestamp")) continue;
      auto chosen = ledger::ChosenFromAnnotation(text);
      if (!chosen) return chosen.error();
      const std::string bound = pod["spec"].value("nodeName", "");
      if (!bound.empty() && bound != chosen->node)
        return pod["metadata"]["name"].get<std::string>() + " runs on " +
               pod["spec"].value("nodeName", "") + ", chosen for " + chosen->node;
      auto& ledger = ledgers[chosen->node];
      if (!ledger) {
        auto devices = client.Get(resources::Devices(), "", chosen->node);
        if (!devices) return devices.error();
        ledger = std::make_unique<ledger::NodeLedger>(chosen->node,
                                                      *ledger::SpecFromJson((*devices)["spec"]));
      }
      for (const auto& [container, charges] : chosen->pods.at(0)) {
        if (credits != nullptr)
          for (const ledger::Charge& c : charges) *credits += c.credits;
        Status restored =
            ledger->Restore({{pod["metadata"]["uid"].get<std::string>(), container}, charges});
        if (!restored) return pod["metadata"]["name"].get<std::string>() + ": " + restored.error();
      }
      ++count;
    }
  }
  if (admitted != nullptr) *admitted = count;
  return "";
}

// What the Pod webhook must derive for a partition of `profile` on the pool of `type`
// (docs/behaviour.md §4.1): its memory folded through the card's, as the InstanceType's detail
// publishes them.
std::string PartitionUnits(const Json& type, const std::string& profile) {
  const ledger::FoldContext fold = op::FoldContextOf(&type);
  for (const ledger::PartitionProfile& p : fold.offered_profiles)
    if (p.name == profile)
      return std::to_string(ledger::PartitionUnits(p.memory_mib, fold.card_memory_mib));
  return "no profile " + profile;
}

class AdmissionE2e : public OperatorE2e {
 protected:
  void SetUp() override {
    // The nodes as a kubelet would show them: the counting keys allocatable, the H100 node of
    // cluster B beside cluster A.
    std::vector<FleetNode> nodes = ClusterA();
    nodes.push_back(H100Mixed());
    for (const FleetNode& n : nodes) {
      if (n.name == "node-h100") {
        ASSERT_TRUE(client_->Apply(resources::Nodes(), NodeObject(n), {"operator-e2e", true}));
        ASSERT_TRUE(client_->Apply(resources::Devices(), DevicesObject(n), {"operator-e2e", true}));
      }
      if (!n.spec.is_null()) {
        ASSERT_TRUE(client_->Apply(resources::Nodes(), NodeStatusWithCountingKeys(n),
                                   {"operator-e2e-kubelet", true}, "status"));
      }
    }
    ASSERT_TRUE(WaitFor([&] { return Row(kH100).find(" Active") != std::string::npos; }))
        << Row(kH100);
    ns_ = testing::CreateNamespace(*client_, "admission");
    ASSERT_TRUE(testing::WaitForDefaultServiceAccount(*client_, ns_));
    ASSERT_TRUE(WaitFor([&] {
      for (const char* t : {kA10g, kT4, kH100})
        if (!client_->Get(kLocalQueues, ns_, op::EntranceName(t))) return false;
      return true;
    }));
  }
  void TearDown() override {
    Kubectl("delete namespace " + ns_ + " --wait=false");
    // Kueue gives the quota back once the Pods are gone.
    EXPECT_TRUE(WaitFor(
        [&] {
          auto pods = client_->List(resources::Pods(), ns_);
          return pods && pods->items.empty();
        },
        std::chrono::seconds(60)));
  }

  Result<Json> Create(const std::string& name, const std::string& type, Json containers,
                      Json init = Json::array()) {
    return client_->Create(resources::Pods(),
                           QueuedPod(ns_, name, type, std::move(containers), std::move(init)));
  }
  // The Pod once the check let it through: pinned to a node, with the cards it was counted on.
  ::testing::AssertionResult Admitted(const std::string& name, Json* out = nullptr) {
    Json pod;
    const bool ok = WaitFor(
        [&] {
          auto got = client_->Get(resources::Pods(), ns_, name);
          if (!got) return false;
          pod = *got;
          return !pod["spec"].value("nodeName", "").empty() &&
                 !Annotation(pod, ledger::kChosenAnnotation).empty();
        },
        std::chrono::seconds(60));
    if (out != nullptr) *out = pod;
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << name << " not admitted: " << CheckOf(WorkloadOf(*client_, ns_, name)).dump() << "\n"
           << pod.dump();
  }
  // The check's Retry message for Pod `name`: Kueue resets the check to Pending when it evicts,
  // so the message lives on as a Warning Event on the Pod.
  std::string RetryMessage(const std::string& name) {
    std::string message;
    WaitFor(
        [&] {
          auto events = client_->List(
              resources::Events(), ns_,
              {.field_selector = "involvedObject.name=" + name + ",reason=NoCardFits"});
          if (!events || events->items.empty()) return false;
          message = events->items.back().value("message", "");
          return true;
        },
        std::chrono::seconds(60));
    return message;
  }
  std::string ns_;
};

TEST_F(AdmissionE2e, PodRulesAnswerThroughTheApiserverWithTheReferenceMessages) {
  const std::vector<ledger::ResourceKind> kinds = {kKinds.at("nvidia"), kKinds.at("amd")};
  struct Case {
    std::string name;
    Json containers, init;
    std::string gist;  // the upstream operator's wording (docs/behaviour.md §4.3)
  };
  const std::vector<Case> refused = {
      {"rule1-families",
       {Container("a", {{"nvidia.com/gpu", "1"}}),
        Container("b", {{"nvidia.com/gpu.sliced", "1"},
                        {"nvidia.com/gpu.sliced.memory-percentage", "20"}})},
       Json::array(),
       "a Pod may request only one accelerator family, found [exclusive sliced]"},
      {"rule1-groups",
       {Container("main", {{"nvidia.com/gpu", "1"}})},
       {Container("warmup", {{"nvidia.com/gpu", "1"}})},
       "must sit in one container group"},
      {"rule2-two",
       {Container("main", {{"nvidia.com/gpu.sliced", "2"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "20"}})},
       Json::array(),
       "a logical slice request is always a single accelerator"},
      {"rule2-budget",
       {Container("main", {{"nvidia.com/gpu.sliced", "1"}})},
       Json::array(),
       "must set nvidia.com/gpu.sliced.memory-percentage or nvidia.com/gpu.sliced.memory-mib"},
      {"rule2-both",
       {Container("main", {{"nvidia.com/gpu.sliced", "1"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "20"},
                           {"nvidia.com/gpu.sliced.memory-mib", "2000"}})},
       Json::array(),
       "cannot set both"},
      {"rule3-two",
       {Container("main", {{"nvidia.com/gpu.partitioned", "2"},
                           {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"}})},
       Json::array(),
       "a partition request is always a single accelerator; request one Pod per instance"},
      {"rule3-bare",
       {Container("main", {{"nvidia.com/gpu.partitioned", "1"}})},
       Json::array(),
       "a nvidia.com/gpu.partitioned request must name a profile"},
      {"rule4",
       {Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                           {"nvidia.com/gpu.partitioned.mig-1g.10gb", "1"},
                           {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})},
       Json::array(),
       "a Pod may request only one partition profile, found [1g.10gb 3g.40gb]"},
      {"rule5",
       {Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                           {"nvidia.com/gpu.partitioned.mig-3g.40gb", "2"}})},
       Json::array(),
       "a partition profile request must be exactly 1 instance"},
      {"rule6",
       {Container("main", {{"nvidia.com/gpu.sliced", "1"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "20"}}),
        Container("side", {{"nvidia.com/gpu.sliced", "1"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "20"}})},
       Json::array(),
       "at most one container may request a slicing family, found 2"},
      {"rule7",
       {Container("main", {{"cpu", "100m"}})},
       {{{"name", "sidecar"},
         {"image", "busybox"},
         {"restartPolicy", "Always"},
         {"resources",
          {{"limits", {{"nvidia.com/gpu", "1"}}}, {"requests", {{"nvidia.com/gpu", "1"}}}}}}},
       "a restartable init container (a native sidecar) may not request an accelerator"},
  };
  auto h100 = client_->Get(resources::InstanceTypes(), "", kH100);
  ASSERT_TRUE(h100);
  for (const Case& c : refused) {
    auto created = Create(c.name, kH100, c.containers, c.init);
    ASSERT_FALSE(created) << c.name << " was created";
    ASSERT_NE(created.error().find("pods.mutate.gpustack.ai"), std::string::npos)
        << created.error();
    // The exact message is the rules' (the pure function the unit tests pin), carried intact.
    const Json pod = QueuedPod(ns_, c.name, kH100, c.containers, c.init);
    auto expected = ledger::ParsePodRequests(pod, kinds, op::FoldContextOf(&*h100));
    ASSERT_FALSE(expected) << c.name;
    EXPECT_NE(created.error().find("admission webhook \"pods.mutate.gpustack.ai\" denied the "
                                   "request: " +
                                   expected.error()),
              std::string::npos)
        << c.name << ": " << created.error();
    EXPECT_NE(expected.error().find(c.gist), std::string::npos) << expected.error();
  }
  // Accepted shapes, with what the webhook derived, through the server's dry run.
  struct Accepted {
    std::string name, type;
    Json containers, init;
    std::map<std::string, std::string> derived;  // container key -> value
  };
  const std::vector<Accepted> accepted = {
      {"two-apps",
       kT4,
       {Container("a", {{"nvidia.com/gpu", "1"}}), Container("b", {{"nvidia.com/gpu", "1"}})},
       Json::array(),
       {}},
      {"slice",
       kA10g,
       {Container("main", {{"nvidia.com/gpu.sliced", "1"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "20"}})},
       Json::array(),
       {{"nvidia.com/gpu.sliced.units", "320000"},
        {"nvidia.com/gpu.sliced.cores-percentage", "100"}}},
      {"partition",
       kH100,
       {Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                           {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})},
       Json::array(),
       {{"nvidia.com/gpu.partitioned.units", PartitionUnits(*h100, "3g.40gb")}}},
      {"sidecar-cpu",
       kA10g,
       {Container("main", {{"nvidia.com/gpu", "1"}})},
       {{{"name", "sidecar"},
         {"image", "busybox"},
         {"restartPolicy", "Always"},
         {"resources", {{"limits", {{"cpu", "100m"}}}}}}},
       {}},
      {"slice-and-ssh",
       kA10g,
       {Container("main", {{"nvidia.com/gpu.sliced", "1"},
                           {"nvidia.com/gpu.sliced.memory-percentage", "50"}}),
        Container("sshd", {{"device.gpustack.ai/nvidia.visibility", "1"}})},
       Json::array(),
       {{"nvidia.com/gpu.sliced.units", "800000"}}},
  };
  for (const Accepted& a : accepted) {
    const std::string file = std::string(GPUSTACK_E2E_DIR) + "/" + a.name + ".json";
    std::ofstream(file) << QueuedPod(ns_, a.name, a.type, a.containers, a.init).dump();
    int status = 0;
    const std::string out = Kubectl("create --dry-run=server -o json -f " + file, &status);
    ASSERT_EQ(status, 0) << a.name << ": " << out;
    const Json pod = Json::parse(out.substr(out.find('{')));
    for (const auto& [key, value] : a.derived) {
      const Json got = pod["spec"]["containers"][0]["resources"]["limits"].value(key, Json());
      EXPECT_EQ(kube::MilliOf(got), kube::MilliOf(Json(value)))
          << a.name << " " << key << ": " << got;
    }
  }
}

TEST_F(AdmissionE2e, InstanceTypeWebhooksDefaultValidateAndKeepTheShape) {
  Json type = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
               {"kind", "InstanceType"},
               {"metadata", {{"name", "e2e-cpu-2c"}}},
               {"spec",
                {{"acceleratable", false},
                 {"os", "linux"},
                 {"arch", "amd64"},
                 {"unitResources", {{"cpu", "2"}, {"ram", "4Gi"}}},
                 {"localStorage", "10Gi"}}}};
  // docs/behaviour.md §5.4's shape rules: the CRD's own rules answer first (the validating webhook
  // holds the same ones for a server without them).
  auto refused = client_->Create(resources::InstanceTypes(), type);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("a CPU-only InstanceType has a unit of exactly 1 CPU"),
            std::string::npos)
      << refused.error();
  type["spec"]["unitResources"]["cpu"] = "1";
  auto created = client_->Create(resources::InstanceTypes(), type);
  ASSERT_TRUE(created) << created.error();
  // The defaulting webhook stamped the schedule labels at creation (docs/behaviour.md §5.4).
  EXPECT_EQ((*created)["spec"]["generalGroup"], "generic");
  EXPECT_EQ((*created)["metadata"]["labels"][op::kEntranceLabel], op::EntranceName("e2e-cpu-2c"));
  EXPECT_EQ((*created)["metadata"]["labels"]["feature.gpustack.ai/acceleratable"], "false");
  EXPECT_EQ((*created)["metadata"]["labels"]["kubernetes.io/os"], "linux");
  auto changed = client_->Patch(resources::InstanceTypes(), "", "e2e-cpu-2c", PatchType::kMerge,
                                {{"spec", {{"localStorage", "20Gi"}}}});
  ASSERT_FALSE(changed);
  EXPECT_NE(changed.error().find("only displayName and inactive may change"), std::string::npos)
      << changed.error();
  EXPECT_TRUE(client_->Patch(resources::InstanceTypes(), "", "e2e-cpu-2c", PatchType::kMerge,
                             {{"spec", {{"displayName", "two cores"}}}}));
  EXPECT_TRUE(client_->Delete(resources::InstanceTypes(), "", "e2e-cpu-2c"));
  EXPECT_TRUE(WaitFor([&] { return !client_->Get(resources::InstanceTypes(), "", "e2e-cpu-2c"); }));

  // A group no node has yet: created, and kubectl shows the validating webhook's warning.
  const std::string file = std::string(GPUSTACK_E2E_DIR) + "/a100.json";
  std::ofstream(file) << Json::parse(R"({
    "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
    "metadata": {"name": "e2e-a100"},
    "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-a100", "os": "linux",
             "arch": "amd64", "unitResources": {"cpu": "8", "ram": "64Gi"},
             "localStorage": "100Gi"}})")
                             .dump();
  int status = 1;
  const std::string out = Kubectl("create -f " + file + " 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("Warning: no managed node has nvidia-a100 cards yet"), std::string::npos)
      << out;
  Kubectl("delete instancetype e2e-a100 --wait=false");
}

TEST_F(AdmissionE2e, InstanceWebhooksDefaultAndRefuseAtAdmission) {
  auto instance = [&](const std::string& name, const std::string& type, const Json& resources) {
    return Json{{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                {"kind", "Instance"},
                {"metadata", {{"name", name}, {"namespace", ns_}}},
                {"spec",
                 {{"type", type},
                  {"image", "busybox"},
                  {"volume", {{"ephemeral", {{"capacity", "1Gi"}}}}},
                  {"resources", resources}}}};
  };
  // docs/behaviour.md §12.9's sliced Instance: the unit (8 CPU / 64Gi) scaled by the 20 % it takes.
  auto made =
      client_->Create(resources::Instances(),
                      instance("sliced", kA10g, {{"acceleratorSlicedMemoryPercentage", 20}}));
  ASSERT_TRUE(made) << made.error();
  const Json& r = (*made)["spec"]["resources"];
  EXPECT_EQ(r.value("accelerator", Json()), 1) << r.dump();
  EXPECT_EQ(r.value("acceleratorSlicedCoresPercentage", Json()), 100) << r.dump();
  EXPECT_EQ(r.value("cpu", Json()), "1600m") << r.dump();
  EXPECT_EQ(r.value("ram", Json()), "13108Mi") << r.dump();
  // A running Instance's template cannot change.
  auto changed = client_->Patch(resources::Instances(), ns_, "sliced", PatchType::kMerge,
                                {{"spec", {{"image", "alpine"}}}});
  ASSERT_FALSE(changed);
  EXPECT_NE(changed.error().find("spec.image: Forbidden: stop the Instance first"),
            std::string::npos)
      << changed.error();
  // Refused at admission, never left Pending (docs/behaviour.md §4.4).
  struct Refused {
    std::string type;
    Json resources;
    std::string message;
  };
  const std::vector<Refused> refused = {
      {kH100,
       {{"accelerator", 1}, {"acceleratorPartitionedProfile", "5g.50gb"}},
       "Unsupported value: \"5g.50gb\": InstanceType " + std::string(kH100) +
           " offers [1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb]"},
      {kH100,
       {{"accelerator", 1},
        {"acceleratorPartitionedProfile", "3g.40gb"},
        {"acceleratorSlicedMemoryPercentage", 20}},
       "a hardware partition and a logical slice percentage are mutually exclusive"},
      {kA10g,
       {{"accelerator", 2}},
       "InstanceType " + std::string(kA10g) + " has 1 whole card(s) in all"},
      {kGeneric, {{"accelerator", 1}}, "is CPU-only"},
      {"no-such-type", Json::object(), "spec.type: Not found: \"no-such-type\""},
  };
  int i = 0;
  for (const Refused& c : refused) {
    auto got = client_->Create(resources::Instances(),
                               instance("refused-" + std::to_string(i++), c.type, c.resources));
    ASSERT_FALSE(got) << c.message;
    EXPECT_NE(got.error().find("instances.validate.gpustack.ai"), std::string::npos) << got.error();
    EXPECT_NE(got.error().find(c.message), std::string::npos) << got.error();
  }
}

TEST_F(AdmissionE2e, GateThreeCountsTheCardsKueueCannotSee) {
  auto slice = [](int percent) {
    return Json::array({Container(
        "main", {{"nvidia.com/gpu.sliced", "1"},
                 {"nvidia.com/gpu.sliced.memory-percentage", std::to_string(percent)}})});
  };
  // Cards are named per node (the fixture nodes share UUIDs): node and card.
  auto card = [](const Json& pod) {
    auto chosen = ledger::ChosenFromAnnotation(Annotation(pod, ledger::kChosenAnnotation));
    return chosen->node + "/" + chosen->pods.at(0).at("main").at(0).accelerator_id;
  };
  // Two 30 % slices share a card; 60 % slices do not (T4 pool: 1 card on node-t4-a, 4 on
  // node-t4-b; best fit packs the fullest node first).
  Json a, b;
  ASSERT_TRUE(Create("s30-a", kT4, slice(30)));
  ASSERT_TRUE(Admitted("s30-a", &a));
  ASSERT_TRUE(Create("s30-b", kT4, slice(30)));
  ASSERT_TRUE(Admitted("s30-b", &b));
  EXPECT_EQ(card(a), card(b));
  std::set<std::string> sixty;
  Json last;
  for (const char* name : {"s60-a", "s60-b", "s60-c"}) {
    ASSERT_TRUE(Create(name, kT4, slice(60)));
    ASSERT_TRUE(Admitted(name, &last));
    EXPECT_TRUE(sixty.insert(card(last)).second) << name << " shares " << card(last);
    EXPECT_NE(card(last), card(a));
  }
  // The Pod is pinned where its cards are, and kwok runs it there.
  EXPECT_EQ(last["spec"]["nodeSelector"]["kubernetes.io/hostname"], "node-t4-b");
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");

  // Kueue's credits for node-t4-b's flavor (4 cards, 2.88 used) let two whole cards through; the
  // cards are not there (one is free): Retry, naming the pod set.
  ASSERT_TRUE(
      Create("two-cards", kT4, Json::array({Container("main", {{"nvidia.com/gpu", "2"}})})));
  const std::string message = RetryMessage("two-cards");
  EXPECT_EQ(message.rfind("pod set main (2 whole nvidia.com/gpu, its Pod on one node) fits on no "
                          "node of its flavor",
                          0),
            0u)
      << message;
  EXPECT_EQ(client_->Get(resources::Pods(), ns_, "two-cards")->at("spec").value("nodeName", ""),
            "");
  // A 60 % slice goes: its card frees, and a later retry admits the two cards.
  ASSERT_TRUE(client_->Delete(resources::Pods(), ns_, "s60-c"));
  Json two;
  ASSERT_TRUE(Admitted("two-cards", &two));
  EXPECT_EQ(two["spec"]["nodeSelector"]["kubernetes.io/hostname"], "node-t4-b");
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");

  // Each shape is admitted: shared slots and a whole card on the A10G node, then (its card taken)
  // a slice there waits.
  ASSERT_TRUE(
      Create("shared", kA10g, Json::array({Container("main", {{"nvidia.com/gpu.shared", "3"}})})));
  Json shared;
  ASSERT_TRUE(Admitted("shared", &shared));
  EXPECT_EQ(shared["spec"]["nodeSelector"]["kubernetes.io/hostname"], "node-a10g");
  // Pinned by gate 3, it carries no fit affinity a restarted kubelet would check again against
  // labels that moved (docs/decisions.md D20).
  EXPECT_EQ(shared["spec"].dump().find("fit.gpustack.ai"), std::string::npos)
      << shared["spec"].dump();
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");
}

// docs/decisions.md D20: a Pod the node refused after gate 3 said Ready is replaced and queued
// again, not left Failed. kwok runs no device manager, so the test writes the kubelet's verdict
// itself, as the kubelet writes it (Failed, UnexpectedAdmissionError, no container started).
// The kubelet's verdict on an admitted Pod `name`, written as the kubelet writes it.
::testing::AssertionResult RefuseAtTheNode(kube::Client& client, const std::string& ns,
                                           const std::string& name, const std::string& message) {
  // kwok marks a bound Pod Running; the verdict written before that would be overwritten.
  if (!WaitFor([&] {
        auto got = client.Get(resources::Pods(), ns, name);
        return got && (*got)["status"].value("phase", "") == "Running";
      }))
    return ::testing::AssertionFailure() << name << " never ran";
  auto patched = client.Patch(resources::Pods(), ns, name, kube::PatchType::kMerge,
                              {{"status",
                                {{"phase", "Failed"},
                                 {"reason", "UnexpectedAdmissionError"},
                                 {"message", message},
                                 {"conditions", nullptr},
                                 {"containerStatuses", nullptr}}}},
                              "status");
  if (!patched) return ::testing::AssertionFailure() << patched.error();
  return ::testing::AssertionSuccess();
}

TEST_F(AdmissionE2e, APodTheNodeRefusedIsReplacedAndQueuedAgain) {
  ASSERT_TRUE(
      Create("refused", kT4, Json::array({Container("main", {{"nvidia.com/gpu.shared", "2"}})})));
  Json pod;
  ASSERT_TRUE(Admitted("refused", &pod));
  const std::string node = pod["spec"]["nodeName"];
  const std::string message =
      "Allocate failed due to 2 nvidia.com/gpu.shared slots must be on "
      "one card, the kubelet offered 2 cards";
  ASSERT_TRUE(RefuseAtTheNode(*client_, ns_, "refused", message));
  // The worker says when (an Event on the refused Pod), then replaces it: the same request,
  // admitted afresh (a new Workload, pinned and counted again by gate 3), the failed Pod gone.
  Json replacement;
  ASSERT_TRUE(Admitted("refused-requeued-1", &replacement)) << [] {
    const std::string log = worker_->Log();  // what the requeuer said
    return log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  }();
  EXPECT_EQ(Annotation(replacement, op::kRequeueOfAnnotation), "refused");
  EXPECT_EQ(Annotation(replacement, op::kRequeueAttemptAnnotation), "1");
  EXPECT_EQ(Annotation(replacement, op::kRequeueReasonAnnotation),
            node + ": UnexpectedAdmissionError: " + message);
  EXPECT_EQ(replacement["spec"]["containers"][0]["resources"]["limits"],
            pod["spec"]["containers"][0]["resources"]["limits"]);
  EXPECT_FALSE(WorkloadOf(*client_, ns_, "refused-requeued-1").is_null());
  EXPECT_TRUE(WaitFor([&] {
    auto gone = client_->Get(resources::Pods(), ns_, "refused");
    return !gone && kube::IsNotFound(gone.failure());
  }));
  auto events = client_->List(resources::Events(), ns_,
                              {.field_selector = "involvedObject.name=refused,reason=Requeueing"});
  ASSERT_TRUE(events);
  ASSERT_FALSE(events->items.empty());
  EXPECT_NE(events->items[0].value("message", "").find("refused by node " + node),
            std::string::npos);
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");
}

// A Pod of the replacement's name that does not replace this one (the user's own) is never
// mistaken for it: the refused Pod stays, Failed, and an Event says why.
TEST_F(AdmissionE2e, ARefusedPodIsNotDeletedWhenAnotherPodHoldsTheReplacementsName) {
  ASSERT_TRUE(client_->Create(resources::Pods(),
                              {{"apiVersion", "v1"},
                               {"kind", "Pod"},
                               {"metadata", {{"name", "taken-requeued-1"}, {"namespace", ns_}}},
                               {"spec",  // held unscheduled: deleted at once at the end
                                {{"schedulingGates", {{{"name", "test.gpustack.ai/hold"}}}},
                                 {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}));
  ASSERT_TRUE(
      Create("taken", kT4, Json::array({Container("main", {{"nvidia.com/gpu.shared", "1"}})})));
  ASSERT_TRUE(Admitted("taken"));
  ASSERT_TRUE(RefuseAtTheNode(*client_, ns_, "taken", "Allocate failed"));
  EXPECT_TRUE(WaitFor([&] {
    auto events = client_->List(resources::Events(), ns_,
                                {.field_selector = "involvedObject.name=taken,reason=NotRequeued"});
    return events && !events->items.empty() &&
           events->items[0].value("message", "").find("already exists and does not replace") !=
               std::string::npos;
  }));
  auto kept = client_->Get(resources::Pods(), ns_, "taken");
  ASSERT_TRUE(kept) << "the refused Pod was deleted";
  EXPECT_EQ((*kept)["status"].value("phase", ""), "Failed");
  static_cast<void>(client_->Delete(resources::Pods(), ns_, "taken-requeued-1"));
}

TEST_F(AdmissionE2e, APartitionLandsOnlyWhereAPlacementIsFree) {
  // node-h100's GPUs 0-2 are in MIG mode: 3g.40gb has two placements on each, six in all.
  auto partition =
      Json::array({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                      {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})});
  std::set<std::pair<std::string, uint32_t>> placements;
  for (int i = 0; i < 6; ++i) {
    const std::string name = "mig-" + std::to_string(i);
    ASSERT_TRUE(Create(name, kH100, partition));
    Json pod;
    ASSERT_TRUE(Admitted(name, &pod));
    const ledger::Charge charge =
        ledger::ChosenFromAnnotation(Annotation(pod, ledger::kChosenAnnotation))
            ->pods.at(0)
            .at("main")
            .at(0);
    EXPECT_EQ(charge.profile, "3g.40gb");
    EXPECT_TRUE(placements.insert({charge.accelerator_id, charge.placement.start}).second)
        << charge.accelerator_id << " " << charge.placement.start;
  }
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");
  // A seventh has no placement, though Kueue's credits (8 cards' worth) would let it in.
  ASSERT_TRUE(Create("mig-6", kH100, partition));
  const std::string message = RetryMessage("mig-6");
  EXPECT_NE(message.find("a 3g.40gb partition of nvidia.com/gpu"), std::string::npos) << message;
  ASSERT_TRUE(client_->Delete(resources::Pods(), ns_, "mig-0"));
  ASSERT_TRUE(Admitted("mig-6"));
  EXPECT_EQ(OverCommit(*client_, {ns_}), "");
}

TEST_F(AdmissionE2e, TwoHundredRandomPodsNeverOverCommitACard) {
  std::mt19937 random(20261203);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  auto shape = [&](std::string* type) -> Json {
    switch (pick(5)) {
      case 0:
        *type = std::vector<std::string>{kA10g, kT4, kH100}[pick(3)];
        return Json::array({Container("main", {{"nvidia.com/gpu", std::to_string(1 + pick(2))}})});
      case 1:
        *type = std::vector<std::string>{kA10g, kT4, kH100}[pick(3)];
        return Json::array(
            {Container("main", {{"nvidia.com/gpu.shared", std::to_string(1 + pick(4))}})});
      case 2:
      case 3:
        *type = std::vector<std::string>{kA10g, kT4, kH100}[pick(3)];
        return Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                               {"nvidia.com/gpu.sliced.memory-percentage",
                                                std::to_string(10 * (1 + pick(7)))}})});
      default:
        *type = kH100;
        return Json::array({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                               {std::string("nvidia.com/gpu.partitioned.mig-") +
                                                    (pick(2) == 0 ? "1g.10gb" : "3g.40gb"),
                                                "1"}})});
    }
  };
  std::vector<std::string> live;
  int created = 0, checks = 0, most_admitted = 0;
  int64_t most_credits = 0;
  // node-a10g 1, node-t4-a 1, node-t4-b 4, node-h100 8 cards.
  const int64_t fleet_credits = 14 * ledger::kCardCredits;
  for (int step = 0; step < 20; ++step) {
    for (int i = 0; i < 10; ++i) {
      std::string type;
      Json containers = shape(&type);
      const std::string name = "r" + std::to_string(created++);
      auto made = Create(name, type, containers);
      ASSERT_TRUE(made) << name << ": " << made.error();
      live.push_back(name);
    }
    // Some go away (their cards free up for the ones waiting).
    for (int i = 0; i < 4 && !live.empty(); ++i) {
      const size_t at = static_cast<size_t>(pick(static_cast<int>(live.size())));
      static_cast<void>(client_->Delete(resources::Pods(), ns_, live[at]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
    // The invariant holds at every moment: sampled while Kueue catches up with the step (it
    // makes a Workload per Pod at a few a second on this 2-core machine).
    const auto step_started = std::chrono::steady_clock::now();
    for (bool caught_up = false; !caught_up;) {
      caught_up = std::chrono::steady_clock::now() - step_started > std::chrono::seconds(20);
      if (auto workloads = client_->List(kWorkloads, ns_)) {
        std::set<std::string> owners;
        for (const Json& w : workloads->items)
          for (const Json& o : w["metadata"].value("ownerReferences", Json::array()))
            owners.insert(o.value("name", ""));
        caught_up |= std::all_of(live.begin(), live.end(),
                                 [&](const std::string& p) { return owners.contains(p); });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      int admitted = 0;
      int64_t credits = 0;
      const std::string problem = OverCommit(*client_, {ns_}, &admitted, &credits);
      ASSERT_EQ(problem, "") << "step " << step;
      most_admitted = std::max(most_admitted, admitted);
      most_credits = std::max(most_credits, credits);
      ++checks;
    }
  }
  // Settled: nothing more will be admitted until something leaves.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  int admitted = 0;
  ASSERT_EQ(OverCommit(*client_, {ns_}, &admitted), "");
  int retried = 0;
  if (auto events =
          client_->List(resources::Events(), ns_, {.field_selector = "reason=NoCardFits"})) {
    std::set<std::string> pods;
    for (const Json& e : events->items)
      if (e["involvedObject"].value("kind", "") == "Pod")
        pods.insert(e["involvedObject"].value("name", ""));
    retried = static_cast<int>(pods.size());
  }
  RecordProperty("pods_created", created);
  RecordProperty("pods_admitted_at_end", admitted);
  RecordProperty("pods_retried_at_end", retried);
  RecordProperty("over_commit_checks", checks);
  RecordProperty("most_admitted_at_once", most_admitted);
  const double fill = static_cast<double>(most_credits) / static_cast<double>(fleet_credits);
  RecordProperty("most_fleet_fill_percent", std::to_string(100 * fill));
  std::printf(
      "created %d, most admitted at once %d (%.0f %% of the fleet's cards), %d checks, "
      "%d held back with a reason\n",
      created, most_admitted, 100 * fill, checks, retried);
  // Where the ones still waiting wait (printed for a failure's reader).
  std::map<std::string, int> waiting;
  for (const std::string& name : live) {
    const Json w = WorkloadOf(*client_, ns_, name);
    if (w.is_null()) {
      ++waiting["no workload"];
      continue;
    }
    const Json check = CheckOf(w);
    std::string where = check.is_null() ? "no check" : "check " + check.value("state", "");
    for (const Json& c : w["status"].value("conditions", Json::array()))
      if (c.value("type", "") == "QuotaReserved" && c.value("status", "") == "False")
        where += ", no quota: " + c.value("message", "").substr(0, 160);
    ++waiting[where];
  }
  for (const auto& [where, n] : waiting) std::printf("  %3d %s\n", n, where.c_str());
  // Not vacuous: the fleet filled up, and the check both admitted and held back.
  EXPECT_GT(fill, 0.5);
  EXPECT_GT(retried, 0);
}

TEST_F(OperatorE2e, AWorkerWithTheExamplePluginPublishesItsCountingKeys) {
  // The SDK's example plugin, dropped into a plugin directory beside the in-tree ones.
  const std::string dir = std::string(GPUSTACK_E2E_DIR) + "/plugins";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(GPUSTACK_EXAMPLE_BUILD)) {
    const std::string f = e.path().filename();
    if (f == "example.json" || f.rfind("libgpustack_plugin_example", 0) == 0)
      fs::copy(e.path(), dir + "/" + f);
  }
  // A node with two example cards, as its node daemon would publish it.
  FleetNode example{
      "node-example", "AMD", "AMD EPYC 7R13 Processor", 8,
      Json::parse(R"({"groups": [{"id": "example-accelerator", "manufacturer": "example",
                      "name": "Example Accelerator", "memory": 8192, "cores": 64, "accelerators": [
                      {"id": "EXAMPLE-0", "index": 0, "status": {"logicalSliced": {"count": 4}}},
                      {"id": "EXAMPLE-1", "index": 1, "status": {"logicalSliced": {"count": 4}}}]}]})")};
  ASSERT_TRUE(client_->Apply(resources::Nodes(), NodeObject(example), {"operator-e2e", true}));
  ASSERT_TRUE(
      client_->Apply(resources::Nodes(), NodeObject(example), {"operator-e2e", true}, "status"));
  ASSERT_TRUE(client_->Apply(resources::Devices(), DevicesObject(example), {"operator-e2e", true}));
  // The pool comes from the Devices object alone.
  EXPECT_TRUE(RowBecomes(kExamplePool, "gpustack-fnv64-" +
                                           op::EntranceName(kExamplePool).substr(15) +
                                           " 4/16Gi/100Gi 2/2 10/20 100/200 0/0 0/0 Active"));
  // The counting keys need the resource names, which only the plugin declares: the running
  // worker does not have it, a worker started with it in its plugin directory does.
  auto capacity = [&] {
    return (*client_->Get(resources::Nodes(), "", "node-example"))["status"]["capacity"];
  };
  EXPECT_FALSE(capacity().contains("example.com/accel.sliced.units")) << capacity().dump();
  EXPECT_EQ(worker_->Stop(), 0);
  delete worker_;
  worker_ = new Worker("worker-example", {dir});
  ASSERT_TRUE(worker_->Start());
  EXPECT_TRUE(WaitFor([&] {
    return capacity().value("example.com/accel.sliced.units", "") == "3200k";
  })) << capacity().dump()
      << worker_->Log().substr(0, 20000);
  EXPECT_NE(worker_->Log().find("manufacturer example: example.com/accel"), std::string::npos);
  // Its own limits (ABI 1.2) reach the Pod webhook: quarters at the finest, one card a container.
  const std::string ns = testing::CreateNamespace(*client_, "example");
  ASSERT_TRUE(
      WaitFor([&] { return client_->Get(kLocalQueues, ns, op::EntranceName(kExamplePool)).ok(); }));
  auto refused = [&](const Json& limits) {
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"generateName", "limits-"},
                  {"namespace", ns},
                  {"labels", {{"kueue.x-k8s.io/queue-name", op::EntranceName(kExamplePool)}}}}},
                {"spec",
                 {{"containers",
                   Json::array({{{"name", "main"},
                                 {"image", "busybox"},
                                 {"resources", {{"limits", limits}, {"requests", limits}}}}})}}}};
    auto made = client_->Create(resources::Pods(), pod);
    return made ? std::string("created") : made.error();
  };
  EXPECT_NE(refused({{"example.com/accel.sliced", "1"},
                     {"example.com/accel.sliced.memory-percentage", "10"}})
                .find("example cards take slices of at least 25 % of their memory"),
            std::string::npos);
  EXPECT_NE(
      refused({{"example.com/accel", "2"}}).find("a container takes at most one example card"),
      std::string::npos);
  static_cast<void>(client_->Delete(resources::Namespaces(), "", ns));
  Kubectl("delete node node-example");
  Kubectl("delete devices node-example");
}

TEST_F(OperatorE2e, AnotherReplicaTakesOverFromAKilledLeaderAndChangesNothing) {
  ASSERT_TRUE(WaitFor([&] { return worker_->Leading(); }));
  ASSERT_TRUE(RowBecomes(
      kT4, "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active"));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto before = SpecVersions();
  Worker standby("worker-b");
  ASSERT_TRUE(standby.Start());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_FALSE(standby.Leading());
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(worker_->Stop(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return standby.Leading(); }, std::chrono::seconds(15)))
      << standby.Log();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  // A figure for the note (the lease is 4 s here), not a timed assertion.
  RecordProperty("takeover_seconds", std::to_string(took));
  // The new leader's first pass finds everything as it should be.
  ASSERT_TRUE(WaitFor([&] { return standby.Counter("gpustack_worker_passes_total") > 0; }));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(standby.Counter("gpustack_worker_writes_total"), 0) << standby.Metrics();
  EXPECT_EQ(SpecVersions(), before);
  // The suite's worker comes back (and is up before the suite stops it).
  EXPECT_EQ(standby.Stop(), 0) << standby.Log();
  ASSERT_TRUE(worker_->Start());
  EXPECT_TRUE(WaitFor([&] { return worker_->Leading(); }));
}

}  // namespace
}  // namespace gpustack::kube
