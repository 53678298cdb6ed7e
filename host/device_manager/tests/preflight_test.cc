// What preflight reads from containerd's config: a runtime handler, not a commented-out one.
#include "host/device_manager/preflight.h"

#include <gtest/gtest.h>

namespace gpustack::device_manager {
namespace {

TEST(HasRuntimeHandler, FindsTheHandlerTableInEitherSpelling) {
  EXPECT_TRUE(HasRuntimeHandler(
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n",
      "nvidia"));
  EXPECT_TRUE(HasRuntimeHandler(
      "  [plugins.'cri'.containerd.runtimes.\"nvidia\"]   # the toolkit's\n", "nvidia"));
}

TEST(HasRuntimeHandler, ACommentedOutOrOtherHandlerDoesNotCount) {
  EXPECT_FALSE(
      HasRuntimeHandler("# [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
                        "#   runtime_type = \"io.containerd.runc.v2\"\n",
                        "nvidia"));
  EXPECT_FALSE(
      HasRuntimeHandler("[plugins.cri.containerd.runtimes.nvidia-experimental]\n", "nvidia"));
  EXPECT_FALSE(HasRuntimeHandler("[plugins.cri.containerd.runtimes.xnvidia]\n", "nvidia"));
  EXPECT_FALSE(HasRuntimeHandler("default_runtime_name = \"runtimes.nvidia]\"\n", "nvidia"));
  EXPECT_FALSE(HasRuntimeHandler("", "nvidia"));
}

}  // namespace
}  // namespace gpustack::device_manager
