#include "host/common/yaml.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace gpustack {
namespace {

TEST(ToYaml, StringsThatLookLikeOtherTypesAreQuoted) {
  const nlohmann::json value = {{"computeCapability", "8.6"},
                                {"driverVersion", "580.159.03"},
                                {"pciClass", "0x030200"},
                                {"flag", "true"},
                                {"empty", ""},
                                {"plain", "nvidia-a10g"},
                                {"count", 128},
                                {"overcommit", true}};
  const YAML::Node back = YAML::Load(ToYaml(value));
  // yaml-cpp tags a quoted scalar "!" and a plain one "?".
  for (const char* key : {"computeCapability", "pciClass", "flag", "empty"}) {
    EXPECT_EQ(back[key].Tag(), "!") << key << " must be quoted:\n" << ToYaml(value);
    EXPECT_EQ(back[key].as<std::string>(), value[key].get<std::string>());
  }
  EXPECT_EQ(back["plain"].Tag(), "?");
  EXPECT_EQ(back["driverVersion"].as<std::string>(), "580.159.03");
  EXPECT_EQ(back["count"].as<int>(), 128);
  EXPECT_TRUE(back["overcommit"].as<bool>());
}

TEST(ToYaml, NestedListsAndEmptyContainers) {
  const nlohmann::json value = {
      {"groups", {{{"id", "a10g"}, {"accelerators", nlohmann::json::array()}}}},
      {"status", nlohmann::json::object()}};
  const std::string yaml = ToYaml(value);
  const YAML::Node back = YAML::Load(yaml);
  EXPECT_EQ(back["groups"][0]["id"].as<std::string>(), "a10g");
  EXPECT_EQ(back["groups"][0]["accelerators"].size(), 0u);
  EXPECT_TRUE(back["status"].IsMap());
  EXPECT_NE(yaml.find("  - accelerators: []\n    id: a10g"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace gpustack
