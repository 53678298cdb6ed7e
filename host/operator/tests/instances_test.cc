#include "host/operator/instances.h"

#include <gtest/gtest.h>

namespace gpustack::op {
namespace {

Json T4Type() {
  return Json::parse(R"({
    "metadata": {"name": "nvidia-t4"},
    "spec": {"acceleratable": true, "acceleratorGroup": "nvidia-tesla-t4",
             "unitResources": {"cpu": "4", "ram": "16Gi"}},
    "status": {"entrance": "gpustack-fnv64-0123456789abcdef"}})");
}

Json CpuType() {
  return Json::parse(R"({"metadata": {"name": "cpu"},
    "spec": {"acceleratable": false, "unitResources": {"cpu": "1", "ram": "2Gi"}}})");
}

Json SlicedInstance() {
  return Json::parse(R"({
    "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
    "metadata": {"name": "sliced-demo", "namespace": "default", "uid": "u-1"},
    "spec": {"type": "nvidia-t4", "image": "busybox", "command": ["sleep", "1d"],
             "env": [{"name": "A", "value": "1"}],
             "ports": [{"port": 8080, "name": "http"}, {"port": 9000, "protocol": "UDP",
                        "name": "much-too-long-port-name"}],
             "volume": {"ephemeral": {"capacity": "10Gi"}},
             "additionalVolumes": [{"mountPath": "/data", "readOnly": true,
                                    "configMap": {"name": "cfg"}}],
             "resources": {"cpu": "2", "ram": "4Gi", "localStorage": "8Gi", "accelerator": 1,
                           "acceleratorSlicedMemoryPercentage": 20},
             "sshPublicKey": {"name": "my-key"}}})");
}

Manufacturer Nvidia() {
  Manufacturer m;
  m.key = "nvidia";
  m.base = "nvidia.com/gpu";
  m.partition_kind = "mig";
  return m;
}

InstanceContext Context(const Json& type, const Manufacturer* vendor) {
  InstanceContext c;
  c.type = &type;
  c.vendor = vendor;
  c.settings.instance_ssh_server_image = "gpustack/gpustack-ssh-server:v0.1.0";
  c.settings.image_pull_policy = "IfNotPresent";
  return c;
}

const Json* Container(const Json& pod, const std::string& name) {
  for (const Json& c : pod["spec"]["containers"])
    if (c["name"] == name) return &c;
  return nullptr;
}

TEST(InstancePod, SlicedWithSshAsSection7Lists) {
  const Json type = T4Type();
  const Manufacturer nvidia = Nvidia();
  auto pod = InstancePod(SlicedInstance(), Context(type, &nvidia));
  ASSERT_TRUE(pod) << pod.error();
  EXPECT_EQ((*pod)["metadata"]["name"], "sliced-demo");
  EXPECT_EQ((*pod)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            "gpustack-fnv64-0123456789abcdef");
  EXPECT_EQ((*pod)["metadata"]["labels"]["app.kubernetes.io/part-of"], "u-1");
  EXPECT_EQ((*pod)["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ((*pod)["metadata"]["ownerReferences"][0]["controller"], true);
  const Json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["hostIPC"], true);
  EXPECT_EQ(spec["shareProcessNamespace"], true);
  EXPECT_EQ(spec["automountServiceAccountToken"], false);
  EXPECT_EQ(spec["enableServiceLinks"], false);
  EXPECT_FALSE(spec.contains("runtimeClassName"));
  EXPECT_FALSE(spec.contains("nodeSelector"));
  EXPECT_EQ(spec["volumes"][0]["emptyDir"]["sizeLimit"], "10Gi");

  const Json* main = Container(*pod, "main");
  ASSERT_NE(main, nullptr);
  const Json& limits = (*main)["resources"]["limits"];
  EXPECT_EQ(limits["cpu"], "2");
  EXPECT_EQ(limits["memory"], "4Gi");
  EXPECT_EQ(limits["ephemeral-storage"], "8Gi");
  EXPECT_EQ(limits["nvidia.com/gpu.sliced"], "1");
  EXPECT_EQ(limits["nvidia.com/gpu.sliced.memory-percentage"], "20");
  EXPECT_EQ(limits["nvidia.com/gpu.sliced.cores-percentage"], "100");
  EXPECT_FALSE(limits.contains("nvidia.com/gpu"));
  // Overcommit (the default): the accelerated unit floor, extended resources equal.
  const Json& requests = (*main)["resources"]["requests"];
  EXPECT_EQ(requests["cpu"], "100m");
  EXPECT_EQ(requests["memory"], "128Mi");
  EXPECT_EQ(requests["ephemeral-storage"], std::to_string(8LL * 1024 * 1024 * 1024 / 8));
  EXPECT_EQ(requests["nvidia.com/gpu.sliced.memory-percentage"], "20");
  EXPECT_EQ((*main)["securityContext"]["runAsUser"], 0);
  EXPECT_FALSE((*main)["securityContext"].contains("privileged"));
  // Ports: a name Kubernetes refuses is left out rather than failing the Pod.
  EXPECT_EQ((*main)["ports"][0]["name"], "http");
  EXPECT_EQ((*main)["ports"][0]["protocol"], "TCP");
  EXPECT_FALSE((*main)["ports"][1].contains("name"));
  // The workspace at /workspace, the additional volume in main only.
  EXPECT_EQ((*main)["volumeMounts"][0]["mountPath"], "/workspace");
  EXPECT_EQ((*main)["volumeMounts"][1]["mountPath"], "/data");
  EXPECT_EQ((*main)["volumeMounts"][1]["readOnly"], true);

  const Json* sshd = Container(*pod, "sshd");
  ASSERT_NE(sshd, nullptr);
  EXPECT_EQ((*sshd)["image"], "gpustack/gpustack-ssh-server:v0.1.0");
  EXPECT_EQ((*sshd)["resources"]["limits"],
            Json({{"device.gpustack.ai/nvidia.visibility", "1"}}));
  EXPECT_EQ((*sshd)["securityContext"]["capabilities"]["add"],
            Json::array({"SYS_ADMIN", "SYS_PTRACE"}));
  EXPECT_EQ((*sshd)["stdin"], true);
  EXPECT_EQ((*sshd)["tty"], true);
  EXPECT_EQ((*sshd)["env"][0], Json({{"name", "VOLUME_MOUNT_PATH"}, {"value", "/workspace"}}));
  for (const Json& m : (*sshd)["volumeMounts"]) EXPECT_NE(m["mountPath"], "/data");
  bool keys = false;
  for (const Json& v : spec["volumes"]) {
    if (v["name"] != "ssh-authorized-keys") continue;
    keys = true;
    EXPECT_EQ(v["secret"]["secretName"], "my-key");
    EXPECT_EQ(v["secret"]["defaultMode"], 0600);
  }
  EXPECT_TRUE(keys);
}

TEST(InstancePod, WholeCardsPartitionsAndCpuOnly) {
  const Json type = T4Type();
  const Manufacturer nvidia = Nvidia();
  Json instance = SlicedInstance();
  instance["spec"]["resources"] = {{"accelerator", "2"}, {"cpu", "8"}};
  auto whole = InstancePod(instance, Context(type, &nvidia));
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ((*Container(*whole, "main"))["resources"]["limits"]["nvidia.com/gpu"], "2");
  EXPECT_EQ((*Container(*whole, "sshd"))["resources"]["limits"]
                ["device.gpustack.ai/nvidia.visibility"],
            "2");

  instance["spec"]["resources"] = {{"accelerator", 1}, {"acceleratorPartitionedProfile", "1g.10gb"}};
  auto partition = InstancePod(instance, Context(type, &nvidia));
  ASSERT_TRUE(partition);
  const Json& limits = (*Container(*partition, "main"))["resources"]["limits"];
  EXPECT_EQ(limits["nvidia.com/gpu.partitioned"], "1");
  EXPECT_EQ(limits["nvidia.com/gpu.partitioned.mig-1g.10gb"], "1");

  const Json cpu = CpuType();
  instance["spec"]["resources"] = {{"cpu", "2"}, {"ram", "1Gi"}};
  instance["spec"].erase("sshPublicKey");
  auto general = InstancePod(instance, Context(cpu, nullptr));
  ASSERT_TRUE(general);
  EXPECT_EQ((*general)["spec"]["containers"].size(), 1u);
  const Json& r = (*Container(*general, "main"))["resources"];
  EXPECT_EQ(r["limits"], Json({{"cpu", "2"}, {"memory", "1Gi"}}));
  EXPECT_EQ(r["requests"], Json({{"cpu", "800m"}, {"memory", "128Mi"}}));

  instance["spec"]["resources"]["accelerator"] = "1.5";
  auto bad = InstancePod(instance, Context(type, &nvidia));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("spec.resources.accelerator"), std::string::npos);
}

TEST(InstancePod, PinsRuntimeClassSecretsAndPersistentWorkspace) {
  const Json type = T4Type();
  const Manufacturer nvidia = Nvidia();
  Json instance = SlicedInstance();
  instance["spec"]["nodeName"] = "node-a";
  instance["spec"]["volume"] = {{"persistent", {{"name", "my-claim"}}}};
  instance["spec"]["volumeMount"] = "/home/me";
  instance["spec"]["imagePullSecret"] = {{"name", "own"}};
  instance["spec"]["privileged"] = true;
  InstanceContext c = Context(type, &nvidia);
  c.runtime_class = "nvidia";
  c.pinned_hostname = "host-a";
  c.settings.image_pull_secrets = " shared, own ,";
  c.settings.container_registry = "registry.local:5000";
  c.settings.instance_resources_overcommit = false;
  auto pod = InstancePod(instance, c);
  ASSERT_TRUE(pod);
  const Json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["runtimeClassName"], "nvidia");
  EXPECT_EQ(spec["nodeSelector"], Json({{"kubernetes.io/hostname", "host-a"}}));
  EXPECT_EQ(spec["imagePullSecrets"], Json::parse(R"([{"name":"own"},{"name":"shared"}])"));
  EXPECT_EQ(spec["volumes"][0]["persistentVolumeClaim"]["claimName"], "my-claim");
  const Json* main = Container(*pod, "main");
  EXPECT_EQ((*main)["volumeMounts"][0]["mountPath"], "/home/me");
  EXPECT_EQ((*main)["securityContext"]["privileged"], true);
  EXPECT_EQ((*main)["resources"]["requests"], (*main)["resources"]["limits"]);  // no overcommit
  EXPECT_EQ((*Container(*pod, "sshd"))["image"],
            "registry.local:5000/gpustack/gpustack-ssh-server:v0.1.0");
  EXPECT_EQ((*Container(*pod, "sshd"))["env"][0]["value"], "/home/me");
}

TEST(RewrittenImage, RegistryAndNamespace) {
  Settings s;
  EXPECT_EQ(RewrittenImage("gpustack/x:v1", s), "gpustack/x:v1");
  s.container_namespace = "mirror";
  EXPECT_EQ(RewrittenImage("gpustack/x:v1", s), "mirror/x:v1");
  EXPECT_EQ(RewrittenImage("docker.io/gpustack/x:v1", s), "docker.io/mirror/x:v1");
  s.container_registry = "r.example:5000";
  EXPECT_EQ(RewrittenImage("x", s), "r.example:5000/mirror/x");
}

TEST(ScaledRequests, NeverAboveTheLimit) {
  const Json small = {{"cpu", "50m"}, {"memory", "64Mi"}};
  EXPECT_EQ(ScaledRequests(small, true, true), small);
  EXPECT_EQ(ScaledRequests({{"cpu", "500m"}}, false, true), Json({{"cpu", "500m"}}));
  EXPECT_EQ(ScaledRequests({{"cpu", "4"}}, false, true), Json({{"cpu", "800m"}}));
  EXPECT_EQ(ScaledRequests({{"cpu", "4"}}, false, false), Json({{"cpu", "4"}}));
}

TEST(InstanceService, OnePortPerContainerPortOwnedByThePod) {
  const Json type = T4Type();
  const Manufacturer nvidia = Nvidia();
  const Json instance = SlicedInstance();
  Json pod = *InstancePod(instance, Context(type, &nvidia));
  pod["metadata"]["uid"] = "pod-uid";
  const Json service = InstanceService(instance, pod);
  EXPECT_EQ(service["spec"]["type"], "NodePort");
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["uid"], "pod-uid");
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["kind"], "Pod");
  EXPECT_EQ(service["spec"]["selector"], pod["metadata"]["labels"]);
  std::vector<std::string> names;
  for (const Json& p : service["spec"]["ports"]) names.push_back(p["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"tcp-8080", "udp-9000", "tcp-22"}));

  Json bare = instance;
  bare["spec"].erase("ports");
  bare["spec"].erase("sshPublicKey");
  EXPECT_TRUE(InstanceService(bare, *InstancePod(bare, Context(type, &nvidia))).is_null());
}

Json PodWith(const std::string& text) { return Json::parse(text); }

TEST(PodSummary, FollowsThePodThroughItsLife) {
  EXPECT_EQ(PodSummary(PodWith(R"({"metadata":{"labels":{"kueue.x-k8s.io/queue-name":"q"}},
      "spec":{"schedulingGates":[{"name":"kueue.x-k8s.io/admission"}]},
      "status":{"phase":"Pending"}})")),
            (std::pair<std::string, std::string>{"Pending", "waiting in queue q to be admitted"}));
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{},"status":{"phase":"Pending","conditions":[
      {"type":"PodScheduled","status":"False","message":"0/3 nodes are available"}]}})")),
            (std::pair<std::string, std::string>{"Scheduling", "0/3 nodes are available"}));
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Pending"}})")).first,
            "Scheduled");
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Pending",
      "conditions":[{"type":"Initialized","status":"True"}],
      "containerStatuses":[{"name":"main","state":{"waiting":{"reason":"ContainerCreating"}}}]}})"))
                .first,
            "Starting");
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Pending",
      "conditions":[{"type":"Initialized","status":"True"}],
      "containerStatuses":[{"name":"main","state":{"waiting":{"reason":"ImagePullBackOff",
                            "message":"Back-off pulling image \"nope\""}}}]}})")),
            (std::pair<std::string, std::string>{
                "NotReady", "main: ImagePullBackOff: Back-off pulling image \"nope\""}));
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Running",
      "conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}],
      "containerStatuses":[{"name":"main","state":{"running":{}}}]}})"))
                .first,
            "Ready");
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Pending",
      "conditions":[{"type":"Initialized","status":"False"}],
      "initContainerStatuses":[{"name":"init","state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}})"))
                .first,
            "InitializeFailed");
  EXPECT_EQ(PodSummary(PodWith(R"({"spec":{"nodeName":"n"},"status":{"phase":"Failed",
      "reason":"UnexpectedAdmissionError","message":"no card"}})")),
            (std::pair<std::string, std::string>{
                "NotReady", "the Pod ended (Failed): UnexpectedAdmissionError: no card"}));
}

TEST(InstanceStatus, AddressesPortsAndAllocations) {
  const Json pod = PodWith(R"({"metadata":{"annotations":{
      "device.gpustack.ai/accelerator.allocated":
        "{\"sshd\":{\"accelerators\":[]},\"main\":{\"accelerators\":[{\"id\":\"GPU-1\"}]}}"}},
    "spec":{"nodeName":"n"},
    "status":{"phase":"Running","podIPs":[{"ip":"10.0.0.5"}],
      "conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}],
      "containerStatuses":[{"name":"main","state":{"running":{}}}]}})");
  const Json node = PodWith(R"({"status":{"addresses":[{"type":"InternalIP","address":"10.1.1.1"},
      {"type":"Hostname","address":"n"},{"type":"ExternalIP","address":"203.0.113.9"}]}})");
  Json service = PodWith(R"({"spec":{"ports":[{"name":"tcp-22","port":22,"protocol":"TCP"}]}})");
  Settings settings;
  settings.instance_access_wildcard_dns = "traefik.me";
  Json status = InstanceStatus({.pod = &pod, .service = &service, .node = &node}, settings);
  EXPECT_EQ(status["phase"], "Ready");
  EXPECT_EQ(status["nodeName"], "n");
  EXPECT_EQ(status["hostIPs"], Json::parse(R"([{"ip":"203.0.113.9"},{"ip":"10.1.1.1"}])"));
  EXPECT_EQ(status["podIPs"], Json::parse(R"([{"ip":"10.0.0.5"}])"));
  EXPECT_FALSE(status.contains("ports"));  // not every node port is assigned yet
  EXPECT_EQ(status["allocations"][0]["accelerators"][0]["id"], "GPU-1");  // main first
  EXPECT_EQ(status["accessAddresses"],
            Json::parse(R"(["203.0.113.9.traefik.me","10.1.1.1.traefik.me"])"));

  service["spec"]["ports"][0]["nodePort"] = 30022;
  settings.instance_access_static_address = "gpu.example.com";
  status = InstanceStatus({.pod = &pod, .service = &service, .node = &node}, settings);
  EXPECT_EQ(status["ports"],
            Json::parse(R"([{"port":22,"protocol":"TCP","name":"tcp-22","nodePort":30022}])"));
  EXPECT_EQ(status["accessAddresses"], Json::parse(R"(["gpu.example.com"])"));

  status = InstanceStatus({.phase = "Stopped"}, settings);
  EXPECT_EQ(status, Json({{"phase", "Stopped"}}));
}

}  // namespace
}  // namespace gpustack::op
