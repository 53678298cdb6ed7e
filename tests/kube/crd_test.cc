// The project's CRDs in a real apiserver: they install, serve their short names, validate with
// their schemas, keep status apart from spec, and print their columns.
#include <gtest/gtest.h>

#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

class CrdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto client = testing::TestbedClient();
    ASSERT_NE(client, nullptr);
    for (const char* file :
         {"worker.gpustack.ai_devices.yaml", "worker.gpustack.ai_instancetypes.yaml",
          "worker.gpustack.ai_instances.yaml"}) {
      testing::ApplyCrds(*client, std::string(GPUSTACK_CRD_DIR) + "/" + file, "crd-test");
    }
    // Established: the apiserver serves the new resources.
    ASSERT_TRUE(testing::WaitFor([&] {
      for (const auto& type :
           {resources::Devices(), resources::InstanceTypes(), resources::Instances()}) {
        auto served = client->IsServed(type);
        if (!served || !*served) {
          return false;
        }
      }
      return true;
    }));
  }
  void SetUp() override {
    client_ = testing::TestbedClient();
    ASSERT_NE(client_, nullptr);
  }
  std::unique_ptr<Client> client_;
};

Json A100Type(const std::string& name) {
  return {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
          {"kind", "InstanceType"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"displayName", "A100 80GB"},
            {"acceleratable", true},
            {"acceleratorGroup", "nvidia-a100-sxm4-80gb"},
            {"os", "linux"},
            {"arch", "amd64"},
            {"unitResources", {{"cpu", "8"}, {"ram", "64Gi"}}},
            {"localStorage", "100Gi"}}}};
}

TEST_F(CrdTest, ValidInstanceTypeIsDefaulted) {
  auto created = client_->Create(resources::InstanceTypes(), A100Type("defaults"));
  ASSERT_TRUE(created) << created.error();
  EXPECT_EQ((*created)["spec"]["generalGroup"], "generic");
  EXPECT_EQ((*created)["spec"]["inactive"], false);
  ASSERT_TRUE(client_->Delete(resources::InstanceTypes(), "", "defaults"));
}

TEST_F(CrdTest, SchemaRefusesInvalidInstanceTypes) {
  struct Case {
    const char* what;
    std::function<void(Json&)> mutate;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no arch", [](Json& t) { t["spec"].erase("arch"); }, "spec.arch: Required value"},
      {"storage not in Gi", [](Json& t) { t["spec"]["localStorage"] = "100G"; },
       "spec.localStorage"},
      {"fractional cpu", [](Json& t) { t["spec"]["unitResources"]["cpu"] = "0.5"; },
       "spec.unitResources.cpu"},
      {"accelerated without group", [](Json& t) { t["spec"].erase("acceleratorGroup"); },
       "acceleratorGroup is required when acceleratable is true"},
      {"cpu pool with 2-cpu unit",
       [](Json& t) {
         t["spec"]["acceleratable"] = false;
         t["spec"].erase("acceleratorGroup");
         t["spec"]["unitResources"]["cpu"] = "2";
       },
       "a CPU-only InstanceType has a unit of exactly 1 CPU"},
      {"long display name", [](Json& t) { t["spec"]["displayName"] = std::string(65, 'x'); },
       "spec.displayName"},
  };
  for (const Case& c : cases) {
    Json type = A100Type("invalid");
    c.mutate(type);
    auto refused = client_->Create(resources::InstanceTypes(), type);
    ASSERT_FALSE(refused) << c.what << " was accepted";
    EXPECT_TRUE(IsInvalid(refused.failure())) << c.what << ": " << refused.error();
    EXPECT_NE(refused.error().find(c.message), std::string::npos)
        << c.what << ": " << refused.error();
  }
}

TEST_F(CrdTest, OnlyDisplayNameAndInactiveMayChange) {
  auto created = client_->Create(resources::InstanceTypes(), A100Type("immutable"));
  ASSERT_TRUE(created) << created.error();
  auto renamed = client_->Patch(resources::InstanceTypes(), "", "immutable", PatchType::kMerge,
                                {{"spec", {{"displayName", "renamed"}, {"inactive", true}}}});
  ASSERT_TRUE(renamed) << renamed.error();
  auto moved = client_->Patch(resources::InstanceTypes(), "", "immutable", PatchType::kMerge,
                              {{"spec", {{"arch", "arm64"}}}});
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().find("only displayName and inactive may change"), std::string::npos)
      << moved.error();
  auto described = client_->Patch(resources::InstanceTypes(), "", "immutable", PatchType::kMerge,
                                  {{"spec", {{"description", "changed"}}}});
  ASSERT_FALSE(described) << "description changed";
  EXPECT_TRUE(IsInvalid(described.failure())) << described.error();
  ASSERT_TRUE(client_->Delete(resources::InstanceTypes(), "", "immutable"));
}

TEST_F(CrdTest, StatusIsASubresource) {
  auto created = client_->Create(resources::InstanceTypes(), A100Type("with-status"));
  ASSERT_TRUE(created) << created.error();
  int64_t generation = (*created)["metadata"]["generation"];
  Json object = *created;
  object["status"] = {
      {"phase", "Active"},
      {"entrance", "gpustack-a100"},
      {"accelerator", {{"onceMaxRequest", 8}, {"remaining", 14}, {"capacity", 16}}},
      {"columns",
       {{"unit", "8/64Gi/100Gi"}, {"accelerator", "8/14 80/150 100/1500 0/0"}, {"cpu", "0/0"}}}};
  object["spec"]["displayName"] = "ignored by /status";
  auto updated = client_->UpdateStatus(resources::InstanceTypes(), object);
  ASSERT_TRUE(updated) << updated.error();
  EXPECT_EQ((*updated)["status"]["phase"], "Active");
  EXPECT_EQ((*updated)["spec"]["displayName"], "A100 80GB");  // spec is not written through status
  EXPECT_EQ((*updated)["metadata"]["generation"], generation);

  // Writing status through the main resource is ignored.
  Json main = *updated;
  main["status"]["phase"] = "Inactive";
  auto through_main = client_->Update(resources::InstanceTypes(), main);
  ASSERT_TRUE(through_main) << through_main.error();
  EXPECT_EQ((*through_main)["status"]["phase"], "Active");

  // Server-side apply on /status with its own field manager.
  Json status_patch = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                       {"kind", "InstanceType"},
                       {"metadata", {{"name", "with-status"}}},
                       {"status", {{"phaseMessage", "all cards healthy"}}}};
  auto applied = client_->Apply(resources::InstanceTypes(), status_patch,
                                {.field_manager = "capacity"}, "status");
  ASSERT_TRUE(applied) << applied.error();
  EXPECT_EQ((*applied)["status"]["phaseMessage"], "all cards healthy");
  EXPECT_EQ((*applied)["status"]["phase"], "Active");

  int status = 0;
  std::string table = testing::Kubectl("get instancetypes with-status", &status);
  ASSERT_EQ(status, 0) << table;
  for (const char* header :
       {"NAME", "ENTRANCE", "UNIT(CPU/RAM)/STORAGE", "ACCELERATOR(EX/SH/SL/PT)", "CPU", "PHASE"}) {
    EXPECT_NE(table.find(header), std::string::npos) << header << " missing in:\n" << table;
  }
  for (const char* cell :
       {"with-status", "gpustack-a100", "8/64Gi/100Gi", "8/14 80/150 100/1500 0/0", "Active"}) {
    EXPECT_NE(table.find(cell), std::string::npos) << cell << " missing in:\n" << table;
  }
  std::string short_name = testing::Kubectl("get instype -o name", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(short_name.find("instancetype.worker.gpustack.ai/with-status"), std::string::npos)
      << short_name;
  ASSERT_TRUE(client_->Delete(resources::InstanceTypes(), "", "with-status"));
}

TEST_F(CrdTest, DevicesAndInstancesValidate) {
  Json devices = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                  {"kind", "Devices"},
                  {"metadata", {{"name", "node-a"}}},
                  {"spec",
                   {{"groups",
                     {{{"id", "nvidia-a100"},
                       {"manufacturer", "nvidia"},
                       {"memory", 81920},
                       {"accelerators",
                        {{{"id", "GPU-1"}, {"index", 0}}, {{"id", "GPU-2"}, {"index", 1}}}}}}}}}};
  auto created = client_->Create(resources::Devices(), devices);
  ASSERT_TRUE(created) << created.error();
  Json duplicate_card = devices;
  duplicate_card["metadata"]["name"] = "node-b";
  duplicate_card["spec"]["groups"][0]["accelerators"][1]["id"] = "GPU-1";
  auto refused = client_->Create(resources::Devices(), duplicate_card);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("Duplicate value"), std::string::npos) << refused.error();
  int status = 0;
  std::string listed = testing::Kubectl("get devs", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(listed.find("node-a"), std::string::npos) << listed;
  ASSERT_TRUE(client_->Delete(resources::Devices(), "", "node-a"));

  std::string ns = testing::CreateNamespace(*client_, "inst");
  Json instance = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                   {"kind", "Instance"},
                   {"metadata", {{"name", "job"}, {"namespace", ns}}},
                   {"spec",
                    {{"type", "a100"},
                     {"image", "busybox"},
                     {"volume", {{"ephemeral", {{"capacity", "10Gi"}}}}},
                     {"resources", {{"accelerator", 1}}}}}};
  auto accepted = client_->Create(resources::Instances(), instance);
  ASSERT_TRUE(accepted) << accepted.error();
  EXPECT_EQ((*accepted)["spec"]["volumeMount"], "/workspace");
  EXPECT_EQ((*accepted)["spec"]["imagePullPolicy"], "IfNotPresent");
  Json two_volumes = instance;
  two_volumes["metadata"]["name"] = "two";
  two_volumes["spec"]["volume"]["persistent"] = {{"name", "pvc"}};
  auto both = client_->Create(resources::Instances(), two_volumes);
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().find("exactly one of ephemeral and persistent"), std::string::npos)
      << both.error();
  Json escaping = instance;
  escaping["metadata"]["name"] = "escape";
  escaping["spec"]["additionalVolumes"] = {
      {{"mountPath", "/data"}, {"subPath", "a/../../etc"}, {"secret", {{"name", "s"}}}}};
  auto escaped = client_->Create(resources::Instances(), escaping);
  ASSERT_FALSE(escaped);
  EXPECT_NE(escaped.error().find("subPath may not contain '..'"), std::string::npos)
      << escaped.error();
  Json shadowing = instance;
  shadowing["metadata"]["name"] = "shadow";
  shadowing["spec"]["additionalVolumes"] = {
      {{"mountPath", "/workspace"}, {"secret", {{"name", "s"}}}}};
  auto shadowed = client_->Create(resources::Instances(), shadowing);
  ASSERT_FALSE(shadowed);
  EXPECT_NE(shadowed.error().find("cannot be mounted at volumeMount"), std::string::npos)
      << shadowed.error();
  std::string table = testing::Kubectl("get inst -n " + ns, &status);
  EXPECT_EQ(status, 0);
  for (const char* header : {"TYPE", "HOST-IP", "SSH-PORT", "PHASE"}) {
    EXPECT_NE(table.find(header), std::string::npos) << header << " missing in:\n" << table;
  }
}

}  // namespace
}  // namespace gpustack::kube
