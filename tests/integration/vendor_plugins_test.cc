// The production NVML-family plugins (NVIDIA here) loaded by the real loader, driving the fake
// NVML built from tests/fakes/vendor: discovery on fixture nodes, error injection, the
// last-good rule, partition create/list/destroy with ownership, and metrics.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gpustack_support/nvml_api.h>

#include "host/loader/dlopen_source.h"
#include "host/pci/pci_inventory.h"
#include "host/runtime/last_good.h"

namespace gpustack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::Accelerator;
using sdk::AcceleratorGroup;

const std::string kNodes = GPUSTACK_NODES_DIR;  // scenario files
const std::string kTrees = GPUSTACK_NODE_TREES_DIR;
const std::string kFakeNvml = std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libnvidia-ml.so.1";

class VendorPluginTest : public ::testing::Test {
 protected:
  void TearDown() override {
    plugins_.clear();
    fs::remove_all(state_dir_);
    if (!fixture_copy_.empty()) fs::remove(fixture_copy_);
    ::unsetenv("GPUSTACK_FAKE_FIXTURE");
  }

  // The scenario, optionally with `errors` injected into its nvml section.
  void UseNode(const std::string& node, const json& errors = nullptr) {
    std::string fixture = kNodes + "/" + node + ".json";
    if (!errors.is_null()) {
      std::ifstream in(fixture);
      json scenario = json::parse(in);
      for (const char* section : {"nvml", "hgml", "ixml", "rocm_smi"}) {
        if (scenario.contains(section)) scenario[section]["errors"] = errors;
      }
      fixture_copy_ =
          fs::temp_directory_path() / ("fixture-" + std::to_string(::getpid()) + ".json");
      std::ofstream(fixture_copy_) << scenario.dump();
      fixture = fixture_copy_;
    }
    ::setenv("GPUSTACK_FAKE_FIXTURE", fixture.c_str(), 1);
    auto inventory = pci::Scan({kTrees + "/" + node + "/sys", {"02", "03", "0b", "12"}});
    ASSERT_TRUE(inventory) << inventory.error();
    inventory_ = *inventory;
  }

  // Discovers, then makes a 3g.40gb partition at the start of the first card for pod-1/main.
  static void MakePartitionOnTheFirstCard(loader::LoadedPlugin& plugin, std::string& card,
                                          std::optional<sdk::Partition>& made) {
    auto groups = plugin.Discover();
    ASSERT_TRUE(groups) << groups.error();
    card = groups->front().accelerators[0].id;
    auto created = plugin.CreatePartition({card, "3g.40gb", {0, 4}, "pod-1/main"});
    ASSERT_TRUE(created) << created.error();
    made = *created;
  }

  loader::LoadedPlugin& Start(const std::string& library = kFakeNvml,
                              const std::string& plugin = "nvidia") {
    auto loaded =
        loader::LoadFromManifest(std::string(GPUSTACK_PLUGIN_DIR) + "/" + plugin + ".json");
    EXPECT_TRUE(loaded) << loaded.error();
    plugins_.push_back(std::move(loaded).value());
    auto init =
        plugins_.back()->Init({{"library_path", library}, {"state_dir", state_dir_}}, inventory_);
    EXPECT_TRUE(init) << init.error();
    return *plugins_.back();
  }
  // Unloads the plugins, so the next Start reads the fixture afresh.
  void Stop() { plugins_.clear(); }

  std::vector<pci::PciDevice> inventory_;
  std::vector<std::unique_ptr<loader::LoadedPlugin>> plugins_;
  std::string state_dir_ = fs::temp_directory_path() / ("nvml-state-" + std::to_string(::getpid()));
  std::string fixture_copy_;
};

TEST_F(VendorPluginTest, DiscoversEveryCardWithTopologyAndTheDriverMinor) {
  UseNode("nvidia-t4x4");
  auto groups = Start().Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->size(), 1u);
  const AcceleratorGroup& g = groups->front();
  EXPECT_EQ(g.product, "Tesla T4");
  EXPECT_EQ(g.memory_mib, 16384u);  // physical (NVML v2), not the 15360 usable
  EXPECT_EQ(g.cores, 2560u);
  EXPECT_EQ(g.family, "Turing");
  EXPECT_EQ(g.compute_capability, "7.5");
  EXPECT_EQ(g.driver_version, "580.159.03");
  EXPECT_EQ(g.runtime_version, "13.0");
  ASSERT_EQ(g.accelerators.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const Accelerator& a = g.accelerators[i];
    EXPECT_EQ(a.index, i);
    EXPECT_EQ(a.physical_indexes, std::vector<uint32_t>{i});
    EXPECT_EQ(a.pci_class, 0x030200u);
    EXPECT_EQ(a.logical_slice_count, 128u);
    EXPECT_TRUE(a.cores_percentage_overcommit);
    EXPECT_EQ(a.partition_mode, GPUSTACK_PARTITION_MODE_UNSUPPORTED);
  }
  EXPECT_EQ(g.accelerators[0].pci_bus_id, "0000:00:1b.0");  // NVML's 00000000:00:1B.0, normalized
}

TEST_F(VendorPluginTest, MissingLibraryIsUnavailableWithWhatToDo) {
  UseNode("nvidia-a10g");
  auto groups = Start("/nonexistent/libnvidia-ml.so.1").Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kUnavailable);
  EXPECT_NE(groups.error().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << groups.error();
  EXPECT_NE(groups.error().find("install the NVIDIA driver"), std::string::npos) << groups.error();
}

TEST_F(VendorPluginTest, AWrongLibraryIsRefusedByItsMissingSymbols) {
  UseNode("nvidia-a10g");
  // T-Head's fake exports hgml* names only: not an NVML.
  auto groups = Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libhgml.so").Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kUnavailable);
  EXPECT_NE(groups.error().find("lacks nvmlInit_v2"), std::string::npos) << groups.error();
}

TEST_F(VendorPluginTest, InitFailureIsUnavailableAndRetried) {
  UseNode("nvidia-a10g", {{"Init", {{"code", 9}}}});
  loader::LoadedPlugin& plugin = Start();
  for (int pass = 0; pass < 2; ++pass) {
    auto groups = plugin.Discover();
    ASSERT_FALSE(groups);
    EXPECT_EQ(groups.code(), Code::kUnavailable);
    EXPECT_NE(groups.error().find("Driver Not Loaded"), std::string::npos) << groups.error();
  }
}

TEST_F(VendorPluginTest, ACardThatStopsAnsweringIsReportedUnhealthyAndTheOthersStay) {
  // Five good UUID reads (the first pass and card 0 of the second), then the GPU is lost.
  UseNode("nvidia-t4x4", {{"DeviceGetUUID", {{"code", 15}, {"after", 5}}}});
  loader::LoadedPlugin& plugin = Start();
  auto first = plugin.Discover();
  ASSERT_TRUE(first) << first.error();
  ASSERT_EQ(runtime::CardCount(*first), 4u);

  auto second = plugin.Discover();
  ASSERT_TRUE(second) << "one bad card must not fail the pass: " << second.error();
  const std::vector<Accelerator>& cards = second->front().accelerators;
  ASSERT_EQ(cards.size(), 4u) << "the cards that stopped answering are still reported";
  EXPECT_EQ(cards[0].health, GPUSTACK_HEALTH_HEALTHY);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(cards[i].id, first->front().accelerators[i].id) << "named as it was last read";
    EXPECT_EQ(cards[i].health, GPUSTACK_HEALTH_UNHEALTHY);
    EXPECT_EQ(cards[i].health_reason, "nvml: uuid: GPU is lost (15)");
  }
  auto snapshot = plugin.SampleMetrics({.accelerator_ids = {}, .include_processes = false});
  ASSERT_TRUE(snapshot) << snapshot.error();
  EXPECT_EQ(snapshot->devices[3].health, GPUSTACK_HEALTH_UNHEALTHY);
  EXPECT_FALSE(snapshot->devices[3].memory_total_mib) << "nothing measured of a lost card";
}

TEST_F(VendorPluginTest, TheLastGoodResultStaysWhenTheLibraryFailsAsAWhole) {
  UseNode("nvidia-t4x4", {{"DeviceGetCount", {{"code", 15}, {"after", 1}}}});
  loader::LoadedPlugin& plugin = Start();
  runtime::LastGoodDiscovery published;
  auto first = plugin.Discover();
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(published.Update("nvidia", first).groups.front().accelerators.size(), 4u);
  auto second = plugin.Discover();
  ASSERT_FALSE(second);
  EXPECT_EQ(second.code(), Code::kInternal);
  EXPECT_NE(second.error().find("counting devices: GPU is lost"), std::string::npos)
      << second.error();
  const auto& entry = published.Update("nvidia", second);
  EXPECT_TRUE(entry.stale);
  ASSERT_EQ(entry.groups.size(), 1u);
  EXPECT_EQ(entry.groups.front().accelerators.size(), 4u) << "the last good result is kept";

  // A clean pass that finds nothing does remove them.
  EXPECT_TRUE(published.Update("nvidia", std::vector<AcceleratorGroup>{}).groups.empty());
}

TEST_F(VendorPluginTest, ACardThatFailsItsFirstReadIsLeftOutAndTheOthersReported) {
  // Not "not supported" but an error, on a card never read before: it cannot be named, so it is
  // left out (the host then sees fewer cards than PCI functions); the other three are reported.
  UseNode("nvidia-t4x4", {{"DeviceGetMinorNumber", {{"code", 999}, {"after", 3}}}});
  auto groups = Start().Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->front().accelerators.size(), 3u);
  for (const Accelerator& c : groups->front().accelerators)
    EXPECT_EQ(c.health, GPUSTACK_HEALTH_HEALTHY);
}

TEST_F(VendorPluginTest, GrantsNameTheCardsAndCarryASlicesBudget) {
  UseNode("nvidia-a10g");
  loader::LoadedPlugin& plugin = Start();
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  const std::string uuid = groups->front().accelerators[0].id;
  auto whole = plugin.Grant({"pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {uuid}});
  ASSERT_TRUE(whole) << whole.error();
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ((*whole)[0].key, "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ((*whole)[0].value, uuid);
  // docs/decisions.md D6: 20 % of the A10G's 24560 MiB is 4912 MiB.
  auto slice = plugin.Grant({"pod", "main", GPUSTACK_GRANT_SLICED, {uuid}, 4912, 20});
  ASSERT_TRUE(slice) << slice.error();
  std::map<std::string, std::string> env;
  for (const sdk::ContainerEdit& e : *slice) env[e.key] = e.value;
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4912m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "20");
  auto nodes = plugin.ListDeviceNodes({});
  ASSERT_TRUE(nodes) << nodes.error();
  std::vector<std::string> paths;
  for (const sdk::DeviceNode& n : *nodes) paths.push_back(n.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"nvidiactl", "nvidia-uvm", "nvidia0"}));
}

TEST_F(VendorPluginTest, CardWithoutAMinorIsSkippedNotGuessed) {
  UseNode("nvidia-t4x4", {{"DeviceGetMinorNumber", {{"code", 3}, {"after", 3}}}});
  auto groups = Start().Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->front().accelerators.size(), 3u);
  EXPECT_EQ(groups->front().accelerators.back().physical_indexes, std::vector<uint32_t>{2});
}

TEST_F(VendorPluginTest, MigModeCardsOfferTheTablesProfilesWithTheDriversPlacements) {
  UseNode("nvidia-h100x8-mig-mixed");
  auto groups = Start().Discover();
  ASSERT_TRUE(groups) << groups.error();
  const auto& cards = groups->front().accelerators;
  ASSERT_EQ(cards.size(), 8u);
  for (size_t i = 0; i < cards.size(); ++i) {
    const bool mig = i < 3;
    EXPECT_EQ(cards[i].partition_mode,
              mig ? GPUSTACK_PARTITION_MODE_ENABLED : GPUSTACK_PARTITION_MODE_DISABLED);
    EXPECT_EQ(cards[i].logical_slice_count, mig ? 0u : 128u);
    EXPECT_EQ(cards[i].partition_profiles.size(), mig ? 6u : 0u);
  }
  std::vector<std::string> names;
  for (const auto& p : cards[0].partition_profiles) names.push_back(p.name);
  // The driver's "1g.10gb+me" variant is not a resource name and is left out.
  EXPECT_EQ(names, (std::vector<std::string>{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                                             "7g.80gb"}));
  const sdk::PartitionProfile& three = cards[0].partition_profiles[3];
  EXPECT_EQ(three.memory_slices, 4u);
  EXPECT_EQ(three.max_count, 2u);
  ASSERT_EQ(three.placements.size(), 2u);
  EXPECT_EQ(three.placements[1].start, 4u);
}

TEST_F(VendorPluginTest, PartitionsRoundTripWithOwnershipThatSurvivesARestart) {
  UseNode("nvidia-h100x8-mig-on");
  loader::LoadedPlugin& plugin = Start();
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  const std::string gpu0 = groups->front().accelerators[0].id;
  const std::string gpu7 = groups->front().accelerators[7].id;

  // The administrator's partition on GPU 7 is listed, with no owner.
  auto admin = plugin.ListPartitions(gpu7);
  ASSERT_TRUE(admin) << admin.error();
  ASSERT_EQ(admin->size(), 1u);
  EXPECT_EQ(admin->front().profile, "3g.40gb");
  EXPECT_EQ(admin->front().placement.start, 4u);
  EXPECT_EQ(admin->front().owner, "");
  auto refused = plugin.DestroyPartition({gpu7, admin->front().id, "pod-1/main"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);

  auto made = plugin.CreatePartition({gpu0, "3g.40gb", {0, 4}, "pod-1/main"});
  ASSERT_TRUE(made) << made.error();
  EXPECT_EQ(made->accelerator_id, gpu0);
  EXPECT_EQ(made->id.rfind("MIG-", 0), 0u) << made->id;
  EXPECT_EQ(made->owner, "pod-1/main");

  auto overlap = plugin.CreatePartition({gpu0, "1g.10gb", {2, 1}, "pod-2/main"});
  ASSERT_FALSE(overlap);
  EXPECT_EQ(overlap.code(), Code::kResourceExhausted);
  auto illegal = plugin.CreatePartition({gpu0, "3g.40gb", {2, 4}, "pod-2/main"});
  ASSERT_FALSE(illegal);
  EXPECT_EQ(illegal.code(), Code::kInvalidArgument);
  auto unknown = plugin.CreatePartition({gpu0, "5g.50gb", {0, 4}, "pod-2/main"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);

  // A second instance of the plugin (a restarted device manager) still knows the owner.
  loader::LoadedPlugin& restarted = Start();
  auto listed = restarted.ListPartitions(gpu0);
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, made->id);
  EXPECT_EQ(listed->front().owner, "pod-1/main");

  auto wrong_owner = restarted.DestroyPartition({gpu0, made->id, "pod-2/main"});
  ASSERT_FALSE(wrong_owner);
  EXPECT_EQ(wrong_owner.code(), Code::kFailedPrecondition);
  ASSERT_TRUE(restarted.DestroyPartition({gpu0, made->id, "pod-1/main"}));
  auto after = restarted.ListPartitions(gpu0);
  ASSERT_TRUE(after) << after.error();
  EXPECT_TRUE(after->empty());
  auto gone = restarted.DestroyPartition({gpu0, made->id, "pod-1/main"});
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.code(), Code::kNotFound);
  // The placement is free again.
  EXPECT_TRUE(restarted.CreatePartition({gpu0, "7g.80gb", {0, 8}, "pod-3/main"}));
}

// What an administrator's nvidia-smi would do, through the same fake library the plugin holds.
struct AdminNvml {
  explicit AdminNvml(const std::string& path)
      : handle(::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {}
  ~AdminNvml() {
    if (handle != nullptr) ::dlclose(handle);
  }
  template <class Fn>
  Fn Get(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(handle, name));
  }
  void* handle;
};

// The driver refuses the GPU instance's destroy after its compute instance went: the partition
// (now without a MIG device, so under another id) stays ours, and a second destroy finishes it.
TEST_F(VendorPluginTest, AGpuInstanceThatOutlivesItsComputeInstanceStaysOursUntilDestroyed) {
  UseNode("nvidia-h100x8-mig-on", {{"GpuInstanceDestroy", {{"code", 19}, {"times", 1}}}});
  loader::LoadedPlugin& plugin = Start();
  std::string gpu0;
  std::optional<sdk::Partition> made;
  ASSERT_NO_FATAL_FAILURE(MakePartitionOnTheFirstCard(plugin, gpu0, made));

  auto refused = plugin.DestroyPartition({gpu0, made->id, "pod-1/main"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kUnavailable) << refused.error();
  auto half = plugin.ListPartitions(gpu0);
  ASSERT_TRUE(half) << half.error();
  ASSERT_EQ(half->size(), 1u);
  EXPECT_NE(half->front().id, made->id);  // no MIG device left to name it by
  EXPECT_EQ(half->front().owner, "pod-1/main");

  ASSERT_TRUE(plugin.DestroyPartition({gpu0, half->front().id, "pod-1/main"}));
  auto after = plugin.ListPartitions(gpu0);
  ASSERT_TRUE(after) << after.error();
  EXPECT_TRUE(after->empty());
}

TEST_F(VendorPluginTest, APartitionRecreatedBehindThePluginsBackIsNotMistakenForOurs) {
  namespace nv = support::nvml;
  UseNode("nvidia-h100x8-mig-on");
  loader::LoadedPlugin& plugin = Start();
  std::string gpu0;
  std::optional<sdk::Partition> made;
  ASSERT_NO_FATAL_FAILURE(MakePartitionOnTheFirstCard(plugin, gpu0, made));

  // The administrator destroys it and makes the same shape at the same place.
  AdminNvml nvml(kFakeNvml);
  ASSERT_NE(nvml.handle, nullptr);
  nv::Device card = nullptr;
  ASSERT_EQ(nvml.Get<nv::Return (*)(unsigned, nv::Device*)>("nvmlDeviceGetHandleByIndex")(0, &card),
            0);
  nv::GpuInstance gi = nullptr;
  unsigned n = 2;
  const unsigned three_g = 9;  // the fixture's creation id of 3g.40gb
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::Device, unsigned, nv::GpuInstance*, unsigned*)>(
                "nvmlDeviceGetGpuInstances")(card, three_g, &gi, &n),
            0);
  ASSERT_EQ(n, 1u);
  nv::ComputeInstance ci = nullptr;
  n = 1;
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::GpuInstance, unsigned, nv::ComputeInstance*, unsigned*)>(
                "nvmlGpuInstanceGetComputeInstances")(gi, 2, &ci, &n),
            0);
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::ComputeInstance)>("nvmlComputeInstanceDestroy")(ci), 0);
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::GpuInstance)>("nvmlGpuInstanceDestroy")(gi), 0);

  // The plugin notices it is gone (the device manager lists partitions on every reclaim pass)
  // and forgets its record.
  auto gone = plugin.ListPartitions(gpu0);
  ASSERT_TRUE(gone) << gone.error();
  EXPECT_TRUE(gone->empty());

  const nv::GpuInstancePlacement where{0, 4};
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::Device, unsigned, const nv::GpuInstancePlacement*,
                                    nv::GpuInstance*)>("nvmlDeviceCreateGpuInstanceWithPlacement")(
                card, three_g, &where, &gi),
            0);
  ASSERT_EQ(nvml.Get<nv::Return (*)(nv::GpuInstance, unsigned, nv::ComputeInstance*)>(
                "nvmlGpuInstanceCreateComputeInstance")(gi, 2, &ci),
            0);

  auto listed = plugin.ListPartitions(gpu0);
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  // Same card, same instance ids, so (as on real MIG, it seems) the same UUID: only the record
  // dropped when the partition was seen gone keeps this one from being taken for ours.
  EXPECT_EQ(listed->front().id, made->id);
  EXPECT_EQ(listed->front().owner, "") << "the administrator's partition is not ours";
  auto refused = plugin.DestroyPartition({gpu0, listed->front().id, "pod-1/main"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
}

TEST_F(VendorPluginTest, PartitionsAreRefusedOnACardNotInMigMode) {
  UseNode("nvidia-h100x8-mig-mixed");
  loader::LoadedPlugin& plugin = Start();
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  auto made = plugin.CreatePartition({groups->front().accelerators[5].id, "1g.10gb", {0, 1}, "p"});
  ASSERT_FALSE(made);
  EXPECT_EQ(made.code(), Code::kFailedPrecondition);
  EXPECT_NE(made.error().find("not in partition (MIG) mode"), std::string::npos) << made.error();
}

TEST_F(VendorPluginTest, MetricsReportWhatIsMeasuredAndNothingElse) {
  UseNode("nvidia-t4x4", {{"DeviceGetPowerUsage", {{"code", 3}}}});
  loader::LoadedPlugin& plugin = Start();
  auto snapshot = plugin.SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(snapshot) << snapshot.error();
  ASSERT_EQ(snapshot->devices.size(), 4u);
  const sdk::DeviceSample& s = snapshot->devices[1];
  EXPECT_EQ(s.memory_total_mib, 15360.0);
  EXPECT_EQ(s.memory_used_mib, 400.0);  // 300 + 1 x 100 in the fixture
  EXPECT_NEAR(*s.memory_utilization_percent, 100.0 * 400 / 15360, 1e-9);
  EXPECT_EQ(s.cores_utilization_percent, 10.0);
  EXPECT_EQ(s.temperature_celsius, 41.0);
  EXPECT_FALSE(s.power_watts.has_value()) << "not measured is absent, never zero";
  EXPECT_EQ(s.health, GPUSTACK_HEALTH_HEALTHY);
  ASSERT_EQ(snapshot->processes.size(), 4u);
  EXPECT_EQ(snapshot->processes[1].pid, 4001u);
  EXPECT_EQ(snapshot->processes[1].memory_used_mib, 200.0);
  EXPECT_EQ(snapshot->processes[1].cores_utilization_percent, 10.0);

  auto unknown =
      plugin.SampleMetrics({.accelerator_ids = {"GPU-nope"}, .include_processes = false});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.code(), Code::kNotFound);
}

// A listing call that fails leaves the card's processes unlisted, with why, rather than reading
// as a card nobody uses (which would publish every slice on it as idle).
TEST_F(VendorPluginTest, AProcessListingTheDriverRefusesSaysWhyAndListsNothing) {
  const std::vector<std::pair<int, gpustack_process_listing>> cases = {
      {4, GPUSTACK_PROCESS_LISTING_PERMISSION},  // NVML_ERROR_NO_PERMISSION
      {3, GPUSTACK_PROCESS_LISTING_UNSUPPORTED},
      {999, GPUSTACK_PROCESS_LISTING_DRIVER_ERROR}};
  for (const auto& [code, listing] : cases) {
    SCOPED_TRACE("NVML code " + std::to_string(code));
    UseNode("nvidia-t4x4", {{"DeviceGetComputeRunningProcesses", {{"code", code}}}});
    auto snapshot = Start().SampleMetrics({.accelerator_ids = {}, .include_processes = true});
    ASSERT_TRUE(snapshot) << snapshot.error();
    ASSERT_EQ(snapshot->devices.size(), 4u);
    for (const sdk::DeviceSample& d : snapshot->devices) EXPECT_EQ(d.process_listing, listing);
    EXPECT_TRUE(snapshot->processes.empty());
    EXPECT_EQ(snapshot->devices[1].memory_used_mib, 400.0) << "the card's own figures stay";
    Stop();
  }
  // The size query answers, the read itself fails: still not a list.
  UseNode("nvidia-t4x4", {{"DeviceGetComputeRunningProcesses", {{"code", 999}, {"after", 1}}}});
  auto partial = Start().SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(partial) << partial.error();
  EXPECT_EQ(partial->devices[0].process_listing, GPUSTACK_PROCESS_LISTING_DRIVER_ERROR);
  Stop();

  UseNode("amd-mi210x2", {{"compute_process_info_get", {{"code", 4}}}});  // RSMI_STATUS_PERMISSION
  auto amd = Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/librocm_smi64.so", "amd")
                 .SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(amd) << amd.error();
  ASSERT_EQ(amd->devices.size(), 2u);
  for (const sdk::DeviceSample& d : amd->devices)
    EXPECT_EQ(d.process_listing, GPUSTACK_PROCESS_LISTING_PERMISSION);
  EXPECT_TRUE(amd->processes.empty());
}

TEST_F(VendorPluginTest, ProcessMemoryTheDriverCannotAccountIsNotMeasured) {
  UseNode("nvidia-t4x4");
  std::ifstream in(fixture_copy_.empty() ? kNodes + "/nvidia-t4x4.json" : fixture_copy_);
  json scenario = json::parse(in);
  scenario["nvml"]["devices"][1]["processes"][0]["unaccounted"] = true;
  fixture_copy_ = fs::temp_directory_path() / ("fixture-" + std::to_string(::getpid()) + ".json");
  std::ofstream(fixture_copy_) << scenario.dump();
  ::setenv("GPUSTACK_FAKE_FIXTURE", fixture_copy_.c_str(), 1);
  auto snapshot = Start().SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(snapshot) << snapshot.error();
  ASSERT_EQ(snapshot->processes.size(), 4u);
  EXPECT_FALSE(snapshot->processes[1].memory_used_mib.has_value());
  EXPECT_TRUE(snapshot->processes[2].memory_used_mib.has_value());
}

// The per-Pod figures' end-to-end tests start a container and then tell the fake NVML its pid:
// the loaded plugin sees the rows change from one sample to the next, through the same calls.
TEST_F(VendorPluginTest, ProcessesWrittenWhileLoadedReachTheNextSample) {
  UseNode("nvidia-t4x4");
  const fs::path rows = fs::temp_directory_path() / ("processes-" + std::to_string(::getpid()));
  ::setenv("GPUSTACK_FAKE_PROCESSES", rows.c_str(), 1);
  loader::LoadedPlugin& plugin = Start();
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  const std::string card = groups->front().accelerators[2].id;
  auto before = plugin.SampleMetrics({.accelerator_ids = {card}, .include_processes = true});
  ASSERT_TRUE(before) << before.error();
  const size_t fixture_rows = before->processes.size();
  std::ofstream(rows) << json{{card, {{{"pid", 777}, {"used_mib", 1234}, {"sm_util", 17}}}}}.dump();
  auto after = plugin.SampleMetrics({.accelerator_ids = {card}, .include_processes = true});
  ::unsetenv("GPUSTACK_FAKE_PROCESSES");
  fs::remove(rows);
  ASSERT_TRUE(after) << after.error();
  ASSERT_EQ(after->processes.size(), 1u) << "was " << fixture_rows;
  EXPECT_EQ(after->processes[0].pid, 777u);
  EXPECT_EQ(after->processes[0].accelerator_id, card);
  EXPECT_EQ(after->processes[0].memory_used_mib, 1234.0);
  EXPECT_EQ(after->processes[0].cores_utilization_percent, 17.0);
}

TEST_F(VendorPluginTest, TheadNumbersCardsByMinorMinusOneAndNamesSparseProfilesByName) {
  UseNode("thead-ppu-zw810ex2");
  loader::LoadedPlugin& plugin =
      Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libhgml.so", "thead");
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  const auto& cards = groups->front().accelerators;
  ASSERT_EQ(cards.size(), 2u);
  // The driver reports minors 1 and 2; the card nodes are /dev/alixpu_ppu0 and 1.
  EXPECT_EQ(cards[0].physical_indexes, std::vector<uint32_t>{0});
  EXPECT_EQ(cards[1].physical_indexes, std::vector<uint32_t>{1});
  EXPECT_EQ(cards[0].logical_slice_count, 0u);
  ASSERT_EQ(cards[1].partition_profiles.size(), 2u) << "the +gfx variant is not offered";
  EXPECT_EQ(cards[1].partition_profiles[0].name, "4g.48gb");
  EXPECT_EQ(cards[1].partition_profiles[1].name, "8g.96gb");

  auto made = plugin.CreatePartition({cards[1].id, "4g.48gb", {4, 4}, "pod-9/main"});
  ASSERT_TRUE(made) << made.error();
  auto listed = plugin.ListPartitions("");
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().owner, "pod-9/main");
  EXPECT_TRUE(plugin.DestroyPartition({cards[1].id, made->id, "pod-9/main"}));
}

// Cambricon's process rows: memory from cndevGetProcessInfo, MLU-core utilization from
// cndevGetProcessUtilization when the driver keeps it, absent (never 0) when it does not.
TEST_F(VendorPluginTest, CambriconProcessesCarryTheirCoresWhenTheDriverCounts) {
  std::ifstream in(kNodes + "/cambricon-mlu370x4.json");
  json scenario = json::parse(in);
  json& rows = scenario["cndev"]["devices"][1]["processes"];
  ASSERT_GE(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) rows[i]["ipu_util"] = 3 + i;
  fixture_copy_ = fs::temp_directory_path() / ("fixture-" + std::to_string(::getpid()) + ".json");
  std::ofstream(fixture_copy_) << scenario.dump();
  UseNode("cambricon-mlu370x4");
  ::setenv("GPUSTACK_FAKE_FIXTURE", fixture_copy_.c_str(), 1);
  const std::string library = std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libcndev.so";
  auto counted =
      Start(library, "cambricon").SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(counted) << counted.error();
  ASSERT_EQ(counted->processes.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(counted->processes[i].pid, rows[i]["pid"].get<uint32_t>());
    EXPECT_EQ(counted->processes[i].cores_utilization_percent, 3.0 + static_cast<double>(i));
    EXPECT_TRUE(counted->processes[i].memory_used_mib.has_value());
  }
}

TEST_F(VendorPluginTest, CambriconProcessCoresTheDriverDoesNotCountAreAbsent) {
  UseNode("cambricon-mlu370x4");  // its rows give no ipu_util: NOT_SUPPORTED
  auto uncounted = Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libcndev.so", "cambricon")
                       .SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(uncounted) << uncounted.error();
  ASSERT_FALSE(uncounted->processes.empty());
  for (const sdk::ProcessSample& p : uncounted->processes) {
    EXPECT_TRUE(p.memory_used_mib.has_value());
    EXPECT_FALSE(p.cores_utilization_percent.has_value()) << "not counted is absent, never 0";
  }
}

TEST_F(VendorPluginTest, IluvatarReadsIxmlThroughNvmlNames) {
  UseNode("iluvatar-bi-v150x2");
  loader::LoadedPlugin& plugin =
      Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/libixml.so", "iluvatar");
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->front().accelerators.size(), 2u);
  EXPECT_EQ(groups->front().cores, 0u) << "not reported by this library: left unknown";
  auto partitions = plugin.ListPartitions("");
  ASSERT_FALSE(partitions);
  EXPECT_EQ(partitions.code(), Code::kUnimplemented);
}

TEST_F(VendorPluginTest, AmdReadsRocmSmiAndKfdTopology) {
  UseNode("amd-mi210x2");
  loader::LoadedPlugin& plugin =
      Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/librocm_smi64.so", "amd");
  auto groups = plugin.Discover();
  ASSERT_TRUE(groups) << groups.error();
  const AcceleratorGroup& g = groups->front();
  EXPECT_EQ(g.product, "AMD Instinct MI210");
  EXPECT_EQ(g.cores, 104u);  // 208 SIMDs / 2 per CU
  EXPECT_EQ(g.compute_capability, "gfx90a");
  EXPECT_EQ(g.family, "CDNA2");
  ASSERT_EQ(g.accelerators.size(), 2u);
  EXPECT_EQ(g.accelerators[1].physical_indexes, (std::vector<uint32_t>{2, 129}));

  auto snapshot = plugin.SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(snapshot) << snapshot.error();
  ASSERT_EQ(snapshot->devices.size(), 2u);
  EXPECT_EQ(snapshot->devices[0].temperature_celsius, 46.0);
  EXPECT_NEAR(*snapshot->devices[0].power_watts, 95.000001, 1e-9);
  // pid 9100 spans both cards: ROCm SMI cannot split its VRAM, so it is not measured per card;
  // pid 9101 runs on card 1 alone.
  ASSERT_EQ(snapshot->processes.size(), 3u);
  for (const sdk::ProcessSample& p : snapshot->processes) {
    if (p.pid == 9100) {
      EXPECT_FALSE(p.memory_used_mib.has_value());
    } else {
      EXPECT_EQ(p.pid, 9101u);
      EXPECT_EQ(p.accelerator_id, g.accelerators[1].id);
      EXPECT_EQ(p.memory_used_mib, 1024.0);
    }
  }
}

TEST_F(VendorPluginTest, AmdCardWithoutDrmNodesIsSkipped) {
  UseNode("amd-mi210x2", {{"dev_unique_id_get", {{"code", 2}, {"after", 1}}}});
  auto groups =
      Start(std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/librocm_smi64.so", "amd").Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->front().accelerators.size(), 1u) << "a card without a unique id is skipped";
}

}  // namespace
}  // namespace gpustack

namespace gpustack {
namespace {

// Every plugin against its fake library: the same failure rules hold for all nine.
struct VendorCase {
  std::string plugin;
  std::string library;
  std::string node;
  std::string section;     // the fake's fixture section
  std::string init;        // its initialization function, as the fake names it
  std::string per_device;  // a query discovery makes once per card
};

// Names the case in test listings (instead of the struct's bytes).
void PrintTo(const VendorCase& c, std::ostream* os) { *os << c.plugin; }

class EveryVendor : public ::testing::TestWithParam<VendorCase> {
 protected:
  void TearDown() override {
    if (!fixture_.empty()) std::filesystem::remove(fixture_);
    ::unsetenv("GPUSTACK_FAKE_FIXTURE");
  }
  // Starts the plugin on its node, with `errors` injected into its fake library.
  std::unique_ptr<loader::LoadedPlugin> Start(const nlohmann::json& errors) {
    const VendorCase& c = GetParam();
    std::ifstream in(std::string(GPUSTACK_NODES_DIR) + "/" + c.node + ".json");
    nlohmann::json scenario = nlohmann::json::parse(in);
    scenario[c.section]["errors"] = errors;
    fixture_ = std::filesystem::temp_directory_path() /
               ("every-vendor-" + std::to_string(::getpid()) + ".json");
    std::ofstream(fixture_) << scenario.dump();
    ::setenv("GPUSTACK_FAKE_FIXTURE", fixture_.c_str(), 1);
    auto inventory = pci::Scan(
        {std::string(GPUSTACK_NODE_TREES_DIR) + "/" + c.node + "/sys", {"02", "03", "0b", "12"}});
    EXPECT_TRUE(inventory) << inventory.error();
    auto loaded =
        loader::LoadFromManifest(std::string(GPUSTACK_PLUGIN_DIR) + "/" + c.plugin + ".json");
    EXPECT_TRUE(loaded) << loaded.error();
    std::unique_ptr<loader::LoadedPlugin> plugin = std::move(loaded).value();
    auto init = plugin->Init(
        {{"library_path", std::string(GPUSTACK_FAKE_VENDOR_DIR) + "/" + c.library},
         {"state_dir", (std::filesystem::temp_directory_path() / "every-vendor-state").string()}},
        *inventory);
    EXPECT_TRUE(init) << init.error();
    return plugin;
  }
  std::string fixture_;
};

size_t Cards(const std::vector<AcceleratorGroup>& groups) { return runtime::CardCount(groups); }

TEST_P(EveryVendor, DiscoversAndSamplesEveryCard) {
  auto plugin = Start(nullptr);
  auto groups = plugin->Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_GT(Cards(*groups), 0u);
  auto snapshot = plugin->SampleMetrics({.accelerator_ids = {}, .include_processes = true});
  ASSERT_TRUE(snapshot) << snapshot.error();
  EXPECT_EQ(snapshot->devices.size(), Cards(*groups));
  for (const sdk::DeviceSample& s : snapshot->devices) {
    EXPECT_TRUE(s.memory_total_mib.has_value()) << s.accelerator_id;
    EXPECT_TRUE(s.memory_used_mib.has_value()) << s.accelerator_id;
  }
}

TEST_P(EveryVendor, InitFailureIsUnavailable) {
  auto plugin = Start({{GetParam().init, {{"code", 9}}}});
  auto groups = plugin->Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kUnavailable) << groups.error();
  EXPECT_NE(groups.error().find("initialization failed"), std::string::npos) << groups.error();
}

TEST_P(EveryVendor, OneCardFailingAQueryIsReportedUnhealthyAndTheOthersStay) {
  size_t cards = 0;
  {
    auto clean = Start(nullptr);
    auto groups = clean->Discover();
    ASSERT_TRUE(groups) << groups.error();
    cards = Cards(*groups);
    ASSERT_GE(cards, 2u);
  }
  // The first pass reads every card; in the second, card 0 answers and the rest do not.
  auto plugin = Start({{GetParam().per_device, {{"code", 2}, {"after", cards + 1}}}});
  auto first = plugin->Discover();
  ASSERT_TRUE(first) << first.error();
  auto second = plugin->Discover();
  ASSERT_TRUE(second) << "one bad card must not fail the pass: " << second.error();
  ASSERT_EQ(Cards(*second), cards);
  std::vector<Accelerator> flat;
  for (const AcceleratorGroup& g : *second)
    flat.insert(flat.end(), g.accelerators.begin(), g.accelerators.end());
  EXPECT_NE(flat[0].health, GPUSTACK_HEALTH_UNHEALTHY);
  for (size_t i = 1; i < flat.size(); ++i) {
    EXPECT_EQ(flat[i].health, GPUSTACK_HEALTH_UNHEALTHY) << flat[i].id;
    EXPECT_FALSE(flat[i].health_reason.empty()) << flat[i].id;
  }
}

TEST_P(EveryVendor, GrantsAndDeviceNodesCoverEveryCard) {
  auto plugin = Start(nullptr);
  auto groups = plugin->Discover();
  ASSERT_TRUE(groups) << groups.error();
  auto nodes = plugin->ListDeviceNodes({});
  ASSERT_TRUE(nodes) << nodes.error();
  for (const AcceleratorGroup& g : *groups) {
    for (const Accelerator& c : g.accelerators) {
      auto edits = plugin->Grant({"pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {c.id}});
      ASSERT_TRUE(edits) << c.id << ": " << edits.error();
      EXPECT_FALSE(edits->empty()) << c.id;
      EXPECT_TRUE(std::any_of(nodes->begin(), nodes->end(),
                              [&](const sdk::DeviceNode& n) { return n.accelerator_id == c.id; }))
          << c.id << " has no device node";
    }
  }
  auto none = plugin->Grant({"pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {}});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.code(), Code::kInvalidArgument);
  auto unknown = plugin->Grant({"pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {"NOPE"}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.code(), Code::kNotFound);
}

TEST_P(EveryVendor, MissingLibraryOnANodeWithTheDevicesIsUnavailable) {
  const VendorCase& c = GetParam();
  auto inventory = pci::Scan(
      {std::string(GPUSTACK_NODE_TREES_DIR) + "/" + c.node + "/sys", {"02", "03", "0b", "12"}});
  ASSERT_TRUE(inventory) << inventory.error();
  auto loaded =
      loader::LoadFromManifest(std::string(GPUSTACK_PLUGIN_DIR) + "/" + c.plugin + ".json");
  ASSERT_TRUE(loaded) << loaded.error();
  ASSERT_TRUE((*loaded)->Init({{"library_path", "/nonexistent/" + c.library}}, *inventory));
  auto groups = (*loaded)->Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kUnavailable);
  EXPECT_NE(groups.error().find("/nonexistent/" + c.library), std::string::npos) << groups.error();
}

INSTANTIATE_TEST_SUITE_P(
    Vendors, EveryVendor,
    ::testing::Values(
        VendorCase{"nvidia", "libnvidia-ml.so.1", "nvidia-t4x4", "nvml", "Init", "DeviceGetUUID"},
        VendorCase{"iluvatar", "libixml.so", "iluvatar-bi-v150x2", "ixml", "Init", "DeviceGetUUID"},
        VendorCase{"thead", "libhgml.so", "thead-ppu-zw810ex2", "hgml", "Init", "DeviceGetUUID"},
        VendorCase{"amd", "librocm_smi64.so", "amd-mi210x2", "rocm_smi", "init", "dev_name_get"},
        VendorCase{"hygon", "librocm_smi64.so", "hygon-k100x4", "rocm_smi", "init", "dev_name_get"},
        VendorCase{"ascend", "libdcmi.so", "ascend-910b3x8", "dcmi", "init",
                   "get_device_chip_info"},
        VendorCase{"cambricon", "libcndev.so", "cambricon-mlu370x4", "cndev", "Init", "GetUUID"},
        VendorCase{"metax", "libmxsml.so", "metax-mxc500x2", "mxsml", "Init", "GetDeviceInfo"},
        VendorCase{"mthreads", "libmtml.so", "mthreads-s4000x2", "mtml", "LibraryInit",
                   "DeviceGetUUID"}),
    [](const auto& info) { return info.param.plugin; });

}  // namespace
}  // namespace gpustack
