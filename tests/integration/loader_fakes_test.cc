// The loader (manifests, trust, the dlopen'ed plugin as a runtime backend) against real
// libraries built from tests/fakes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "host/common/logging.h"
#include "host/loader/dlopen_source.h"

namespace gpustack::loader {
namespace {

namespace fs = std::filesystem;
using sdk::Accelerator;
using sdk::AcceleratorGroup;

std::ostringstream captured_log_;

fs::path Fake(const std::string& name) {
  return fs::path(GPUSTACK_FAKES_DIR) / name / (name + ".json");
}

std::unique_ptr<LoadedPlugin> LoadOk(const std::string& name, LoaderOptions options = {}) {
  auto plugin = LoadFromManifest(Fake(name), options);
  EXPECT_TRUE(plugin) << plugin.error();
  return plugin ? std::move(plugin).value() : nullptr;
}

// A private copy of one fake's directory, for tests that change permissions or contents.
class FakeCopy {
 public:
  explicit FakeCopy(const std::string& name)
      : dir_(fs::temp_directory_path() /
             ("gpustack-fake-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::copy(fs::path(GPUSTACK_FAKES_DIR) / name, dir_, fs::copy_options::recursive);
    fs::permissions(dir_, fs::perms(0755));
    manifest_ = dir_ / (name + ".json");
    library_ = dir_ / ("libgpustack_plugin_" + name + ".so");
  }
  ~FakeCopy() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }
  const fs::path& manifest() const { return manifest_; }
  const fs::path& library() const { return library_; }

 private:
  fs::path dir_, manifest_, library_;
};

TEST(LoaderFakes, EveryStatusCodeReachesTheHostWithItsNameAndMessage) {
  auto plugin = LoadOk("configurable");
  ASSERT_TRUE(plugin);
  for (int code = GPUSTACK_STATUS_CANCELLED; code <= GPUSTACK_STATUS_INCOMPATIBLE_VERSION; ++code) {
    ASSERT_TRUE(plugin->Init({{"discover_status", std::to_string(code)}}, {}));
    auto groups = plugin->Discover();
    ASSERT_FALSE(groups) << "status " << code;
    EXPECT_EQ(groups.code(), code == GPUSTACK_STATUS_INCOMPATIBLE_VERSION
                                 ? Code::kFailedPrecondition
                                 : static_cast<Code>(code));
    EXPECT_EQ(groups.error(), "configurable: discover failed: " + sdk::StatusName(code) +
                                  ": fake status " + std::to_string(code));
    plugin->Shutdown();
  }
  // A code the ABI does not define is reported as UNKNOWN, saying what the plugin sent.
  ASSERT_TRUE(plugin->Init({{"discover_status", "4242"}}, {}));
  auto odd = plugin->Discover();
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.code(), Code::kUnknown);
  EXPECT_NE(odd.error().find("undefined status 4242"), std::string::npos) << odd.error();
  plugin->Shutdown();
  // And OK with nothing found is a clean, empty discovery.
  ASSERT_TRUE(plugin->Init({{"discover_status", "0"}}, {}));
  auto empty = plugin->Discover();
  ASSERT_TRUE(empty) << empty.error();
  EXPECT_TRUE(empty->empty());
}

TEST(LoaderFakes, PluginLogsReachTheHostLoggerUnderThePluginsName) {
  InitLogging("info");
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured_log_);
  Logger("plugin.configurable")->sinks().push_back(sink);
  auto plugin = LoadOk("configurable");
  ASSERT_TRUE(plugin);
  ASSERT_TRUE(plugin->Init({{"log", "hello from the plugin"}}, {}));
  const std::string text = captured_log_.str();
  EXPECT_NE(text.find("[plugin.configurable]"), std::string::npos) << text;
  EXPECT_NE(text.find("[info] hello from the plugin ("), std::string::npos) << text;
  EXPECT_NE(text.find("fake_plugin.c:"), std::string::npos) << "the plugin's file and line" << text;
  Logger("plugin.configurable")->sinks().pop_back();
}

TEST(LoaderFakes, InvalidPluginOutputIsRefusedNotTrusted) {
  auto plugin = LoadOk("configurable");
  ASSERT_TRUE(plugin);
  const std::pair<const char*, const char*> cases[] = {
      {"small_group", "accelerator_group.struct_size 16 is smaller than its minimum"},
      {"null_string", "accelerator.id has a size but no data"},
      {"bad_health", "accelerator.health 77 is not a known value"}};
  for (const auto& [emit, expected] : cases) {
    ASSERT_TRUE(plugin->Init({{"discover_emit", emit}}, {}));
    auto groups = plugin->Discover();
    ASSERT_FALSE(groups) << emit;
    EXPECT_NE(groups.error().find(expected), std::string::npos) << groups.error();
    plugin->Shutdown();
  }
}

// ABI 1.3: a plugin's slice enforcer reaches the host as declared, and a declaration that breaks
// one of the host's rules refuses the plugin, naming the rule.
TEST(LoaderFakes, ASliceEnforcerIsReadAndABrokenDeclarationRefusesThePlugin) {
  unsetenv("FAKE_ENFORCER_CASE");
  auto plugin = LoadOk("enforcer");
  ASSERT_NE(plugin, nullptr);
  const auto& e = plugin->identity().enforcer;
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "test-enforcer");
  EXPECT_EQ(e->files, (std::vector<std::string>{"libtest_enforcer.so", "enforcer.conf"}));
  EXPECT_EQ(e->preload, std::vector<std::string>{"libtest_enforcer.so"});
  EXPECT_EQ(e->package_dir, "enforcer");
  EXPECT_EQ(e->variant, GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR);
  EXPECT_EQ(e->variant_prefix, "cuda-");
  EXPECT_EQ(e->workdir_env, "TEST_ENFORCER_DIR");
  EXPECT_EQ(e->default_env,
            (std::vector<std::pair<std::string, std::string>>{{"TEST_ENFORCER_LOG", "0"}}));
  plugin.reset();
  const std::pair<const char*, const char*> cases[] = {
      {"slash", "is not a plain file name"},
      {"unlisted", "preloads \"libelsewhere.so\", which it does not list"},
      {"outside", "is not a path inside the package"},
      {"bad_env", "is not KEY=value"},
      {"no_slicing", "declares an enforcer but does not claim logical slicing"},
      {"small", "is below the 1.3 minimum"}};
  for (const auto& [which, words] : cases) {
    setenv("FAKE_ENFORCER_CASE", which, 1);
    auto refused = LoadFromManifest(Fake("enforcer"), {});
    ASSERT_FALSE(refused) << which;
    EXPECT_NE(refused.error().find(words), std::string::npos) << which << ": " << refused.error();
  }
  unsetenv("FAKE_ENFORCER_CASE");
}

TEST(LoaderFakes, LargerStructsFromANewerPluginAreReadByTheirKnownPrefix) {
  auto plugin = LoadOk("larger-structs");
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->client().negotiated().minor, static_cast<uint32_t>(GPUSTACK_PLUGIN_ABI_MINOR))
      << "a newer plugin is used at the host's minor";
  ASSERT_TRUE(plugin->Init({}, {}));
  auto groups = plugin->Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].product, "Future Accelerator");
  ASSERT_EQ((*groups)[0].accelerators.size(), 1u);
  EXPECT_EQ((*groups)[0].accelerators[0].id, "FUTURE-0");
  EXPECT_EQ((*groups)[0].accelerators[0].memory_mib, 2048u);
}

TEST(LoaderFakes, AnOlderMinorPluginLoadsIntoANewerHost) {
  LoaderOptions newer_host;
  newer_host.host_abi = {GPUSTACK_PLUGIN_ABI_MAJOR, GPUSTACK_PLUGIN_ABI_MINOR + 3};
  auto plugin = LoadOk("older-minor", newer_host);
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->client().negotiated().minor, static_cast<uint32_t>(GPUSTACK_PLUGIN_ABI_MINOR));
  ASSERT_TRUE(plugin->Init({}, {}));
  EXPECT_TRUE(plugin->Discover());
}

TEST(LoaderFakes, APluginBuiltAgainstAbi10RunsOnThisHostThroughInit) {
  auto plugin = LoadOk("abi-1-0");
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->client().negotiated().minor, 0u);
  EXPECT_EQ(plugin->client().table().create_instance, nullptr) << "1.1 slots read as absent";
  EXPECT_EQ(plugin->identity().abi, "1.0");
  EXPECT_TRUE(plugin->identity().install_hint.empty()) << "a 1.0 identity has no hint";
  ASSERT_TRUE(plugin->Init({}, {}));
  EXPECT_TRUE(plugin->Discover());
}

TEST(LoaderFakes, AClaimWithoutItsHookIsRefusedAndAHelperLeavesUnwrittenHooksNull) {
  auto refused = LoadFromManifest(Fake("no-grant"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("claims sharing but provides no grant"), std::string::npos)
      << refused.error();
  // ABI 1.0 allowed the claim: that plugin still loads, without the capability it cannot serve.
  auto old = LoadOk("abi-1-0-no-grant");
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->identity().Has(GPUSTACK_CAP_SHARED));
  EXPECT_FALSE(old->Provides(runtime::Hook::kGrant));
  // cpp-throws overrides Discover and Grant only: nothing else may appear in its table.
  auto helper = LoadOk("cpp-throws");
  ASSERT_TRUE(helper);
  using H = runtime::Hook;
  EXPECT_TRUE(helper->Provides(H::kDiscover));
  EXPECT_TRUE(helper->Provides(H::kGrant));
  for (H hook : {H::kSampleMetrics, H::kPollHealthEvents, H::kListPartitions, H::kListDeviceNodes,
                 H::kPrepareSlice}) {
    EXPECT_FALSE(helper->Provides(hook)) << runtime::HookName(hook);
  }
  EXPECT_NE(helper->client().table().create_instance, nullptr) << "1.1 init is always there";
}

TEST(LoaderFakes, RefusedBeforeDlopenRunsNoPluginCode) {
  const fs::path marker =
      fs::temp_directory_path() / ("gpustack-marker-" + std::to_string(::getpid()));
  fs::remove(marker);
  ::setenv("FAKE_MARKER", marker.c_str(), 1);
  auto wrong_major = LoadFromManifest(Fake("wrong-major-manifest"));
  ASSERT_FALSE(wrong_major);
  EXPECT_NE(wrong_major.error().find("manifest declares ABI major 2"), std::string::npos);
  auto missing_entry = LoadFromManifest(Fake("missing-entry"));
  ASSERT_FALSE(missing_entry);
  EXPECT_NE(missing_entry.error().find("does not export gpustack_plugin_negotiate"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(marker)) << "a refused library ran its constructor";
  ::unsetenv("FAKE_MARKER");
}

TEST(LoaderFakes, UntrustedFilesAreRefused) {
  FakeCopy copy("noop");
  ASSERT_TRUE(LoadFromManifest(copy.manifest()));

  fs::permissions(copy.library(), fs::perms(0777));
  auto writable = LoadFromManifest(copy.manifest());
  ASSERT_FALSE(writable);
  EXPECT_NE(writable.error().find("writable by others"), std::string::npos) << writable.error();
  fs::permissions(copy.library(), fs::perms(0755));

  fs::permissions(copy.dir(), fs::perms(0775));
  auto group_dir = LoadFromManifest(copy.manifest());
  ASSERT_FALSE(group_dir);
  EXPECT_NE(group_dir.error().find("writable by its group"), std::string::npos);
  fs::permissions(copy.dir(), fs::perms(0755));

  LoaderOptions strict;
  strict.trusted_uid = 0;
  if (::geteuid() == 0 && ::chown(copy.manifest().c_str(), 65534, 65534) == 0) {
    auto foreign = LoadFromManifest(copy.manifest(), strict);
    ASSERT_FALSE(foreign);
    EXPECT_NE(foreign.error().find("owned by uid 65534"), std::string::npos) << foreign.error();
  }
}

TEST(LoaderFakes, TheSourceNamesBrokenShadowedAndMisnamedPluginsAndKeepsGoing) {
  FakeCopy first("noop");
  FakeCopy second("full");
  // A second "noop" later in the search path, a broken manifest and a misnamed one beside it.
  fs::copy(first.manifest(), second.dir() / "noop.json");
  std::ofstream(second.dir() / "broken.json") << "{ not json";
  fs::copy(first.manifest(), second.dir() / "nvidia.json");  // says "noop" inside
  DlopenPluginSource source({first.dir(), "/nonexistent/plugins", second.dir()},
                            {"/nonexistent/plugins"});
  std::vector<runtime::SourceProblem> problems;
  const auto candidates = source.Find(&problems);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].message, "plugin directory /nonexistent/plugins does not exist");
  EXPECT_TRUE(problems[0].fatal) << "a directory someone named must exist";
  EXPECT_EQ(problems[1].message, "plugin noop at " + (second.dir() / "noop.json").string() +
                                     " is shadowed by " + first.manifest().string() +
                                     " (earlier in the search path); not loaded");
  EXPECT_FALSE(problems[1].fatal);
  std::map<std::string, std::string> outcome;
  for (const auto& c : candidates) {
    outcome[fs::path(c.origin).filename().string() + "@" +
            fs::path(c.origin).parent_path().filename().string()] =
        c.usable ? "ok" : c.usable.error();
  }
  ASSERT_EQ(candidates.size(), 4u);
  EXPECT_EQ(outcome["noop.json@" + first.dir().filename().string()], "ok");
  EXPECT_EQ(outcome["full.json@" + second.dir().filename().string()], "ok");
  EXPECT_NE(outcome["broken.json@" + second.dir().filename().string()].find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(outcome["nvidia.json@" + second.dir().filename().string()].find(
                "names plugin \"noop\" but is not named noop.json"),
            std::string::npos);
}

TEST(LoaderFakes, AFifoOrAHugeManifestIsRefusedWithoutBlocking) {
  FakeCopy copy("noop");
  fs::remove(copy.manifest());
  ASSERT_EQ(::mkfifo(copy.manifest().c_str(), 0644), 0);
  DlopenPluginSource source({copy.dir()}, {copy.dir()});
  std::vector<runtime::SourceProblem> problems;
  auto candidates = source.Find(&problems);  // would block forever reading the FIFO
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_NE(candidates[0].usable.error().find("not a regular file"), std::string::npos)
      << candidates[0].usable.error();
  fs::remove(copy.manifest());
  std::ofstream(copy.manifest()) << std::string(client::kMaxManifestBytes + 1, ' ');
  candidates = source.Find(&problems);
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_NE(candidates[0].usable.error().find("larger than"), std::string::npos);
}

TEST(LoaderFakes, TheFullPluginRoundTripsEveryHook) {
  auto plugin = LoadOk("full");
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->identity().partition_kind, "mig");
  ASSERT_TRUE(plugin->Init({}, {}));
  auto groups = plugin->Discover();
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->size(), 2u);
  const Accelerator& sliceable = (*groups)[0].accelerators[1];
  EXPECT_EQ(sliceable.id, "FAKE-A-1");
  EXPECT_EQ(sliceable.physical_indexes, std::vector<uint32_t>{11});
  EXPECT_EQ(sliceable.cpu_affinity, "0-15");
  EXPECT_EQ(sliceable.logical_slice_count, 16u);
  const Accelerator& partitioned = (*groups)[1].accelerators[0];
  ASSERT_EQ(partitioned.partition_profiles.size(), 2u);
  EXPECT_EQ(partitioned.partition_profiles[1].name, "4g.40gb");
  ASSERT_EQ(partitioned.partition_profiles[1].placements.size(), 2u);
  EXPECT_EQ(partitioned.partition_mode, GPUSTACK_PARTITION_MODE_ENABLED);
  EXPECT_EQ(partitioned.partition_profiles[1].placements[1].start, 4u);

  // A slice of a slice-objects plugin: prepared first, then granted by its id.
  auto slice = plugin->PrepareSlice({"FAKE-A-1", 4096, 40, "uid-1/main"});
  ASSERT_TRUE(slice) << slice.error();
  EXPECT_EQ(slice->accelerator_id, "FAKE-A-1");
  auto edits = plugin->Grant(
      {"uid-1", "main", GPUSTACK_GRANT_SLICED, {"FAKE-A-1"}, 4096, 40, {}, slice->id});
  ASSERT_TRUE(edits) << edits.error();
  ASSERT_EQ(edits->size(), 4u);
  EXPECT_EQ((*edits)[2].key, "FAKE_MEMORY_LIMIT_MIB");
  EXPECT_EQ((*edits)[2].value, "4096");
  EXPECT_EQ((*edits)[1].kind, GPUSTACK_EDIT_DEVICE_NODE);
  EXPECT_EQ((*edits)[1].host_path, "/dev/fakectl");
  auto unprepared = plugin->Grant(
      {"uid-1", "main", GPUSTACK_GRANT_SLICED, {"FAKE-A-1"}, 4096, 40, {}, "SLICE-none"});
  ASSERT_FALSE(unprepared);
  EXPECT_EQ(unprepared.code(), Code::kFailedPrecondition);
  EXPECT_TRUE(plugin->UnprepareSlice({"FAKE-A-1", slice->id, "uid-1/main"}));
  EXPECT_EQ(plugin->UnprepareSlice({"FAKE-A-1", slice->id, "uid-1/main"}).code(), Code::kNotFound);

  auto nodes = plugin->ListDeviceNodes({"FAKE-P-0"});
  ASSERT_TRUE(nodes) << nodes.error();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].path, "fakectl");
  EXPECT_EQ((*nodes)[1].accelerator_id, "FAKE-P-0");
  EXPECT_EQ((*nodes)[1].path, "fake12");

  auto part = plugin->CreatePartition({"FAKE-P-0", "4g.40gb", {4, 4}, "pod-uid-1"});
  ASSERT_TRUE(part) << part.error();
  auto granted =
      plugin->Grant({"uid-1", "main", GPUSTACK_GRANT_PARTITIONED, {"FAKE-P-0"}, 0, 0, part->id});
  ASSERT_TRUE(granted) << granted.error();
  EXPECT_EQ((*granted)[0].value, part->id);
  auto overlap = plugin->CreatePartition({"FAKE-P-0", "1g.10gb", {5, 1}, "pod-uid-2"});
  ASSERT_FALSE(overlap);
  EXPECT_EQ(overlap.code(), Code::kAlreadyExists);
  EXPECT_TRUE(plugin->DestroyPartition({"FAKE-P-0", part->id, "pod-uid-1"}));

  auto metrics =
      plugin->SampleMetrics({.accelerator_ids = {"FAKE-A-0"}, .include_processes = true});
  ASSERT_TRUE(metrics) << metrics.error();
  ASSERT_EQ(metrics->devices.size(), 1u);
  EXPECT_EQ(metrics->devices[0].memory_utilization_percent, 0.0) << "measured zero stays zero";
  EXPECT_FALSE(metrics->devices[0].temperature_celsius) << "not measured stays absent";
  EXPECT_GT(metrics->devices[0].timestamp_ns, 0u) << "the host clock reached the plugin";
  ASSERT_EQ(metrics->processes.size(), 1u);
  EXPECT_EQ(metrics->processes[0].pid, 1000u);
  EXPECT_FALSE(metrics->processes[0].cores_utilization_percent);

  auto events = plugin->PollHealthEvents(0);
  ASSERT_TRUE(events) << events.error();
  EXPECT_EQ(events->size(), 3u);
  auto quiet = plugin->PollHealthEvents(0);
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->empty());
}

TEST(LoaderFakes, HealthPollingRacesSafelyWithInitAndShutdown) {
  // The poll runs on its own thread beside other calls; Shutdown must wait for it. Under ASan a
  // poll that outlived its instance or host services is a use-after-free report.
  auto plugin = LoadOk("full");
  ASSERT_TRUE(plugin);
  std::atomic<bool> stop{false};
  std::atomic<int> polls{0};
  std::thread poller([&] {
    while (!stop) {
      auto events = plugin->PollHealthEvents(0);
      if (events) ++polls;
    }
  });
  // Cycle until the poller has hit live instances a few times (bounded, in case it never does).
  for (int round = 0; round < 200 || (polls < 20 && round < 200000); ++round) {
    ASSERT_TRUE(plugin->Init({}, {}));
    ASSERT_TRUE(plugin->Discover());
    plugin->Shutdown();
  }
  stop = true;
  poller.join();
  EXPECT_GT(polls.load(), 0) << "the poller never overlapped a live instance";
}

TEST(LoaderFakes, CallsBeforeInitAreRefusedByTheHost) {
  auto plugin = LoadOk("full");
  ASSERT_TRUE(plugin);
  auto groups = plugin->Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.error(), "full: discover called before init");
  EXPECT_EQ(groups.code(), Code::kFailedPrecondition);
}

TEST(LoaderFakes, CppExceptionsBecomeStatuses) {
  auto plugin = LoadOk("cpp-throws");
  ASSERT_TRUE(plugin);
  auto init = plugin->Init({{"throw_in_init", "1"}}, {});
  ASSERT_FALSE(init);
  EXPECT_EQ(init.error(),
            "cpp-throws: init failed: INTERNAL: unhandled exception in plugin: init exploded on "
            "purpose");
  ASSERT_TRUE(plugin->Init({}, {}));
  auto groups = plugin->Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kInternal);
  auto grant = plugin->Grant({"uid", "c", GPUSTACK_GRANT_EXCLUSIVE, {"x"}});
  ASSERT_FALSE(grant);
  EXPECT_EQ(grant.code(), Code::kPermissionDenied);
  EXPECT_NE(grant.error().find("grant refused on purpose"), std::string::npos);
}

TEST(LoaderFakes, AllNineVendorPluginsLoadSideBySide) {
  DlopenPluginSource source({GPUSTACK_PLUGIN_DIR}, {GPUSTACK_PLUGIN_DIR});
  std::vector<runtime::SourceProblem> problems;
  std::vector<std::unique_ptr<runtime::PluginBackend>> plugins;
  for (const auto& candidate : source.Find(&problems)) {
    ASSERT_TRUE(candidate.usable) << candidate.usable.error();
    auto plugin = source.Load(candidate);
    ASSERT_TRUE(plugin) << plugin.error();
    ASSERT_TRUE((*plugin)->Init({}, {}));
    plugins.push_back(std::move(plugin).value());
  }
  EXPECT_TRUE(problems.empty());
  std::set<std::string> names;
  for (const auto& p : plugins) {
    names.insert(p->identity().manufacturer);
    EXPECT_FALSE(p->identity().install_hint.empty()) << p->identity().manufacturer;
    EXPECT_TRUE(p->Provides(runtime::Hook::kGrant)) << p->identity().manufacturer;
    EXPECT_TRUE(p->Provides(runtime::Hook::kListDeviceNodes)) << p->identity().manufacturer;
  }
  EXPECT_EQ(names, (std::set<std::string>{"amd", "ascend", "cambricon", "hygon", "iluvatar",
                                          "metax", "mthreads", "nvidia", "thead"}));
}

}  // namespace
}  // namespace gpustack::loader
