// The loader's pure parts: the search path and the install location.
#include <gtest/gtest.h>

#include "host/loader/dlopen_source.h"

namespace gpustack::loader {
namespace {

TEST(SearchPath, FlagsThenEnvThenDefaultWithoutDuplicates) {
  const auto dirs = PluginSearchPath({"/flag/a", "/flag/b/"}, "/env/x::/flag/a:/env/y",
                                     "/usr/lib/gpustack/plugins");
  const std::vector<std::filesystem::path> expected{"/flag/a", "/flag/b/", "/env/x", "/env/y",
                                                    "/usr/lib/gpustack/plugins"};
  EXPECT_EQ(dirs, expected);
}

TEST(SearchPath, DefaultIsBesideTheExecutable) {
  EXPECT_EQ(DefaultPluginDir("/opt/gpustack/bin/gpustack-operator"),
            "/opt/gpustack/lib/gpustack/plugins");
  EXPECT_EQ(DefaultPluginDir("/usr/local/bin/../sbin/gpustack-operator"),
            "/usr/local/lib/gpustack/plugins");
}

}  // namespace
}  // namespace gpustack::loader
