// Which refused Pods are re-queued, when, and what the replacement carries (docs/decisions.md D20).
#include "host/operator/requeue.h"

#include <gtest/gtest.h>

#include <tuple>

#include "host/kube/resource.h"
#include "host/ledger/chosen.h"
#include "host/operator/reconciler.h"

namespace gpustack::op {
namespace {

// A plain queued Pod as the kubelet leaves it after refusing it at admission: bound, pinned and
// annotated by gate 3, the flavor's label and toleration injected by Kueue.
Json RefusedPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train", "namespace": "team", "uid": "u-1",
      "creationTimestamp": "2026-12-05T06:00:00Z",
      "labels": {"kueue.x-k8s.io/queue-name": "gpustack--t4", "kueue.x-k8s.io/managed": "true",
                 "kueue.x-k8s.io/priority-class": "high", "kueue.x-k8s.io/podset": "main",
                 "kueue.x-k8s.io/local-queue-name": "gpustack--t4", "app": "train"},
      "annotations": {"device.gpustack.ai/accelerator.chosen": "{}", "note": "kept",
                      "kueue.x-k8s.io/workload": "pod-train-1a2b3", "kueue.x-k8s.io/role-hash": "8b"},
      "finalizers": ["kueue.x-k8s.io/managed"]},
    "spec": {"nodeName": "node-a", "schedulingGates": [],
      "nodeSelector": {"kubernetes.io/hostname": "node-a", "pool.gpustack.ai/t4": "true",
                       "disk": "ssd"},
      "tolerations": [{"operator": "Exists"}, {"key": "dedicated", "operator": "Exists"}],
      "containers": [{"name": "main", "image": "busybox",
                      "resources": {"limits": {"nvidia.com/gpu.shared": "2"}}}]},
    "status": {"phase": "Failed", "reason": "UnexpectedAdmissionError",
      "message": "Allocate failed due to 2 slots must be on one card",
      "startTime": "2026-12-05T06:00:10Z"}
  })");
}

TEST(Requeue, OnlyAQueuedPlainPodTheNodeRefusedQualifies) {
  auto refusal = RefusalOf(RefusedPod());
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->node, "node-a");
  EXPECT_EQ(refusal->reason, "UnexpectedAdmissionError");
  EXPECT_EQ(refusal->chain, "train");
  EXPECT_EQ(refusal->attempt, 0);
  EXPECT_EQ(kube::FormatTime(refusal->at), "2026-12-05T06:00:10Z");
  for (const char* reason : {"NodeAffinity", "OutOfnvidia.com/gpu.shared"}) {
    Json pod = RefusedPod();
    pod["status"]["reason"] = reason;
    EXPECT_TRUE(RefusalOf(pod)) << reason;
  }
  auto changed = [](auto edit) {
    Json pod = RefusedPod();
    edit(pod);
    // The worker's cache holds a projection of each bound Pod: it must judge as the whole does.
    Json cached = pod;
    TrimPodForWorkerCache(cached);
    auto whole = RefusalOf(pod), projected = RefusalOf(cached);
    EXPECT_EQ(whole.has_value(), projected.has_value()) << pod.dump();
    if (whole && projected) {
      EXPECT_EQ(std::tie(whole->node, whole->reason, whole->message, whole->attempt, whole->chain,
                         whole->at),
                std::tie(projected->node, projected->reason, projected->message, projected->attempt,
                         projected->chain, projected->at));
    }
    return whole.has_value();
  };
  // The Pod failed for its own reasons, ran, is not queued, has an owner that replaces it, is
  // being deleted, or never reached a node: left alone.
  EXPECT_TRUE(changed([](Json&) {}));
  EXPECT_TRUE(changed([](Json& p) {
    p["metadata"]["annotations"]["gpustack.ai/requeue-attempt"] = "2";
    p["metadata"]["annotations"]["gpustack.ai/requeue-of"] = "first";
    p["status"].erase("startTime");
  }));
  EXPECT_FALSE(changed([](Json& p) { p["status"]["reason"] = "Error"; }));
  EXPECT_FALSE(changed([](Json& p) { p["status"]["reason"] = "Evicted"; }));
  EXPECT_FALSE(changed([](Json& p) { p["status"]["phase"] = "Pending"; }));
  EXPECT_FALSE(changed([](Json& p) {
    p["status"]["containerStatuses"] = {{{"name", "main"}, {"state", {{"terminated", {}}}}}};
  }));
  EXPECT_FALSE(changed([](Json& p) {
    p["status"]["initContainerStatuses"] = {
        {{"name", "init"}, {"image", "busybox"}, {"lastState", {{"terminated", {}}}}}};
  }));
  EXPECT_FALSE(
      changed([](Json& p) { p["metadata"]["labels"].erase("kueue.x-k8s.io/queue-name"); }));
  EXPECT_FALSE(changed([](Json& p) {
    p["metadata"]["ownerReferences"] = {
        {{"kind", "ReplicaSet"}, {"name", "rs"}, {"controller", true}}};
  }));
  EXPECT_FALSE(
      changed([](Json& p) { p["metadata"]["deletionTimestamp"] = "2026-12-05T06:01:00Z"; }));
  EXPECT_FALSE(changed([](Json& p) { p["spec"].erase("nodeName"); }));
  EXPECT_FALSE(
      changed([](Json& p) { p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"; }));
  // Gate 3 never placed it (a CPU-only queue's Pod): not the gates disagreeing.
  EXPECT_FALSE(changed([](Json& p) {
    p["metadata"]["annotations"].erase("device.gpustack.ai/accelerator.chosen");
  }));
  // A container still waiting (created, never started) does not count as having run.
  EXPECT_TRUE(changed([](Json& p) {
    p["status"]["containerStatuses"] = {{{"name", "main"}, {"state", {{"waiting", {}}}}}};
  }));
}

TEST(Requeue, TheDelayDoublesAndTheChainEnds) {
  Refusal r = *RefusalOf(RefusedPod());
  const RequeuePolicy policy{.max_attempts = 3,
                             .first_delay = std::chrono::seconds(5),
                             .longest_delay = std::chrono::seconds(12)};
  std::vector<int64_t> delays;
  for (r.attempt = 0; r.attempt < 3; ++r.attempt) {
    auto due = ReplacementDue(r, policy);
    ASSERT_TRUE(due);
    delays.push_back(std::chrono::duration_cast<std::chrono::seconds>(*due - r.at).count());
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{5, 10, 12}));
  EXPECT_FALSE(ReplacementDue(r, policy));  // the third replacement was the last
}

TEST(Requeue, TheReplacementDropsWhatBindingAndAdmissionAdded) {
  const Json pod = RefusedPod();
  Refusal r = *RefusalOf(pod);
  const Json out = ReplacementOf(
      pod, r, {nullptr, {{"pool.gpustack.ai/t4", "true"}}, {Json{{"operator", "Exists"}}}});
  EXPECT_EQ(out["metadata"]["name"], "train-requeued-1");
  EXPECT_EQ(out["metadata"]["namespace"], "team");
  EXPECT_FALSE(out["metadata"].contains("uid"));
  EXPECT_FALSE(out["metadata"].contains("finalizers"));
  // Kueue's own keys would tie the replacement to the refused Pod's Workload; the user's stay.
  EXPECT_EQ(out["metadata"]["labels"], (Json{{"kueue.x-k8s.io/queue-name", "gpustack--t4"},
                                             {"kueue.x-k8s.io/priority-class", "high"},
                                             {"app", "train"}}));
  const Json& notes = out["metadata"]["annotations"];
  EXPECT_FALSE(notes.contains(ledger::kChosenAnnotation));
  EXPECT_FALSE(notes.contains("kueue.x-k8s.io/workload"));
  EXPECT_FALSE(notes.contains("kueue.x-k8s.io/role-hash"));
  EXPECT_EQ(notes["note"], "kept");
  EXPECT_EQ(notes[kRequeueOfAnnotation], "train");
  EXPECT_EQ(notes[kRequeueOfUidAnnotation], "u-1");
  EXPECT_EQ(notes[kRequeueAttemptAnnotation], "1");
  EXPECT_EQ(notes[kRequeueReasonAnnotation],
            "node-a: UnexpectedAdmissionError: Allocate failed due to 2 slots must be on one card");
  EXPECT_FALSE(out["spec"].contains("nodeName"));
  EXPECT_FALSE(out["spec"].contains("schedulingGates"));
  EXPECT_EQ(out["spec"]["nodeSelector"], (Json{{"disk", "ssd"}}));  // the user's own stays
  EXPECT_EQ(out["spec"]["tolerations"],
            Json::array({{{"key", "dedicated"}, {"operator", "Exists"}}}));
  EXPECT_EQ(out["spec"]["containers"], pod["spec"]["containers"]);
  EXPECT_FALSE(out.contains("status"));

  // The replacement refused in turn: the chain keeps the user's name and counts on.
  Json second = out;
  second["metadata"]["uid"] = "u-2";
  second["spec"]["nodeName"] = "node-a";
  second["metadata"]["annotations"][ledger::kChosenAnnotation] = "{}";  // gate 3 placed it again
  second["status"] = pod["status"];
  Refusal again = *RefusalOf(second);
  EXPECT_EQ(again.chain, "train");
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(ReplacementOf(second, again, {})["metadata"]["name"], "train-requeued-2");
}

TEST(Requeue, AReplacementNameStaysAValidPodName) {
  EXPECT_EQ(ReplacementName("train", 3), "train-requeued-3");
  const std::string longest(253, 'a');
  const std::string name = ReplacementName(longest, 5);
  EXPECT_EQ(name.size(), 253u);
  EXPECT_EQ(name.substr(name.size() - 11), "-requeued-5");
}

TEST(Requeue, TheUsersOwnNodeConstraintsComeFromTheQueuedWorkload) {
  const Json pod = RefusedPod();
  const Refusal r = *RefusalOf(pod);
  // The user pinned the Pod to node-a themselves: the replacement keeps the pin, which the
  // fallback (no Workload) cannot tell from gate 3's.
  const Json queued = {{"nodeSelector", {{"kubernetes.io/hostname", "node-a"}, {"disk", "ssd"}}}};
  const std::vector<Json> workloads = {
      {{"metadata", {{"name", "pod-other"}, {"ownerReferences", {{{"uid", "u-other"}}}}}},
       {"spec", {{"podSets", {{{"template", {{"spec", Json::object()}}}}}}}}},
      {{"metadata", {{"name", "pod-train"}, {"ownerReferences", {{{"uid", "u-1"}}}}}},
       {"spec", {{"podSets", {{{"template", {{"spec", queued}}}}}}}}}};
  const Json* spec = QueuedSpecOf(workloads, "u-1");
  ASSERT_NE(spec, nullptr);
  const Json out = ReplacementOf(pod, r, {spec, {}, {}});
  EXPECT_EQ(out["spec"]["nodeSelector"], queued["nodeSelector"]);
  EXPECT_FALSE(out["spec"].contains("tolerations"));  // all were admission's
  EXPECT_EQ(QueuedSpecOf(workloads, "u-none"), nullptr);
  EXPECT_EQ(QueuedSpecOf(workloads, ""), nullptr);
}

}  // namespace
}  // namespace gpustack::op
