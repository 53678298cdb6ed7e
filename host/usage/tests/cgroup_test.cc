#include "host/usage/cgroup.h"

#include <gtest/gtest.h>

namespace gpustack::usage {
namespace {

constexpr const char* kUid = "0f2c6a3e-5b1d-4c7a-9e2f-1a2b3c4d5e6f";
constexpr const char* kId = "4c1f0e5a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e";

TEST(Cgroup, CgroupfsDriverOnV2) {
  auto ref = ContainerOfCgroup(std::string("0::/kubepods/burstable/pod") + kUid + "/" + kId + "\n");
  ASSERT_TRUE(ref) << ref.error();
  EXPECT_EQ(ref->pod_uid, kUid);
  EXPECT_EQ(ref->container_id, kId);
}

TEST(Cgroup, SystemdDriverWithContainerdAndCrio) {
  const std::string underscored = "0f2c6a3e_5b1d_4c7a_9e2f_1a2b3c4d5e6f";
  for (const char* runtime : {"cri-containerd-", "crio-", "docker-"}) {
    auto ref =
        ContainerOfCgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                          underscored + ".slice/" + runtime + kId + ".scope");
    ASSERT_TRUE(ref) << runtime << ": " << ref.error();
    EXPECT_EQ(ref->pod_uid, kUid) << runtime;
    EXPECT_EQ(ref->container_id, kId) << runtime;
  }
  // A guaranteed Pod sits right under kubepods.slice.
  auto guaranteed = ContainerOfCgroup("0::/kubepods.slice/kubepods-pod" + underscored +
                                      ".slice/cri-containerd-" + kId + ".scope");
  ASSERT_TRUE(guaranteed);
  EXPECT_EQ(guaranteed->pod_uid, kUid);
}

TEST(Cgroup, V1LinesAndACgroupNamespaceView) {
  const std::string v1 = std::string("12:pids:/kubepods/besteffort/pod") + kUid + "/" + kId +
                         "\n4:memory:/kubepods/besteffort/pod" + kUid + "/" + kId +
                         "\n1:name=systemd:/\n0::/\n";
  auto ref = ContainerOfCgroup(v1);
  ASSERT_TRUE(ref) << ref.error();
  EXPECT_EQ(ref->pod_uid, kUid);
  // Read from inside a container with its own cgroup namespace.
  auto nested = ContainerOfCgroup(std::string("0::/../../kubepods/pod") + kUid + "/" + kId);
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->pod_uid, kUid);
}

TEST(Cgroup, ThePodsOwnCgroupAndRuntimeHelpersHaveNoContainer) {
  auto sandbox = ContainerOfCgroup(std::string("0::/kubepods/besteffort/pod") + kUid);
  ASSERT_TRUE(sandbox);
  EXPECT_EQ(sandbox->pod_uid, kUid);
  EXPECT_EQ(sandbox->container_id, "");
  auto conmon =
      ContainerOfCgroup(std::string("0::/kubepods.slice/kubepods-pod") +
                        "0f2c6a3e_5b1d_4c7a_9e2f_1a2b3c4d5e6f.slice/crio-conmon-" + kId + ".scope");
  ASSERT_TRUE(conmon);
  EXPECT_EQ(conmon->container_id, "");
}

TEST(Cgroup, HostProcessesAndLookalikesAreNoPods) {
  for (const std::string& text :
       {std::string("0::/system.slice/nvidia-persistenced.service\n"), std::string("0::/\n"),
        std::string(""), std::string("garbage without colons"),
        std::string("0::/kubepods/besteffort/podnot-a-uid/") + kId,
        std::string("0::/kubepods/besteffort/xpod") + kUid + "/" + kId,
        std::string("0::/user.slice/pod") + "0F2C6A3E-5B1D-4C7A-9E2F-1A2B3C4D5E6F"}) {
    auto ref = ContainerOfCgroup(text);
    ASSERT_FALSE(ref) << text;
    EXPECT_EQ(ref.failure().reason, kNoPodComponent) << text;
  }
}

}  // namespace
}  // namespace gpustack::usage
