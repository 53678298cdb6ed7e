// gpustack-plugin-conformance: the suite every plugin must pass, ours or a third party's. It reads
// the plugin through the same client the host uses (sdk/client), plus the raw C table for what
// the client never does on purpose (wrong versions, undersized structs, refusing sinks).
//
// A hook the plugin does not provide (a NULL slot) skips its tests; a hook the plugin claims a
// capability for but leaves NULL fails. Run with --help for the flags.
#include <gpustack/plugin.h>
#include <gpustack/client/elf.hpp>
#include <gpustack/client/manifest.hpp>
#include <gpustack/client/plugin.hpp>
#include <gpustack/plugin_types.hpp>
#include <gpustack/small_file.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace gpustack {
namespace {

using client::Hook;

constexpr const char* kUsage =
    R"(usage: gpustack-plugin-conformance --manifest <plugin.json> [options] [gtest flags]

Checks a GPUStack plugin against the plugin ABI's rules, reading it the way the host does.

  --manifest FILE        the plugin's manifest (repeatable: several plugins in one run)
  --setting KEY=VALUE    a per-node plugin setting, as the host passes it from the node config
                         (plugins.<name>.config): e.g. library_path=/opt/x/libvendor.so.1,
                         state_dir=/tmp/state (repeatable)
  --sysfs-root DIR       hand init the PCI inventory of this sysfs tree (classes 02, 03, 0b, 12),
                         e.g. a fixture node's; without it the inventory is empty, as on a node
                         without the plugin's devices
  --expect-failure REGEX pass only if the suite fails with a message matching REGEX (for
                         plugins broken on purpose)

Without devices (no --sysfs-root, no library) the suite checks exports, versioning, identity,
init and empty discovery; with them, discovery, grants, partitions, slices and metrics too.
)";

std::vector<std::string> g_manifests;
std::map<std::string, std::string> g_settings;  // --setting
std::string g_sysfs_root;                       // --sysfs-root

constexpr const char* kNoMessage = "(the plugin gave no message)";

std::string LastError(const gpustack_plugin_api& api) {
  return std::string(sdk::View(api.last_error_message()));
}

// Host services for raw calls: no logging, the --setting values through config_get.
gpustack_host_services HostServices() {
  gpustack_host_services host{};
  host.struct_size = sizeof(host);
  host.log = [](void*, gpustack_log_level, gpustack_str, gpustack_str, uint32_t) {};
  host.log_enabled = [](void*, gpustack_log_level) -> int32_t { return 0; };
  host.monotonic_time_ns = [](void*) -> uint64_t { return 1; };
  host.config_get = [](void*, gpustack_str key, gpustack_str* value) -> gpustack_status {
    auto it = g_settings.find(std::string(sdk::View(key)));
    if (it == g_settings.end()) return GPUSTACK_STATUS_NOT_FOUND;
    *value = sdk::Str(it->second);
    return GPUSTACK_STATUS_OK;
  };
  return host;
}

// The PCI functions of the scanned classes under <root>/bus/pci/devices, as ABI structs.
class Inventory {
 public:
  explicit Inventory(const std::string& sysfs_root) {
    if (sysfs_root.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(fs::path(sysfs_root) / "bus/pci/devices", ec)) {
      entries.push_back(e.path());
    }
    std::sort(entries.begin(), entries.end());
    for (const fs::path& dir : entries) {
      const uint32_t klass = Hex(dir / "class");
      const uint32_t base = klass >> 16;
      if (base != 0x02 && base != 0x03 && base != 0x0b && base != 0x12) continue;
      strings_.push_back(dir.filename().string());
      strings_.push_back(dir.string());
      const std::string numa = sdk::ReadSmallFile((dir / "numa_node").string(), 64).value_or("-1");
      devices_.push_back({sizeof(gpustack_pci_device),
                          nullptr,
                          {},
                          static_cast<uint16_t>(Hex(dir / "vendor")),
                          static_cast<uint16_t>(Hex(dir / "device")),
                          klass,
                          static_cast<uint16_t>(Hex(dir / "subsystem_vendor")),
                          static_cast<uint16_t>(Hex(dir / "subsystem_device")),
                          static_cast<int32_t>(std::strtol(numa.c_str(), nullptr, 10)),
                          {}});
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      devices_[i].bus_id = sdk::Str(strings_[2 * i]);
      devices_[i].sysfs_path = sdk::Str(strings_[2 * i + 1]);
      pointers_.push_back(&devices_[i]);
    }
  }
  Inventory(const Inventory&) = delete;
  std::span<const gpustack_pci_device* const> span() const { return pointers_; }

 private:
  static uint32_t Hex(const std::filesystem::path& file) {
    const std::string text = sdk::ReadSmallFile(file.string(), 64).value_or("0");
    return static_cast<uint32_t>(std::strtoul(text.c_str(), nullptr, 16));
  }
  std::vector<std::string> strings_;  // complete before any view into them is taken
  std::vector<gpustack_pci_device> devices_;
  std::vector<const gpustack_pci_device*> pointers_;
};

bool IsBusId(const std::string& s) {
  static const std::regex bus("^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  return std::regex_match(s, bus);
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto manifest = client::ReadManifest(GetParam());
    ASSERT_TRUE(manifest) << manifest.error();
    manifest_ = *manifest;
    client::OpenOptions options;
    options.require_claimed_hooks = false;  // ClaimedCapabilitiesHaveHooks reports it
    auto opened = client::Plugin::Open(manifest_, options);
    ASSERT_TRUE(opened) << opened.error();
    plugin_ = std::move(opened).value();
  }

  // Creates the instance for tests that need one; a failure explains the usual cause.
  bool Started() {
    if (plugin_->initialized()) return true;
    auto init = plugin_->Init(&host_, inventory_.span());
    if (!init) {
      ADD_FAILURE() << init.error()
                    << "\n(a plugin must initialize on a node without its devices or its "
                       "library: open the vendor library on first use, and fail for a missing "
                       "one only when the PCI inventory holds the plugin's devices; see the SDK "
                       "README)";
      return false;
    }
    return true;
  }

  bool Has(gpustack_capabilities cap) const {
    return (plugin_->identity().capabilities & cap) != 0;
  }

  // Every failure must explain itself.
  static void ExpectExplained(const Error& error) {
    EXPECT_EQ(error.message.find(kNoMessage), std::string::npos) << error.message;
  }

  // A provided hook that answers UNIMPLEMENTED should have been left NULL.
  static void ExpectImplemented(const Error& error) {
    EXPECT_NE(error.code, Code::kUnimplemented)
        << error.message << " (leave the slot NULL instead: the host reads NULL as not provided)";
  }

  // Discovery, or nullopt when the plugin does not provide it (or could not start).
  std::optional<std::vector<sdk::AcceleratorGroup>> DiscoverOrSkip() {
    if (!plugin_->Provides(Hook::kDiscover) || !Started()) return std::nullopt;
    auto groups = plugin_->Discover();
    if (!groups) {
      ExpectExplained(groups.failure());
      ADD_FAILURE() << "discover must succeed on a node without its devices: " << groups.error();
      return std::nullopt;
    }
    return *groups;
  }

  client::Manifest manifest_;
  std::unique_ptr<client::Plugin> plugin_;
  const gpustack_host_services host_ = HostServices();
  const Inventory inventory_{g_sysfs_root};
};

TEST_P(Conformance, ExportsOnlyTheEntrySymbol) {
  auto exported = client::ExportedSymbols(manifest_.library_path);
  ASSERT_TRUE(exported) << exported.error();
  EXPECT_EQ(*exported, std::vector<std::string>{GPUSTACK_PLUGIN_ENTRY_SYMBOL})
      << "a plugin exports its entry point and nothing else (hidden visibility + the SDK's "
         "export map), so plugins cannot interpose on each other or on the host";
}

TEST_P(Conformance, RefusesAnotherAbiMajor) {
  gpustack_negotiate_args args{};
  args.struct_size = sizeof(args);
  args.host_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR + 1;
  args.host_abi_minor = 0;
  args.api = reinterpret_cast<const gpustack_plugin_api*>(&args);  // must be overwritten or kept
  EXPECT_EQ(plugin_->negotiate()(&args), GPUSTACK_STATUS_INCOMPATIBLE_VERSION);
  EXPECT_EQ(args.plugin_abi_major, static_cast<uint32_t>(GPUSTACK_PLUGIN_ABI_MAJOR));
  EXPECT_EQ(args.api, nullptr);
}

TEST_P(Conformance, NegotiationRejectsUndersizedArgs) {
  gpustack_negotiate_args args{};
  args.struct_size = offsetof(gpustack_negotiate_args, host_abi_minor);  // too small
  args.host_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
  EXPECT_EQ(plugin_->negotiate()(&args), GPUSTACK_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(args.api, nullptr) << "wrote past the struct_size it was given";
}

TEST_P(Conformance, IdentityIsWellFormed) {
  const client::Identity& id = plugin_->identity();
  EXPECT_EQ(id.manufacturer, manifest_.name);
  EXPECT_TRUE(client::IsValidManufacturerKey(id.manufacturer));
  EXPECT_FALSE(id.display_name.empty());
  EXPECT_FALSE(id.plugin_version.empty());
  EXPECT_NE(id.base_resource_name.find('/'), std::string::npos);
  EXPECT_FALSE(id.pci_vendor_ids.empty()) << "auto-enable needs at least one PCI vendor id";
  EXPECT_EQ(std::set<uint16_t>(id.pci_vendor_ids.begin(), id.pci_vendor_ids.end()).size(),
            id.pci_vendor_ids.size())
      << "duplicate PCI vendor ids";
  EXPECT_EQ(Has(GPUSTACK_CAP_PARTITIONING), !id.partition_kind.empty());
  // Recommended since 1.1, never required: unchanged source written for 1.0 and rebuilt against a
  // newer SDK answers the newer minor without knowing the field, and must still pass.
  if (plugin_->negotiated().minor >= 1 && id.install_hint.empty()) {
    const char* warning =
        "install_hint is empty: preflight cannot tell an administrator what to install when the "
        "vendor library is missing";
    std::cerr << "warning: " << manifest_.name << ": " << warning << "\n";
    RecordProperty("warning", warning);
  }
}

TEST_P(Conformance, ProvidesInitForOlderHosts) {
  EXPECT_NE(plugin_->table().init, nullptr)
      << manifest_.name << " provides create_instance but not init: a 1.0 host calls only init "
      << "(plugin.h: provide both)";
}

TEST_P(Conformance, ClaimedCapabilitiesHaveHooks) {
  if (plugin_->negotiated().minor < 1) {
    GTEST_SKIP() << "an ABI 1.0 plugin: the host drops any capability it has no hook for";
  }
  for (const std::string& missing : client::MissingHooks(plugin_->identity(), plugin_->table())) {
    ADD_FAILURE() << manifest_.name << " " << missing;
  }
}

TEST_P(Conformance, IdentifyWritesOnlyWithinStructSize) {
  struct {
    gpustack_plugin_identity id;
    unsigned char tail[64];
  } buffer;
  for (size_t size : {GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0, sizeof(buffer.id)}) {
    std::memset(&buffer, 0xAA, sizeof buffer);
    buffer.id.struct_size = size;
    ASSERT_EQ(plugin_->table().identify(&buffer.id), GPUSTACK_STATUS_OK)
        << LastError(plugin_->table());
    const auto* bytes = reinterpret_cast<const unsigned char*>(&buffer);
    for (size_t i = size; i < sizeof buffer; ++i) {
      ASSERT_EQ(bytes[i], 0xAA) << "identify wrote byte " << i << " past struct_size " << size;
    }
  }
  gpustack_plugin_identity small{};
  small.struct_size = offsetof(gpustack_plugin_identity, display_name);
  EXPECT_EQ(plugin_->table().identify(&small), GPUSTACK_STATUS_INVALID_ARGUMENT);
  EXPECT_FALSE(LastError(plugin_->table()).empty()) << "a failure needs a message";
}

TEST_P(Conformance, InitAndShutdownCycle) {
  for (int round = 0; round < 3; ++round) {
    if (!Started()) return;
    plugin_->Shutdown();
  }
  const gpustack_plugin_api& api = plugin_->table();
  if (api.init != nullptr) {
    // The 1.0 entry, as an older host calls it.
    gpustack_init_args args{};
    args.struct_size = GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0;
    args.abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
    args.host = &host_;
    args.pci_devices = inventory_.span().data();
    args.pci_device_count = inventory_.span().size();
    gpustack_plugin_instance* instance = nullptr;
    ASSERT_EQ(api.init(&args, &instance), GPUSTACK_STATUS_OK) << LastError(api);
    api.shutdown(instance);
  }
  api.shutdown(nullptr);  // NULL-safe by contract
}

TEST_P(Conformance, InitRejectsUndersizedArgs) {
  const gpustack_plugin_api& api = plugin_->table();
  gpustack_init_args args{};
  args.struct_size = offsetof(gpustack_init_args, host);
  args.host = &host_;
  gpustack_plugin_instance* instance = nullptr;
  if (api.init != nullptr) {
    EXPECT_EQ(api.init(&args, &instance), GPUSTACK_STATUS_INVALID_ARGUMENT);
    EXPECT_FALSE(LastError(api).empty());
  }
  if (api.create_instance != nullptr) {
    EXPECT_EQ(api.create_instance(&args), GPUSTACK_STATUS_INVALID_ARGUMENT);
    EXPECT_FALSE(LastError(api).empty());
  }
}

TEST_P(Conformance, DiscoveryIsWellFormed) {
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  std::set<uint32_t> indexes;
  size_t cards = 0;
  for (const sdk::AcceleratorGroup& g : *groups) {
    EXPECT_FALSE(g.accelerators.empty()) << g.product << ": a group without accelerators";
    EXPECT_GT(g.memory_mib, 0u) << g.product;
    for (const sdk::Accelerator& a : g.accelerators) {
      ++cards;
      EXPECT_TRUE(indexes.insert(a.index).second) << "duplicate index " << a.index;
      EXPECT_FALSE(IsBusId(a.id)) << a.id << ": an id must be a UUID, never the PCI bus id";
      if (!a.pci_bus_id.empty()) {
        EXPECT_TRUE(IsBusId(a.pci_bus_id)) << a.pci_bus_id;
      }
      EXPECT_GT(a.memory_mib, 0u) << a.id;
      if (a.health == GPUSTACK_HEALTH_UNHEALTHY) {
        EXPECT_FALSE(a.health_reason.empty()) << a.id << ": an unhealthy card says why";
      }
      if (a.logical_slice_count > 0) {
        EXPECT_TRUE(Has(GPUSTACK_CAP_LOGICAL_SLICING)) << a.id;
      }
      if (a.partition_mode == GPUSTACK_PARTITION_MODE_ENABLED) {
        EXPECT_TRUE(Has(GPUSTACK_CAP_PARTITIONING)) << a.id;
        EXPECT_EQ(a.logical_slice_count, 0u) << a.id << ": a partitioned card offers no slices";
        EXPECT_FALSE(a.partition_profiles.empty()) << a.id;
      }
      std::set<std::string> names;
      for (const sdk::PartitionProfile& p : a.partition_profiles) {
        EXPECT_TRUE(names.insert(p.name).second) << "duplicate profile " << p.name;
        EXPECT_TRUE(
            std::regex_match(p.name, std::regex("^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")))
            << p.name << " is not a valid resource-name segment";
        EXPECT_GT(p.memory_mib, 0u) << p.name;
        EXPECT_GE(p.max_count, 1u) << p.name;
        EXPECT_GE(p.placements.size(), 1u) << p.name << ": a profile needs a legal placement";
        for (const gpustack_placement& pl : p.placements) {
          EXPECT_EQ(pl.length, p.memory_slices) << p.name << " placement at " << pl.start;
        }
      }
    }
  }
  // Indexes are the plugin's 0-based enumeration.
  for (uint32_t i = 0; i < cards; ++i) EXPECT_TRUE(indexes.count(i)) << "index " << i << " missing";
}

TEST_P(Conformance, DiscoveryIsRepeatable) {
  auto first = DiscoverOrSkip();
  if (!first) GTEST_SKIP() << "no discovery";
  auto second = DiscoverOrSkip();
  ASSERT_TRUE(second);
  ASSERT_EQ(first->size(), second->size());
  for (size_t i = 0; i < first->size(); ++i) {
    ASSERT_EQ((*first)[i].accelerators.size(), (*second)[i].accelerators.size());
    for (size_t j = 0; j < (*first)[i].accelerators.size(); ++j) {
      EXPECT_EQ((*first)[i].accelerators[j].id, (*second)[i].accelerators[j].id);
    }
  }
}

TEST_P(Conformance, DiscoveryStopsWhenTheHostRefuses) {
  auto groups = DiscoverOrSkip();
  if (!groups || groups->empty()) GTEST_SKIP() << "nothing discovered";
  plugin_->Shutdown();  // one instance at a time
  const gpustack_plugin_api& api = plugin_->table();
  gpustack_init_args init{};
  init.struct_size = sizeof(init);
  init.abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
  init.abi_minor = plugin_->negotiated().minor;
  init.host = &host_;
  init.pci_devices = inventory_.span().data();
  init.pci_device_count = inventory_.span().size();
  gpustack_plugin_instance* instance = nullptr;
  ASSERT_EQ(api.init != nullptr ? api.init(&init, &instance) : api.create_instance(&init),
            GPUSTACK_STATUS_OK)
      << LastError(api);
  if (api.init == nullptr) instance = init.instance;
  int calls = 0;
  const gpustack_discovery_sink sink{
      sizeof(sink), nullptr, &calls, [](void* data, const gpustack_accelerator_group*) {
        ++*static_cast<int*>(data);
        return static_cast<gpustack_status>(GPUSTACK_STATUS_CANCELLED);
      }};
  const gpustack_discover_args args{sizeof(args), nullptr, &sink};
  EXPECT_NE(api.discover(instance, &args), GPUSTACK_STATUS_OK)
      << "the host refused a group, so discovery must not report success";
  EXPECT_EQ(calls, 1) << "the plugin kept calling a sink that had refused";
  api.shutdown(instance);
}

TEST_P(Conformance, GrantValidatesInputAndEmitsWellFormedEdits) {
  if (!plugin_->Provides(Hook::kGrant)) GTEST_SKIP() << "grant is not provided";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  sdk::Grant bad{.pod_uid = "conformance-pod", .container_name = "main"};
  auto none = plugin_->Grant(bad);
  ASSERT_FALSE(none) << "a grant of no accelerator must fail";
  ExpectExplained(none.failure());
  ExpectImplemented(none.failure());
  bad.accelerator_ids = {"NO-SUCH-ACCELERATOR"};
  auto unknown = plugin_->Grant(bad);
  ASSERT_FALSE(unknown) << "a grant of an unknown accelerator must fail";
  ExpectExplained(unknown.failure());

  for (const sdk::AcceleratorGroup& g : *groups) {
    for (const sdk::Accelerator& a : g.accelerators) {
      if (a.health == GPUSTACK_HEALTH_UNHEALTHY) continue;
      std::vector<sdk::Grant> grants;
      if (a.partition_mode != GPUSTACK_PARTITION_MODE_ENABLED) {
        grants.push_back({"conformance-pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {a.id}});
        if (Has(GPUSTACK_CAP_SHARED)) {
          grants.push_back({"conformance-pod", "main", GPUSTACK_GRANT_SHARED, {a.id}});
        }
      }
      if (a.logical_slice_count > 0 && !Has(GPUSTACK_CAP_SLICE_OBJECTS)) {
        grants.push_back(
            {"conformance-pod", "main", GPUSTACK_GRANT_SLICED, {a.id}, a.memory_mib / 4, 50});
      }
      for (const sdk::Grant& grant : grants) {
        auto edits = plugin_->Grant(grant);
        ASSERT_TRUE(edits) << a.id << " mode " << grant.mode << ": " << edits.error();
        EXPECT_FALSE(edits->empty()) << a.id << ": a grant that changes nothing exposes nothing";
        for (const sdk::ContainerEdit& e : *edits) {
          switch (e.kind) {
            case GPUSTACK_EDIT_ENV:
            case GPUSTACK_EDIT_ANNOTATION:
              EXPECT_FALSE(e.key.empty());
              break;
            case GPUSTACK_EDIT_MOUNT:
            case GPUSTACK_EDIT_DEVICE_NODE:
              EXPECT_EQ(e.host_path.rfind('/', 0), 0u) << e.host_path << " is not absolute";
              EXPECT_EQ(e.container_path.rfind('/', 0), 0u) << e.container_path;
              break;
            case GPUSTACK_EDIT_CDI_DEVICE:
              EXPECT_NE(e.value.find('='), std::string::npos) << e.value << " is not a CDI name";
              break;
            default:
              ADD_FAILURE() << "unknown edit kind " << e.kind;
          }
        }
      }
    }
  }
}

TEST_P(Conformance, DeviceNodesAreWellFormed) {
  if (!plugin_->Provides(Hook::kListDeviceNodes)) GTEST_SKIP() << "no device nodes";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  std::set<std::string> cards;
  for (const auto& g : *groups) {
    for (const auto& a : g.accelerators) cards.insert(a.id);
  }
  auto nodes = plugin_->ListDeviceNodes({});
  ASSERT_TRUE(nodes) << nodes.error();
  std::set<std::string> paths;
  for (const sdk::DeviceNode& node : *nodes) {
    EXPECT_TRUE(node.accelerator_id.empty() || cards.count(node.accelerator_id))
        << node.path << " belongs to unknown card " << node.accelerator_id;
    EXPECT_TRUE(paths.insert(node.accelerator_id + "|" + node.path).second)
        << node.path << " reported twice";
  }
  auto unknown = plugin_->ListDeviceNodes({"NO-SUCH-ACCELERATOR"});
  ASSERT_FALSE(unknown) << "device nodes of an unknown card must fail";
  EXPECT_EQ(unknown.failure().code, Code::kNotFound) << unknown.error();
}

TEST_P(Conformance, PartitionLifecycle) {
  if (!Has(GPUSTACK_CAP_PARTITIONING)) GTEST_SKIP() << "no partitioning capability";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  const sdk::Accelerator* card = nullptr;
  for (const sdk::AcceleratorGroup& g : *groups) {
    for (const sdk::Accelerator& a : g.accelerators) {
      if (a.partition_mode == GPUSTACK_PARTITION_MODE_ENABLED && !card) card = &a;
    }
  }
  if (card == nullptr) GTEST_SKIP() << "no card in partition mode";
  const sdk::PartitionProfile& profile = card->partition_profiles.front();
  const gpustack_placement placement = profile.placements.front();
  const std::string owner = "gpustack-conformance";

  auto before = plugin_->ListPartitions(card->id);
  ASSERT_TRUE(before) << before.error();
  auto created = plugin_->CreatePartition({card->id, profile.name, placement, owner});
  ASSERT_TRUE(created) << created.error();
  EXPECT_EQ(created->accelerator_id, card->id);
  EXPECT_EQ(created->profile, profile.name);
  EXPECT_EQ(created->owner, owner);
  EXPECT_EQ(created->placement.start, placement.start);
  EXPECT_FALSE(created->id.empty());

  auto grant = plugin_->Grant(
      {"conformance-pod", "main", GPUSTACK_GRANT_PARTITIONED, {card->id}, 0, 0, created->id});
  EXPECT_TRUE(grant) << "a grant of the partition just made: " << grant.error();

  auto again = plugin_->CreatePartition({card->id, profile.name, placement, owner});
  EXPECT_FALSE(again) << "the same placement was handed out twice";
  if (!again) ExpectExplained(again.failure());

  auto listed = plugin_->ListPartitions(card->id);
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(listed->size(), before->size() + 1);

  auto stranger = plugin_->DestroyPartition({card->id, created->id, "someone-else"});
  ASSERT_FALSE(stranger) << "destroyed a partition it does not own";
  EXPECT_EQ(stranger.failure().code, Code::kFailedPrecondition);

  auto destroyed = plugin_->DestroyPartition({card->id, created->id, owner});
  ASSERT_TRUE(destroyed) << destroyed.error();
  auto after = plugin_->ListPartitions(card->id);
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->size(), before->size());
  auto twice = plugin_->DestroyPartition({card->id, created->id, owner});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.failure().code, Code::kNotFound);
}

TEST_P(Conformance, SliceObjectLifecycle) {
  if (!Has(GPUSTACK_CAP_SLICE_OBJECTS)) GTEST_SKIP() << "slices are not driver objects";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  const sdk::Accelerator* card = nullptr;
  for (const sdk::AcceleratorGroup& g : *groups) {
    for (const sdk::Accelerator& a : g.accelerators) {
      if (a.logical_slice_count > 0 && a.health != GPUSTACK_HEALTH_UNHEALTHY && !card) card = &a;
    }
  }
  if (card == nullptr) GTEST_SKIP() << "no sliceable card";
  const std::string owner = "gpustack-conformance";
  auto slice = plugin_->PrepareSlice({card->id, card->memory_mib / 4, 25, owner});
  ASSERT_TRUE(slice) << slice.error();
  EXPECT_EQ(slice->accelerator_id, card->id);
  auto again = plugin_->PrepareSlice({card->id, card->memory_mib / 4, 25, owner});
  ASSERT_TRUE(again) << "preparing again for the same owner finds the slice: " << again.error();
  EXPECT_EQ(again->id, slice->id);

  auto edits = plugin_->Grant({"conformance-pod",
                               "main",
                               GPUSTACK_GRANT_SLICED,
                               {card->id},
                               card->memory_mib / 4,
                               25,
                               {},
                               slice->id});
  ASSERT_TRUE(edits) << edits.error();
  EXPECT_FALSE(edits->empty());

  auto stranger = plugin_->UnprepareSlice({card->id, slice->id, "someone-else"});
  ASSERT_FALSE(stranger) << "removed a slice another owner holds";
  EXPECT_EQ(stranger.failure().code, Code::kFailedPrecondition);
  auto removed = plugin_->UnprepareSlice({card->id, slice->id, owner});
  ASSERT_TRUE(removed) << removed.error();
  auto twice = plugin_->UnprepareSlice({card->id, slice->id, owner});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.failure().code, Code::kNotFound);
}

TEST_P(Conformance, MetricsAreWellFormed) {
  if (!plugin_->Provides(Hook::kSampleMetrics)) GTEST_SKIP() << "no metrics";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "no discovery";
  auto snapshot = plugin_->SampleMetrics({{}, Has(GPUSTACK_CAP_PROCESS_METRICS)});
  ASSERT_TRUE(snapshot) << snapshot.error();
  for (const std::string& warning : snapshot->warnings) ADD_FAILURE() << warning;
  std::set<std::string> cards;
  for (const auto& g : *groups) {
    for (const auto& a : g.accelerators) cards.insert(a.id);
  }
  std::set<std::string> sampled;
  for (const sdk::DeviceSample& s : snapshot->devices) {
    EXPECT_TRUE(cards.count(s.accelerator_id)) << "sample of unknown card " << s.accelerator_id;
    EXPECT_TRUE(sampled.insert(s.accelerator_id).second)
        << s.accelerator_id << " sampled twice in one round";
    if (s.memory_used_mib && s.memory_total_mib) {
      EXPECT_LE(*s.memory_used_mib, *s.memory_total_mib);
    }
  }
  EXPECT_EQ(sampled, cards) << "one sample per discovered card";
  for (const sdk::ProcessSample& p : snapshot->processes) {
    EXPECT_TRUE(cards.count(p.accelerator_id)) << p.accelerator_id;
    EXPECT_GT(p.pid, 0u);
  }
  if (!Has(GPUSTACK_CAP_PROCESS_METRICS)) {
    EXPECT_TRUE(snapshot->processes.empty());
  }

  auto unknown = plugin_->SampleMetrics({{"NO-SUCH-ACCELERATOR"}, false});
  EXPECT_FALSE(unknown) << "sampling an unknown card must fail";
}

TEST_P(Conformance, HealthPollReturnsPromptly) {
  if (!plugin_->Provides(Hook::kPollHealthEvents)) GTEST_SKIP() << "no health events";
  if (!Started()) return;
  auto events = plugin_->PollHealthEvents(0);
  ASSERT_TRUE(events) << events.error();
  for (const sdk::HealthEvent& e : *events) {
    EXPECT_FALSE(e.accelerator_id.empty());
    if (e.health == GPUSTACK_HEALTH_UNHEALTHY) {
      EXPECT_FALSE(e.reason.empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, Conformance, ::testing::ValuesIn(g_manifests),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name + "_" + std::to_string(info.index);
                         });

// Records failure messages, for --expect-failure.
class FailureRecorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) messages.emplace_back(result.message());
  }
  std::vector<std::string> messages;
};

}  // namespace
}  // namespace gpustack

int main(int argc, char** argv) {
  std::string expect_failure;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::cout << gpustack::kUsage;
      return 0;
    } else if (arg == "--manifest" && has_value) {
      gpustack::g_manifests.emplace_back(argv[++i]);
    } else if (arg == "--expect-failure" && has_value) {
      expect_failure = argv[++i];
    } else if (arg == "--setting" && has_value) {
      const std::string setting = argv[++i];
      const size_t eq = setting.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "--setting takes key=value, got \"" << setting << "\"\n";
        return 2;
      }
      gpustack::g_settings[setting.substr(0, eq)] = setting.substr(eq + 1);
    } else if (arg == "--sysfs-root" && has_value) {
      gpustack::g_sysfs_root = argv[++i];
    } else if (arg.rfind("--gtest_", 0) == 0) {
      rest.push_back(argv[i]);
    } else {
      std::cerr << "unknown or incomplete argument \"" << arg << "\"\n\n" << gpustack::kUsage;
      return 2;
    }
  }
  if (gpustack::g_manifests.empty()) {
    std::cerr << gpustack::kUsage;
    return 2;
  }
  int rest_argc = static_cast<int>(rest.size());
  ::testing::InitGoogleTest(&rest_argc, rest.data());
  auto* recorder = new gpustack::FailureRecorder;  // owned by gtest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(recorder);
  const int failed = RUN_ALL_TESTS();
  if (expect_failure.empty()) return failed;

  const std::regex pattern(expect_failure);
  for (const std::string& message : recorder->messages) {
    if (std::regex_search(message, pattern)) {
      std::cout << "\nExpected failure seen (" << expect_failure << "): the plugin was refused "
                << "for the expected reason.\n";
      return 0;
    }
  }
  std::cout << "\n"
            << (failed ? "The suite failed, but no failure matched " : "The suite passed, but ")
            << "the expected reason: " << expect_failure << "\n";
  return 1;
}
