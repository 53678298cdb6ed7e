// The plugin conformance suite: every plugin, ours or a third party's, must pass it.
//
//   gpustack-plugin-conformance --manifest <dir>/<name>.json [--manifest ...] [gtest flags]
//   gpustack-plugin-conformance --manifest <m> --expect-failure <regex>
//   gpustack-plugin-conformance --manifest <m> --setting library_path=<lib> --sysfs-root <dir>
//
// The second form is for plugins that are broken on purpose: it passes only if the suite fails
// and some failure message matches <regex>.
//
// Hooks a plugin does not implement (UNIMPLEMENTED, with a message) are skipped, not failed:
// the suite checks that what a plugin does, it does by the contract.
#include <gpustack/plugin.h>
#include <gpustack/plugin_types.hpp>

#include <gtest/gtest.h>
#include <boost/dll/library_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <cstring>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "host/common/logging.h"
#include "host/loader/loader.h"
#include "host/loader/manifest.h"
#include "host/pci/pci_inventory.h"

namespace gpustack {
namespace {

using loader::Plugin;
std::vector<std::string> g_manifests;
// --setting key=value: the plugin's per-node settings (library_path, state_dir ...).
std::map<std::string, std::string> g_settings;
// --sysfs-root: the PCI inventory handed to init, from a (fixture) sysfs tree; none when empty.
std::string g_sysfs_root;

constexpr const char* kNoMessage = "(the plugin gave no message)";

// Direct access to the C table, for the cases the C++ wrapper never produces on purpose
// (wrong versions, undersized structs, refusing sinks).
struct RawPlugin {
  boost::dll::shared_library library;
  gpustack_plugin_negotiate_fn negotiate = nullptr;
  const gpustack_plugin_api* api = nullptr;

  explicit RawPlugin(const loader::Manifest& manifest)
      : library(manifest.library_path,
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local) {
    negotiate =
        &library.get<gpustack_status(gpustack_negotiate_args*)>(GPUSTACK_PLUGIN_ENTRY_SYMBOL);
    gpustack_negotiate_args args{};
    args.struct_size = sizeof(args);
    args.host_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
    args.host_abi_minor = GPUSTACK_PLUGIN_ABI_MINOR;
    if (negotiate(&args) == GPUSTACK_STATUS_OK) api = args.api;
  }
  std::string LastError() const { return std::string(sdk::View(api->last_error_message())); }
};

gpustack_host_services NullHostServices() {
  gpustack_host_services host{};
  host.struct_size = sizeof(host);
  host.log = [](void*, gpustack_log_level, gpustack_str, gpustack_str, uint32_t) {};
  host.log_enabled = [](void*, gpustack_log_level) -> int32_t { return 0; };
  host.monotonic_time_ns = [](void*) -> uint64_t { return 1; };
  // The same --setting values the loader hands the plugin.
  host.config_get = [](void*, gpustack_str key, gpustack_str* value) -> gpustack_status {
    auto it = g_settings.find(std::string(sdk::View(key)));
    if (it == g_settings.end()) return GPUSTACK_STATUS_NOT_FOUND;
    *value = sdk::Str(it->second);
    return GPUSTACK_STATUS_OK;
  };
  return host;
}

// The --sysfs-root inventory as ABI structs, for tests that call the plugin's table directly.
struct RawInventory {
  explicit RawInventory(const std::vector<pci::PciDevice>& devices) : source(devices) {
    for (const pci::PciDevice& d : source) {
      structs.push_back({sizeof(gpustack_pci_device), nullptr, sdk::Str(d.bus_id), d.vendor_id,
                         d.device_id, d.class_code, d.subsystem_vendor_id, d.subsystem_device_id,
                         d.numa_node, sdk::Str(d.sysfs_path)});
    }
    for (const gpustack_pci_device& d : structs) pointers.push_back(&d);
  }
  std::vector<pci::PciDevice> source;
  std::vector<gpustack_pci_device> structs;
  std::vector<const gpustack_pci_device*> pointers;
};

bool IsBusId(const std::string& s) {
  static const std::regex bus("^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  return std::regex_match(s, bus);
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto manifest = loader::ReadManifest(GetParam());
    ASSERT_TRUE(manifest) << manifest.error();
    manifest_ = *manifest;
    auto loaded = loader::LoadFromManifest(GetParam(), loader::LoaderOptions{});
    ASSERT_TRUE(loaded) << loaded.error();
    plugin_ = std::move(loaded).value();
    if (!g_sysfs_root.empty()) {
      auto scanned = pci::Scan({g_sysfs_root, {"02", "03", "0b", "12"}});
      ASSERT_TRUE(scanned) << scanned.error();
      inventory_ = *scanned;
    }
    auto init = plugin_->Init(g_settings, inventory_);
    ASSERT_TRUE(init) << init.error();
  }

  bool Has(gpustack_capabilities cap) const {
    return (plugin_->identity().capabilities & cap) != 0;
  }

  // Every failure must explain itself.
  static void ExpectExplained(const Error& error) {
    EXPECT_EQ(error.message.find(kNoMessage), std::string::npos) << error.message;
  }

  // Discovery, or nullopt (test skipped) when the plugin does not implement it.
  std::optional<std::vector<sdk::AcceleratorGroup>> DiscoverOrSkip() {
    auto groups = plugin_->Discover();
    if (!groups) {
      ExpectExplained(groups.failure());
      if (groups.failure().code == GPUSTACK_STATUS_UNIMPLEMENTED) return std::nullopt;
      ADD_FAILURE() << "discover must succeed on a node without its devices: " << groups.error();
      return std::nullopt;
    }
    return *groups;
  }

  loader::Manifest manifest_;
  std::unique_ptr<Plugin> plugin_;
  std::vector<pci::PciDevice> inventory_;
};

TEST_P(Conformance, ExportsOnlyTheEntrySymbol) {
  // library_info lists the defined, exported symbols, read from the file without loading it.
  const std::vector<std::string> exported =
      boost::dll::library_info(manifest_.library_path).symbols();
  EXPECT_EQ(exported, std::vector<std::string>{GPUSTACK_PLUGIN_ENTRY_SYMBOL})
      << "a plugin exports its entry point and nothing else (hidden visibility + the SDK's "
         "export map), so plugins cannot interpose on each other or on the host";
}

TEST_P(Conformance, RefusesAnotherAbiMajor) {
  RawPlugin raw(manifest_);
  gpustack_negotiate_args args{};
  args.struct_size = sizeof(args);
  args.host_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR + 1;
  args.host_abi_minor = 0;
  args.api = reinterpret_cast<const gpustack_plugin_api*>(&args);  // must be overwritten or kept
  EXPECT_EQ(raw.negotiate(&args), GPUSTACK_STATUS_INCOMPATIBLE_VERSION);
  EXPECT_EQ(args.plugin_abi_major, static_cast<uint32_t>(GPUSTACK_PLUGIN_ABI_MAJOR));
  EXPECT_EQ(args.api, nullptr);
}

TEST_P(Conformance, NegotiationRejectsUndersizedArgs) {
  RawPlugin raw(manifest_);
  gpustack_negotiate_args args{};
  args.struct_size = offsetof(gpustack_negotiate_args, host_abi_minor);  // too small
  args.host_abi_major = GPUSTACK_PLUGIN_ABI_MAJOR;
  EXPECT_NE(raw.negotiate(&args), GPUSTACK_STATUS_OK);
  EXPECT_EQ(args.api, nullptr) << "wrote past the struct_size it was given";
}

TEST_P(Conformance, IdentityIsWellFormed) {
  const loader::PluginIdentity& id = plugin_->identity();
  EXPECT_EQ(id.manufacturer, manifest_.name);
  EXPECT_TRUE(loader::IsValidManufacturerKey(id.manufacturer));
  EXPECT_FALSE(id.display_name.empty());
  EXPECT_FALSE(id.plugin_version.empty());
  EXPECT_NE(id.base_resource_name.find('/'), std::string::npos);
  EXPECT_FALSE(id.pci_vendor_ids.empty()) << "auto-enable needs at least one PCI vendor id";
  EXPECT_EQ(std::set<uint16_t>(id.pci_vendor_ids.begin(), id.pci_vendor_ids.end()).size(),
            id.pci_vendor_ids.size())
      << "duplicate PCI vendor ids";
  constexpr gpustack_capabilities kKnown =
      GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PARTITIONING |
      GPUSTACK_CAP_PROCESS_METRICS | GPUSTACK_CAP_HEALTH_EVENTS;
  EXPECT_EQ(id.capabilities & ~kKnown, 0u) << "capability bits this ABI version does not define";
  EXPECT_EQ(Has(GPUSTACK_CAP_PARTITIONING), !id.partition_kind.empty());
}

TEST_P(Conformance, IdentifyWritesOnlyWithinStructSize) {
  RawPlugin raw(manifest_);
  ASSERT_NE(raw.api, nullptr);
  struct {
    gpustack_plugin_identity id;
    unsigned char tail[64];
  } buffer;
  std::memset(&buffer, 0xAA, sizeof buffer);
  buffer.id.struct_size = sizeof(buffer.id);
  ASSERT_EQ(raw.api->identify(&buffer.id), GPUSTACK_STATUS_OK) << raw.LastError();
  for (unsigned char byte : buffer.tail) ASSERT_EQ(byte, 0xAA) << "identify wrote past struct_size";

  gpustack_plugin_identity small{};
  small.struct_size = offsetof(gpustack_plugin_identity, display_name);
  EXPECT_EQ(raw.api->identify(&small), GPUSTACK_STATUS_INVALID_ARGUMENT);
  EXPECT_FALSE(raw.LastError().empty()) << "a failure needs a message";
}

TEST_P(Conformance, InitAndShutdownCycle) {
  plugin_->Shutdown();
  for (int round = 0; round < 3; ++round) {
    if (!g_sysfs_root.empty()) {
      auto scanned = pci::Scan({g_sysfs_root, {"02", "03", "0b", "12"}});
      ASSERT_TRUE(scanned) << scanned.error();
      inventory_ = *scanned;
    }
    auto init = plugin_->Init(g_settings, inventory_);
    ASSERT_TRUE(init) << "round " << round << ": " << init.error();
    plugin_->Shutdown();
  }
  RawPlugin raw(manifest_);
  ASSERT_NE(raw.api, nullptr);
  raw.api->shutdown(nullptr);  // NULL-safe by contract
}

TEST_P(Conformance, InitRejectsUndersizedArgs) {
  RawPlugin raw(manifest_);
  ASSERT_NE(raw.api, nullptr);
  const gpustack_host_services host = NullHostServices();
  gpustack_init_args args{};
  args.struct_size = offsetof(gpustack_init_args, host);
  args.host = &host;
  gpustack_plugin_instance* instance = nullptr;
  EXPECT_NE(raw.api->init(&args, &instance), GPUSTACK_STATUS_OK);
  EXPECT_FALSE(raw.LastError().empty());
}

TEST_P(Conformance, DiscoveryIsWellFormed) {
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "discover is not implemented";
  std::set<std::string> ids;
  std::set<uint32_t> indexes;
  size_t cards = 0;
  for (const sdk::AcceleratorGroup& g : *groups) {
    EXPECT_FALSE(g.product.empty());
    EXPECT_FALSE(g.accelerators.empty()) << g.product << ": a group without accelerators";
    EXPECT_GT(g.memory_mib, 0u) << g.product;
    for (const sdk::Accelerator& a : g.accelerators) {
      ++cards;
      EXPECT_TRUE(ids.insert(a.id).second) << "duplicate accelerator id " << a.id;
      EXPECT_TRUE(indexes.insert(a.index).second) << "duplicate index " << a.index;
      EXPECT_FALSE(IsBusId(a.id)) << a.id << ": an id must be a UUID, never the PCI bus id";
      if (!a.pci_bus_id.empty()) {
        EXPECT_TRUE(IsBusId(a.pci_bus_id)) << a.pci_bus_id;
      }
      EXPECT_GT(a.memory_mib, 0u) << a.id;
      EXPECT_GE(a.numa_affinity, -1) << a.id;
      if (a.health == GPUSTACK_HEALTH_UNHEALTHY) {
        EXPECT_FALSE(a.health_reason.empty()) << a.id;
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
  if (!first) GTEST_SKIP() << "discover is not implemented";
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
  RawPlugin raw(manifest_);
  ASSERT_NE(raw.api, nullptr);
  const gpustack_host_services host = NullHostServices();
  const RawInventory inventory(inventory_);
  const gpustack_init_args init{sizeof(init),
                                nullptr,
                                GPUSTACK_PLUGIN_ABI_MAJOR,
                                GPUSTACK_PLUGIN_ABI_MINOR,
                                &host,
                                inventory.pointers.data(),
                                inventory.pointers.size()};
  gpustack_plugin_instance* instance = nullptr;
  plugin_->Shutdown();  // one instance at a time
  ASSERT_EQ(raw.api->init(&init, &instance), GPUSTACK_STATUS_OK) << raw.LastError();
  int calls = 0;
  const gpustack_discovery_sink sink{
      sizeof(sink), nullptr, &calls, [](void* data, const gpustack_accelerator_group*) {
        ++*static_cast<int*>(data);
        return static_cast<gpustack_status>(GPUSTACK_STATUS_CANCELLED);
      }};
  const gpustack_discover_args args{sizeof(args), nullptr, &sink};
  EXPECT_NE(raw.api->discover(instance, &args), GPUSTACK_STATUS_OK)
      << "the host refused a group, so discovery must not report success";
  EXPECT_EQ(calls, 1) << "the plugin kept calling a sink that had refused";
  raw.api->shutdown(instance);
}

TEST_P(Conformance, GrantValidatesInputAndEmitsWellFormedEdits) {
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "discover is not implemented";
  sdk::Grant bad;
  bad.pod_uid = "conformance-pod";
  bad.container_name = "main";
  bad.mode = GPUSTACK_GRANT_EXCLUSIVE;
  auto none = plugin_->Grant(bad);
  ASSERT_FALSE(none) << "a grant of no accelerator must fail";
  if (none.failure().code == GPUSTACK_STATUS_UNIMPLEMENTED) {
    ExpectExplained(none.failure());
    GTEST_SKIP() << "grant is not implemented";
  }
  ExpectExplained(none.failure());
  bad.accelerator_ids = {"NO-SUCH-ACCELERATOR"};
  auto unknown = plugin_->Grant(bad);
  ASSERT_FALSE(unknown) << "a grant of an unknown accelerator must fail";
  ExpectExplained(unknown.failure());

  for (const sdk::AcceleratorGroup& g : *groups) {
    for (const sdk::Accelerator& a : g.accelerators) {
      std::vector<sdk::Grant> grants;
      if (a.partition_mode != GPUSTACK_PARTITION_MODE_ENABLED) {
        grants.push_back({"conformance-pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {a.id}, 0, 0, {}});
      }
      if (a.logical_slice_count > 0) {
        grants.push_back(
            {"conformance-pod", "main", GPUSTACK_GRANT_SLICED, {a.id}, a.memory_mib / 4, 50, {}});
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

TEST_P(Conformance, PartitionLifecycle) {
  if (!Has(GPUSTACK_CAP_PARTITIONING)) GTEST_SKIP() << "no partitioning capability";
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "discover is not implemented";
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

  auto again = plugin_->CreatePartition({card->id, profile.name, placement, owner});
  EXPECT_FALSE(again) << "the same placement was handed out twice";
  if (!again) ExpectExplained(again.failure());

  auto listed = plugin_->ListPartitions(card->id);
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(listed->size(), before->size() + 1);

  auto stranger = plugin_->DestroyPartition({card->id, created->id, "someone-else"});
  ASSERT_FALSE(stranger) << "destroyed a partition it does not own";
  EXPECT_EQ(stranger.failure().code, GPUSTACK_STATUS_FAILED_PRECONDITION);

  auto destroyed = plugin_->DestroyPartition({card->id, created->id, owner});
  ASSERT_TRUE(destroyed) << destroyed.error();
  auto after = plugin_->ListPartitions(card->id);
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->size(), before->size());
  auto twice = plugin_->DestroyPartition({card->id, created->id, owner});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.failure().code, GPUSTACK_STATUS_NOT_FOUND);
}

TEST_P(Conformance, MetricsAreWellFormed) {
  auto groups = DiscoverOrSkip();
  if (!groups) GTEST_SKIP() << "discover is not implemented";
  auto snapshot = plugin_->SampleMetrics({{}, Has(GPUSTACK_CAP_PROCESS_METRICS)});
  if (!snapshot) {
    ExpectExplained(snapshot.failure());
    if (snapshot.failure().code == GPUSTACK_STATUS_UNIMPLEMENTED) GTEST_SKIP() << "no metrics";
    FAIL() << snapshot.error();
  }
  std::set<std::string> cards;
  for (const auto& g : *groups) {
    for (const auto& a : g.accelerators) cards.insert(a.id);
  }
  std::set<std::string> sampled;
  for (const sdk::DeviceSample& s : snapshot->devices) {
    EXPECT_TRUE(cards.count(s.accelerator_id)) << "sample of unknown card " << s.accelerator_id;
    sampled.insert(s.accelerator_id);
    for (const auto& percent : {s.memory_utilization_percent, s.cores_utilization_percent}) {
      if (percent) {
        EXPECT_GE(*percent, 0.0);
        EXPECT_LE(*percent, 100.0);
      }
    }
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
  auto events = plugin_->PollHealthEvents(0);
  if (!events) {
    ExpectExplained(events.failure());
    if (events.failure().code == GPUSTACK_STATUS_UNIMPLEMENTED) GTEST_SKIP() << "no health events";
    FAIL() << events.error();
  }
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
    if (arg == "--manifest" && i + 1 < argc) {
      gpustack::g_manifests.emplace_back(argv[++i]);
    } else if (arg == "--expect-failure" && i + 1 < argc) {
      expect_failure = argv[++i];
    } else if (arg == "--setting" && i + 1 < argc) {
      const std::string setting = argv[++i];
      const size_t eq = setting.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "--setting takes key=value, got \"" << setting << "\"\n";
        return 2;
      }
      gpustack::g_settings[setting.substr(0, eq)] = setting.substr(eq + 1);
    } else if (arg == "--sysfs-root" && i + 1 < argc) {
      gpustack::g_sysfs_root = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (gpustack::g_manifests.empty()) {
    std::cerr << "usage: " << argv[0]
              << " --manifest <plugin.json> [--manifest ...] [--expect-failure <regex>]\n"
              << "    [--setting key=value ...] [--sysfs-root <dir>]\n";
    return 2;
  }
  gpustack::InitLogging("off");
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
