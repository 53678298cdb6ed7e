// The admission webhooks' rules (docs/behaviour.md §4, §5.2, §5.4), the AdmissionReview codec, the
// webhook certificates and gate 3's Judge, without a server: the e2e test drives the same code
// through a real apiserver and Kueue.
#include <gtest/gtest.h>

#include <fstream>

#include "host/kube/config.h"
#include "host/ledger/chosen.h"
#include "host/operator/admission.h"
#include "host/operator/node_check.h"
#include "host/operator/webhooks.h"

namespace gpustack::op {
namespace {

ManufacturerTable Table() {
  return {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "test"}},
          {"amd", {"amd", "amd.com/gpu", "", "test"}}};
}

// The derived A10G InstanceType as the worker writes it, with its entrance label and detail.
Json A10gType() {
  return {{"metadata",
           {{"name", "gpustack--nvidia-a10g-linux-amd64"},
            {"labels", {{kEntranceLabel, "gpustack-fnv64-c4680bb149644f1c"}}}}},
          {"spec",
           {{"acceleratable", true},
            {"acceleratorGroup", "nvidia-a10g"},
            {"os", "linux"},
            {"arch", "amd64"}}},
          {"status", {{"detail", {{"manufacturer", "nvidia"}, {"memory", 24560}}}}}};
}

Json H100Type() {
  return {{"metadata", {{"name", "h100"}, {"labels", {{kEntranceLabel, "q-h100"}}}}},
          {"spec", {{"acceleratable", true}, {"acceleratorGroup", "nvidia-h100-80gb-hbm3"}}},
          {"status",
           {{"detail",
             {{"manufacturer", "nvidia"},
              {"memory", 81559},
              {"slicedDetail",
               {{"physical",
                 {{"count", 56},
                  {"profiles",
                   {{{"name", "1g.10gb"}, {"count", 56}, {"memoryMib", 9856}},
                    {{"name", "3g.40gb"}, {"count", 16}, {"memoryMib", 40192}}}}}}}}}}}}};
}

Json CpuType() {
  return {{"metadata",
           {{"name", "gpustack--generic-linux-amd64"}, {"labels", {{kEntranceLabel, "q-cpu"}}}}},
          {"spec", {{"acceleratable", false}}}};
}

AdmissionView View() {
  AdmissionView view;
  view.manufacturers = Table();
  view.instance_type_by_entrance = [](const std::string& queue) -> std::shared_ptr<const Json> {
    for (const Json& t : {A10gType(), H100Type(), CpuType()}) {
      if (t["metadata"]["labels"][kEntranceLabel] == queue) return std::make_shared<Json>(t);
    }
    return nullptr;
  };
  return view;
}

Json Pod(const std::string& queue, Json containers, Json init = Json::array()) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "team"}}},
              {"spec", {{"containers", std::move(containers)}}}};
  if (!queue.empty()) pod["metadata"]["labels"] = {{kQueueNameLabel, queue}};
  if (!init.empty()) pod["spec"]["initContainers"] = std::move(init);
  return pod;
}

Json Container(const std::string& name, Json limits) {
  return {{"name", name}, {"image", "busybox"}, {"resources", {{"limits", std::move(limits)}}}};
}

AdmissionRequest Create(Json object) {
  AdmissionRequest r;
  r.uid = "u-1";
  r.kind = object.value("kind", "");
  r.operation = "CREATE";
  r.object = std::move(object);
  return r;
}

// The object as the apiserver would store it after `verdict`'s patch.
Json Patched(const Json& object, const Verdict& verdict) { return object.patch(verdict.patch); }

const std::string kA10gQueue = "gpustack-fnv64-c4680bb149644f1c";

TEST(AdmissionReview, DecodesARealRequestAndRefusesWhatIsNot) {
  const Json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                         {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                         {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                         {"operation", "CREATE"},
                         {"namespace", "team"},
                         {"object", Pod(kA10gQueue, Json::array())},
                         {"oldObject", nullptr},
                         {"dryRun", true}}}};
  auto r = DecodeReview(review.dump());
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind, "Pod");
  EXPECT_EQ(r->resource, "pods");
  EXPECT_EQ(r->ns, "team");
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->old_object.is_null());

  EXPECT_EQ(DecodeReview("{").error(), "the body is not JSON");
  EXPECT_EQ(DecodeReview("[]").error(), "the body is not a JSON object");
  Json bad = review;
  bad["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(DecodeReview(bad.dump()).error(), "not an admission.k8s.io/v1 AdmissionReview");
  bad = review;
  bad["request"].erase("uid");
  EXPECT_EQ(DecodeReview(bad.dump()).error(), "the AdmissionReview request has no uid");
  bad = review;
  bad["request"]["object"] = "a string";
  EXPECT_EQ(DecodeReview(bad.dump()).error(), "request.object is not an object");
  bad = review;
  bad["request"]["kind"] = 7;
  EXPECT_EQ(DecodeReview(bad.dump()).error(),
            "the AdmissionReview request names no kind or operation");
}

TEST(AdmissionReview, EncodesAPatchAndADenial) {
  Verdict allowed;
  allowed.patch = Json::array({{{"op", "add"}, {"path", "/x"}, {"value", 1}}});
  const Json a = Json::parse(EncodeReview("u", allowed));
  EXPECT_EQ(a["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(a["response"]["uid"], "u");
  EXPECT_EQ(a["response"]["allowed"], true);
  EXPECT_EQ(a["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(Json::parse(*kube::DecodeBase64(a["response"]["patch"].get<std::string>(), "patch")),
            allowed.patch);
  const Json d = Json::parse(EncodeReview("u", Deny(403, "spec: Forbidden: no")));
  EXPECT_EQ(d["response"]["allowed"], false);
  EXPECT_EQ(d["response"]["status"]["code"], 403);
  EXPECT_EQ(d["response"]["status"]["message"], "spec: Forbidden: no");
  EXPECT_FALSE(d["response"].contains("patch"));
}

TEST(PodWebhook, SliceGetsItsUnitsCoresAndFitAffinity) {
  const Json pod = Pod(
      kA10gQueue, Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                                  {"nvidia.com/gpu.sliced.memory-percentage", "20"},
                                                  {"nvidia.com/gpu.sliced.units", "999"}})}));
  const Verdict v = MutatePod(Create(pod), View());
  ASSERT_TRUE(v.allowed) << v.message;
  const Json out = Patched(pod, v);
  const Json& resources = out["spec"]["containers"][0]["resources"];
  for (const char* section : {"limits", "requests"}) {
    EXPECT_EQ(resources[section]["nvidia.com/gpu.sliced.units"], "320000") << section;
    EXPECT_EQ(resources[section]["nvidia.com/gpu.sliced.cores-percentage"], "100") << section;
  }
  const Json term = out["spec"]["affinity"]["nodeAffinity"]
                       ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
  EXPECT_EQ(term["matchExpressions"][0],
            Json({{"key", "sliced-max-free-units.fit.gpustack.ai/nvidia-a10g"},
                  {"operator", "Gt"},
                  {"values", {"319999"}}}));
  // The final Pod passes validation; a Pod whose units were changed after us does not.
  EXPECT_TRUE(ValidatePod(Create(out), View()).allowed);
  // The apiserver stores the quantity canonically: the same number.
  Json stored = out;
  stored["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.units"] = "320k";
  EXPECT_TRUE(ValidatePod(Create(stored), View()).allowed);
  EXPECT_TRUE(MutatePod(Create(stored), View()).patch.empty());
  Json tampered = out;
  tampered["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.units"] = "1";
  const Verdict denied = ValidatePod(Create(tampered), View());
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.message,
            "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.units]: Invalid value: "
            "\"1\": must be 320000, as the gpustack Pod webhook derives it (something changed it "
            "after that webhook ran)");
}

// With gate 3 pinning the node, a Pod carries no fit affinity: the kubelet would check the
// moving fit labels again on a restart and turn the running Pod away (docs/decisions.md D20).
TEST(PodWebhook, NoFitAffinityWhenGateThreePinsTheNode) {
  AdmissionView pinned = View();
  pinned.nodes_pinned = true;
  for (const Json& limits :
       {Json{{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "20"}},
        Json{{"nvidia.com/gpu.shared", "3"}}}) {
    const Json pod = Pod(kA10gQueue, Json::array({Container("main", limits)}));
    const Verdict v = MutatePod(Create(pod), pinned);
    ASSERT_TRUE(v.allowed) << v.message;
    const Json out = Patched(pod, v);
    EXPECT_FALSE(out["spec"].contains("affinity")) << out["spec"].dump();
    EXPECT_TRUE(ValidatePod(Create(out), pinned).allowed);
    // Without gate 3 the same Pod gets the affinity.
    EXPECT_TRUE(Patched(pod, MutatePod(Create(pod), View()))["spec"].contains("affinity"));
  }
  // The derived keys are written all the same.
  const Json slice =
      Pod(kA10gQueue,
          Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                          {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}));
  EXPECT_EQ(
      Patched(slice, MutatePod(Create(slice), pinned))["spec"]["containers"][0]["resources"]
                                                      ["limits"]["nvidia.com/gpu.sliced.units"],
      "320000");
}

TEST(PodWebhook, MemoryMibFoldsThroughTheCardOfTheQueuesType) {
  const Json pod =
      Pod(kA10gQueue,
          Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                          {"nvidia.com/gpu.sliced.memory-mib", "6140"},
                                          {"nvidia.com/gpu.sliced.cores-percentage", "30"}})}));
  const Json out = Patched(pod, MutatePod(Create(pod), View()));
  // floor(6140 x 1,600,000 / 24560) = 400,000.
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.units"],
            "400000");
  EXPECT_EQ(
      out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.sliced.cores-percentage"],
      "30");
}

TEST(PodWebhook, PartitionUnitsFoldTheProfileMemory) {
  const Json pod =
      Pod("q-h100",
          Json::array({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                          {"nvidia.com/gpu.partitioned.mig-3g.40gb", "1"}})}));
  const Verdict v = MutatePod(Create(pod), View());
  ASSERT_TRUE(v.allowed) << v.message;
  const Json out = Patched(pod, v);
  // floor(40192 x 1,600,000 / 81559).
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.partitioned.units"],
            std::to_string(40192LL * 1600000 / 81559));
  EXPECT_FALSE(out["spec"].contains("affinity"));
  const Json unknown =
      Pod("q-h100",
          Json::array({Container("main", {{"nvidia.com/gpu.partitioned", "1"},
                                          {"nvidia.com/gpu.partitioned.mig-2g.20gb", "1"}})}));
  const Verdict denied = MutatePod(Create(unknown), View());
  EXPECT_FALSE(denied.allowed);
  EXPECT_NE(denied.message.find("Unsupported value: \"2g.20gb\""), std::string::npos)
      << denied.message;
}

TEST(PodWebhook, SharedTwoSlotsNeedsACardWithTwoFreeSlots) {
  const Json pod =
      Pod(kA10gQueue, Json::array({Container("main", {{"nvidia.com/gpu.shared", "2"}})}));
  const Json out = Patched(pod, MutatePod(Create(pod), View()));
  EXPECT_EQ(
      out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0]["matchExpressions"][0]["key"],
      "shared-max-free-slots.fit.gpustack.ai/nvidia-a10g");
  // Every existing term gets the requirement (terms are ORed).
  Json two_terms = pod;
  two_terms["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
           ["nodeSelectorTerms"] =
               Json::array({{{"matchExpressions", {{{"key", "a"}, {"operator", "Exists"}}}}},
                            {{"matchExpressions", {{{"key", "b"}, {"operator", "Exists"}}}}}});
  const Json both = Patched(two_terms, MutatePod(Create(two_terms), View()));
  for (const Json& term :
       both["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
           ["nodeSelectorTerms"])
    EXPECT_EQ(term["matchExpressions"].size(), 2u);
  // Without the type fronting the queue the slots cannot be pinned: refused, with the reason.
  const Json lost =
      Pod("no-such-queue", Json::array({Container("main", {{"nvidia.com/gpu.shared", "2"}})}));
  EXPECT_EQ(MutatePod(Create(lost), View()).message,
            "metadata.labels[kueue.x-k8s.io/queue-name]: Forbidden: a shared request of 2 slots "
            "needs the InstanceType fronting queue no-such-queue, and none does");
}

TEST(PodWebhook, AVendorsOwnLimitsComeFromItsPlugin) {
  // What a plugin declares through the ABI (1.2), nothing the host knows of the vendor.
  AdmissionView view = View();
  view.manufacturers.at("nvidia").min_slice_memory_percentage = 25;
  view.manufacturers.at("nvidia").one_card_per_container = true;
  view.manufacturers.at("nvidia").origin = "nvidia.json";
  auto verdict = [&](Json limits) {
    return MutatePod(Create(Pod(kA10gQueue, Json::array({Container("main", std::move(limits))}))),
                     view);
  };
  EXPECT_EQ(
      verdict({{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "20"}})
          .message,
      "spec.containers[0].resources.limits[nvidia.com/gpu.sliced.memory-percentage]: Invalid "
      "value: \"20\": nvidia cards take slices of at least 25 % of their memory (its "
      "plugin, nvidia.json, says so)");
  // In MiB, measured by its units: 4912 MiB of 24560 is 20 %.
  EXPECT_NE(verdict({{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-mib", "4912"}})
                .message.find("sliced.memory-mib]: Invalid value: \"4912\""),
            std::string::npos);
  EXPECT_TRUE(
      verdict({{"nvidia.com/gpu.sliced", "1"}, {"nvidia.com/gpu.sliced.memory-percentage", "25"}})
          .allowed);
  EXPECT_EQ(verdict({{"nvidia.com/gpu", "2"}}).message,
            "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"2\": a "
            "container takes at most one nvidia card (its plugin, nvidia.json, says so)");
  EXPECT_TRUE(verdict({{"nvidia.com/gpu", "1"}}).allowed);
  // Without the declarations, the same Pods pass.
  EXPECT_TRUE(MutatePod(Create(Pod(kA10gQueue,
                                   Json::array({Container("main", {{"nvidia.com/gpu", "2"}})}))),
                        View())
                  .allowed);
}

TEST(PodWebhook, RulesRefuseWithTheReferenceMessages) {
  struct Case {
    Json containers, init;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Json::array({Container("a", {{"nvidia.com/gpu", "1"}}),
                    Container("b", {{"nvidia.com/gpu.sliced", "1"},
                                    {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}),
       Json::array(),
       "spec: Forbidden: a Pod may request only one accelerator family, found [exclusive sliced]"},
      {Json::array({Container("main", {{"nvidia.com/gpu.sliced", "2"},
                                       {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}),
       Json::array(),
       "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: \"2\": a "
       "logical slice request is always a single accelerator; multi-accelerator logical slicing "
       "is not supported yet"},
      {Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"}})}), Json::array(),
       "spec.containers[0].resources.limits: Required value: a nvidia.com/gpu.sliced request "
       "must set nvidia.com/gpu.sliced.memory-percentage or nvidia.com/gpu.sliced.memory-mib"},
      {Json::array({Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                       {"nvidia.com/gpu.sliced.memory-percentage", "20"}}),
                    Container("side", {{"nvidia.com/gpu.sliced", "1"},
                                       {"nvidia.com/gpu.sliced.memory-percentage", "20"}})}),
       Json::array(),
       "spec: Forbidden: at most one container may request a slicing family, found 2"},
      {Json::array({Container("main", {{"cpu", "1"}})}),
       Json::array({{{"name", "sidecar"},
                     {"restartPolicy", "Always"},
                     {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}),
       "spec.initContainers[0].resources.limits: Forbidden: a restartable init container (a "
       "native sidecar) may not request an accelerator; move the request to an app container"},
  };
  for (const Case& c : cases) {
    const Verdict v = MutatePod(Create(Pod(kA10gQueue, c.containers, c.init)), View());
    EXPECT_FALSE(v.allowed);
    EXPECT_EQ(v.code, 403);
    EXPECT_EQ(v.message, c.message);
  }
}

TEST(PodWebhook, OutOfScopePodsPassUntouchedAndTheWrongQueueIsNamed) {
  // No queue label: no rule, no fold.
  const Json unqueued = Pod("", Json::array({Container("main", {{"nvidia.com/gpu.sliced", "3"}})}));
  const Verdict v = MutatePod(Create(unqueued), View());
  EXPECT_TRUE(v.allowed);
  EXPECT_TRUE(v.patch.empty());
  // A CPU Pod on a GPU queue, an exclusive Pod: nothing to write.
  EXPECT_TRUE(
      MutatePod(Create(Pod(kA10gQueue, Json::array({Container("main", {{"cpu", "2"}})}))), View())
          .patch.empty());
  EXPECT_TRUE(MutatePod(Create(Pod(kA10gQueue,
                                   Json::array({Container("main", {{"nvidia.com/gpu", "1"}})}))),
                        View())
                  .patch.empty());
  // Accelerators through a CPU queue, another vendor's cards through the A10G queue.
  EXPECT_EQ(
      MutatePod(Create(Pod("q-cpu", Json::array({Container("main", {{"nvidia.com/gpu", "1"}})}))),
                View())
          .message,
      "metadata.labels[kueue.x-k8s.io/queue-name]: Forbidden: queue q-cpu fronts the "
      "CPU-only InstanceType gpustack--generic-linux-amd64, which has no nvidia.com/gpu; use "
      "the entrance of an accelerated InstanceType (kubectl get instancetypes)");
  EXPECT_EQ(
      MutatePod(Create(Pod(kA10gQueue, Json::array({Container("main", {{"amd.com/gpu", "1"}})}))),
                View())
          .message,
      "metadata.labels[kueue.x-k8s.io/queue-name]: Forbidden: queue " + kA10gQueue +
          " fronts InstanceType gpustack--nvidia-a10g-linux-amd64 (nvidia cards), which has "
          "no amd.com/gpu");
}

Json Workload(const Json& pod_spec, bool reserved) {
  Json w = {
      {"apiVersion", "kueue.x-k8s.io/v1beta2"},
      {"kind", "Workload"},
      {"metadata", {{"name", "w"}, {"namespace", "team"}, {"uid", "wl-1"}}},
      {"spec",
       {{"queueName", kA10gQueue},
        {"podSets", {{{"name", "main"}, {"count", 1}, {"template", {{"spec", pod_spec}}}}}}}}};
  if (reserved)
    w["status"] = {{"admission", {{"clusterQueue", "gpustack--nvidia-a10g-linux-amd64"}}}};
  return w;
}

TEST(WorkloadWebhook, FitPinsSlicesUntilQuotaIsReserved) {
  const Json spec = {{"containers",
                      {Container("main", {{"nvidia.com/gpu.sliced", "1"},
                                          {"nvidia.com/gpu.sliced.memory-percentage", "50"}})}}};
  AdmissionRequest r = Create(Workload(spec, false));
  const Verdict v = MutateWorkload(r, View());
  ASSERT_EQ(v.patch.size(), 1u);
  EXPECT_EQ(v.patch[0]["path"], "/spec/podSets/0/template/spec/affinity");
  const Json out = Patched(r.object, v);
  // Applying it twice changes nothing.
  EXPECT_TRUE(MutateWorkload(Create(out), View()).patch.empty());
  r.operation = "UPDATE";
  r.object = Workload(spec, true);
  EXPECT_TRUE(MutateWorkload(r, View()).patch.empty());
  AdmissionView off = View();
  off.settings.workload_fit_affinity = false;
  EXPECT_TRUE(MutateWorkload(Create(Workload(spec, false)), off).patch.empty());
}

Json InstanceType(Json spec) {
  return {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
          {"kind", "InstanceType"},
          {"metadata", {{"name", "a10g-12c128g"}}},
          {"spec", std::move(spec)}};
}

const Json kCustomSpec = {{"acceleratable", true},
                          {"acceleratorGroup", "nvidia-a10g"},
                          {"os", "linux"},
                          {"arch", "amd64"},
                          {"unitResources", {{"cpu", "12"}, {"ram", "128Gi"}}},
                          {"localStorage", "200Gi"}};

TEST(InstanceTypeWebhooks, ValidateCreateAndImmutability) {
  EXPECT_TRUE(ValidateInstanceType(Create(InstanceType(kCustomSpec)), View()).allowed);
  auto refused = [&](auto edit) {
    Json spec = kCustomSpec;
    edit(spec);
    return ValidateInstanceType(Create(InstanceType(spec)), View()).message;
  };
  EXPECT_EQ(refused([](Json& s) { s.erase("acceleratorGroup"); }),
            "spec.acceleratorGroup: Required value: an acceleratable InstanceType names its "
            "accelerator group, e.g. nvidia-a10g");
  EXPECT_EQ(refused([](Json& s) { s["acceleratable"] = false; }),
            "spec.acceleratorGroup: Forbidden: only an acceleratable InstanceType has an "
            "accelerator group");
  EXPECT_EQ(refused([](Json& s) { s.erase("arch"); }), "spec.arch: Required value");
  EXPECT_EQ(refused([](Json& s) { s["unitResources"]["cpu"] = "1.5"; }),
            "spec.unitResources.cpu: Invalid value: \"1.5\": must be a whole number of cores, "
            "without a unit (e.g. 8)");
  EXPECT_EQ(refused([](Json& s) {
              s["acceleratable"] = false;
              s.erase("acceleratorGroup");
              s["unitResources"]["cpu"] = "2";
            }),
            "spec.unitResources.cpu: Invalid value: \"2\": a CPU-only InstanceType's unit is "
            "exactly 1 core");
  EXPECT_EQ(refused([](Json& s) { s["unitResources"]["ram"] = "lots"; }),
            "spec.unitResources.ram: Invalid value: \"lots\": must be a positive quantity (e.g. "
            "64Gi)");
  EXPECT_EQ(refused([](Json& s) { s["localStorage"] = "200GB"; }),
            "spec.localStorage: Invalid value: \"200GB\": must be a whole number of Gi "
            "(case-sensitive), e.g. 100Gi");

  AdmissionRequest update = Create(InstanceType(kCustomSpec));
  update.operation = "UPDATE";
  update.old_object = InstanceType(kCustomSpec);
  update.object["spec"]["displayName"] = "A10G, large";
  update.object["spec"]["inactive"] = true;
  EXPECT_TRUE(ValidateInstanceType(update, View()).allowed);
  update.object["spec"]["unitResources"]["cpu"] = "16";
  EXPECT_EQ(ValidateInstanceType(update, View()).message,
            "spec.unitResources: Invalid value: {\"cpu\":\"16\",\"ram\":\"128Gi\"}: field is "
            "immutable (only displayName and inactive may change; create a new InstanceType "
            "instead)");
  // A group no pool has: created, with a warning saying why its queue admits nothing.
  AdmissionView view = View();
  view.accelerator_group_known = [](const std::string& akey) { return akey == "nvidia-a10g"; };
  EXPECT_TRUE(ValidateInstanceType(Create(InstanceType(kCustomSpec)), view).warnings.empty());
  Json a100 = kCustomSpec;
  a100["acceleratorGroup"] = "nvidia-a100";
  const Verdict warned = ValidateInstanceType(Create(InstanceType(a100)), view);
  EXPECT_TRUE(warned.allowed);
  ASSERT_EQ(warned.warnings.size(), 1u);
  EXPECT_EQ(warned.warnings[0].rfind("no managed node has nvidia-a100 cards yet", 0), 0u);
}

TEST(InstanceTypeWebhooks, DefaultingStampsGroupAndLabels) {
  const Json object = InstanceType(kCustomSpec);
  const Json out = Patched(object, MutateInstanceType(Create(object), View()));
  EXPECT_EQ(out["spec"]["generalGroup"], "generic");
  const Json& labels = out["metadata"]["labels"];
  EXPECT_EQ(labels["kubernetes.io/os"], "linux");
  EXPECT_EQ(labels["feature.gpustack.ai/acceleratable"], "true");
  EXPECT_EQ(labels["acceleratable.feature.gpustack.ai/nvidia-a10g"], "true");
  // docs/behaviour.md §5.1: FNV-1a of the name.
  EXPECT_EQ(labels[kEntranceLabel], "gpustack-fnv64-d4c0e6cd72686015");
}

TEST(WebhookConfigurations, ScopeTimeoutsAndFailurePolicies) {
  WebhookOptions options;
  options.url = "https://127.0.0.1:9443/";
  const auto configs = RenderWebhookConfigurations(options, "gpustack-system", "CA PEM");
  ASSERT_EQ(configs.size(), 2u);
  const Json& pods = configs[0]["webhooks"][0];
  EXPECT_EQ(configs[0]["metadata"]["name"], "gpustack-worker-mutation");
  EXPECT_EQ(pods["clientConfig"]["url"], "https://127.0.0.1:9443/mutate-pod");
  EXPECT_EQ(pods["clientConfig"]["caBundle"], kube::EncodeBase64("CA PEM"));
  EXPECT_EQ(pods["failurePolicy"], "Fail");
  EXPECT_EQ(pods["namespaceSelector"]["matchExpressions"][0]["values"],
            Json({"kube-system", "gpustack-system"}));
  EXPECT_EQ(pods["objectSelector"]["matchExpressions"][0]["key"], "kueue.x-k8s.io/queue-name");
  EXPECT_EQ(configs[0]["webhooks"][1]["failurePolicy"], "Ignore");  // the Workload fit-pin
  options.url.clear();
  options.certificates = "cert-manager";
  const auto service = RenderWebhookConfigurations(options, "gpustack-system", "");
  EXPECT_EQ(service[1]["webhooks"][0]["clientConfig"]["service"]["name"],
            "gpustack-operator-worker-webhook");
  EXPECT_FALSE(service[1]["webhooks"][0]["clientConfig"].contains("caBundle"));
  EXPECT_EQ(service[1]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "gpustack-system/gpustack-operator-worker-webhook");
}

// An A10G pool's type as the worker keeps it: one card, sliceable.
Json A10gPool() {
  Json t = A10gType();
  t["spec"]["unitResources"] = {{"cpu", "8"}, {"ram", "64Gi"}};
  t["spec"]["localStorage"] = "100Gi";
  t["status"]["accelerator"] = {{"onceMaxRequest", 1}, {"remaining", 1}, {"capacity", 1}};
  t["status"]["detail"]["slicedDetail"] = {{"logical", {{"count", 512}}}};
  return t;
}

AdmissionView InstanceView() {
  AdmissionView view = View();
  view.instance_type_by_name = [](const std::string& name) -> std::shared_ptr<const Json> {
    if (name == "a10g") return std::make_shared<Json>(A10gPool());
    if (name == "h100") return std::make_shared<Json>(H100Type());
    if (name == "cpu") return std::make_shared<Json>(CpuType());
    return nullptr;
  };
  return view;
}

Json Instance(const std::string& type, Json resources) {
  return {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
          {"kind", "Instance"},
          {"metadata", {{"name", "i"}, {"namespace", "team"}}},
          {"spec",
           {{"type", type},
            {"image", "busybox"},
            {"volume", {{"ephemeral", {{"capacity", "1Gi"}}}}},
            {"resources", std::move(resources)}}}};
}

TEST(InstanceWebhooks, DefaultsScaleTheUnitByWhatTheInstanceTakes) {
  const Json slice = Instance("a10g", {{"acceleratorSlicedMemoryPercentage", 20}});
  const Json out = Patched(slice, MutateInstance(Create(slice), InstanceView()));
  EXPECT_EQ(out["spec"]["resources"], Json({{"accelerator", 1},
                                            {"acceleratorSlicedMemoryPercentage", 20},
                                            {"acceleratorSlicedCoresPercentage", 100},
                                            {"cpu", "1600m"},
                                            {"ram", "13108Mi"}}));
  const Json whole = Instance("a10g", Json::object());
  EXPECT_EQ(Patched(whole, MutateInstance(Create(whole), InstanceView()))["spec"]["resources"],
            Json({{"accelerator", 1}, {"cpu", "8"}, {"ram", "64Gi"}}));
  // Given values stay; an unknown type is left to validation.
  const Json given = Instance("a10g", {{"accelerator", 1}, {"cpu", "2"}, {"ram", "8Gi"}});
  EXPECT_TRUE(MutateInstance(Create(given), InstanceView()).patch.empty());
  EXPECT_TRUE(
      MutateInstance(Create(Instance("nope", Json::object())), InstanceView()).patch.empty());
}

// A mutating webhook runs before the schema is checked: a field of the wrong type must not throw
// (a 500 would hide the schema's own message), it reads as unset (the fuzzer's finding).
TEST(InstanceTypeWebhooks, DefaultingReadsAWronglyTypedFieldAsUnset) {
  Json object = InstanceType(kCustomSpec);
  object["spec"]["generalGroup"] = Json::object();
  object["spec"]["acceleratable"] = "yes";
  object["spec"]["acceleratorGroup"] = 7;
  const Verdict verdict = MutateInstanceType(Create(object), View());
  EXPECT_TRUE(verdict.allowed);
  const Json out = Patched(object, verdict);
  EXPECT_EQ(out["spec"]["generalGroup"], "generic");
  EXPECT_EQ(out["metadata"]["labels"]["feature.gpustack.ai/acceleratable"], "false");

  Json instance = Instance("a10g", Json::object());
  instance["spec"]["resources"] = "all of it";
  instance["spec"]["stop"] = "no";
  EXPECT_TRUE(MutateInstance(Create(instance), InstanceView()).patch.empty());
  instance["spec"]["resources"] = {{"acceleratorSlicedMemoryPercentage", "20"}};
  EXPECT_NO_THROW(ValidateInstance(Create(instance), InstanceView()));
}

TEST(InstanceWebhooks, ResourcesMustMakeSenseOnThePool) {
  auto message = [](const std::string& type, Json resources) {
    return ValidateInstance(Create(Instance(type, std::move(resources))), InstanceView()).message;
  };
  EXPECT_EQ(message("nope", Json::object()),
            "spec.type: Not found: \"nope\": no such InstanceType (kubectl get instancetypes)");
  EXPECT_EQ(message("cpu", {{"accelerator", 1}}),
            "spec.resources.accelerator: Forbidden: InstanceType cpu is CPU-only");
  EXPECT_EQ(message("h100", {{"accelerator", 1},
                             {"acceleratorPartitionedProfile", "3g.40gb"},
                             {"acceleratorSlicedMemoryPercentage", 20}}),
            "spec.resources: Forbidden: a hardware partition and a logical slice percentage are "
            "mutually exclusive");
  EXPECT_EQ(message("h100", {{"accelerator", 2}, {"acceleratorPartitionedProfile", "3g.40gb"}}),
            "spec.resources.accelerator: Invalid value: 2: a slice or a partition is always "
            "exactly 1 accelerator");
  EXPECT_EQ(message("h100", {{"accelerator", 1}, {"acceleratorPartitionedProfile", "2g.20gb"}}),
            "spec.resources.acceleratorPartitionedProfile: Unsupported value: \"2g.20gb\": "
            "InstanceType h100 offers [1g.10gb 3g.40gb]");
  EXPECT_EQ(message("h100", {{"accelerator", 1}, {"acceleratorSlicedMemoryPercentage", 20}}),
            "spec.resources.acceleratorSlicedMemoryPercentage: Forbidden: InstanceType h100 has "
            "no card that takes logical slices; its cards are partitioned: ask for "
            "acceleratorPartitionedProfile instead");
  EXPECT_EQ(message("a10g", {{"accelerator", 2}}),
            "spec.resources.accelerator: Invalid value: 2: InstanceType a10g has 1 whole card(s) "
            "in all (an Instance waits while they are busy, never for more than there are)");
  EXPECT_EQ(message("a10g", {{"accelerator", 1}, {"ram", "65Gi"}}),
            "spec.resources.ram: Invalid value: \"65Gi\": at most 64Gi x 1 on InstanceType a10g");
  EXPECT_EQ(message("a10g", {{"accelerator", 1}, {"localStorage", "200Gi"}}),
            "spec.resources.localStorage: Invalid value: \"200Gi\": at most 100Gi on "
            "InstanceType a10g");
  EXPECT_EQ(message("a10g", {{"accelerator", 1}}), "");
  EXPECT_EQ(message("h100", {{"accelerator", 1}, {"acceleratorPartitionedProfile", "3g.40gb"}}),
            "");
}

TEST(InstanceWebhooks, RunningInstancesStopBeforeTheyChangeAndSettingsGateTheRest) {
  Json running = Instance("a10g", {{"accelerator", 1}});
  AdmissionRequest update = Create(running);
  update.operation = "UPDATE";
  update.old_object = running;
  update.object["spec"]["image"] = "other";
  EXPECT_EQ(ValidateInstance(update, InstanceView()).message,
            "spec.image: Forbidden: stop the Instance first (spec.stop: true); a running "
            "Instance's image cannot change");
  update.old_object["spec"]["stop"] = true;
  update.object["spec"]["stop"] = true;
  EXPECT_TRUE(ValidateInstance(update, InstanceView()).allowed);
  // Starting again waits for Stopped.
  update.object["spec"]["stop"] = false;
  update.old_object["status"] = {{"phase", "Stopping"}};
  EXPECT_EQ(ValidateInstance(update, InstanceView()).message,
            "spec.stop: Forbidden: the Instance is Stopping; it can start again once its phase "
            "is Stopped");
  update.old_object["status"]["phase"] = "Stopped";
  EXPECT_TRUE(ValidateInstance(update, InstanceView()).allowed);

  Json privileged = Instance("a10g", {{"accelerator", 1}});
  privileged["spec"]["privileged"] = true;
  EXPECT_EQ(ValidateInstance(Create(privileged), InstanceView())
                .message.rfind(
                    "spec.privileged: Forbidden: privileged Instances are not allowed here", 0),
            0u);
  AdmissionView allowed = InstanceView();
  allowed.settings.instance_privileged_allowed = true;
  EXPECT_TRUE(ValidateInstance(Create(privileged), allowed).allowed);
  Json host_path = Instance("a10g", {{"accelerator", 1}});
  host_path["spec"]["additionalVolumes"] = {
      {{"mountPath", "/data"}, {"hostPath", {{"path", "/srv"}}}}};
  EXPECT_NE(ValidateInstance(Create(host_path), InstanceView())
                .message.find("instance-host-path-volume-allowed"),
            std::string::npos);
}

// Gate 3's arithmetic (docs/behaviour.md §5.2): the same ledger the allocator uses.
ledger::NodeLedger A10gNode(const std::string& name) {
  std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/expected/nvidia-a10g.devices.json");
  return ledger::NodeLedger(name, *ledger::SpecFromJson(Json::parse(in)));
}

PodSetDemand Slice(const std::string& name, uint32_t percent,
                   std::vector<const ledger::NodeLedger*> candidates) {
  ledger::Request r;
  r.manufacturer = "nvidia";
  r.base = "nvidia.com/gpu";
  r.mode = ledger::Mode::kSliced;
  r.memory_percentage = percent;
  r.units = ledger::SliceUnits(percent, 0, 24560);
  return {name, 1, {{"main", r}}, std::move(candidates)};
}

TEST(NodeDevicesJudge, TwoSixtiesNeedTwoCardsTwoThirtiesShareOne) {
  const ledger::NodeLedger a = A10gNode("node-a"), b = A10gNode("node-b");
  // Two 60 % slices in one Workload: one per card, on two nodes.
  CheckVerdict v = Judge("w", {Slice("x", 60, {&a, &b}), Slice("y", 60, {&a, &b})});
  ASSERT_TRUE(v.ready) << v.message;
  ASSERT_EQ(v.placements.size(), 2u);
  EXPECT_NE(v.placements[0].node, v.placements[1].node);
  // With one node only, the second is starved, and the message names its role.
  v = Judge("w", {Slice("x", 60, {&a}), Slice("y", 60, {&a})});
  EXPECT_FALSE(v.ready);
  EXPECT_EQ(v.message.rfind("pod set y (a 60 % slice of nvidia.com/gpu, its Pod on one node) fits "
                            "on no node of its flavor (1 node(s)); node-a: ",
                            0),
            0u)
      << v.message;
  EXPECT_TRUE(v.placements.empty());
  // Two 30 % slices share the card.
  v = Judge("w", {Slice("x", 30, {&a}), Slice("y", 30, {&a})});
  ASSERT_TRUE(v.ready) << v.message;
  EXPECT_EQ(v.placements[0].pods[0].at("main")[0].accelerator_id,
            v.placements[1].pods[0].at("main")[0].accelerator_id);
  // The candidates' ledgers are not changed by judging.
  EXPECT_TRUE(a.allocations().empty());
  // A flavor with no node is said so.
  v = Judge("w", {Slice("x", 30, {})});
  EXPECT_NE(v.message.find("the flavor has no managed node with a Devices ledger"),
            std::string::npos);
}

TEST(NodeDevicesJudge, APodSetOfManyLandsOnOneNodeAndItsChoiceRoundTrips) {
  const ledger::NodeLedger a = A10gNode("node-a");
  PodSetDemand three = Slice("workers", 30, {&a});
  three.count = 3;
  CheckVerdict v = Judge("w", {three});
  ASSERT_TRUE(v.ready) << v.message;
  ASSERT_EQ(v.placements[0].pods.size(), 3u);
  three.count = 4;  // 120 % of one card
  EXPECT_FALSE(Judge("w", {three}).ready);

  ledger::Chosen chosen{"wl-uid", "workers", "node-a", v.placements[0].pods};
  auto back = ledger::ChosenFromAnnotation(ledger::ToAnnotation(chosen));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->pods, chosen.pods);
  EXPECT_EQ(back->CardsFor("main").size(), 1u);
  EXPECT_FALSE(ledger::ChosenFromAnnotation("{\"workload\":\"\"}"));
}

}  // namespace
}  // namespace gpustack::op
