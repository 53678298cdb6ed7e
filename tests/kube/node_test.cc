// Tier B (the testbed_node fixture): a real kubelet on containerd + runc + the CNI bridge, with
// a local busybox image. A Pod is scheduled, gets an address, runs, and its output is read back
// through the apiserver's log endpoint (apiserver -> kubelet, client certificates both ways).
#include <gtest/gtest.h>

#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

TEST(RealNode, APodRunsAndItsLogComesBackThroughTheApiserver) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  auto node = client->Get(resources::Nodes(), "", "testbed-node");
  ASSERT_TRUE(node) << node.error();
  EXPECT_NE((*node)["status"]["nodeInfo"]["containerRuntimeVersion"].get<std::string>().find(
                "containerd://"),
            std::string::npos);

  std::string ns = testing::CreateNamespace(*client, "node");
  ASSERT_TRUE(testing::WaitForDefaultServiceAccount(*client, ns));
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"},
    "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
             "nodeSelector": {"kubernetes.io/hostname": "testbed-node"},
             "containers": [{"name": "main", "image": "docker.io/library/busybox:local",
                             "imagePullPolicy": "Never",
                             "command": ["/bin/sh", "-c", "echo hello from $(cat /proc/self/cgroup | wc -l) cgroups"]}]}})");
  pod["metadata"]["namespace"] = ns;
  ASSERT_TRUE(client->Create(resources::Pods(), pod));
  Json done;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto got = client->Get(resources::Pods(), ns, "hello");
        if (!got) return false;
        done = *got;
        std::string phase = done["status"].value("phase", "");
        return phase == "Succeeded" || phase == "Failed";
      },
      std::chrono::seconds(90)))
      << done.dump(1);
  EXPECT_EQ(done["status"]["phase"], "Succeeded") << done["status"].dump(1);
  EXPECT_EQ(done["status"].value("podIP", "").rfind("10.88.", 0), 0u) << done["status"].dump(1);
  auto log = client->GetText("/api/v1/namespaces/" + ns + "/pods/hello/log");
  ASSERT_TRUE(log) << log.error();
  EXPECT_NE(log->find("hello from "), std::string::npos) << *log;
  EXPECT_NE(log->find(" cgroups"), std::string::npos) << *log;
}

}  // namespace
}  // namespace gpustack::kube
