// The fleet model against the upstream operator's recorded clusters (docs/behaviour.md §12 cluster
// A and B) and vectors (docs/behaviour.md §5.1), with Devices objects made from the detect output
// of the fixture nodes.
#include "host/operator/fleet.h"

#include "host/ledger/allocated.h"

#include <gtest/gtest.h>

#include <fstream>

#include "host/ledger/views.h"

namespace gpustack::op {
namespace {

Json Expected(const std::string& fixture) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/" + fixture + ".devices.json");
  return Json::parse(in);
}

// The Devices spec of `fixture`, cut to its first `cards` cards (0: all).
Json Devices(const std::string& name, const std::string& fixture, size_t cards = 0) {
  Json spec = Expected(fixture);
  if (cards > 0) {
    Json& a = spec["groups"][0]["accelerators"];
    a.erase(a.begin() + static_cast<std::ptrdiff_t>(cards), a.end());
  }
  return {{"metadata", {{"name", name}}}, {"spec", spec}};
}

Json Node(const std::string& name, const std::string& vendor, const std::string& cpu_name,
          int cores, Json extra_capacity = Json::object()) {
  Json capacity = {{"cpu", std::to_string(cores)}, {"memory", "64Gi"}};
  capacity.update(extra_capacity);
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/os", "linux"},
              {"kubernetes.io/arch", "amd64"},
              {kCpuVendorLabel, vendor}}},
            {"annotations", {{kCpuNameAnnotation, cpu_name}}}}},
          {"status", {{"capacity", capacity}}}};
}

ManufacturerTable Table() {
  return {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "test"}},
          {"amd", {"amd", "amd.com/gpu", "", "test"}}};
}

// Cluster A of docs/behaviour.md §12: node-cpu, node-a10g, node-t4-a (1 x T4), node-t4-b (4 x T4).
std::vector<NodeFacts> ClusterA(Json a10g_devices = Devices("node-a10g", "nvidia-a10g")) {
  Json t4a = Devices("node-t4-a", "nvidia-t4x4", 1);
  Json t4b = Devices("node-t4-b", "nvidia-t4x4");
  return {
      NodeFactsOf(Node("node-cpu", "AMD", "AMD EPYC 7R13 Processor", 16)),
      NodeFactsOf(Node("node-a10g", "AMD", "AMD EPYC 7R32", 4), &a10g_devices),
      NodeFactsOf(Node("node-t4-a", "Intel", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 4),
                  &t4a),
      NodeFactsOf(Node("node-t4-b", "Intel", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 48),
                  &t4b),
  };
}

std::map<std::string, Json> Types(const Fleet& fleet) {
  std::map<std::string, Json> out;
  for (const PoolIdentity& id : fleet.DerivedPools()) {
    Json type = fleet.RenderDerivedInstanceType(id);
    out[PoolName(id)] = type;
  }
  return out;
}

// "ENTRANCE UNIT EX SH SL PT CPU PHASE", as kubectl get instancetypes prints a row.
std::string Row(const Fleet& fleet, const Json& type) {
  const Json s = fleet.RenderInstanceTypeStatus(type, false, "")["status"];
  return s["entrance"].get<std::string>() + " " + s["columns"]["unit"].get<std::string>() + " " +
         s["columns"]["accelerator"].get<std::string>() + " " +
         s["columns"]["cpu"].get<std::string>() + " " + s["phase"].get<std::string>();
}

TEST(Entrance, ReferenceVectors) {
  const std::map<std::string, std::string> vectors = {
      {"gpustack--generic-linux-amd64", "gpustack-fnv64-3b93966fd73eb9ec"},
      {"gpustack--nvidia-a10g-linux-amd64", "gpustack-fnv64-c4680bb149644f1c"},
      {"gpustack--nvidia-tesla-t4-linux-amd64", "gpustack-fnv64-6b371caa2da0b799"},
      {"gpustack--nvidia-h100-80gb-hbm3-linux-amd64", "gpustack-fnv64-e4768a65ca0ce96b"},
      {"gpustack--nvidia-l40s-linux-amd64", "gpustack-fnv64-a730f1dca9e26fca"},
      {"gpustack--amd-epyc-7r13-linux-amd64", "gpustack-fnv64-8dde992f64a17a2f"},
      {"gpustack--amd-epyc-7r32-linux-amd64", "gpustack-fnv64-d3390f10cd57a632"},
      {"gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64", "gpustack-fnv64-029fd9550e0c70bd"},
      {"gpustack--intel-xeon-platinum-8259cl-linux-amd64", "gpustack-fnv64-c6aee2b7b5c4dc6b"},
      {"gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64",
       "gpustack-fnv64-5b59e508edc027b7"},
  };
  for (const auto& [queue, entrance] : vectors) {
    EXPECT_EQ(EntranceName(queue), entrance) << queue;
    EXPECT_EQ(EntranceName(queue).size(), 31u);
  }
}

TEST(Presets, ReferenceExamples) {
  auto unit = [](const char* m, const char* g) {
    UnitPreset p = PresetFor(m, g);
    return p.cpu + "/" + p.ram;
  };
  EXPECT_EQ(unit("nvidia", "a10g"), "8/64Gi");
  EXPECT_EQ(unit("nvidia", "tesla-t4"), "8/32Gi");
  EXPECT_EQ(unit("nvidia", "h100-80gb-hbm3"), "12/192Gi");
  EXPECT_EQ(unit("nvidia", "l40s"), "12/128Gi");
  EXPECT_EQ(unit("nvidia", "a100-sxm4-80gb"), "12/128Gi");
  EXPECT_EQ(unit("nvidia", "a100-pcie-40gb"), "8/64Gi");
  EXPECT_EQ(unit("ascend", "910b3"), "8/64Gi");
  EXPECT_EQ(unit("amd", "instinct-mi210"), "12/128Gi");
  EXPECT_EQ(unit("hygon", "k100-ai"), "12/128Gi");
  EXPECT_EQ(unit("metax", "mxc500"), "8/64Gi");
  EXPECT_EQ(unit("thead", "ppu-zw810e"), "8/64Gi");
  EXPECT_EQ(unit("amd", "radeon-rx-7800-xt"), "4/16Gi");  // not in the table: fallback
  EXPECT_EQ(unit("nvidia", "t4x"), "8/32Gi");             // a token prefix, as the table matches
}

TEST(ClusterA, FlavorsQueuesAndRows) {
  Fleet fleet(ClusterA(), Settings{}, Table());
  std::vector<std::string> flavors;
  for (const auto& [name, f] : fleet.flavors()) flavors.push_back(name);
  EXPECT_EQ(flavors, (std::vector<std::string>{
                         "gpustack--amd-epyc-7r13-linux-amd64-16c",
                         "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64-1d",
                         "gpustack--amd-epyc-7r32-linux-amd64-4c",
                         "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-1d",
                         "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-4d",
                         "gpustack--intel-xeon-platinum-8259cl-linux-amd64-48c",
                         "gpustack--intel-xeon-platinum-8259cl-linux-amd64-4c"}));
  const auto types = Types(fleet);
  ASSERT_EQ(types.size(), 3u);
  // docs/behaviour.md §12.3 with docs/decisions.md D1 (SH onceMax = most free slots on one card)
  // and docs/decisions.md D3.
  EXPECT_EQ(Row(fleet, types.at("gpustack--generic-linux-amd64")),
            "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/72 Active");
  EXPECT_EQ(Row(fleet, types.at("gpustack--nvidia-a10g-linux-amd64")),
            "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 Active");
  EXPECT_EQ(Row(fleet, types.at("gpustack--nvidia-tesla-t4-linux-amd64")),
            "gpustack-fnv64-6b371caa2da0b799 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 Active");

  // docs/behaviour.md §12.7: the A10G queue (with the node's cores too: Kueue v0.17 cannot ignore
  // cpu requests).
  const Json a10g =
      fleet.RenderClusterQueue(types.at("gpustack--nvidia-a10g-linux-amd64"), nullptr, false, true);
  EXPECT_EQ(a10g["spec"]["resourceGroups"],
            Json::parse(R"([{"coveredResources": ["credits.gpustack.ai/nvidia", "cpu"],
              "flavors": [{"name": "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64-1d",
                           "resources": [{"name": "credits.gpustack.ai/nvidia",
                                          "nominalQuota": "1600k"},
                                         {"name": "cpu", "nominalQuota": "4"}]}]}])"));
  EXPECT_EQ(a10g["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"],
            "gpustack-node-devices");
  EXPECT_EQ(a10g["spec"]["stopPolicy"], "None");
  EXPECT_FALSE(a10g["spec"].contains("cohortName"));
  // The T4 queue: the smaller per-node count first.
  const Json t4 = fleet.RenderClusterQueue(types.at("gpustack--nvidia-tesla-t4-linux-amd64"),
                                           nullptr, false, true);
  const Json& t4_flavors = t4["spec"]["resourceGroups"][0]["flavors"];
  ASSERT_EQ(t4_flavors.size(), 2u);
  EXPECT_EQ(t4_flavors[0]["resources"][0]["nominalQuota"], "1600k");
  EXPECT_EQ(t4_flavors[1]["resources"][0]["nominalQuota"], "6400k");
  EXPECT_EQ(t4_flavors[1]["resources"][1]["nominalQuota"], "48");
  // The CPU queue covers cpu only, in cores, and has no node-devices check.
  const Json cpu =
      fleet.RenderClusterQueue(types.at("gpustack--generic-linux-amd64"), nullptr, false, true);
  EXPECT_EQ(cpu["spec"]["resourceGroups"][0]["coveredResources"], Json::array({"cpu"}));
  EXPECT_EQ(cpu["spec"]["resourceGroups"][0]["flavors"].size(), 4u);
  EXPECT_FALSE(cpu["spec"].contains("admissionChecksStrategy"));
}

TEST(ClusterA, UnmanagingANodeEmptiesItsPoolAndShrinksTheCpuPool) {
  std::vector<NodeFacts> nodes = ClusterA();
  nodes[1].labels[kManagedLabel] = "false";
  Fleet fleet(nodes, Settings{}, Table());
  EXPECT_EQ(fleet.flavors().size(), 5u);
  const Json a10g =
      Fleet(ClusterA(), Settings{}, Table())
          .RenderDerivedInstanceType({true, "nvidia-a10g", "generic", "linux", "amd64"});
  EXPECT_EQ(Row(fleet, a10g),
            "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 0/0 0/0 0/0 0/0 0/0 Active");
  // An empty pool has no detail at all (an emptied map would be applied as null).
  EXPECT_FALSE(fleet.RenderInstanceTypeStatus(a10g, true, "")["status"].contains("detail"));
  // An administrator's unit may hold numbers (int-or-string): shown as written, never a throw.
  Json numbers = a10g;
  numbers["spec"]["unitResources"]["cpu"] = 8;
  numbers["spec"].erase("localStorage");
  EXPECT_EQ(fleet.RenderInstanceTypeStatus(numbers, false, "")["status"]["columns"]["unit"],
            "8/64Gi/");
  const Json generic = fleet.RenderDerivedInstanceType({false, "", "generic", "linux", "amd64"});
  EXPECT_EQ(Row(fleet, generic),
            "gpustack-fnv64-3b93966fd73eb9ec 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/68 Active");
  // Its queue holds once drained (nothing was admitted here, so it holds at once).
  const Json queue = fleet.RenderClusterQueue(a10g, nullptr, false, true);
  EXPECT_EQ(queue["spec"]["resourceGroups"], Json::array());
  EXPECT_EQ(queue["spec"]["stopPolicy"], "Hold");
  // A queue that still runs work drains before its groups go.
  Json busy = Fleet(ClusterA(), Settings{}, Table()).RenderClusterQueue(a10g, nullptr, false, true);
  busy["status"] = {{"admittedWorkloads", 1}, {"reservingWorkloads", 1}};
  const Json draining = fleet.RenderClusterQueue(a10g, &busy, false, true);
  EXPECT_EQ(draining["spec"]["stopPolicy"], "HoldAndDrain");
  EXPECT_EQ(draining["spec"]["resourceGroups"], busy["spec"]["resourceGroups"]);
}

TEST(ClusterA, PodsCpuRequestsTakeFromTheCpuView) {
  Fleet fleet(ClusterA(), Settings{}, Table());
  // 2.5 cores on node-t4-b (48) leave 45 whole cores there; 500m on node-cpu (16) leaves 15.
  fleet.SetCpuRequests({{"node-t4-b", 2500}, {"node-cpu", 500}});
  const Json generic = fleet.RenderDerivedInstanceType({false, "", "generic", "linux", "amd64"});
  const Json cpu = fleet.RenderInstanceTypeStatus(generic, false, "")["status"]["cpu"];
  EXPECT_EQ(cpu["onceMaxRequest"], 45);
  EXPECT_EQ(cpu["remaining"], 68);  // 15 + 4 + 4 + 45
  EXPECT_EQ(cpu["capacity"], 72);
}

TEST(Pods, CpuRequestsAsTheSchedulerCountsThem) {
  auto pod = [](const char* spec) { return Json{{"spec", Json::parse(spec)}}; };
  EXPECT_EQ(PodCpuMillicores(pod(R"({"containers": [{"resources": {"requests": {"cpu": "500m"}}},
                                                     {"resources": {"requests": {"cpu": "1.5"}}}]})")),
            2000);
  // A limit alone is the request; an init container counts when it is the largest.
  EXPECT_EQ(PodCpuMillicores(pod(R"({"containers": [{"resources": {"limits": {"cpu": "1"}}}],
                                     "initContainers": [{"resources": {"requests": {"cpu": "3"}}}]})")),
            3000);
  // A native sidecar adds to the app containers.
  EXPECT_EQ(PodCpuMillicores(pod(R"({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
      "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}}]})")),
            1250);
  EXPECT_EQ(
      PodCpuMillicores(pod(R"({"containers": [{"resources": {"requests": {"cpu": "lots"}}}]})")),
      0);
  EXPECT_EQ(PodCpuMillicores(pod(R"({"containers": [{"name": "c"}]})")), 0);
  EXPECT_EQ(PodCpuMillicores(pod(R"({"containers": [{"resources": {"requests": {"cpu": "0.5"}}},
                                                     {"resources": {"requests": {"cpu": "1.25"}}}]})")),
            1750);
  // Finer than a millicore rounds up, as the scheduler's MilliValue does.
  EXPECT_EQ(
      PodCpuMillicores(pod(R"({"containers": [{"resources": {"requests": {"cpu": "1.2345"}}}]})")),
      1235);
}

TEST(ClusterA, AwarePoolsRegroupWithoutChangingFlavors) {
  Settings aware;
  aware.aware_cpu_manufacturer = true;
  Fleet fleet(ClusterA(), aware, Table());
  EXPECT_EQ(fleet.flavors().size(), 7u);
  const auto types = Types(fleet);
  std::vector<std::string> rows;
  for (const auto& [name, type] : types) rows.push_back(name + " " + Row(fleet, type));
  EXPECT_EQ(rows, (std::vector<std::string>{
                      "gpustack--amd-epyc-7r13-linux-amd64 gpustack-fnv64-8dde992f64a17a2f "
                      "1/2Gi/100Gi 0/0 0/0 0/0 0/0 16/16 Active",
                      "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64 "
                      "gpustack-fnv64-029fd9550e0c70bd 8/64Gi/100Gi 1/1 10/10 100/100 0/0 0/0 "
                      "Active",
                      "gpustack--amd-epyc-7r32-linux-amd64 gpustack-fnv64-d3390f10cd57a632 "
                      "1/2Gi/100Gi 0/0 0/0 0/0 0/0 4/4 Active",
                      "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64 "
                      "gpustack-fnv64-5b59e508edc027b7 8/32Gi/100Gi 4/5 10/50 100/500 0/0 0/0 "
                      "Active",
                      "gpustack--intel-xeon-platinum-8259cl-linux-amd64 "
                      "gpustack-fnv64-c6aee2b7b5c4dc6b 1/2Gi/100Gi 0/0 0/0 0/0 0/0 48/52 Active"}));
  const Json queue = fleet.RenderClusterQueue(
      types.at("gpustack--intel-xeon-platinum-8259cl-linux-amd64"), nullptr, false, true);
  EXPECT_EQ(queue["metadata"]["labels"]["general.feature.gpustack.ai/intel-xeon-platinum-8259cl"],
            "true");
}

TEST(ClusterA, ASliceMovesTheA10gRow) {
  // The node daemon published a 20 % slice (320,000 credits, one slice) on the A10G.
  Json devices = Devices("node-a10g", "nvidia-a10g");
  ledger::NodeLedger ledger("node-a10g", *ledger::SpecFromJson(devices["spec"]));
  ledger::Request slice;
  slice.manufacturer = "nvidia";
  slice.base = "nvidia.com/gpu";
  slice.group_id = "a10g";
  slice.mode = ledger::Mode::kSliced;
  slice.memory_percentage = 20;
  slice.units = 320000;
  ASSERT_TRUE(ledger.Reserve({"pod", "main"}, slice));
  devices["status"] = ledger::ToJson(ledger.ToStatus());
  Fleet fleet(ClusterA(devices), Settings{}, Table());
  ASSERT_EQ(fleet.Node("node-a10g")->devices_problem, "");
  const Json type =
      fleet.RenderDerivedInstanceType({true, "nvidia-a10g", "generic", "linux", "amd64"});
  EXPECT_EQ(Row(fleet, type),
            "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 0/0 0/0 80/80 0/0 0/0 Active");
  // The fit labels of docs/behaviour.md §3.7 follow the ledger.
  const Json labels = fleet.RenderNodeLabels(*fleet.Node("node-a10g"))["metadata"]["labels"];
  EXPECT_EQ(labels["sliced-max-free-units.fit.gpustack.ai/nvidia-a10g"], "1280000");
  EXPECT_EQ(labels["shared-free-cards.fit.gpustack.ai/nvidia-a10g"], "0");
  EXPECT_EQ(labels[kManagedLabel], "true");
  EXPECT_EQ(labels["general.feature.gpustack.ai/amd-epyc-7r32.count"], "4");
}

TEST(ClusterB, H100RowsAndCountingKeys) {
  auto h100 = [](const std::string& fixture) {
    Json devices = Devices("node-h100", fixture);
    Json capacity = {{"nvidia.com/gpu.sliced", "1024"}, {"nvidia.com/gpu.partitioned", "21"}};
    return Fleet(
        {NodeFactsOf(Node("node-h100", "Intel", "Intel(R) Xeon(R) Platinum 8480+", 224, capacity),
                     &devices)},
        Settings{}, Table());
  };
  const PoolIdentity pool{true, "nvidia-h100-80gb-hbm3", "generic", "linux", "amd64"};
  {
    Fleet fleet = h100("nvidia-h100x8-mig-off");
    const Json type = fleet.RenderDerivedInstanceType(pool);
    EXPECT_EQ(PoolName(pool), "gpustack--nvidia-h100-80gb-hbm3-linux-amd64");
    EXPECT_EQ(Row(fleet, type),
              "gpustack-fnv64-e4768a65ca0ce96b 12/192Gi/100Gi 8/8 10/80 100/800 0/0 0/0 Active");
    const Json status = fleet.RenderInstanceTypeStatus(type, false, "")["status"];
    EXPECT_EQ(status["detail"]["slicedDetail"],
              Json::parse(R"({"logical": {"coresPercentageOvercommit": true, "count": 1024}})"));
    // docs/behaviour.md §3.6's example: 8 x H100 all logical.
    const Json capacity = fleet.RenderNodeCapacity(*fleet.Node("node-h100"))["status"]["capacity"];
    EXPECT_EQ(capacity["nvidia.com/gpu.sliced.units"], "12800k");
    EXPECT_EQ(capacity["nvidia.com/gpu.sliced.cores-percentage"], "102400");
    EXPECT_EQ(capacity["nvidia.com/gpu.sliced.memory-percentage"], "800");
    EXPECT_EQ(capacity["nvidia.com/gpu.sliced.memory-mib"], "655360");
  }
  {
    Fleet fleet = h100("nvidia-h100x8-mig-on");
    const Json type = fleet.RenderDerivedInstanceType(pool);
    EXPECT_EQ(Row(fleet, type),
              "gpustack-fnv64-e4768a65ca0ce96b 12/192Gi/100Gi 0/0 0/0 0/0 1/56 0/0 Active");
    const Json status = fleet.RenderInstanceTypeStatus(type, false, "")["status"];
    EXPECT_EQ(status["detail"]["slicedDetail"]["physical"]["count"], 56);
    const Json capacity = fleet.RenderNodeCapacity(*fleet.Node("node-h100"))["status"]["capacity"];
    EXPECT_EQ(capacity["nvidia.com/gpu.partitioned.units"], "12800k");
    EXPECT_EQ(capacity["nvidia.com/gpu.partitioned.mig-1g.10gb"], "56");
  }
  {
    Fleet fleet = h100("nvidia-h100x8-mig-mixed");
    EXPECT_EQ(Row(fleet, fleet.RenderDerivedInstanceType(pool)),
              "gpustack-fnv64-e4768a65ca0ce96b 12/192Gi/100Gi 5/5 10/50 100/500 1/21 0/0 Active");
  }
}

TEST(Nodes, CapacityQuantitiesAsTheApiserverWritesThem) {
  Json node = Node("n", "AMD", "AMD EPYC 7R13 Processor", 0,
                   {{"cpu", "4000m"},
                    {"nvidia.com/gpu.sliced", "1k"},
                    {"nvidia.com/gpu.partitioned", "2Ki"},
                    {"memory", "2Gi"},
                    {"example.com/odd.sliced", "1.5"},
                    {"example.com/bad.sliced", "x1"}});
  const NodeFacts f = NodeFactsOf(node);
  EXPECT_EQ(f.cores, 4);
  EXPECT_EQ(f.capacity.at("nvidia.com/gpu.sliced"), 1000);
  EXPECT_EQ(f.capacity.at("nvidia.com/gpu.partitioned"), 2048);
  EXPECT_EQ(f.capacity.at("example.com/odd.sliced"), 1);  // whole units, rounded down
  EXPECT_EQ(f.capacity.count("example.com/bad.sliced"), 0u);
  EXPECT_EQ(f.capacity.count("memory"), 0u);  // not read by the fleet: not kept
}

TEST(Nodes, ManualManagementAndHeldLabels) {
  Settings manual;
  manual.node_management_manual = true;
  std::vector<NodeFacts> nodes = ClusterA();
  nodes[0].labels[kManagedLabel] = "true";  // an admin opted node-cpu in
  Fleet fleet(nodes, manual, Table());
  EXPECT_EQ(fleet.flavors().size(), 1u);
  EXPECT_FALSE(fleet.Node("node-a10g")->managed);
  // Manual: the worker writes no managed label of its own, nor fit labels on unmanaged nodes.
  const Json labels = fleet.RenderNodeLabels(*fleet.Node("node-a10g"))["metadata"]["labels"];
  EXPECT_FALSE(labels.contains(kManagedLabel));
  EXPECT_FALSE(labels.contains("shared-free-cards.fit.gpustack.ai/nvidia-a10g"));
  // Counting keys only while the device plugin's bare pool is in the node's capacity.
  EXPECT_EQ(fleet.RenderNodeCapacity(*fleet.Node("node-a10g"))["status"]["capacity"],
            Json::object());
}

TEST(Nodes, ABrokenDevicesObjectIsNamedAndNothingOfItCountsAsFree) {
  Json devices = {{"metadata", {{"name", "node-x"}}}, {"spec", {{"groups", "nope"}}}};
  NodeFacts facts = NodeFactsOf(Node("node-x", "AMD", "AMD EPYC 7R13 Processor", 16), &devices);
  EXPECT_FALSE(facts.ledger);
  EXPECT_NE(facts.devices_problem.find("Devices node-x: spec"), std::string::npos)
      << facts.devices_problem;
  // A status that over-charges a card is not believed: the card stays in its pool (its flavor
  // and quota do not move) but counts as taken.
  Json over = Devices("node-x", "nvidia-a10g");
  over["status"] = Json::parse(R"({"groups": [{"id": "a10g", "manufacturer": "nvidia",
    "accelerators": [{"id": "GPU-a10a0000-1111-2222-3333-000000000000", "index": 0, "mode": 2,
                      "allocated": 1760000, "remaining": -160000}]}]})");
  facts = NodeFactsOf(Node("node-x", "AMD", "AMD EPYC 7R32", 4), &over);
  ASSERT_TRUE(facts.ledger);
  EXPECT_NE(facts.devices_problem.find("over-charges"), std::string::npos) << facts.devices_problem;
  Fleet fleet({facts}, Settings{}, Table());
  EXPECT_EQ(fleet.flavors().count("gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64-1d"), 1u);
  const Json type =
      fleet.RenderDerivedInstanceType({true, "nvidia-a10g", "generic", "linux", "amd64"});
  EXPECT_EQ(Row(fleet, type),
            "gpustack-fnv64-c4680bb149644f1c 8/64Gi/100Gi 0/0 0/0 0/0 0/0 0/0 Active");
  EXPECT_EQ(fleet.RenderInstanceTypeStatus(type, false, "")["status"]["accelerator"]["capacity"],
            1);
}

TEST(Nodes, WhatResourceClaimsHoldIsReadForGate3) {
  ledger::Allocation claim{.owner = {"claim:u1", "claim"}, .charges = {}};
  ledger::Charge whole;
  whole.accelerator_id = "GPU-a10a0000-1111-2222-3333-000000000000";
  whole.mode = ledger::Mode::kExclusive;
  whole.credits = ledger::kCardCredits;
  claim.charges.push_back(whole);
  Json devices = Devices("node-x", "nvidia-a10g");
  devices["metadata"]["annotations"][ledger::kClaimsAnnotation] = ledger::ClaimsAnnotation({claim});
  NodeFacts facts = NodeFactsOf(Node("node-x", "AMD", "AMD EPYC 7R32", 4), &devices);
  EXPECT_EQ(facts.devices_problem, "");
  ASSERT_EQ(facts.claims.size(), 1u);
  EXPECT_EQ(facts.claims[0], claim);
  // An annotation that cannot be read: nothing of the node counts as free.
  devices["metadata"]["annotations"][ledger::kClaimsAnnotation] = "[{\"podUID\": 1}]";
  facts = NodeFactsOf(Node("node-x", "AMD", "AMD EPYC 7R32", 4), &devices);
  EXPECT_NE(facts.devices_problem.find(ledger::kClaimsAnnotation), std::string::npos)
      << facts.devices_problem;
  EXPECT_TRUE(facts.claims.empty());
  EXPECT_TRUE(facts.ledger->spec().groups.at(0).accelerators.at(0).unhealthy);
}

TEST(Nodes, ADevicesRecordChangesOnlyWithWhatItIsMadeOf) {
  Json devices = Devices("node-x", "nvidia-a10g");
  devices["metadata"]["resourceVersion"] = "41";
  const DevicesRecord first = DevicesRecordOf(devices);
  EXPECT_EQ(CacheKey(first), "node-x");
  EXPECT_EQ(CacheVersion(first), "41");
  ASSERT_TRUE(first.ledger);
  EXPECT_EQ(first.ledger->spec().groups.at(0).accelerators.size(), 1u);
  // A new version that changes nothing the record reads (a label, a finalizer) keeps its digest,
  // so it starts no pass.
  devices["metadata"]["resourceVersion"] = "42";
  devices["metadata"]["labels"]["team"] = "a";
  devices["metadata"]["finalizers"] = Json::array({"example.com/keep"});
  const DevicesRecord relabelled = DevicesRecordOf(devices);
  EXPECT_EQ(relabelled.resource_version, "42");
  EXPECT_EQ(relabelled.digest, first.digest);
  // The status, the spec and the claims annotation each change it.
  Json charged = devices;
  charged["status"] = Json::parse(R"({"groups": [{"id": "a10g", "manufacturer": "nvidia",
    "accelerators": [{"id": "GPU-a10a0000-1111-2222-3333-000000000000", "index": 0, "mode": 2,
                      "allocated": 400000, "remaining": 1200000}]}]})");
  const DevicesRecord charged_record = DevicesRecordOf(charged);
  EXPECT_NE(charged_record.digest, first.digest);
  EXPECT_EQ(charged_record.problem, "") << charged_record.problem;
  Json claimed = devices;
  claimed["metadata"]["annotations"][ledger::kClaimsAnnotation] = "[]";
  EXPECT_NE(DevicesRecordOf(claimed).digest, first.digest);
  Json respecced = devices;
  respecced["spec"]["groups"][0]["accelerators"][0]["memory"] = 1;
  EXPECT_NE(DevicesRecordOf(respecced).digest, first.digest);
  // The facts of a node share the record's ledger: one copy of it however many passes read it.
  const NodeFacts facts = NodeFactsOf(Node("node-x", "AMD", "AMD EPYC 7R32", 4), &first);
  EXPECT_EQ(facts.ledger.get(), first.ledger.get());
}

TEST(PublishedLedger, StatusRoundTripsWithPartitions) {
  ledger::DevicesSpec spec = *ledger::SpecFromJson(Expected("nvidia-h100x8-mig-mixed"));
  ledger::NodeLedger live("n", spec);
  auto request = [](ledger::Mode mode, uint32_t count, const char* profile) {
    ledger::Request r;
    r.manufacturer = "nvidia";
    r.base = "nvidia.com/gpu";
    r.mode = mode;
    r.count = count;
    r.profile = profile;
    r.units = mode == ledger::Mode::kPartitioned ? 800000 : 0;
    return r;
  };
  ASSERT_TRUE(live.Reserve({"a", "c"}, request(ledger::Mode::kPartitioned, 1, "3g.40gb")));
  ASSERT_TRUE(live.Reserve({"b", "c"}, request(ledger::Mode::kPartitioned, 1, "1g.10gb")));
  ASSERT_TRUE(live.Reserve({"c", "c"}, request(ledger::Mode::kShared, 3, "")));
  ASSERT_TRUE(live.Reserve({"d", "c"}, request(ledger::Mode::kExclusive, 2, "")));
  auto published = ledger::PublishedLedger("n", spec, live.ToStatus());
  ASSERT_TRUE(published) << published.error();
  EXPECT_EQ((*published)->ToStatus(), live.ToStatus());
}

TEST(Covers, SubsetsAndNumbers) {
  const Json actual = Json::parse(R"({"a": 1, "b": {"c": "x", "d": [1, 2]}, "e": 2})");
  EXPECT_TRUE(Covers(actual, Json::parse(R"({"a": 1, "b": {"d": [1, 2]}})")));
  EXPECT_TRUE(Covers(actual, Json::parse(R"({"a": 1.0, "z": {}})")));
  EXPECT_FALSE(Covers(actual, Json::parse(R"({"b": {"d": [1]}})")));
  EXPECT_FALSE(Covers(actual, Json::parse(R"({"b": {"c": "y"}})")));
  EXPECT_FALSE(Covers(actual, Json::parse(R"({"f": 1})")));
}

TEST(Settings, SeedAndParse) {
  auto seeds = SeedValues([](const std::string& name) {
    return name == "GPUSTACK_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER" ? "TRUE" : "";
  });
  ASSERT_TRUE(seeds);
  EXPECT_EQ(seeds->at("instance-type-aware-cpu-manufacturer"), "true");
  EXPECT_EQ(seeds->at("node-management-manual"), "false");
  auto bad = SeedValues([](const std::string& name) {
    return name == "GPUSTACK_NODE_MANAGEMENT_MANUAL" ? "maybe" : "";
  });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "GPUSTACK_NODE_MANAGEMENT_MANUAL=maybe: not a boolean (true or false)");
  std::vector<std::string> problems;
  Settings s = ParseSettings(
      {{"node-management-manual", "true"}, {"instance-type-mixed-on-node", "nope"}}, &problems);
  EXPECT_TRUE(s.node_management_manual);
  EXPECT_TRUE(s.mixed_on_node);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "setting instance-type-mixed-on-node = 'nope' is not a boolean; keeping true");
}

}  // namespace
}  // namespace gpustack::op
