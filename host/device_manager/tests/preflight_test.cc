// What preflight reads from containerd's config: a runtime handler, as containerd would parse it.
#include "host/device_manager/preflight.h"

#include <gtest/gtest.h>

namespace gpustack::device_manager {
namespace {

bool Has(std::string_view config, std::string_view name = "nvidia") {
  auto has = HasRuntimeHandler(config, name);
  EXPECT_TRUE(has) << has.error();
  return has && *has;
}

TEST(HasRuntimeHandler, FindsTheHandlerTableInEverySpellingAndConfigVersion) {
  EXPECT_TRUE(
      Has("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
          "  runtime_type = \"io.containerd.runc.v2\"\n"));
  EXPECT_TRUE(Has("  [plugins.'cri'.containerd.runtimes.\"nvidia\"]   # the toolkit's\n"));
  EXPECT_TRUE(
      Has("version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
          "runtime_type = 'io.containerd.runc.v2'\n"));
  // The same table written inline, or as a dotted key of its parent.
  EXPECT_TRUE(Has("[plugins.cri.containerd]\nruntimes = { nvidia = { runtime_type = 'x' } }\n"));
  EXPECT_TRUE(Has("[plugins.cri.containerd]\nruntimes.nvidia.runtime_type = 'x'\n"));
}

TEST(HasRuntimeHandler, ACommentedOutQuotedOrOtherHandlerDoesNotCount) {
  EXPECT_FALSE(
      Has("# [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
          "#   runtime_type = \"io.containerd.runc.v2\"\n"));
  EXPECT_FALSE(Has("[plugins.cri.containerd.runtimes.nvidia-experimental]\n"));
  EXPECT_FALSE(Has("[plugins.cri.containerd.runtimes.xnvidia]\n"));
  EXPECT_FALSE(Has("default_runtime_name = \"runtimes.nvidia]\"\n"));
  EXPECT_FALSE(Has(""));
  // A header that appears only inside a multi-line string is text, not a table.
  EXPECT_FALSE(
      Has("[plugins.cri]\nnote = \"\"\"\n[plugins.cri.containerd.runtimes.nvidia]\n\"\"\"\n"));
  // Outside plugins, a runtimes table is not containerd's.
  EXPECT_FALSE(Has("[elsewhere.runtimes.nvidia]\n"));
}

TEST(HasRuntimeHandler, MalformedTomlIsAnErrorNamingWhere) {
  auto has = HasRuntimeHandler("[plugins.cri\nruntime = 1\n", "nvidia");
  ASSERT_FALSE(has);
  EXPECT_NE(has.error().find("not valid TOML at line 1"), std::string::npos) << has.error();
}

}  // namespace
}  // namespace gpustack::device_manager
