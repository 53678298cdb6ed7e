// Injection tables: positional variables in ascending card order, the budget where the vendor's
// runtime reads it, a partition in place of its card, and bad grants refused.
#include "gpustack_support/injection.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gpustack::support {
namespace {

// Records the edits a grant produces.
struct Recorder {
  std::vector<sdk::ContainerEdit> edits;
  gpustack_container_edit_sink raw{
      sizeof(gpustack_container_edit_sink), nullptr, this,
      [](void* self, const gpustack_container_edit* e) {
        static_cast<Recorder*>(self)->edits.push_back(
            {e->kind, std::string(sdk::View(e->key)), std::string(sdk::View(e->value)),
             std::string(sdk::View(e->host_path)), std::string(sdk::View(e->container_path)),
             std::string(sdk::View(e->permissions)), e->read_only != 0});
        return static_cast<gpustack_status>(GPUSTACK_STATUS_OK);
      }};
  sdk::ContainerEditSink sink{raw};
  std::map<std::string, std::string> Env() const {
    std::map<std::string, std::string> env;
    for (const auto& e : edits) {
      if (e.kind == GPUSTACK_EDIT_ENV) env[e.key] = e.value;
    }
    return env;
  }
  std::vector<std::string> Nodes() const {
    std::vector<std::string> nodes;
    for (const auto& e : edits) {
      if (e.kind == GPUSTACK_EDIT_DEVICE_NODE) nodes.push_back(e.host_path);
    }
    return nodes;
  }
};

Injection Hami() {
  return {.shared_nodes = {"nvidiactl"},
          .visible_env = "NVIDIA_VISIBLE_DEVICES",
          .memory_env = "CUDA_DEVICE_MEMORY_LIMIT_",
          .memory_suffix = "m",
          .cores_env = "CUDA_DEVICE_SM_LIMIT",
          .slice_env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
          .partition_in_visible_env = true};
}

const InjectedCard kCard0{"GPU-a", 0, "GPU-a", {"nvidia0"}};
const InjectedCard kCard1{"GPU-b", 1, "GPU-b", {"nvidia1"}};

TEST(Injection, WholeCardsAreNamedInAscendingIndexWhateverTheGrantOrder) {
  Recorder r;
  EmitGrant(Hami(), {.mode = GPUSTACK_GRANT_EXCLUSIVE}, {kCard1, kCard0}, r.sink);
  EXPECT_EQ(r.Env(),
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}));
  EXPECT_TRUE(r.Nodes().empty()) << "the vendor runtime injects them";
}

TEST(Injection, ASliceCarriesItsBudget) {
  Recorder r;
  EmitGrant(Hami(),
            {.mode = GPUSTACK_GRANT_SLICED, .memory_limit_mib = 4912, .cores_percentage = 20},
            {kCard1}, r.sink);
  EXPECT_EQ(r.Env(), (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "GPU-b"},
                                                         {"CUDA_DEVICE_MEMORY_LIMIT_0", "4912m"},
                                                         {"CUDA_DEVICE_SM_LIMIT", "20"},
                                                         {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}));
}

TEST(Injection, BytesAndPlainNamesForRuntimesThatWantThem) {
  Injection mthreads{.visible_env = "MTHREADS_VISIBLE_DEVICES",
                     .memory_env = "MTHREADS_QOS_MEMORY_LIMIT",
                     .memory_env_positional = false,
                     .memory_unit_bytes = 1};
  Recorder r;
  EmitGrant(mthreads,
            {.mode = GPUSTACK_GRANT_SLICED, .memory_limit_mib = 2, .cores_percentage = 50},
            {kCard0}, r.sink);
  EXPECT_EQ(r.Env().at("MTHREADS_QOS_MEMORY_LIMIT"), "2097152");
}

TEST(Injection, APartitionReplacesItsCardOrBringsTheCardsNodes) {
  Recorder nvidia;
  EmitGrant(Hami(), {.mode = GPUSTACK_GRANT_PARTITIONED, .partition_id = "MIG-1234"}, {kCard0},
            nvidia.sink);
  EXPECT_EQ(nvidia.Env().at("NVIDIA_VISIBLE_DEVICES"), "MIG-1234");

  Injection thead{.shared_nodes = {"alixpu", "alixpu_ctl"}, .inject_nodes = true};
  Recorder ppu;
  EmitGrant(thead, {.mode = GPUSTACK_GRANT_PARTITIONED, .partition_id = "MIG-9"},
            {{"PPU-0", 0, "PPU-0", {"alixpu_ppu0"}}}, ppu.sink);
  EXPECT_EQ(ppu.Nodes(),
            (std::vector<std::string>{"/dev/alixpu", "/dev/alixpu_ctl", "/dev/alixpu_ppu0"}));
}

TEST(Injection, GrantsTheModeDoesNotAllowAreRefused) {
  Recorder r;
  auto refused = [&](const sdk::Grant& grant, std::vector<InjectedCard> cards) {
    try {
      EmitGrant(Hami(), grant, std::move(cards), r.sink);
    } catch (const sdk::Error& e) {
      EXPECT_EQ(e.code(), GPUSTACK_STATUS_INVALID_ARGUMENT) << e.what();
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused({.mode = GPUSTACK_GRANT_EXCLUSIVE}, {}));
  EXPECT_TRUE(refused({.mode = GPUSTACK_GRANT_SHARED}, {kCard0, kCard1}));
  EXPECT_TRUE(refused({.mode = GPUSTACK_GRANT_SLICED, .cores_percentage = 20}, {kCard0}));
  EXPECT_TRUE(refused(
      {.mode = GPUSTACK_GRANT_SLICED, .memory_limit_mib = 1, .cores_percentage = 101}, {kCard0}));
  EXPECT_TRUE(refused({.mode = GPUSTACK_GRANT_PARTITIONED}, {kCard0}));
  EXPECT_TRUE(refused({.mode = 9}, {kCard0}));
  EXPECT_TRUE(r.edits.empty()) << "a refused grant emits nothing";
}

}  // namespace
}  // namespace gpustack::support
