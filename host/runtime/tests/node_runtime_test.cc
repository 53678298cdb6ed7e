// The node runtime over fake plugins: which plugins run and why, last-good discovery, values
// checked against the PCI inventory, conflicts named, quarantine across a crash, the health loop.
#include "host/runtime/node_runtime.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "host/runtime/testing/fake_backend.h"
#include "host/runtime/testing/fake_node.h"

namespace gpustack::runtime {
namespace {

namespace fs = std::filesystem;
using testing::CandidateOf;
using testing::FakeScript;
using testing::FakeSource;
using testing::MakeScript;
using testing::Node;

std::unique_ptr<NodeRuntime> OpenRuntime(RuntimeOptions options,
                                         std::vector<FakeSource::Entry> entries) {
  auto runtime = NodeRuntime::Open(std::move(options), std::make_unique<FakeSource>(entries));
  EXPECT_TRUE(runtime) << runtime.error();
  return std::move(runtime).value();
}

const PluginStatus& StatusOf(const NodeReport& report, const std::string& name) {
  for (const PluginStatus& p : report.plugins) {
    if (p.name == name) return p;
  }
  throw std::runtime_error("no plugin " + name);
}

TEST(NodeRuntime, RunsWhatTheInventoryHoldsAndPublishesItsCards) {
  Node node;
  node.AddPci(0x1234, 2);
  auto acme = MakeScript("acme", 0x1234, 2);
  auto other = MakeScript("other", 0x5678, 1);
  auto runtime =
      OpenRuntime(node.Options(), {{CandidateOf(*acme), acme}, {CandidateOf(*other), other}});
  runtime->Discover();
  const NodeReport report = runtime->Report();
  EXPECT_EQ(StatusOf(report, "acme").state, PluginState::kRunning);
  EXPECT_EQ(StatusOf(report, "other").state, PluginState::kDisabled);
  EXPECT_EQ(StatusOf(report, "other").decision, "auto: no PCI device of vendor 0x5678");
  ASSERT_TRUE(report.spec) << report.spec.error();
  ASSERT_EQ(report.spec->groups.size(), 1u);
  EXPECT_EQ(report.spec->groups[0].accelerators.size(), 2u);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(runtime->WithLedger([](ledger::NodeLedger& l) { return l.cards().size(); }), 2u);
}

TEST(NodeRuntime, AFailedPassKeepsTheLastGoodCardsAndSaysSo) {
  Node node;
  node.AddPci(0x1234, 2);
  auto acme = MakeScript("acme", 0x1234, 2);
  auto runtime = OpenRuntime(node.Options(), {{CandidateOf(*acme), acme}});
  runtime->Discover();
  acme->discover_errors.push_back(Error{"acme: discover failed: INTERNAL: lost", Code::kInternal});
  runtime->Discover();
  NodeReport report = runtime->Report();
  const PluginStatus& status = StatusOf(report, "acme");
  ASSERT_TRUE(status.discovery_error);
  EXPECT_EQ(status.discovery_error->message, "acme: discover failed: INTERNAL: lost");
  EXPECT_TRUE(status.stale);
  EXPECT_EQ(CardCount(status.groups), 2u) << "an error is not 'no accelerators'";
  EXPECT_FALSE(report.ok());
  ASSERT_TRUE(report.spec);
  EXPECT_EQ(report.spec->groups.size(), 1u);

  acme->groups.clear();  // a clean pass that finds nothing removes them
  runtime->Discover();
  report = runtime->Report();
  EXPECT_TRUE(report.spec->groups.empty());
  // ... but with both of its PCI devices still there, that is every card lost: not a working node.
  EXPECT_FALSE(report.ok());
  ASSERT_EQ(StatusOf(report, "acme").faults.size(), 1u);
  EXPECT_NE(
      StatusOf(report, "acme").faults[0].find("none of acme's 2 accelerator(s) could be read"),
      std::string::npos)
      << StatusOf(report, "acme").faults[0];
}

TEST(NodeRuntime, MoreCardsThanPciDevicesIsRefusedUnlessForcedOn) {
  Node node;
  node.AddPci(0x1234, 1);
  auto acme = MakeScript("acme", 0x1234, 4);
  auto runtime = OpenRuntime(node.Options(), {{CandidateOf(*acme), acme}});
  runtime->Discover();
  NodeReport report = runtime->Report();
  const PluginStatus& status = StatusOf(report, "acme");
  ASSERT_TRUE(status.discovery_error);
  EXPECT_EQ(status.discovery_error->message,
            "acme: discovery refused: acme reports 4 card(s) but the PCI inventory holds 1 "
            "function(s) of vendor 0x1234");
  EXPECT_TRUE(report.spec->groups.empty()) << "never published";

  RuntimeOptions forced = node.Options();
  ASSERT_TRUE(ApplyEnableOverrides(forced.config, "acme=on", "--enable"));
  auto runtime2 = OpenRuntime(forced, {{CandidateOf(*acme), acme}});
  runtime2->Discover();
  report = runtime2->Report();
  EXPECT_FALSE(StatusOf(report, "acme").discovery_error);
  EXPECT_EQ(StatusOf(report, "acme").warnings.at(0),
            "acme reports 4 card(s) but the PCI inventory holds 1 function(s) of vendor 0x1234 "
            "(kept: the plugin is forced on)");
}

TEST(NodeRuntime, TwoPluginsOfOneVendorAreNamedNotGuessed) {
  Node node;
  node.AddPci(0x10de, 1);
  auto real = MakeScript("nvidia", 0x10de, 1);
  auto impostor = MakeScript("nvidia-fork", 0x10de, 1);
  auto runtime =
      OpenRuntime(node.Options(), {{CandidateOf(*real), real}, {CandidateOf(*impostor), impostor}});
  NodeReport report = runtime->Report();
  for (const char* name : {"nvidia", "nvidia-fork"}) {
    const PluginStatus& s = StatusOf(report, name);
    EXPECT_EQ(s.state, PluginState::kRefused) << name;
    ASSERT_TRUE(s.error);
    EXPECT_EQ(
        s.error->message.rfind("plugins nvidia and nvidia-fork both claim PCI vendor 0x10de", 0),
        0u)
        << s.error->message;
  }
  EXPECT_FALSE(report.ok());

  RuntimeOptions forced = node.Options();
  ASSERT_TRUE(ApplyEnableOverrides(forced.config, "nvidia=on", "--enable"));
  report = OpenRuntime(forced, {{CandidateOf(*real), real}, {CandidateOf(*impostor), impostor}})
               ->Report();
  EXPECT_EQ(StatusOf(report, "nvidia").state, PluginState::kRunning);
  EXPECT_EQ(StatusOf(report, "nvidia-fork").decision,
            "off: PCI vendor 0x10de is driven by nvidia, which is forced on");
}

TEST(NodeRuntime, TwoPluginsReportingOneCardRefuseTheSpecNamingBoth) {
  Node node;
  node.AddPci(0x1111, 1);
  node.AddPci(0x2222, 1);
  auto a = MakeScript("alpha", 0x1111, 1);
  auto b = MakeScript("beta", 0x2222, 1);
  b->groups[0].accelerators[0].id = "alpha-card-0";
  auto runtime = OpenRuntime(node.Options(), {{CandidateOf(*a), a}, {CandidateOf(*b), b}});
  runtime->Discover();
  const NodeReport report = runtime->Report();
  ASSERT_FALSE(report.spec);
  EXPECT_EQ(report.spec.error(),
            "two plugins report one card (id alpha-card-0): alpha card alpha-card-0 and beta card "
            "alpha-card-0; disable one of them (--enable <name>=off)");
}

TEST(NodeRuntime, AForcedOnPluginThatIsNotInstalledIsAnError) {
  Node node;
  RuntimeOptions options = node.Options();
  ASSERT_TRUE(ApplyEnableOverrides(options.config, "nvidia=on", "--enable"));
  auto runtime = OpenRuntime(options, {});
  const NodeReport report = runtime->Report();
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].message,
            "plugin nvidia is forced on by --enable but is not installed (searched: (fake))");
  EXPECT_FALSE(report.ok());
}

TEST(NodeRuntime, ALibraryPathOthersCanWriteIsRefusedWhateverItsSource) {
  Node node;
  node.AddPci(0x1234, 1);
  const fs::path library = node.root() / "libacme.so";
  std::ofstream(library) << "not really a library";
  fs::permissions(library, fs::perms(0666));
  auto acme = MakeScript("acme", 0x1234, 1);
  RuntimeOptions options = node.Options();
  options.env = [&](const std::string& name) {
    return name == "GPUSTACK_ACME_LIBRARY" ? library.string() : std::string();
  };
  auto runtime = OpenRuntime(options, {{CandidateOf(*acme), acme}});
  const NodeReport report = runtime->Report();
  const PluginStatus& status = StatusOf(report, "acme");
  EXPECT_EQ(status.state, PluginState::kFailed);
  ASSERT_TRUE(status.error);
  EXPECT_EQ(status.error->message.rfind(
                "library_path " + library.string() + " (from GPUSTACK_ACME_LIBRARY) refused: ", 0),
            0u)
      << status.error->message;
  EXPECT_EQ(acme->calls, 0) << "the plugin was never initialized with it";

  fs::permissions(library, fs::perms(0644));
  auto trusted = OpenRuntime(options, {{CandidateOf(*acme), acme}});
  EXPECT_EQ(StatusOf(trusted->Report(), "acme").state, PluginState::kRunning);
  EXPECT_EQ(acme->settings.at("library_path"), library.string());
}

TEST(NodeRuntime, TheDeployTimeManufacturerOverridesReachTheRunningIdentity) {
  Node node;
  node.AddPci(0x4321, 1);  // a rebadged card: not the vendor id the plugin declares
  auto acme = MakeScript("acme", 0x1234, 1);
  std::map<std::string, std::string> vars = {
      {"GPUSTACK_ACME_PCI_VENDOR_ID", "4321"},
      {"GPUSTACK_ACME_ACCELERATABLE_RESOURCE_NAME", "example.org/accel"}};
  RuntimeOptions options = node.Options();
  options.env = [&](const std::string& name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
  auto runtime = OpenRuntime(options, {{CandidateOf(*acme), acme}});
  ASSERT_EQ(StatusOf(runtime->Report(), "acme").state, PluginState::kRunning)
      << StatusOf(runtime->Report(), "acme").decision;
  const auto identities = runtime->RunningIdentities();
  ASSERT_EQ(identities.size(), 1u);
  EXPECT_EQ(identities[0].base_resource_name, "example.org/accel");
  EXPECT_EQ(identities[0].pci_vendor_ids, (std::vector<uint16_t>{0x4321}));

  vars["GPUSTACK_ACME_ACCELERATABLE_RESOURCE_NAME"] = "accel";  // no domain
  auto refused = OpenRuntime(options, {{CandidateOf(*acme), acme}});
  const NodeReport report = refused->Report();
  const PluginStatus& status = StatusOf(report, "acme");
  EXPECT_EQ(status.state, PluginState::kFailed);
  ASSERT_TRUE(status.error);
  EXPECT_NE(status.error->message.find("GPUSTACK_ACME_ACCELERATABLE_RESOURCE_NAME=\"accel\""),
            std::string::npos)
      << status.error->message;
}

TEST(NodeRuntime, APluginThatCrashedTheLastProcessIsQuarantinedUntilItsFileChanges) {
  Node node;
  node.AddPci(0x1234, 1);
  const fs::path state = node.root() / "state";
  const fs::path library = node.root() / "libgpustack_plugin_acme.so";
  std::ofstream(library) << "version 1";
  auto acme = MakeScript("acme", 0x1234, 1);
  RuntimeOptions options = node.Options();
  options.state_dir = state;

  // A process whose acme plugin faults inside discover, on the thread running the hook. Its hook
  // deadline is long: the fault ends the process, and under ASan only after the report is
  // symbolized, which on a loaded machine took longer than the 2 s the other tests use.
  const pid_t pid = ::fork();
  if (pid == 0) {
    RuntimeOptions crashing = options;
    crashing.hook_deadline = std::chrono::minutes(2);
    auto runtime =
        NodeRuntime::Open(crashing, std::make_unique<FakeSource>(std::vector<FakeSource::Entry>{
                                        {CandidateOf(*acme, library.string()), acme}}));
    acme->signals[Hook::kDiscover] = SIGSEGV;
    (*runtime)->Discover();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  acme->signals.clear();

  auto runtime = OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}});
  NodeReport report = runtime->Report();
  const PluginStatus& quarantined = StatusOf(report, "acme");
  EXPECT_EQ(quarantined.state, PluginState::kQuarantined);
  ASSERT_TRUE(quarantined.error);
  EXPECT_NE(quarantined.error->message.find("during its discover hook"), std::string::npos)
      << quarantined.error->message;
  EXPECT_NE(quarantined.error->message.find("it stays off until " + library.string() + " changes"),
            std::string::npos)
      << quarantined.error->message;
  EXPECT_FALSE(report.ok());
  runtime.reset();

  // Still the same file: still quarantined, in a process of its own.
  EXPECT_EQ(StatusOf(OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}})->Report(),
                     "acme")
                .state,
            PluginState::kQuarantined);
  // A file that cannot be looked at now (mid-upgrade) keeps it off, and its entry.
  fs::rename(library, library.string() + ".moved");
  EXPECT_EQ(StatusOf(OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}})->Report(),
                     "acme")
                .state,
            PluginState::kQuarantined);
  fs::rename(library.string() + ".moved", library);
  EXPECT_EQ(StatusOf(OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}})->Report(),
                     "acme")
                .state,
            PluginState::kQuarantined);
  // A new file lifts it.
  std::ofstream(library) << "version 2, fixed";
  auto fixed = OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}});
  EXPECT_EQ(StatusOf(fixed->Report(), "acme").state, PluginState::kRunning);
}

TEST(NodeRuntime, AProcessKilledWhileAHookRunsDoesNotQuarantineThatPlugin) {
  Node node;
  node.AddPci(0x1234, 1);
  const fs::path library = node.root() / "libgpustack_plugin_acme.so";
  std::ofstream(library) << "version 1";
  auto acme = MakeScript("acme", 0x1234, 1);
  RuntimeOptions options = node.Options();
  options.state_dir = node.root() / "state";

  // SIGKILL (the OOM killer, a rollout's grace period) lands while acme sits in discover.
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto runtime = NodeRuntime::Open(
        options, std::make_unique<FakeSource>(
                     std::vector<FakeSource::Entry>{{CandidateOf(*acme, library.string()), acme}}));
    acme->delays[Hook::kDiscover] = std::chrono::minutes(1);
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::raise(SIGKILL);
    }).detach();
    (*runtime)->Discover();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  acme->delays.clear();

  auto runtime = OpenRuntime(options, {{CandidateOf(*acme, library.string()), acme}});
  const NodeReport report = runtime->Report();
  EXPECT_EQ(StatusOf(report, "acme").state, PluginState::kRunning);
  bool noted = false;
  for (const SourceProblem& p : report.problems) {
    noted = noted || p.message.find("acme is not quarantined") != std::string::npos;
  }
  EXPECT_TRUE(noted) << "the death during its hook is still reported";
}

TEST(NodeRuntime, HealthEventsReachThePublishedCardsAndTheSpec) {
  Node node;
  node.AddPci(0x1234, 2);
  auto acme = MakeScript("acme", 0x1234, 2);
  acme->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  auto runtime = OpenRuntime(node.Options(), {{CandidateOf(*acme), acme}});
  runtime->Discover();
  std::atomic<int> changes{0};
  {
    std::lock_guard lock(acme->mutex);
    acme->health_events.push_back({{"acme-card-1", GPUSTACK_HEALTH_UNHEALTHY, "XID 79"}});
  }
  runtime->StartHealthLoop(std::chrono::milliseconds(50), [&] { ++changes; });
  for (int i = 0; i < 200 && changes == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runtime->StopHealthLoop();
  ASSERT_EQ(changes, 1);
  const NodeReport report = runtime->Report();
  const sdk::Accelerator& card = StatusOf(report, "acme").groups[0].accelerators[1];
  EXPECT_EQ(card.health, GPUSTACK_HEALTH_UNHEALTHY);
  EXPECT_EQ(card.health_reason, "XID 79");
  EXPECT_TRUE(report.spec->groups[0].accelerators[1].unhealthy);
}

TEST(NodeRuntime, APluginAnsweringHealthPollsAtOnceIsNotPolledFlatOut) {
  // The fake answers "nothing" after 20 ms whatever the timeout: polled back to back, that is 25
  // polls in half a second; waited out to the 100 ms timeout, about 5.
  Node node;
  node.AddPci(0x1234, 1);
  auto acme = MakeScript("acme", 0x1234, 1);
  acme->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  auto runtime = OpenRuntime(node.Options(), {{CandidateOf(*acme), acme}});
  runtime->Discover();
  const int before = acme->calls;
  runtime->StartHealthLoop(std::chrono::milliseconds(100), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  runtime->StopHealthLoop();
  EXPECT_LE(acme->calls - before, 10);
  EXPECT_GE(acme->calls - before, 1);
}

TEST(NodeRuntime, AHealthPollThatHangsShowsThePluginHungAtItsDeadline) {
  Node node;
  node.AddPci(0x1234, 1);
  auto acme = MakeScript("acme", 0x1234, 1);
  acme->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  RuntimeOptions options = node.Options();
  options.hook_deadline = std::chrono::milliseconds(100);
  auto runtime = OpenRuntime(options, {{CandidateOf(*acme), acme}});
  runtime->Discover();
  acme->delays[Hook::kPollHealthEvents] = std::chrono::minutes(10);
  runtime->StartHealthLoop(std::chrono::milliseconds(50), nullptr);
  // The owner (the daemon's loop) checks when CheckHealthPolls says: at the poll's deadline.
  PluginState state = PluginState::kRunning;
  std::optional<std::chrono::steady_clock::time_point> due = std::chrono::steady_clock::now();
  int checks = 0;
  while (due && checks < 10) {
    std::this_thread::sleep_until(*due);
    due = runtime->CheckHealthPolls();
    ++checks;
  }
  state = StatusOf(runtime->Report(), "acme").state;
  EXPECT_EQ(state, PluginState::kHung) << "without waiting for the next discovery";
  EXPECT_LE(checks, 3) << "the first check after the poll's deadline finds it";
  EXPECT_FALSE(runtime->Report().ok());
  runtime->StopHealthLoop();
  runtime.reset();
  acme->release = true;
}

TEST(NodeRuntime, APluginThatHangsAtInitIsReportedAndTheOthersRun) {
  Node node;
  node.AddPci(0x1234, 1);
  node.AddPci(0x5678, 1);
  auto stuck = MakeScript("stuck", 0x1234, 1);
  stuck->delays[Hook::kInit] = std::chrono::minutes(10);
  auto fine = MakeScript("fine", 0x5678, 1);
  RuntimeOptions options = node.Options();
  options.hook_deadline = std::chrono::milliseconds(200);
  auto runtime = OpenRuntime(options, {{CandidateOf(*stuck), stuck}, {CandidateOf(*fine), fine}});
  runtime->Discover();
  const NodeReport report = runtime->Report();
  EXPECT_EQ(StatusOf(report, "stuck").state, PluginState::kHung);
  EXPECT_EQ(StatusOf(report, "stuck").error->message,
            "stuck: init did not return within 0.2 s; the plugin is marked hung and will not be "
            "called again");
  EXPECT_EQ(StatusOf(report, "fine").state, PluginState::kRunning);
  EXPECT_EQ(report.spec->groups.size(), 1u);
  runtime.reset();  // must not wait for the stuck init
  stuck->release = true;
}

TEST(NodeRuntime, APluginThatHangsWhileLoadingIsReportedAndTheOthersRun) {
  // Its library's constructors (or negotiation) never return: the same deadline as a hook.
  Node node;
  node.AddPci(0x1234, 1);
  node.AddPci(0x5678, 1);
  auto stuck = MakeScript("stuck", 0x1234, 1);
  stuck->delays[Hook::kLoad] = std::chrono::minutes(10);
  auto fine = MakeScript("fine", 0x5678, 1);
  RuntimeOptions options = node.Options();
  options.hook_deadline = std::chrono::milliseconds(200);
  auto runtime = OpenRuntime(options, {{CandidateOf(*stuck), stuck}, {CandidateOf(*fine), fine}});
  runtime->Discover();
  const NodeReport report = runtime->Report();
  EXPECT_EQ(StatusOf(report, "stuck").state, PluginState::kHung);
  EXPECT_EQ(StatusOf(report, "stuck").error->message,
            "stuck: loading did not finish within 0.2 s; the plugin is marked hung");
  EXPECT_EQ(StatusOf(report, "fine").state, PluginState::kRunning);
  runtime.reset();
  stuck->release = true;
}

}  // namespace
}  // namespace gpustack::runtime
