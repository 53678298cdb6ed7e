#include "host/runtime/node_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

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

TEST(NodeConfig, AnUnknownKeyIsNamedNotIgnored) {
  auto typo = ParseNodeConfig(R"({"plugins": {"nvidia": {"enabled": "on"}}})", "node config f");
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error(),
            "node config f plugins.nvidia: unknown key \"enabled\" (expected enable, config)");
  EXPECT_EQ(typo.code(), Code::kInvalidArgument);
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
