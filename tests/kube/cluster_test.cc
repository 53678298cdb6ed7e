// The full testbed (testbed_full: scheduler, controller-manager, kwok nodes, Kueue out of
// cluster, all on loopback): simulated nodes come up Ready with the fixture's labels and
// capacity; a Pod for a Kueue LocalQueue is gated, admitted, bound to a kwok node and runs;
// the real helm CLI installs and uninstalls a chart.
#include <gtest/gtest.h>

#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

TEST(Cluster, KwokNodesAreReadyWithFixtureLabelsAndCapacity) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  auto nodes = client->List(resources::Nodes(), "", {.label_selector = "type=kwok"});
  ASSERT_TRUE(nodes) << nodes.error();
  ASSERT_EQ(nodes->items.size(), 2u);
  for (const Json& node : nodes->items) {
    EXPECT_EQ(node["metadata"]["labels"]["feature.node.kubernetes.io/pci-0302_10de.present"],
              "true");
    EXPECT_EQ(node["status"]["allocatable"]["nvidia.com/gpu"], "8");
    bool ready = false;
    for (const Json& condition : node["status"]["conditions"]) {
      ready |= condition["type"] == "Ready" && condition["status"] == "True";
    }
    EXPECT_TRUE(ready) << node["metadata"]["name"];
  }
}

TEST(Cluster, KueueAdmitsAPodThatThenRunsOnAKwokNode) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "kueue");
  ASSERT_TRUE(testing::WaitForDefaultServiceAccount(*client, ns));
  const ResourceType flavors{"kueue.x-k8s.io", "v1beta2", "resourceflavors", false};
  const ResourceType cluster_queues{"kueue.x-k8s.io", "v1beta2", "clusterqueues", false};
  const ResourceType local_queues{"kueue.x-k8s.io", "v1beta2", "localqueues", true};
  const ResourceType workloads{"kueue.x-k8s.io", "v1beta2", "workloads", true};
  ApplyOptions apply{.field_manager = "cluster-test"};
  auto flavor = client->Apply(flavors, Json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
    "spec": {"nodeLabels": {"feature.node.kubernetes.io/pci-0302_10de.present": "true"}}})"),
                              apply);
  ASSERT_TRUE(flavor) << flavor.error();
  auto queue = client->Apply(cluster_queues, Json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a100"},
    "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "credits.gpustack.ai/nvidia"],
      "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 64},
        {"name": "credits.gpustack.ai/nvidia", "nominalQuota": "12800k"}]}]}]}})"),
                             apply);
  ASSERT_TRUE(queue) << queue.error();
  Json local = Json::parse(R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                               "metadata": {"name": "a100"}, "spec": {"clusterQueue": "a100"}})");
  local["metadata"]["namespace"] = ns;
  ASSERT_TRUE(client->Apply(local_queues, local, apply));

  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "trainer", "labels": {"kueue.x-k8s.io/queue-name": "a100"}},
    "spec": {"tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
             "containers": [{"name": "main", "image": "busybox",
      "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1"}}}]}})");
  pod["metadata"]["namespace"] = ns;
  // The apiserver calls Kueue's webhook on 127.0.0.1: the Pod comes back gated.
  auto created = client->Create(resources::Pods(), pod);
  ASSERT_TRUE(created) << created.error();
  bool gated = false;
  for (const Json& gate : (*created)["spec"].value("schedulingGates", Json::array())) {
    gated |= gate["name"] == "kueue.x-k8s.io/admission";
  }
  EXPECT_TRUE(gated) << (*created)["spec"].dump();

  Json running;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto got = client->Get(resources::Pods(), ns, "trainer");
        if (!got) return false;
        running = *got;
        return running["status"].value("phase", "") == "Running";
      },
      std::chrono::seconds(60)))
      << running.dump(1);
  // Admission injected the flavor's node labels.
  EXPECT_EQ(running["spec"]["nodeSelector"]["feature.node.kubernetes.io/pci-0302_10de.present"],
            "true");
  std::string node = running["spec"].value("nodeName", "");
  EXPECT_EQ(node.rfind("kwok-node-", 0), 0u) << node;
  EXPECT_FALSE(running["spec"].contains("schedulingGates"));
  auto admitted = client->List(workloads, ns);
  ASSERT_TRUE(admitted) << admitted.error();
  ASSERT_EQ(admitted->items.size(), 1u);
  bool is_admitted = false;
  for (const Json& condition : admitted->items[0]["status"]["conditions"]) {
    is_admitted |= condition["type"] == "Admitted" && condition["status"] == "True";
  }
  EXPECT_TRUE(is_admitted) << admitted->items[0]["status"].dump();
}

TEST(Cluster, HelmInstallsAndUninstallsAChart) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "helm");
  std::string helm = testing::TestbedEnv("HELM_BIN") + "/helm --kubeconfig " +
                     std::getenv("KUBECONFIG") + " --namespace " + ns + " ";
  int status = 0;
  std::string installed =
      testing::Run(helm + "install probe " + GPUSTACK_TEST_CHART + " --set greeting=hi", &status);
  ASSERT_EQ(status, 0) << installed;
  EXPECT_NE(installed.find("STATUS: deployed"), std::string::npos) << installed;
  auto probe = client->Get(resources::ConfigMaps(), ns, "probe-probe");
  ASSERT_TRUE(probe) << probe.error();
  EXPECT_EQ((*probe)["data"]["greeting"], "hi");
  // Helm read the server's version: the version ldflags of the testbed build are real.
  EXPECT_EQ((*probe)["data"]["kubeVersion"].get<std::string>().rfind("v1.35.", 0), 0u)
      << probe->dump();
  std::string listed = testing::Run(helm + "list", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(listed.find("probe"), std::string::npos) << listed;
  std::string removed = testing::Run(helm + "uninstall probe --wait", &status);
  ASSERT_EQ(status, 0) << removed;
  auto gone = client->Get(resources::ConfigMaps(), ns, "probe-probe");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(IsNotFound(gone.failure()));
}

}  // namespace
}  // namespace gpustack::kube
