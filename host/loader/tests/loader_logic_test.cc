// The loader's pure parts: version negotiation and the search path.
#include <gtest/gtest.h>

#include "host/loader/loader.h"

namespace gpustack::loader {
namespace {

TEST(Negotiation, SameMajorUsesTheLowerMinor) {
  auto older_plugin = CheckNegotiation({1, 3}, 1, 1, GPUSTACK_STATUS_OK);
  ASSERT_TRUE(older_plugin) << older_plugin.error();
  EXPECT_EQ(older_plugin->minor, 1u);
  auto newer_plugin = CheckNegotiation({1, 0}, 1, 7, GPUSTACK_STATUS_OK);
  ASSERT_TRUE(newer_plugin) << newer_plugin.error();
  EXPECT_EQ(newer_plugin->minor, 0u);
}

TEST(Negotiation, RefusalsNameBothVersions) {
  auto refused = CheckNegotiation({1, 0}, 2, 0, GPUSTACK_STATUS_INCOMPATIBLE_VERSION);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), "the plugin refused the host's ABI (host ABI 1.0, plugin ABI 2.0)");
  auto lied = CheckNegotiation({1, 0}, 2, 0, GPUSTACK_STATUS_OK);
  ASSERT_FALSE(lied);
  EXPECT_NE(lied.error().find("different ABI major"), std::string::npos);
  auto broken = CheckNegotiation({1, 0}, 1, 0, GPUSTACK_STATUS_INTERNAL);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("INTERNAL"), std::string::npos);
}

TEST(SearchPath, FlagsThenEnvThenDefaultWithoutDuplicates) {
  const auto dirs = PluginSearchPath({"/flag/a", "/flag/b/"}, "/env/x::/flag/a:/env/y",
                                     "/usr/lib/gpustack/plugins");
  const std::vector<std::filesystem::path> expected{"/flag/a", "/flag/b/", "/env/x", "/env/y",
                                                    "/usr/lib/gpustack/plugins"};
  EXPECT_EQ(dirs, expected);
}

TEST(SearchPath, DefaultIsBesideTheExecutable) {
  const auto dir = DefaultPluginDir();
  EXPECT_EQ(dir.filename(), "plugins");
  EXPECT_EQ(dir.parent_path().filename(), "gpustack");
}

}  // namespace
}  // namespace gpustack::loader
