// `gpustack-operator device-manager detect` as an administrator runs it: the real binary, the real
// vendor plugins and fakes, fixture sysfs trees.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

using nlohmann::json;

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout only; logs go to stderr
};

CliRun Detect(const std::string& args, const std::string& env = "") {
  const std::string command =
      env + " '" GPUSTACK_BINARY "' device-manager detect " + args + " 2>/dev/null";
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string Sysfs(const std::string& node) {
  return std::string("--sysfs-root '") + GPUSTACK_NODE_TREES_DIR + "/" + node + "/sys'";
}

// The fake vendor libraries with the node's fixture: the production plugins then really discover.
std::string FakeLibraries(const std::string& node) {
  const std::string dir = GPUSTACK_FAKE_VENDOR_DIR;
  return std::string("GPUSTACK_FAKE_FIXTURE='") + GPUSTACK_NODES_DIR + "/" + node +
         ".json' GPUSTACK_NVIDIA_LIBRARY='" + dir + "/libnvidia-ml.so.1' GPUSTACK_AMD_LIBRARY='" +
         dir + "/librocm_smi64.so'";
}

std::string FakeDir(const std::string& name) {
  return std::string("'") + GPUSTACK_FAKES_DIR + "/" + name + "'";
}

const json* FindPlugin(const json& report, const std::string& name) {
  for (const json& p : report["plugins"]) {
    if (p["name"] == name) return &p;
  }
  return nullptr;
}

TEST(DetectCli, NodeWithoutAcceleratorsIsAnHonestEmptyResult) {
  const CliRun run = Detect(Sysfs("cpu-only") + " -o text");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("Plugins (9 found)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("nvidia: disabled - auto: no PCI device of vendor 0x10de"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("Accelerators: none"), std::string::npos) << run.out;
}

TEST(DetectCli, AutoEnablesThePluginWhoseVendorIsPresent) {
  const CliRun run = Detect(Sysfs("nvidia-a10g") + " -o json", FakeLibraries("nvidia-a10g"));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json report = json::parse(run.out);
  const json* nvidia = FindPlugin(report, "nvidia");
  ASSERT_NE(nvidia, nullptr);
  EXPECT_TRUE((*nvidia)["enabled"].get<bool>());
  EXPECT_EQ((*nvidia)["decision"], "auto: 1 PCI device(s) of vendor 0x10de (0000:00:1e.0)");
  EXPECT_EQ((*nvidia)["identity"]["baseResourceName"], "nvidia.com/gpu");
  EXPECT_EQ((*nvidia)["identity"]["partitionKind"], "mig");
  EXPECT_EQ((*nvidia)["discovery"]["status"], "OK");
  EXPECT_EQ((*nvidia)["discovery"]["accelerators"], 1);
  EXPECT_FALSE((*FindPlugin(report, "amd"))["enabled"].get<bool>());
  EXPECT_EQ(report["pciDevices"].size(), 1u);
}

TEST(DetectCli, MixedNodeEnablesBothVendors) {
  const CliRun run =
      Detect(Sysfs("mixed-nvidia-amd") + " -o json", FakeLibraries("mixed-nvidia-amd"));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json report = json::parse(run.out);
  int enabled = 0;
  for (const json& p : report["plugins"]) enabled += p["enabled"].get<bool>() ? 1 : 0;
  EXPECT_EQ(enabled, 2);
  EXPECT_TRUE((*FindPlugin(report, "amd"))["enabled"].get<bool>());
  EXPECT_TRUE((*FindPlugin(report, "nvidia"))["enabled"].get<bool>());
}

TEST(DetectCli, ReportsWhatAnEnabledPluginDiscovers) {
  const CliRun run = Detect(Sysfs("cpu-only") + " --plugin-dir " + FakeDir("full") +
                            " --enable 'full=on' -o json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json report = json::parse(run.out);
  EXPECT_EQ(report["pluginDirs"][0], std::string(GPUSTACK_FAKES_DIR) + "/full");
  const json* full = FindPlugin(report, "full");
  ASSERT_NE(full, nullptr);
  EXPECT_EQ((*full)["decision"], "forced on by --enable");
  ASSERT_EQ((*full)["discovery"]["status"], "OK");
  // What it found is in the node's Devices spec, under its manufacturer.
  const json& groups = report["devices"]["spec"]["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["name"], "Fake Accel A");
  EXPECT_EQ(groups[0]["manufacturer"], "full");
  EXPECT_EQ(groups[1]["accelerators"][0]["status"]["physicalSliced"]["profiles"][1]["name"],
            "4g.40gb");
}

TEST(DetectCli, APluginThatFailsIsReportedAndTheOthersStillRun) {
  const CliRun run = Detect(Sysfs("nvidia-a10g") + " --plugin-dir " + FakeDir("init-fails") +
                                " --enable 'init-fails=on' -o json",
                            FakeLibraries("nvidia-a10g"));
  EXPECT_EQ(run.exit_code, 1) << "an enabled plugin failed";
  const json report = json::parse(run.out);
  const json* broken = FindPlugin(report, "init-fails");
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ((*broken)["state"], "failed");
  EXPECT_EQ((*broken)["library"],
            std::string(GPUSTACK_FAKES_DIR) + "/init-fails/libgpustack_plugin_init-fails.so");
  EXPECT_EQ((*broken)["error"]["code"], "UNAVAILABLE");
  EXPECT_EQ((*broken)["error"]["message"],
            "init-fails: init failed: UNAVAILABLE: fake management library not found");
  EXPECT_EQ((*FindPlugin(report, "nvidia"))["discovery"]["status"], "OK");
  EXPECT_EQ(report["devices"]["spec"]["groups"][0]["id"], "a10g");
  EXPECT_FALSE(report["ok"].get<bool>());
}

TEST(DetectCli, PluginPathComesFromTheEnvironmentToo) {
  const CliRun run =
      Detect(Sysfs("cpu-only") + " -o json",
             "GPUSTACK_PLUGIN_PATH=" + FakeDir("noop") + " GPUSTACK_PLUGIN_ENABLE=noop=on");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json report = json::parse(run.out);
  const json* noop = FindPlugin(report, "noop");
  ASSERT_NE(noop, nullptr);
  EXPECT_EQ((*noop)["decision"], "forced on by GPUSTACK_PLUGIN_ENABLE");
}

TEST(DetectCli, BadInputIsAClearErrorWithExitCode2) {
  FILE* pipe =
      ::popen("'" GPUSTACK_BINARY "' device-manager detect --enable nvidia=maybe 2>&1", "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 512> buffer{};
  const size_t n = std::fread(buffer.data(), 1, buffer.size() - 1, pipe);
  const int status = ::pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(std::string(buffer.data(), n).find("\"maybe\" is not one of auto, on, off"),
            std::string::npos);
  EXPECT_EQ(Detect("--sysfs-root /nonexistent").exit_code, 2);
  EXPECT_EQ(Detect("--pci-classes 3").exit_code, 2);
  EXPECT_EQ(Detect("--node-config /nonexistent.json").exit_code, 2);
}

}  // namespace
