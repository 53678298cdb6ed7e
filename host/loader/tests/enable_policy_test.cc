#include "host/loader/enable_policy.h"

#include <gtest/gtest.h>

namespace gpustack::loader {
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
        R"({"plugins": {"x": {"config": {"k": 1}}}})", R"({"default_enable": "yes"})"}) {
    auto parsed = ParseNodeConfig(bad, "node config f.json");
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().rfind("node config f.json", 0), 0u) << parsed.error();
  }
  EXPECT_TRUE(ApplyEnableOverrides(config, "", "--enable")) << "empty is a no-op";
}

}  // namespace
}  // namespace gpustack::loader
