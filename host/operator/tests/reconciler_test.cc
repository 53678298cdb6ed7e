// The order a pass's writes run in: phase by phase, whatever order the reconcilers returned them
// in, and a phase with a failure stops the phases after it.
#include "host/operator/reconciler.h"

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <tuple>

#include "host/kube/resource.h"
#include "host/operator/bound_pod.h"
#include "host/operator/fleet.h"

namespace gpustack::op {
namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> ran;
  Write Make(const std::string& name, Phase phase, bool ok = true) {
    return {name, "write " + name, phase, [this, name, ok]() -> Status {
              std::lock_guard lock(mutex);
              ran.push_back(name);
              if (!ok) return Error{"refused"};
              return Ok{};
            }};
  }
};

TEST(RunWrites, PhasesRunInOrderWhateverOrderTheWritesCameIn) {
  Recorder r;
  std::vector<Write> writes = {r.Make("node", Phase::kNodes), r.Make("delete", Phase::kDeletions),
                               r.Make("queue", Phase::kReferring),
                               r.Make("flavor", Phase::kReferenced)};
  std::map<std::string, bool> counted;
  auto errors = RunWrites(writes, 4, [&](const Write& w, bool ok) { counted[w.kind] = ok; });
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(r.ran, (std::vector<std::string>{"flavor", "queue", "delete", "node"}));
  EXPECT_EQ(counted.size(), 4u);
}

TEST(RunWrites, AFailedPhaseStopsTheRestAndNamesTheWrite) {
  Recorder r;
  std::vector<Write> writes = {
      r.Make("flavor", Phase::kReferenced), r.Make("queue", Phase::kReferring, /*ok=*/false),
      r.Make("entrance", Phase::kReferring), r.Make("node", Phase::kNodes)};
  int failures = 0;
  auto errors = RunWrites(writes, 1, [&](const Write&, bool ok) { failures += ok ? 0 : 1; });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "write queue: refused");
  EXPECT_EQ(failures, 1);
  // The whole failed phase ran; the node phase did not.
  EXPECT_EQ(std::count(r.ran.begin(), r.ran.end(), "node"), 0);
  EXPECT_EQ(std::count(r.ran.begin(), r.ran.end(), "entrance"), 1);
}

TEST(OwnedKeys, ReadsTheKeysAManagerOwns) {
  const Json node = Json::parse(R"({"metadata": {"managedFields": [
      {"manager": "gpustack-worker-nodes", "operation": "Apply",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}, ".": {}}}}},
      {"manager": "gpustack-worker-nodes", "operation": "Apply", "subresource": "status",
       "fieldsV1": {"f:status": {"f:capacity": {"f:x": {}}}}},
      {"manager": "kubectl", "operation": "Update",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:c": {}}}}}]}})");
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, ""), {"f:metadata", "f:labels"}),
            (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, "status"), {"f:status", "f:capacity"}),
            std::set<std::string>{"x"});
  EXPECT_TRUE(OwnedKeys(OwnedFields(node, "nobody", ""), {"f:metadata"}).empty());
  EXPECT_TRUE(OwnedKeys(OwnedFields(Json::object(), kNodesManager, ""), {"f:spec"}).empty());
}

TEST(TrimForWorkerCache, KeepsTheWorkersOwnManagedFieldsAndNoImages) {
  Json node = Json::parse(R"({"metadata": {"name": "n", "managedFields": [
      {"manager": "gpustack-worker-nodes", "operation": "Apply", "apiVersion": "v1",
       "time": "2026-12-07T09:00:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}},
      {"manager": "gpustack-worker-nodes", "operation": "Apply", "subresource": "status",
       "fieldsV1": {"f:status": {"f:capacity": {"f:example.com/gpu": {}}}}},
      {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
      "status": {"capacity": {"cpu": "8"}, "images": [{"names": ["busybox"]}],
                 "nodeInfo": {"architecture": "amd64"}}})");
  TrimNodeForWorkerCache(node);
  ASSERT_EQ(node["metadata"]["managedFields"].size(), 2u);
  // Of the worker's own entries, what OwnedFields reads, the field set kept as its text.
  EXPECT_EQ(node["metadata"]["managedFields"][0],
            Json::parse(R"({"manager": "gpustack-worker-nodes", "operation": "Apply",
                            "fieldsV1": "{\"f:metadata\":{\"f:labels\":{\"f:a\":{}}}}"})"));
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, ""), {"f:metadata", "f:labels"}),
            std::set<std::string>{"a"});
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, "status"), {"f:status", "f:capacity"}),
            std::set<std::string>{"example.com/gpu"});
  Json mangled = node;
  mangled["metadata"]["managedFields"][0]["fieldsV1"] = "{not json";
  EXPECT_TRUE(OwnedKeys(OwnedFields(mangled, kNodesManager, ""), {"f:metadata"}).empty());
  EXPECT_FALSE(node["status"].contains("images"));
  EXPECT_EQ(node["status"]["nodeInfo"]["architecture"], "amd64");  // fleet.cc reads it
  EXPECT_EQ(node["status"]["capacity"]["cpu"], "8");

  Json pod = Json::parse(R"({"metadata": {"name": "p", "managedFields": [
      {"manager": "kubelet", "operation": "Update"}]},
      "status": {"phase": "Running", "images": "a Pod's own field of that name stays"}})");
  TrimForWorkerCache(pod);
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  EXPECT_EQ(pod["status"]["phase"], "Running");
  EXPECT_TRUE(pod["status"].contains("images"));
  Json odd = Json::parse(R"({"metadata": "not an object"})");
  TrimForWorkerCache(odd);  // left as it is
  EXPECT_EQ(odd["metadata"], "not an object");
}

TEST(TrimForWorkerCache, ANodeKeepsWhatAPassReads) {
  Json node = Json::parse(R"({"apiVersion": "v1", "kind": "Node",
      "metadata": {"name": "n", "uid": "u", "resourceVersion": "7", "labels": {"a": "1"},
                   "creationTimestamp": "2026-12-07T09:00:00Z",
                   "annotations": {"feature.gpustack.ai/cpu-name": "Xeon",
                                   "node.alpha.kubernetes.io/ttl": "0"}},
      "spec": {"taints": [{"key": "t", "effect": "NoSchedule"}]},
      "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7"},
                 "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                 "conditions": [{"type": "Ready", "status": "True"}],
                 "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                 "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                              "bootID": "b", "kernelVersion": "6.1"}}})");
  const Json whole = node;
  TrimNodeForWorkerCache(node);
  EXPECT_EQ(node["status"], Json::parse(R"({"capacity": {"cpu": "8"},
      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
      "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}})"));
  EXPECT_EQ(node["metadata"], Json::parse(R"({"name": "n", "uid": "u", "resourceVersion": "7",
      "labels": {"a": "1"}, "annotations": {"feature.gpustack.ai/cpu-name": "Xeon"}})"));
  EXPECT_FALSE(node.contains("spec"));
  EXPECT_EQ(node["kind"], "Node");
  const NodeFacts a = NodeFactsOf(whole), b = NodeFactsOf(node);
  EXPECT_EQ(std::tie(a.name, a.uid, a.os, a.arch, a.capacity, a.labels, a.cpu_name, a.gkey),
            std::tie(b.name, b.uid, b.os, b.arch, b.capacity, b.labels, b.cpu_name, b.gkey));
  EXPECT_EQ(b.cpu_name, "Xeon");
  EXPECT_TRUE(SameForPass("nodes", whole, node));
  // Of the labels, the facts keep the one the fleet reads, even empty (an admin's).
  node["metadata"]["labels"][kManagedLabel] = "";
  EXPECT_EQ(NodeFactsOf(node).labels, (std::map<std::string, std::string>{{kManagedLabel, ""}}));
}

// The worker's record of a Node: the trimmed Node back as it was, the hostname gate 3 reads, and
// a digest that changes with what a pass reads and with nothing else.
TEST(NodeRecord, KeepsTheTrimmedNodeAndADigestOfWhatAPassReads) {
  Json node = Json::parse(R"({"apiVersion": "v1", "kind": "Node",
      "metadata": {"name": "n", "resourceVersion": "7",
                   "labels": {"kubernetes.io/hostname": "host-n", "a": "1"},
                   "annotations": {"feature.gpustack.ai/cpu-name": "Xeon"}},
      "status": {"capacity": {"cpu": "8"},
                 "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                 "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}}})");
  TrimNodeForWorkerCache(node);
  const NodeRecord record = NodeRecordOf(node);
  EXPECT_EQ(record.name, "n");
  EXPECT_EQ(record.resource_version, "7");
  EXPECT_EQ(record.hostname, "host-n");
  EXPECT_EQ(record.Parse(), node);

  auto digest_after = [&](auto change) {
    Json changed = node;
    change(changed);
    return NodeRecordOf(changed).pass_digest;
  };
  // Not read by a pass: the version, the addresses.
  EXPECT_EQ(digest_after([](Json& n) { n["metadata"]["resourceVersion"] = "8"; }),
            record.pass_digest);
  EXPECT_EQ(digest_after([](Json& n) { n["status"]["addresses"] = Json::array(); }),
            record.pass_digest);
  // Read: a label, the CPU name, the capacity, the architecture, a deletion.
  EXPECT_NE(digest_after([](Json& n) { n["metadata"]["labels"]["a"] = "2"; }), record.pass_digest);
  EXPECT_NE(digest_after([](Json& n) {
              n["metadata"]["annotations"]["feature.gpustack.ai/cpu-name"] = "EPYC";
            }),
            record.pass_digest);
  EXPECT_NE(digest_after([](Json& n) { n["status"]["capacity"]["nvidia.com/gpu"] = "8"; }),
            record.pass_digest);
  EXPECT_NE(digest_after([](Json& n) { n["status"]["nodeInfo"]["architecture"] = "arm64"; }),
            record.pass_digest);
  EXPECT_NE(
      digest_after([](Json& n) { n["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"; }),
      record.pass_digest);
}

TEST(TrimForWorkerCache, ABoundPodKeepsWhatTheCpuViewAndGate3Read) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                   "generateName": "p-", "labels": {"app": "x", "kueue.x-k8s.io/queue-name": "q"},
                   "annotations": {"device.gpustack.ai/accelerator.allocated": "{}",
                                   "gpustack.ai/requeue-attempt": "1", "note": "long text"},
                   "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "r",
                                        "controller": true},
                                       {"kind": "Thing", "name": "t", "uid": "t"}],
                   "managedFields": [{"manager": "kubelet"}]},
      "spec": {"nodeName": "n", "volumes": [{"name": "v"}], "tolerations": [{"operator": "Exists"}],
               "containers": [{"name": "a", "image": "i", "env": [{"name": "E", "value": "1"}],
                               "resources": {"requests": {"cpu": "250m", "memory": "1Gi"},
                                             "limits": {"nvidia.com/gpu": "1"}}}],
               "initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always",
                                   "resources": {"limits": {"cpu": "1"}}}]},
      "status": {"phase": "Running", "podIP": "10.0.0.9",
                 "conditions": [{"type": "Ready", "status": "True"}],
                 "containerStatuses": [{"name": "a", "imageID": "sha", "ready": true,
                                        "state": {"running": {"startedAt": "t"}},
                                        "lastState": {}}]}})");
  const Json whole = pod;
  TrimPodForWorkerCache(pod);
  EXPECT_EQ(PodCpuMillicores(pod), PodCpuMillicores(whole));
  EXPECT_EQ(PodCpuMillicores(pod), 1250);
  EXPECT_EQ(kube::ObjectKey(pod), "ns/p");
  // Running: what a requeue would judge is not kept.
  EXPECT_EQ(pod["metadata"], Json::parse(R"({"name": "p", "namespace": "ns", "uid": "u",
      "resourceVersion": "7",
      "annotations": {"device.gpustack.ai/accelerator.allocated": "{}",
                      "gpustack.ai/requeue-attempt": "1"}})"));
  EXPECT_EQ(pod["spec"], Json::parse(R"({"nodeName": "n",
      "containers": [{"name": "a", "resources": {"requests": {"cpu": "250m"}, "limits": {}}}],
      "initContainers": [{"name": "s", "restartPolicy": "Always",
                          "resources": {"limits": {"cpu": "1"}}}]})"));
  EXPECT_EQ(pod["status"], Json::parse(R"({"phase": "Running"})"));
  Json again = pod;
  TrimPodForWorkerCache(again);
  EXPECT_EQ(again, pod);  // a watch event and a list item are trimmed alike, once or twice

  // Failed: it is (requeue_test.cc checks the verdict on the projection is the whole's).
  Json failed = whole;
  failed["status"]["phase"] = "Failed";
  TrimPodForWorkerCache(failed);
  EXPECT_EQ(failed["metadata"]["labels"], Json::parse(R"({"kueue.x-k8s.io/queue-name": "q"})"));
  EXPECT_EQ(failed["metadata"]["ownerReferences"],
            Json::parse(R"([{"kind": "ReplicaSet", "controller": true}])"));
  EXPECT_EQ(failed["status"], Json::parse(R"({"phase": "Failed",
      "containerStatuses": [{"name": "a", "state": {"running": {}}, "lastState": {}}]})"));
}

TEST(BoundPodOf, KeepsTheCpuViewsGate3sAndTheRequeuesInputs) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                   "annotations": {"device.gpustack.ai/accelerator.allocated": "{}",
                                   "device.gpustack.ai/accelerator.chosen": "c"}},
      "spec": {"nodeName": "n", "containers": [{"name": "a",
               "resources": {"requests": {"cpu": "250m"}}}, {"name": "b",
               "resources": {"limits": {"cpu": "1"}}}]},
      "status": {"phase": "Running"}})");
  TrimPodForWorkerCache(pod);
  const BoundPod running = BoundPodOf(pod);
  EXPECT_EQ(running.key(), "ns/p");
  EXPECT_EQ(running.uid(), "u");
  EXPECT_EQ(CacheVersion(running), "7");
  EXPECT_EQ(running.node(), "n");
  EXPECT_EQ(running.phase(), "Running");
  EXPECT_FALSE(running.Finished());
  EXPECT_EQ(running.cpu_millicores(), 1250);
  EXPECT_EQ(running.allocated(), "{}");
  EXPECT_EQ(running.chosen(), "c");
  EXPECT_EQ(running.failed(), nullptr);  // a running Pod's JSON is not kept

  Json failed = pod;
  failed["status"]["phase"] = "Failed";
  failed["metadata"]["annotations"].erase("device.gpustack.ai/accelerator.chosen");
  failed["metadata"]["annotations"]["device.gpustack.ai/accelerator.allocated"] = 3;
  const BoundPod record = BoundPodOf(failed);
  EXPECT_TRUE(record.Finished());
  EXPECT_EQ(record.chosen(), std::nullopt);
  EXPECT_EQ(record.allocated(), std::nullopt);  // an annotation is a string, or no record
  ASSERT_NE(record.failed(), nullptr);
  EXPECT_EQ(*record.failed(), failed);  // what the requeue judges, as it was

  // An annotation present but empty is kept apart from one that is absent.
  Json empty = pod;
  empty["metadata"]["annotations"]["device.gpustack.ai/accelerator.chosen"] = "";
  empty["metadata"]["annotations"].erase("device.gpustack.ai/accelerator.allocated");
  empty["metadata"].erase("uid");
  const BoundPod blank = BoundPodOf(empty);
  EXPECT_EQ(blank.chosen(), "");
  EXPECT_EQ(blank.allocated(), std::nullopt);
  EXPECT_EQ(blank.uid(), "");
  EXPECT_EQ(blank.key(), "ns/p");
  EXPECT_EQ(blank.node(), "n");
}

TEST(SameForPass, ANodesHeartbeatTaintsAndTtlStartNoPassItsLabelsAndCapacityDo) {
  const Json node = Json::parse(R"({"metadata": {"name": "n", "labels": {"a": "1"},
      "annotations": {"feature.gpustack.ai/cpu-name": "Xeon"}},
      "spec": {}, "status": {"capacity": {"cpu": "8"}, "nodeInfo": {"architecture": "amd64"},
      "conditions": [{"type": "Ready", "status": "True"}]}})");
  Json after = node;
  after["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "30";
  after["metadata"]["resourceVersion"] = "9";
  after["spec"]["taints"] = Json::array({{{"key", "node.kubernetes.io/unreachable"}}});
  after["status"]["conditions"][0]["status"] = "Unknown";
  EXPECT_TRUE(SameForPass("nodes", node, after));
  EXPECT_FALSE(SameForPass("devices", node, after));  // elsewhere every annotation counts

  for (auto change : std::vector<std::function<void(Json&)>>{
           [](Json& n) { n["metadata"]["labels"]["b"] = "2"; },
           [](Json& n) { n["metadata"]["annotations"]["feature.gpustack.ai/cpu-name"] = "EPYC"; },
           [](Json& n) { n["status"]["capacity"]["cpu"] = "16"; },
           [](Json& n) { n["status"]["nodeInfo"]["architecture"] = "arm64"; },
           [](Json& n) { n["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"; }}) {
    Json changed = node;
    change(changed);
    EXPECT_FALSE(SameForPass("nodes", node, changed)) << changed.dump();
  }
}

}  // namespace
}  // namespace gpustack::op
