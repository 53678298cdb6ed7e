// The CDI spec of a prepared claim: the plugin's grant as container edits a CDI-capable engine
// applies.
#include "host/dra/cdi_spec.h"

#include <gtest/gtest.h>

namespace gpustack::dra {
namespace {

TEST(ClaimCdiSpec, CarriesTheGrantsEdits) {
  std::vector<sdk::ContainerEdit> edits = {
      {.kind = GPUSTACK_EDIT_ENV, .key = "NVIDIA_VISIBLE_DEVICES", .value = "GPU-a"},
      {.kind = GPUSTACK_EDIT_DEVICE_NODE, .host_path = "/dev/nvidia0"},
      {.kind = GPUSTACK_EDIT_MOUNT,
       .host_path = "/var/lib/gpustack/x",
       .container_path = "/etc/x",
       .read_only = true},
      {.kind = GPUSTACK_EDIT_ANNOTATION, .key = "k", .value = "v"},
      {.kind = GPUSTACK_EDIT_CDI_DEVICE, .value = "nvidia.com/gpu=GPU-a"}};
  std::vector<std::string> dropped;
  const nlohmann::json spec = ClaimCdiSpec("uid-1", edits, &dropped);
  EXPECT_EQ(spec["kind"], "gpustack.ai/claim");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  ASSERT_EQ(spec["devices"].size(), 1u);
  const nlohmann::json& device = spec["devices"][0];
  EXPECT_EQ(device["name"], "uid-1");
  const nlohmann::json& e = device["containerEdits"];
  EXPECT_EQ(e["env"], (nlohmann::json{"NVIDIA_VISIBLE_DEVICES=GPU-a"}));
  EXPECT_EQ(e["deviceNodes"][0],
            (nlohmann::json{
                {"path", "/dev/nvidia0"}, {"hostPath", "/dev/nvidia0"}, {"permissions", "rw"}}));
  EXPECT_EQ(e["mounts"][0]["options"][0], "ro");
  EXPECT_EQ(dropped, std::vector<std::string>{"annotation k"});
  EXPECT_EQ(CdiDeviceName("uid-1"), "gpustack.ai/claim=uid-1");
  EXPECT_EQ(ClaimOfCdiSpecFile(CdiSpecFileName("uid-1")), "uid-1");
  for (const char* other : {"nvidia.yaml", "gpustack.ai-claim_.json", "gpustack.ai-claim_u.yaml"})
    EXPECT_FALSE(ClaimOfCdiSpecFile(other).has_value()) << other;
}

}  // namespace
}  // namespace gpustack::dra
