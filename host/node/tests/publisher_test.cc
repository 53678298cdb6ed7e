#include "host/node/publisher.h"

#include <gtest/gtest.h>

namespace gpustack::node {
namespace {

using Json = nlohmann::json;

runtime::PluginStatus Running(const std::string& name) {
  runtime::PluginStatus p;
  p.name = name;
  p.enabled = true;
  p.state = runtime::PluginState::kRunning;
  return p;
}

const Json& PluginsReady(const Json& status) { return status["conditions"][0]; }

TEST(DevicesStatus, PluginsReadyWhenEveryEnabledPluginRunsAndReadsItsCards) {
  runtime::NodeReport report;
  report.plugins = {Running("nvidia")};
  const Json status = DevicesStatusJson(report, {}, "2026-12-05T00:00:00Z");
  EXPECT_EQ(PluginsReady(status)["status"], "True");
  EXPECT_FALSE(status["plugins"][0].contains("message"));
}

TEST(DevicesStatus, APluginWhoseCardsAreAllUnreadableIsNotReadyAndSaysWhy) {
  runtime::NodeReport report;
  report.plugins = {Running("nvidia")};
  report.plugins[0].faults = {"none of nvidia's 4 accelerator(s) could be read"};
  const Json status = DevicesStatusJson(report, {}, "2026-12-05T00:00:00Z");
  EXPECT_EQ(PluginsReady(status)["status"], "False");
  EXPECT_EQ(PluginsReady(status)["message"],
            "nvidia running: none of nvidia's 4 accelerator(s) could be read");
  EXPECT_EQ(status["plugins"][0]["message"], "none of nvidia's 4 accelerator(s) could be read");
}

TEST(DevicesStatus, TwoPluginsRefusedForOneVendorSayHowToKeepOne) {
  runtime::NodeReport report;
  for (const char* name : {"acme", "acme-fork"}) {
    runtime::PluginStatus p;
    p.name = name;
    p.state = runtime::PluginState::kRefused;
    p.error = Error{
        "plugins acme and acme-fork both claim PCI vendor 0x1234, so neither runs; "
        "keep one by turning the other off on this node"};
    report.plugins.push_back(p);
  }
  const Json status = DevicesStatusJson(report, {}, "2026-12-05T00:00:00Z");
  EXPECT_EQ(PluginsReady(status)["status"], "False");
  ASSERT_EQ(status["plugins"].size(), 2u);
  EXPECT_EQ(status["plugins"][1]["state"], "refused");
  EXPECT_NE(status["plugins"][1]["message"].get<std::string>().find("keep one"), std::string::npos);
}

TEST(DevicesStatus, SlicesCountedButNotEnforcedSaySoAndWhy) {
  using enforcement::Binding;
  runtime::NodeReport report;
  report.plugins = {Running("nvidia"), Running("mthreads")};
  EXPECT_EQ(DevicesStatusJson(report, {}, "")["conditions"].size(), 1u);  // nobody slices
  std::vector<enforcement::State> states = {
      {.manufacturer = "nvidia",
       .enforcer = "hami-core",
       .binding = Binding::kCountedOnly,
       .message = "slices are counted, not enforced: no source"},
      {.manufacturer = "mthreads", .enforcer = "", .binding = Binding::kUnknown, .message = "?"}};
  auto condition = [&] { return DevicesStatusJson(report, {}, "", states)["conditions"][1]; };
  EXPECT_EQ(condition()["type"], "SlicesEnforced");
  EXPECT_EQ(condition()["status"], "False");
  EXPECT_EQ(condition()["reason"], "CountedNotEnforced");
  EXPECT_EQ(condition()["message"],
            "nvidia: slices are counted, not enforced: no source; mthreads: ?");
  states[0].binding = Binding::kBound;
  states[0].message = "enforced by hami-core";
  EXPECT_EQ(condition()["status"], "Unknown");  // mthreads declares nothing the daemon can check
  EXPECT_EQ(condition()["reason"], "NoEnforcerDeclared");
  EXPECT_EQ(condition()["message"], "mthreads: ?; nvidia: enforced by hami-core");
  states.pop_back();
  EXPECT_EQ(condition()["status"], "True");
  EXPECT_EQ(condition()["reason"], "Enforced");
}

}  // namespace
}  // namespace gpustack::node
