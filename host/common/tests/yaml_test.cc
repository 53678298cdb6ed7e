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

TEST(FromYaml, TypesAnchorsAndSeveralDocuments) {
  auto docs = FromYaml(R"(
a: &x {n: 1, f: 2.5, b: true, s: "8.6", z: null, plain: v1}
b: *x
---
---
- 1
- "2"
)");
  ASSERT_TRUE(docs) << docs.error();
  ASSERT_EQ(docs->size(), 2u);
  const nlohmann::json& first = (*docs)[0];
  EXPECT_EQ(first["a"]["n"], 1);
  EXPECT_EQ(first["a"]["f"], 2.5);
  EXPECT_EQ(first["a"]["b"], true);
  EXPECT_EQ(first["a"]["s"], "8.6");
  EXPECT_TRUE(first["a"]["z"].is_null());
  EXPECT_EQ(first["a"]["plain"], "v1");
  EXPECT_EQ(first["b"], first["a"]);
  EXPECT_EQ((*docs)[1], nlohmann::json::parse(R"([1, "2"])"));
  auto round_trip = FromYaml(ToYaml(first));
  ASSERT_TRUE(round_trip);
  EXPECT_EQ((*round_trip)[0], first);
  auto bad = FromYaml("a: [1, 2");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("YAML"), std::string::npos);
}

}  // namespace
}  // namespace gpustack
