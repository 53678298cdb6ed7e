// `device-manager detect` on each fixture node, through the real binary, the production plugins
// and the fake vendor libraries: the printed Devices spec must equal the node's expected spec,
// and, fed to the ledger, must reproduce the capacity rows and node counts the upstream operator
// recorded on real clusters (docs/behaviour.md §12, items 3 and 13-16).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "host/ledger/model.h"
#include "host/ledger/views.h"

namespace gpustack {
namespace {

using nlohmann::json;

struct CliRun {
  int exit_code = -1;
  json report;
};

// Every plugin pointed at its fake management library.
std::string FakeLibraries() {
  const std::string dir = GPUSTACK_FAKE_VENDOR_DIR;
  std::string env;
  for (const auto& [vendor, library] : {std::pair{"NVIDIA", "libnvidia-ml.so.1"},
                                        {"ILUVATAR", "libixml.so"},
                                        {"THEAD", "libhgml.so"},
                                        {"AMD", "librocm_smi64.so"},
                                        {"HYGON", "librocm_smi64.so"},
                                        {"ASCEND", "libdcmi.so"},
                                        {"CAMBRICON", "libcndev.so"},
                                        {"METAX", "libmxsml.so"},
                                        {"MTHREADS", "libmtml.so"}}) {
    env += std::string("GPUSTACK_") + vendor + "_LIBRARY='" + dir + "/" + library + "' ";
  }
  return env;
}

CliRun Detect(const std::string& node, const std::string& extra_env = "") {
  const std::string trees = std::string(GPUSTACK_NODE_TREES_DIR) + "/" + node;
  const std::string command = "GPUSTACK_FAKE_FIXTURE='" + std::string(GPUSTACK_NODES_DIR) + "/" +
                              node + ".json' " + FakeLibraries() + extra_env + " '" +
                              GPUSTACK_BINARY + "' device-manager detect -o json --node-name " +
                              node + " --sysfs-root '" + trees + "/sys' --proc-root '" + trees +
                              "/proc' 2>/dev/null";
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::string out;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
    out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.report = json::parse(out, nullptr, false);
  return run;
}

json Expected(const std::string& node) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/" + node + ".devices.json");
  return json::parse(in, nullptr, false);
}

class DetectNode : public ::testing::TestWithParam<std::string> {};

TEST_P(DetectNode, PrintsTheExpectedDevicesSpec) {
  const CliRun run = Detect(GetParam());
  ASSERT_EQ(run.exit_code, 0) << run.report.dump(1);
  const json expected = Expected(GetParam());
  ASSERT_FALSE(expected.is_discarded());
  EXPECT_EQ(run.report["devices"]["spec"], expected) << "got:\n"
                                                     << run.report["devices"]["spec"].dump(1);
  EXPECT_EQ(run.report["devices"]["metadata"]["name"], GetParam());
  // The spec is what the CRD accepts.
  auto spec = ledger::SpecFromJson(run.report["devices"]["spec"]);
  EXPECT_TRUE(spec) << spec.error();
}

INSTANTIATE_TEST_SUITE_P(Nodes, DetectNode,
                         ::testing::Values("nvidia-a10g", "nvidia-t4x4", "nvidia-h100x8-mig-off",
                                           "nvidia-h100x8-mig-on", "nvidia-h100x8-mig-mixed",
                                           "mixed-nvidia-amd", "iluvatar-bi-v150x2",
                                           "thead-ppu-zw810ex2", "amd-mi210x2", "hygon-k100x4",
                                           "ascend-910b3x8", "cambricon-mlu370x4", "metax-mxc500x2",
                                           "mthreads-s4000x2", "cpu-only"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

ledger::NodeLedger Ledger(const std::string& node) {
  const CliRun run = Detect(node);
  auto spec = ledger::SpecFromJson(run.report["devices"]["spec"]);
  if (!spec) throw std::runtime_error(node + ": " + spec.error());
  return ledger::NodeLedger(node, *spec);
}

std::string Row(const ledger::NodeLedger& node, const std::string& group) {
  return ledger::FormatViews(ledger::ComputePoolViews({&node}, "nvidia", group));
}

const ledger::ResourceKind kNvidia{"nvidia", "nvidia.com/gpu", "mig"};

TEST(DetectedCapacity, MatchesTheRecordedRows) {
  EXPECT_EQ(Row(Ledger("nvidia-a10g"), "a10g"), "1/1 10/10 100/100 0/0");
  EXPECT_EQ(Row(Ledger("nvidia-t4x4"), "tesla-t4"), "4/4 10/40 100/400 0/0");
  EXPECT_EQ(Row(Ledger("nvidia-h100x8-mig-off"), "h100-80gb-hbm3"), "8/8 10/80 100/800 0/0");
  EXPECT_EQ(Row(Ledger("nvidia-h100x8-mig-on"), "h100-80gb-hbm3"), "0/0 0/0 0/0 1/56");
  EXPECT_EQ(Row(Ledger("nvidia-h100x8-mig-mixed"), "h100-80gb-hbm3"), "5/5 10/50 100/500 1/21");
}

TEST(DetectedCapacity, MatchesTheRecordedNodeCounts) {
  const ledger::NodeLedger off = Ledger("nvidia-h100x8-mig-off");
  const auto keys = ledger::CountingKeys(off, kNvidia);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.memory-mib"), 655360);  // 8 x 81920 (nominal)
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.cores-percentage"), 102400);
  EXPECT_EQ(keys.at("nvidia.com/gpu.sliced.units"), 12800000);

  const ledger::NodeLedger on = Ledger("nvidia-h100x8-mig-on");
  const auto counts = ledger::AdvertisedCounts(on, kNvidia);
  EXPECT_EQ(counts.at("nvidia.com/gpu"), 0);
  EXPECT_EQ(counts.at("nvidia.com/gpu.partitioned"), 56);
  const auto on_keys = ledger::CountingKeys(on, kNvidia);
  const std::map<std::string, int64_t> recorded = {{"1g.10gb", 56}, {"1g.20gb", 32},
                                                   {"2g.20gb", 24}, {"3g.40gb", 16},
                                                   {"4g.40gb", 8},  {"7g.80gb", 8}};
  for (const auto& [profile, count] : recorded) {
    EXPECT_EQ(on_keys.at("nvidia.com/gpu.partitioned.mig-" + profile), count) << profile;
  }
  const ledger::NodeLedger mixed = Ledger("nvidia-h100x8-mig-mixed");
  EXPECT_EQ(ledger::CountingKeys(mixed, kNvidia).at("nvidia.com/gpu.partitioned.units"), 4800000);
  EXPECT_EQ(ledger::AdvertisedCounts(mixed, kNvidia).at("nvidia.com/gpu.sliced"), 640);
}

TEST(DetectedLabels, CarryTheReferenceKeysAndValues) {
  const json labels = Detect("nvidia-a10g").report["devices"]["metadata"]["labels"];
  const std::string p = "acceleratable.feature.gpustack.ai/";
  EXPECT_EQ(labels["feature.gpustack.ai/acceleratable"], "true");
  EXPECT_EQ(labels[p + "nvidia-a10g.memory"], "24Gi");
  EXPECT_EQ(labels[p + "nvidia-a10g.cores"], "10240");
  EXPECT_EQ(labels[p + "nvidia-a10g.family"], "Ampere");
  EXPECT_EQ(labels[p + "nvidia-a10g.comcap"], "8.6");
  EXPECT_EQ(labels[p + "nvidia-a10g.product"], "NVIDIA-A10G");
  EXPECT_EQ(labels[p + "nvidia.driver-version"], "580.159.03");
  EXPECT_EQ(labels[p + "nvidia.runtime-version"], "13.0");
  EXPECT_EQ(
      Detect("nvidia-t4x4").report["devices"]["metadata"]["labels"][p + "nvidia-tesla-t4.memory"],
      "16Gi");
}

// docs/behaviour.md §12 item 22: the AMD RX 7800 XT group as the upstream operator's detect printed
// it.
TEST(DetectedGroups, AmdRx7800XtMatchesTheRecordedDetect) {
  const json groups = Detect("mixed-nvidia-amd").report["devices"]["spec"]["groups"];
  const json* amd = nullptr;
  for (const json& g : groups) {
    if (g["manufacturer"] == "amd") amd = &g;
  }
  ASSERT_NE(amd, nullptr) << groups.dump(1);
  EXPECT_EQ((*amd)["id"], "radeon-rx-7800-xt");
  EXPECT_EQ((*amd)["memory"], 16368);
  EXPECT_EQ((*amd)["cores"], 60);
  EXPECT_EQ((*amd)["computeCapability"], "gfx1101");
  const json& card = (*amd)["accelerators"][0];
  EXPECT_EQ(card["status"]["logicalSliced"]["count"], 128);
  EXPECT_EQ(card["status"]["logicalSliced"]["coresPercentageOvercommit"], true);
  // The DRM card and render numbers, never an enumeration index.
  EXPECT_EQ(card["physicalIndexes"], json::array({3, 130}));
}

TEST(DetectedProfile, ReportsTheNodesCpuAndKey) {
  const json profile = Detect("nvidia-a10g").report["nodeProfile"];
  EXPECT_EQ(profile["cpu"]["key"], "amd-epyc-7r32");
  EXPECT_EQ(profile["cpu"]["logicalCores"], 4);
  EXPECT_EQ(profile["cpu"]["physicalCores"], 2);
}

TEST(DetectFailures, AFailingLibraryIsReportedAndExitsOne) {
  const CliRun run =
      Detect("nvidia-a10g", "GPUSTACK_NVIDIA_LIBRARY=/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(run.exit_code, 1);
  bool seen = false;
  for (const json& p : run.report["plugins"]) {
    if (p["name"] != "nvidia") continue;
    seen = true;
    EXPECT_EQ(p["state"], "failed");
    EXPECT_EQ(p["error"]["code"], "NOT_FOUND");
    EXPECT_EQ(p["error"]["message"],
              "library_path /nonexistent/libnvidia-ml.so.1 (from GPUSTACK_NVIDIA_LIBRARY) "
              "does not exist");
  }
  EXPECT_TRUE(seen) << run.report.dump(1);
  EXPECT_TRUE(run.report["devices"]["spec"]["groups"].empty());
}

TEST(DetectFailures, ACardThatCannotBeReadIsNamedByItsPciAddress) {
  // The fourth T4 answers its first queries, then is lost: the three others are published and
  // the fourth is named, on stdout and stderr, by the PCI address nothing reported.
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/nvidia-t4x4.json");
  json scenario = json::parse(in);
  scenario["nvml"]["errors"] = {{"DeviceGetName", {{"code", 15}, {"after", 3}}}};
  const std::string fixture = ::testing::TempDir() + "/t4x4-lost-card.json";
  std::ofstream(fixture) << scenario.dump();
  const CliRun run = Detect("nvidia-t4x4", "GPUSTACK_FAKE_FIXTURE='" + fixture + "' ");
  EXPECT_EQ(run.exit_code, 0) << "three good cards still make a working node";
  ASSERT_EQ(run.report["devices"]["spec"]["groups"].size(), 1u) << run.report.dump(1);
  EXPECT_EQ(run.report["devices"]["spec"]["groups"][0]["accelerators"].size(), 3u);
  bool warned = false;
  for (const json& p : run.report["plugins"]) {
    if (p["name"] != "nvidia") continue;
    ASSERT_TRUE(p.contains("warnings")) << p.dump(1);
    warned = p["warnings"][0].get<std::string>().find("0000:00:1e.0") != std::string::npos;
  }
  EXPECT_TRUE(warned) << run.report.dump(1);
}

TEST(DetectFailures, EveryCardLostIsAnErrorNotAWarning) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/nvidia-t4x4.json");
  json scenario = json::parse(in);
  for (json& card : scenario["nvml"]["devices"]) card["lost"] = true;
  const std::string fixture = ::testing::TempDir() + "/t4x4-all-lost.json";
  std::ofstream(fixture) << scenario.dump();
  const CliRun run = Detect("nvidia-t4x4", "GPUSTACK_FAKE_FIXTURE='" + fixture + "' ");
  EXPECT_EQ(run.exit_code, 1) << "a node whose every card is lost is not working";
  EXPECT_TRUE(run.report["devices"]["spec"]["groups"].empty()) << run.report.dump(1);
  bool faulted = false;
  for (const json& p : run.report["plugins"]) {
    if (p["name"] != "nvidia") continue;
    ASSERT_TRUE(p.contains("faults")) << p.dump(1);
    faulted = p["faults"][0].get<std::string>().find(
                  "none of nvidia's 4 accelerator(s) could "
                  "be read") != std::string::npos;
  }
  EXPECT_TRUE(faulted) << run.report.dump(1);
}

TEST(DetectOutput, TextEscapesControlCharactersFromTheDriver) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/nvidia-a10g.json");
  json scenario = json::parse(in);
  scenario["nvml"]["devices"][0]["name"] = "NVIDIA \x1b[2J A10G";
  const std::string fixture = ::testing::TempDir() + "/a10g-escape.json";
  std::ofstream(fixture) << scenario.dump();
  const std::string trees = std::string(GPUSTACK_NODE_TREES_DIR) + "/nvidia-a10g";
  const std::string command = "GPUSTACK_FAKE_FIXTURE='" + fixture + "' " + FakeLibraries() + "'" +
                              GPUSTACK_BINARY + "' device-manager detect -o text --sysfs-root '" +
                              trees + "/sys' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
    out.append(buffer.data(), n);
  ::pclose(pipe);
  EXPECT_NE(out.find("NVIDIA \\x1b[2J A10G"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
}

TEST(DetectOutput, YamlIsTheDefault) {
  const std::string trees = std::string(GPUSTACK_NODE_TREES_DIR) + "/nvidia-a10g";
  const std::string command = "GPUSTACK_FAKE_FIXTURE='" + std::string(GPUSTACK_NODES_DIR) +
                              "/nvidia-a10g.json' GPUSTACK_NVIDIA_LIBRARY='" +
                              GPUSTACK_FAKE_VENDOR_DIR + "/libnvidia-ml.so.1' '" + GPUSTACK_BINARY +
                              "' device-manager detect --sysfs-root '" + trees +
                              "/sys' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
    out.append(buffer.data(), n);
  EXPECT_EQ(::pclose(pipe), 0);
  EXPECT_NE(out.find("kind: Devices\n"), std::string::npos) << out;
  EXPECT_NE(out.find("id: a10g\n"), std::string::npos) << out;
  EXPECT_NE(out.find("computeCapability: \"8.6\""), std::string::npos) << out;
}

// `device-manager monitor`, one JSON line per round.
std::vector<json> Monitor(const std::string& node, const std::string& fixture,
                          const std::string& flags, int* exit_code = nullptr) {
  const std::string trees = std::string(GPUSTACK_NODE_TREES_DIR) + "/" + node;
  const std::string command = "GPUSTACK_FAKE_FIXTURE='" + fixture + "' " + FakeLibraries() + "'" +
                              GPUSTACK_BINARY + "' device-manager monitor -o json --sysfs-root '" +
                              trees + "/sys' " + flags + " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::vector<json> rounds;
  if (pipe == nullptr) return rounds;
  std::array<char, 65536> line;
  while (std::fgets(line.data(), line.size(), pipe) != nullptr)
    rounds.push_back(json::parse(line.data()));
  const int status = ::pclose(pipe);
  if (exit_code != nullptr) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return rounds;
}

TEST(MonitorCli, MemoryUsedAboveTheTotalIsLeftUnmeasuredAndFails) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/nvidia-t4x4.json");
  json scenario = json::parse(in);
  scenario["nvml"]["devices"][1]["used_mib"] = 163840;  // of 15360
  const std::string fixture = ::testing::TempDir() + "/monitor-overused.json";
  std::ofstream(fixture) << scenario.dump();
  int exit_code = -1;
  const auto rounds = Monitor("nvidia-t4x4", fixture, "", &exit_code);
  EXPECT_EQ(exit_code, 1);
  ASSERT_EQ(rounds.size(), 1u);
  const json& cards = rounds[0]["accelerators"];
  ASSERT_EQ(cards.size(), 4u);
  EXPECT_FALSE(cards[1].contains("memoryUsage")) << cards[1].dump();
  EXPECT_EQ(cards[2]["memoryUsage"], 500.0);
  ASSERT_TRUE(rounds[0].contains("warnings")) << rounds[0].dump();
  EXPECT_NE(rounds[0]["warnings"][0].get<std::string>().find("is more than the total"),
            std::string::npos)
      << rounds[0].dump();
}

TEST(MonitorCli, SamplesEveryCardWithProcesses) {
  const auto rounds = Monitor("nvidia-t4x4", std::string(GPUSTACK_NODES_DIR) + "/nvidia-t4x4.json",
                              "--processes -i 0.05 -c 2");
  ASSERT_EQ(rounds.size(), 2u);
  const json& cards = rounds[1]["accelerators"];
  ASSERT_EQ(cards.size(), 4u);
  EXPECT_EQ(cards[2]["memory"], 15360.0);  // what processes can use (NVML v1)
  EXPECT_EQ(cards[2]["memoryUsage"], 500.0);
  EXPECT_EQ(cards[2]["coresUtilization"], 20.0);
  EXPECT_EQ(cards[2]["temperature"], 42.0);
  EXPECT_EQ(cards[2]["powerUsage"], 72.0);
  EXPECT_EQ(cards[2]["unhealthy"], false);
  ASSERT_EQ(cards[2]["processes"].size(), 1u);
  EXPECT_EQ(cards[2]["processes"][0]["pid"], 4002);
}

TEST(MonitorCli, WhatCannotBeMeasuredIsAbsentNotZero) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/amd-mi210x2.json");
  json scenario = json::parse(in);
  scenario["rocm_smi"]["errors"] = {{"dev_power_ave_get", {{"code", 2}}}};
  const std::string fixture = ::testing::TempDir() + "/monitor-fixture.json";
  std::ofstream(fixture) << scenario.dump();
  const auto rounds = Monitor("amd-mi210x2", fixture, "");
  ASSERT_EQ(rounds.size(), 1u);
  for (const json& card : rounds[0]["accelerators"]) {
    EXPECT_FALSE(card.contains("powerUsage")) << card.dump();
    EXPECT_TRUE(card.contains("temperature")) << card.dump();
  }
}

// `device-manager preflight -o json` on a fixture node: {exit code, checks}.
std::pair<int, json> Preflight(const std::string& node, const std::string& extra_env = "") {
  const std::string trees = std::string(GPUSTACK_NODE_TREES_DIR) + "/" + node;
  const std::string command =
      "GPUSTACK_FAKE_FIXTURE='" + std::string(GPUSTACK_NODES_DIR) + "/" + node + ".json' " +
      FakeLibraries() + extra_env + " '" + GPUSTACK_BINARY +
      "' device-manager preflight -o json --sysfs-root '" + trees + "/sys' --dev-root '" + trees +
      "/dev' --containerd-config '" + trees + "/etc/containerd/config.toml' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
    out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, json::parse(out, nullptr, false)};
}

const json* FindCheck(const json& report, const std::string& check) {
  for (const json& c : report["checks"]) {
    if (c["check"] == check) return &c;
  }
  return nullptr;
}

TEST(PreflightCli, AReadyNodePasses) {
  const auto [code, report] = Preflight("nvidia-a10g");
  EXPECT_EQ(code, 0) << report.dump(1);
  for (const json& c : report["checks"]) EXPECT_EQ(c["result"], "PASS") << c.dump();
  ASSERT_NE(FindCheck(report, "container runtime"), nullptr);
}

TEST(PreflightCli, MissingNodesAndRuntimeSayWhatToFix) {
  const auto [code, report] = Preflight("nvidia-t4x4");
  EXPECT_EQ(code, 1);
  const json* nodes = FindCheck(report, "device nodes");
  ASSERT_NE(nodes, nullptr) << report.dump(1);
  EXPECT_EQ((*nodes)["result"], "FAIL");
  EXPECT_NE((*nodes)["detail"].get<std::string>().find("/dev/nvidia-uvm"), std::string::npos);
  EXPECT_FALSE((*nodes)["fix"].get<std::string>().empty());
  EXPECT_EQ((*FindCheck(report, "container runtime"))["result"], "WARN");  // no containerd config
}

TEST(PreflightCli, AMissingLibraryFailsTheLibraryCheck) {
  const auto [code, report] =
      Preflight("amd-mi210x2", "GPUSTACK_AMD_LIBRARY=/nonexistent/librocm_smi64.so");
  EXPECT_EQ(code, 1);
  const json* library = FindCheck(report, "management library");
  ASSERT_NE(library, nullptr) << report.dump(1);
  EXPECT_EQ((*library)["result"], "FAIL");
  EXPECT_NE((*library)["detail"].get<std::string>().find("GPUSTACK_AMD_LIBRARY"),
            std::string::npos);
  EXPECT_NE((*library)["fix"].get<std::string>().find("library_path"), std::string::npos);
}

TEST(PreflightCli, ALibraryThatFailsGivesThePluginsInstallHint) {
  // The library exists but has none of the vendor's functions: the plugin's own init fails,
  // and the fix is what the plugin says its manufacturer needs.
  const auto [code, report] = Preflight("amd-mi210x2", "GPUSTACK_AMD_LIBRARY=/bin/true");
  EXPECT_EQ(code, 1);
  const json* library = FindCheck(report, "management library");
  ASSERT_NE(library, nullptr) << report.dump(1);
  EXPECT_EQ((*library)["result"], "FAIL");
  EXPECT_EQ((*library)["fix"], "load the amdgpu driver and install ROCm (rocm-smi-lib)");
}

TEST(PreflightCli, PartitionModeIsReported) {
  const auto [code, report] = Preflight("nvidia-h100x8-mig-mixed");
  EXPECT_EQ(code, 0) << report.dump(1);
  const json* mode = FindCheck(report, "partition mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ((*mode)["detail"], "3 of 8 card(s) in mig mode");
}

TEST(PreflightCli, APendingModeChangeIsAWarningWithItsFix) {
  const auto [code, report] = Preflight("thead-ppu-zw810ex2");
  const json* mode = FindCheck(report, "partition mode");
  ASSERT_NE(mode, nullptr) << report.dump(1);
  EXPECT_EQ((*mode)["result"], "WARN");
  EXPECT_EQ((*mode)["detail"], "1 of 2 card(s) in mig mode, 1 with a mode change pending");
  EXPECT_NE((*mode)["fix"].get<std::string>().find("reset"), std::string::npos);
  EXPECT_EQ(code, 1) << "its device nodes are missing in this fixture";
}

}  // namespace
}  // namespace gpustack
