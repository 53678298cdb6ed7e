#include "host/runtime/node_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

namespace gpustack::runtime {
namespace {

std::vector<pci::PciDevice> Inventory() {
  return {{"0000:3b:00.0", 0x10de, 0x2237, 0x030200, 0, 0, 0, ""},
          {"0000:5e:00.0", 0x10de, 0x2237, 0x030200, 0, 0, 1, ""}};
}

NodeConfig Defaults() {
  NodeConfig config;
  config.default_setting.source = "default";
  return config;
}

TEST(EnablePolicy, AutoEnablesWhenTheVendorIsPresentAndSaysWhere) {
  const EnableDecision d = Decide(Defaults(), "nvidia", {0x10de}, Inventory());
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.reason, "auto: 2 PCI device(s) of vendor 0x10de (0000:3b:00.0, 0000:5e:00.0)");
}

TEST(EnablePolicy, AutoDisablesWhenTheVendorIsAbsent) {
  const EnableDecision d = Decide(Defaults(), "amd", {0x1002}, Inventory());
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, "auto: no PCI device of vendor 0x1002");
}

TEST(EnablePolicy, AutoNeverEnablesAPluginWithoutVendorIds) {
  const EnableDecision d = Decide(Defaults(), "custom", {}, Inventory());
  EXPECT_FALSE(d.enabled);
  EXPECT_NE(d.reason.find("enable it explicitly"), std::string::npos);
}

TEST(EnablePolicy, PrecedenceIsFileThenEnvThenFlag) {
  auto config = ParseNodeConfig(
      R"({"plugins": {"nvidia": {"enable": "off"}, "amd": {"enable": "on"},
                      "metax": {"config": {"library_path": "/opt/mx/libmxsml.so"}}}})",
      "node config /etc/n.json");
  ASSERT_TRUE(config) << config.error();
  EXPECT_FALSE(Decide(*config, "nvidia", {0x10de}, Inventory()).enabled);
  EXPECT_EQ(Decide(*config, "nvidia", {0x10de}, Inventory()).reason,
            "forced off by node config /etc/n.json");
  EXPECT_EQ(config->plugin_settings["metax"]["library_path"], "/opt/mx/libmxsml.so");

  ASSERT_TRUE(ApplyEnableOverrides(*config, "nvidia=on", "GPUSTACK_PLUGIN_ENABLE"));
  EXPECT_EQ(Decide(*config, "nvidia", {0x10de}, Inventory()).reason,
            "forced on by GPUSTACK_PLUGIN_ENABLE");
  ASSERT_TRUE(ApplyEnableOverrides(*config, " nvidia = off , amd=auto", "--enable"));
  EXPECT_EQ(Decide(*config, "nvidia", {0x10de}, Inventory()).reason, "forced off by --enable");
  EXPECT_FALSE(Decide(*config, "amd", {0x1002}, Inventory()).enabled);
}

TEST(EnablePolicy, StarSetsTheDefaultAndClearsEarlierPerPluginSettings) {
  NodeConfig config = Defaults();
  ASSERT_TRUE(ApplyEnableOverrides(config, "nvidia=off", "file"));
  ASSERT_TRUE(ApplyEnableOverrides(config, "*=on", "--enable"));
  EXPECT_EQ(Decide(config, "nvidia", {0x10de}, {}).reason, "forced on by --enable");
  EXPECT_TRUE(Decide(config, "anything", {}, {}).enabled);
  auto file = ParseNodeConfig(R"({"default_enable": "off"})", "f");
  ASSERT_TRUE(file);
  EXPECT_FALSE(Decide(*file, "nvidia", {0x10de}, Inventory()).enabled);
}

TEST(EnablePolicy, BadInputIsRefusedWithItsSource) {
  NodeConfig config = Defaults();
  for (const char* bad : {"nvidia", "nvidia=maybe", "Bad_Name=on", "=on"}) {
    auto status = ApplyEnableOverrides(config, bad, "--enable");
    ASSERT_FALSE(status) << bad;
    EXPECT_EQ(status.error().rfind("--enable", 0), 0u) << status.error();
  }
  for (const char* bad :
       {"not json", R"({"plugins": []})", R"({"plugins": {"x": {"enable": 1}}})",
        R"({"plugins": {"x": {"enable": "sometimes"}}})",
        R"({"plugins": {"x": {"config": {"k": 1}}}})", R"({"default_enable": "yes"})",
        R"({"plugin": {"nvidia": {"enable": "on"}}})",
        R"({"plugins": {"nvidia": {"enabled": "on"}}})"}) {
    auto parsed = ParseNodeConfig(bad, "node config f.json");
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().rfind("node config f.json", 0), 0u) << parsed.error();
  }
  EXPECT_TRUE(ApplyEnableOverrides(config, "", "--enable")) << "empty is a no-op";
}

TEST(EnablePolicy, OneConfigServesEveryNodeThroughItsNodesSection) {
  auto config = ParseNodeConfig(
      R"({"plugins": {"nvidia": {"enable": "on"}},
          "nodes": {"gpu-7": {"nvidia": "off", "*": "auto"}, "gpu-8": {"amd": "on"}}})",
      "node config /etc/n.json");
  ASSERT_TRUE(config) << config.error();
  NodeConfig other = *config;
  ASSERT_TRUE(ApplyNodeSection(other, "cpu-1"));  // not named: the plugin entries stand
  EXPECT_EQ(Decide(other, "nvidia", {0x10de}, {}).reason, "forced on by node config /etc/n.json");
  ASSERT_TRUE(ApplyNodeSection(*config, "gpu-7"));
  // "*" sorts first: auto for the rest, then this node's own nvidia entry.
  EXPECT_EQ(Decide(*config, "nvidia", {0x10de}, Inventory()).reason,
            "forced off by node config /etc/n.json nodes.gpu-7");
  EXPECT_EQ(Decide(*config, "amd", {0x1002}, {}).reason.rfind("auto:", 0), 0u);
  auto gpu8 = ParseNodeConfig(R"({"nodes": {"gpu-8": {"amd": "on"}}})", "node config c");
  ASSERT_TRUE(gpu8 && ApplyNodeSection(*gpu8, "gpu-8"));
  EXPECT_EQ(Decide(*gpu8, "amd", {0x1002}, {}).reason, "forced on by node config c nodes.gpu-8");

  for (const char* bad : {R"({"nodes": []})", R"({"nodes": {"n": {"nvidia": "maybe"}}})",
                          R"({"nodes": {"n": {"nvidia": true}}})", R"({"nodes": {"n": "off"}})"}) {
    auto parsed = ParseNodeConfig(bad, "node config f.json");
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().rfind("node config f.json", 0), 0u) << parsed.error();
  }
}

TEST(EnablePolicy, NodeLabelsOverrideTheConfigAndABadLabelIsReportedNotFatal) {
  const auto from = EnableOverridesFromLabels({{"plugins.gpustack.ai/nvidia", "off"},
                                               {"plugins.gpustack.ai/amd", "sometimes"},
                                               {"plugins.gpustack.ai/Bad_Name", "on"},
                                               {"kubernetes.io/hostname", "n"}});
  ASSERT_EQ(from.overrides.size(), 1u);
  EXPECT_EQ(from.overrides[0].first, "node label plugins.gpustack.ai/nvidia");
  EXPECT_EQ(from.overrides[0].second, "nvidia=off");
  ASSERT_EQ(from.problems.size(), 2u);
  EXPECT_NE(from.problems[0].find("plugins.gpustack.ai/Bad_Name"), std::string::npos);
  EXPECT_NE(from.problems[1].find("\"sometimes\" is not one of auto, on, off"), std::string::npos)
      << from.problems[1];

  NodeConfig config = Defaults();
  ASSERT_TRUE(ApplyEnableOverrides(config, "nvidia=on", "node config f"));
  ASSERT_TRUE(ApplyEnableOverrides(config, from.overrides[0].second, from.overrides[0].first));
  EXPECT_EQ(Decide(config, "nvidia", {0x10de}, Inventory()).reason,
            "forced off by node label plugins.gpustack.ai/nvidia");
}

TEST(IdentityOverrides, TheChartsManufacturerRowsReachTheIdentityWithoutARebuild) {
  std::map<std::string, std::string> vars = {
      {"GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME", "example.org/gpu"},
      {"GPUSTACK_NVIDIA_PARTITION_KIND", "mig2"},
      {"GPUSTACK_NVIDIA_ACCELERATABLE_RUNTIME_NAME", "nvidia-cdi"},
      {"GPUSTACK_NVIDIA_PCI_VENDOR_ID", "0302_10de, 0x1af4"},
      {"GPUSTACK_T_HEAD_PCI_VENDOR_ID", "1ded"}};
  auto env = [&](const std::string& name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
  PluginIdentity id;
  id.manufacturer = "nvidia";
  id.base_resource_name = "nvidia.com/gpu";
  ASSERT_TRUE(ApplyIdentityOverrides(id, env));
  EXPECT_EQ(id.base_resource_name, "example.org/gpu");
  EXPECT_EQ(id.partition_kind, "mig2");
  EXPECT_EQ(id.runtime_class, "nvidia-cdi");
  EXPECT_EQ(id.pci_vendor_ids, (std::vector<uint16_t>{0x10de, 0x1af4}));
  auto thead = VendorIdsOverride("t-head", env);
  ASSERT_TRUE(thead && *thead);
  EXPECT_EQ(**thead, (std::vector<uint16_t>{0x1ded}));
  auto none = VendorIdsOverride("amd", env);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  for (const auto& [variable, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME", "gpu", "is not a resource name"},
           {"GPUSTACK_NVIDIA_PARTITION_KIND", "MIG", "is not a partition kind"},
           {"GPUSTACK_NVIDIA_PCI_VENDOR_ID", "nvidia", "is not a PCI vendor id"},
           {"GPUSTACK_NVIDIA_PCI_VENDOR_ID", "10de0", "is not a PCI vendor id"}}) {
    vars = {{variable, value}};
    PluginIdentity bad;
    bad.manufacturer = "nvidia";
    auto status = ApplyIdentityOverrides(bad, env);
    ASSERT_FALSE(status) << variable << "=" << value;
    EXPECT_EQ(status.error().rfind(variable + "=\"" + value + "\"", 0), 0u) << status.error();
    EXPECT_NE(status.error().find(says), std::string::npos) << status.error();
  }
}

TEST(NodeConfig, AnUnknownKeyIsNamedNotIgnored) {
  auto typo = ParseNodeConfig(R"({"plugins": {"nvidia": {"enabled": "on"}}})", "node config f");
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error(),
            "node config f plugins.nvidia: unknown key \"enabled\" (expected enable, config)");
  EXPECT_EQ(typo.code(), Code::kInvalidArgument);
}

// The schema is versioned: v1 (or no version, the first files) is read, a later one refused.
TEST(NodeConfig, TheSchemaVersionIsV1AndALaterOneIsRefused) {
  EXPECT_TRUE(ParseNodeConfig(R"({"version": "v1", "default_enable": "off"})", "f"));
  EXPECT_TRUE(ParseNodeConfig(R"({"default_enable": "off"})", "f"));
  auto later = ParseNodeConfig(R"({"version": "v2", "default_enable": "off"})", "node config f");
  ASSERT_FALSE(later);
  EXPECT_EQ(later.error(), "node config f: version \"v2\" is not one this daemon reads (v1)");
  EXPECT_EQ(later.code(), Code::kInvalidArgument);
  EXPECT_FALSE(ParseNodeConfig(R"({"version": 1})", "f"));
}

TEST(NodeConfig, LibraryPathComesFromTheConfigElseTheVariableOfThatPlugin) {
  auto config = ParseNodeConfig(
      R"({"plugins": {"acme-ai": {"config": {"devices": "2"}},
                      "nvidia": {"config": {"library_path": "/opt/nv/libnvidia-ml.so.1"}}}})",
      "f");
  ASSERT_TRUE(config) << config.error();
  auto env = [](const std::string& name) {
    return name == "GPUSTACK_ACME_AI_LIBRARY"  ? std::string("/opt/acme/libacme.so")
           : name == "GPUSTACK_NVIDIA_LIBRARY" ? std::string("/elsewhere/libnvidia-ml.so.1")
                                               : std::string();
  };
  EXPECT_EQ(LibraryVariable("acme-ai"), "GPUSTACK_ACME_AI_LIBRARY");
  const ResolvedSettings third_party = SettingsFor(*config, "acme-ai", env);
  EXPECT_EQ(third_party.settings.at("library_path"), "/opt/acme/libacme.so");
  EXPECT_EQ(third_party.settings.at("devices"), "2");
  EXPECT_EQ(third_party.library_source, "GPUSTACK_ACME_AI_LIBRARY");
  const ResolvedSettings nvidia = SettingsFor(*config, "nvidia", env);
  EXPECT_EQ(nvidia.settings.at("library_path"), "/opt/nv/libnvidia-ml.so.1") << "config wins";
  EXPECT_EQ(nvidia.library_source, "node config plugins.nvidia.config.library_path");
  EXPECT_EQ(SettingsFor(*config, "amd", env).settings.count("library_path"), 0u);
}

TEST(NodeConfig, AFileOthersCanWriteIsRefusedAndAHugeOneIsNotRead) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpustack-nc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms(0755));
  const fs::path file = dir / "node.json";
  std::ofstream(file) << R"({"default_enable": "off"})";
  fs::permissions(file, fs::perms(0644));
  auto loaded = LoadNodeConfig(file, ::geteuid());
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(loaded->default_setting.setting, EnableSetting::kOff);

  fs::permissions(file, fs::perms(0666));
  auto refused = LoadNodeConfig(file, ::geteuid());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("writable by others"), std::string::npos) << refused.error();

  fs::permissions(file, fs::perms(0644));
  std::ofstream(file) << std::string(kMaxNodeConfigBytes + 1, ' ');
  auto huge = LoadNodeConfig(file, ::geteuid());
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().find("larger than"), std::string::npos) << huge.error();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpustack::runtime
