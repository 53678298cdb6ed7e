// Gate 5 without a kubelet: which container an Allocate serves, what it is charged, what is
// recorded, and that nothing stays charged that no record names.
#include "host/node/allocator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host/ledger/allocated.h"
#include "host/ledger/chosen.h"
#include "host/node/tests/node_fixture.h"

namespace gpustack::node {
namespace {

using testing::MemoryPods;

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_ = testing::AcmeRuntime(node_);
    ASSERT_NE(runtime_, nullptr);
    for (const ServedResource& r : ResourcesOf(runtime_->RunningIdentities().at(0), {})) {
      served_[r.mode] = r;
    }
    allocator_ = std::make_unique<Allocator>(*runtime_, pods_, AllocatorOptions{});
  }

  // The kubelet's ids for `resource`'s tokens on card `index`.
  std::vector<std::string> Tokens(ledger::Mode mode, uint32_t index, size_t count) {
    std::vector<std::string> ids;
    runtime_->WithLedger([&](ledger::NodeLedger& ledger) {
      for (const Token& t : TokensOf(ledger, served_[mode])) {
        if (ids.size() < count && ParseTokenId(t.id)->card_index == index) ids.push_back(t.id);
      }
    });
    return ids;
  }

  size_t Allocations() {
    return runtime_->WithLedger([](ledger::NodeLedger& l) { return l.allocations().size(); });
  }

  static std::string Env(const AllocateResult& result, const std::string& key) {
    for (const sdk::ContainerEdit& e : result.edits) {
      if (e.kind == GPUSTACK_EDIT_ENV && e.key == key) return e.value;
    }
    return "";
  }

  runtime::testing::Node node_;
  std::unique_ptr<runtime::NodeRuntime> runtime_;
  MemoryPods pods_;
  std::map<ledger::Mode, ServedResource> served_;
  std::unique_ptr<Allocator> allocator_;
};

TEST_F(AllocatorTest, ServesTheOldestWaitingPodAndRecordsItBeforeAnswering) {
  pods_.Add("newer", {{"acme.example.com/accel", "1"}}, "2026-01-02T00:00:00Z");
  pods_.Add("older", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 1, 1));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->pod, "ns/older");
  EXPECT_EQ(Env(*result, "FAKE_VISIBLE_DEVICES"), "acme-card-1");  // the kubelet's card
  ASSERT_EQ(pods_.records.count("uid-older"), 1u);
  const Json record = Json::parse(pods_.records["uid-older"]);
  EXPECT_EQ(record["main"]["accelerators"][0]["id"], "acme-card-1");
  EXPECT_EQ(record["main"]["accelerators"][0]["mode"], 1);

  // The next Allocate serves the other Pod: the first holds its card already.
  auto second = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->pod, "ns/newer");
  // Nobody waits any more.
  auto third = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                    Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_FALSE(third);
  EXPECT_EQ(third.code(), Code::kNotFound);
}

TEST_F(AllocatorTest, TheWatchCacheServesFirstAndAFreshListWhenItLags) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  pods_.cache = pods_.pods;
  ASSERT_TRUE(allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                   Tokens(ledger::Mode::kExclusive, 0, 1)));
  EXPECT_EQ(pods_.lists, 0);
  pods_.Add("newer", {{"acme.example.com/accel", "1"}}, "2026-01-02T00:00:00Z");  // not cached
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 1, 1));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->pod, "ns/newer");
  EXPECT_EQ(pods_.lists, 1);
  EXPECT_EQ(pods_.kubelet_asks, 2);  // once per Allocate, not once per attempt
  // GetPreferredAllocation is a hint: the cache serves it, no list.
  pods_.Add("third", {{"acme.example.com/accel.shared", "1"}}, "2026-01-03T00:00:00Z");
  pods_.cache = pods_.pods;
  std::vector<std::string> shared;
  runtime_->WithLedger([&](ledger::NodeLedger& ledger) {
    for (const Token& t : TokensOf(ledger, served_[ledger::Mode::kShared])) shared.push_back(t.id);
  });
  EXPECT_EQ(allocator_->Prefer(served_[ledger::Mode::kShared], shared, {}, 1).size(), 1u);
  EXPECT_EQ(pods_.lists, 1) << allocator_->ExplainOffer(served_[ledger::Mode::kShared], shared);
}

TEST_F(AllocatorTest, TheKubeletsWordNarrowsTheChoice) {
  pods_.Add("older", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  pods_.Add("admitted", {{"acme.example.com/accel", "1"}}, "2026-01-02T00:00:00Z");
  pods_.waiting = std::set<std::string>{"ns/admitted/main"};
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->pod, "ns/admitted");
}

TEST_F(AllocatorTest, FinishedAndDeletingPodsAreNeverServed) {
  pods_.Add("done", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z")["status"]["phase"] =
      "Succeeded";
  pods_.Add("going", {{"acme.example.com/accel", "1"}},
            "2026-01-01T00:00:01Z")["metadata"]["deletionTimestamp"] = "2026-01-03T00:00:00Z";
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.code(), Code::kNotFound);
}

TEST_F(AllocatorTest, AFailedRecordGivesTheChargeBack) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  pods_.fail_records = true;
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                     Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.code(), Code::kUnavailable);
  EXPECT_NE(result.error().find("apiserver unavailable"), std::string::npos) << result.error();
  EXPECT_EQ(Allocations(), 0u);
}

TEST_F(AllocatorTest, ACardHeldInAnotherModeIsAFailedPrecondition) {
  pods_.Add("whole", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                   Tokens(ledger::Mode::kExclusive, 0, 1)));
  pods_.Add("slice",
            {{"acme.example.com/accel.sliced", "1"},
             {"acme.example.com/accel.sliced.memory-percentage", "20"}},
            "2026-01-02T00:00:00Z");
  auto result =
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.code(), Code::kFailedPrecondition);
  EXPECT_NE(result.error().find("held Exclusive"), std::string::npos) << result.error();
  EXPECT_EQ(Allocations(), 1u);
}

TEST_F(AllocatorTest, SharedSlotsSitOnOneCard) {
  pods_.Add("p", {{"acme.example.com/accel.shared", "2"}}, "2026-01-01T00:00:00Z");
  std::vector<std::string> split = Tokens(ledger::Mode::kShared, 0, 1);
  split.push_back(Tokens(ledger::Mode::kShared, 1, 1).at(0));
  auto refused = allocator_->Allocate(served_[ledger::Mode::kShared], split);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  auto result =
      allocator_->Allocate(served_[ledger::Mode::kShared], Tokens(ledger::Mode::kShared, 1, 2));
  ASSERT_TRUE(result) << result.error();
  const Json record = Json::parse(pods_.records["uid-p"]);
  EXPECT_EQ(record["main"]["accelerators"][0]["sharedSlots"], 2);
}

TEST_F(AllocatorTest, ASlicesBudgetIsFlooredFromTheCardsMemory) {
  pods_.Add("p",
            {{"acme.example.com/accel.sliced", "1"},
             {"acme.example.com/accel.sliced.memory-percentage", "20"}},
            "2026-01-01T00:00:00Z");
  auto result =
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(Env(*result, "FAKE_MEMORY_LIMIT_MIB"), "3276");  // floor(16384 x 20 / 100)
  ledger::Request mib;
  mib.memory_mib = 99999;
  EXPECT_EQ(SliceBudgetMib(mib, 24560), 24560u);  // capped at the card
  ledger::Request percent;
  percent.memory_percentage = 20;
  EXPECT_EQ(SliceBudgetMib(percent, 24560), 4912u);  // docs/decisions.md D6
}

// A slice gets its enforcer's mounts and its own working directory; a whole card does not; a
// slice whose working directory cannot be made is refused with nothing held.
TEST(AllocatorEnforcement, ASliceGetsItsEnforcerAndAWorkingDirectoryOrIsRefused) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("allocator-enforcement-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "data");
  client::EnforcerDeclaration declared;
  declared.name = "acme-enforcer";
  declared.files = {"libacme.so"};
  declared.preload = {"libacme.so"};
  declared.workdir_env = "ACME_LEDGER_PATH";
  declared.default_env = {{"ACME_LOG_LEVEL", "1"}};
  runtime::testing::Node node;
  auto runtime = testing::AcmeRuntime(node, 3, declared);
  ASSERT_NE(runtime, nullptr);
  std::map<ledger::Mode, ServedResource> served;
  for (const ServedResource& r : ResourcesOf(runtime->RunningIdentities().at(0), {}))
    served[r.mode] = r;
  testing::MemoryPods pods;
  Allocator allocator(*runtime, pods, AllocatorOptions{});
  enforcement::SliceEnforcement enforcement({.data_dir = root / "data", .host_data_dir = "/h"});
  enforcement.Prepare(runtime->Report().plugins);  // no source: counted, not enforced
  allocator.set_enforcement(&enforcement);
  auto tokens = [&](ledger::Mode mode, uint32_t index) {
    return runtime->WithLedger([&](ledger::NodeLedger& ledger) {
      for (const Token& t : TokensOf(ledger, served[mode])) {
        if (ParseTokenId(t.id)->card_index == index) return std::vector<std::string>{t.id};
      }
      return std::vector<std::string>{};
    });
  };
  pods.Add("sliced",
           {{"acme.example.com/accel.sliced", "1"},
            {"acme.example.com/accel.sliced.memory-percentage", "20"}},
           "2026-01-01T00:00:00Z");
  auto sliced = allocator.Allocate(served[ledger::Mode::kSliced], tokens(ledger::Mode::kSliced, 0));
  ASSERT_TRUE(sliced) << sliced.error();
  std::map<std::string, std::string> env, mounts;
  for (const sdk::ContainerEdit& e : sliced->edits) {
    if (e.kind == GPUSTACK_EDIT_ENV) env[e.key] = e.value;
    if (e.kind == GPUSTACK_EDIT_MOUNT) mounts[e.container_path] = e.host_path;
  }
  EXPECT_EQ(env["ACME_LEDGER_PATH"], enforcement::kWorkdirMount);
  EXPECT_EQ(env["ACME_LOG_LEVEL"], "1");
  EXPECT_EQ(env["FAKE_MEMORY_LIMIT_MIB"], "3276");  // the plugin's own edits are still there
  EXPECT_EQ(mounts[enforcement::kWorkdirMount], "/h/operator/pods/uid-sliced/main");
  EXPECT_TRUE(fs::is_directory(root / "data/operator/pods/uid-sliced/main"));

  pods.Add("whole", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:01Z");
  auto whole =
      allocator.Allocate(served[ledger::Mode::kExclusive], tokens(ledger::Mode::kExclusive, 1));
  ASSERT_TRUE(whole) << whole.error();
  for (const sdk::ContainerEdit& e : whole->edits) EXPECT_NE(e.kind, GPUSTACK_EDIT_MOUNT);

  // A file where the Pods' directories go: the next slice cannot get one.
  fs::remove_all(root / "data/operator/pods");
  std::ofstream(root / "data/operator/pods") << "in the way";
  pods.Add("refused",
           {{"acme.example.com/accel.sliced", "1"},
            {"acme.example.com/accel.sliced.memory-percentage", "20"}},
           "2026-01-01T00:00:02Z");
  const size_t before =
      runtime->WithLedger([](ledger::NodeLedger& l) { return l.allocations().size(); });
  auto refused =
      allocator.Allocate(served[ledger::Mode::kSliced], tokens(ledger::Mode::kSliced, 2));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.failure().code, Code::kUnavailable);
  EXPECT_NE(refused.error().find("working directory"), std::string::npos) << refused.error();
  EXPECT_EQ(runtime->WithLedger([](ledger::NodeLedger& l) { return l.allocations().size(); }),
            before);
  EXPECT_EQ(pods.records.count("uid-refused"), 0u);
  fs::remove_all(root);
}

// GPUSTACK_<MFR>_DEVICE_INJECTION_STRATEGY=auto on a CDI-capable engine whose specs name the
// card: the grant carries the CDI annotation; a Pod naming a RuntimeClass keeps the variable.
TEST_F(AllocatorTest, AutoInjectionNamesTheCardsAsCdiDevicesWhereTheNodeAllows) {
  namespace fs = std::filesystem;
  const fs::path specs =
      fs::temp_directory_path() / ("allocator-cdi-" + std::to_string(::getpid()));
  fs::create_directories(specs);
  std::ofstream(specs / "acme.yaml")
      << "kind: acme.example.com/accel\ndevices: [{name: acme-card-0}, {name: acme-card-1}]\n";
  cdi::Engine engine{.runtime_version = "containerd://2.4.2"};
  cdi::ReadContainerdConfig("version = 3\n", engine);
  cdi::Injector injector({{"acme", cdi::Strategy::kAuto}}, engine, {specs});
  allocator_->set_injector(&injector);
  auto annotations = [](const AllocateResult& result) {
    std::map<std::string, std::string> out;
    for (const sdk::ContainerEdit& e : result.edits)
      if (e.kind == GPUSTACK_EDIT_ANNOTATION) out[e.key] = e.value;
    return out;
  };
  pods_.Add("cdi", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  auto cdi = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                  Tokens(ledger::Mode::kExclusive, 0, 1));
  ASSERT_TRUE(cdi) << cdi.error();
  EXPECT_EQ(annotations(*cdi)["cdi.k8s.io/gpustack-acme"], "acme.example.com/accel=acme-card-0");
  Json& runtime_class =
      pods_.Add("runtime-class", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:01Z");
  runtime_class["spec"]["runtimeClassName"] = "acme";
  auto variable = allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                       Tokens(ledger::Mode::kExclusive, 1, 1));
  ASSERT_TRUE(variable) << variable.error();
  EXPECT_TRUE(annotations(*variable).empty());
  fs::remove_all(specs);
}

TEST_F(AllocatorTest, ForeignDeviceIdsAreRefused) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  auto result = allocator_->Allocate(served_[ledger::Mode::kExclusive], {"GPU-1234"});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.code(), Code::kInvalidArgument);
  auto unknown = allocator_->Allocate(served_[ledger::Mode::kExclusive], {"nope:0:0"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
}

TEST_F(AllocatorTest, RestoreRebuildsFromRecordsAndRefusesForeignOnes) {
  pods_.Add("a", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  pods_.Add("b",
            {{"acme.example.com/accel.sliced", "1"},
             {"acme.example.com/accel.sliced.memory-percentage", "30"}},
            "2026-01-02T00:00:00Z");
  ASSERT_TRUE(allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                   Tokens(ledger::Mode::kExclusive, 0, 1)));
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 1, 1)));
  const auto before = runtime_->WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); });
  for (Json& pod : pods_.pods) {
    pod["metadata"]["annotations"][ledger::kAllocatedAnnotation] =
        pods_.records[pod["metadata"]["uid"].get<std::string>()];
  }
  // A hostile record: a Pod claiming another Pod's card.
  Json& thief = pods_.Add("thief", {{"acme.example.com/accel", "1"}}, "2026-01-03T00:00:00Z");
  thief["metadata"]["annotations"][ledger::kAllocatedAnnotation] = pods_.records["uid-a"];

  // A new process: a fresh runtime and allocator over the same Pods.
  runtime::testing::Node other;
  auto fresh = testing::AcmeRuntime(other);
  ASSERT_NE(fresh, nullptr);
  Allocator restarted(*fresh, pods_, {});
  EXPECT_EQ(restarted.Restore(pods_.pods), 2u);
  EXPECT_EQ(fresh->WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); }), before);
}

TEST_F(AllocatorTest, ReconcileReleasesGonePodsButNotNewerReservations) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  const auto listed_before = std::chrono::steady_clock::now();
  ASSERT_TRUE(allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                   Tokens(ledger::Mode::kExclusive, 0, 1)));
  // A cache that lacks the Pod is no proof it is gone.
  EXPECT_FALSE(allocator_->Reconcile({}, std::nullopt));
  EXPECT_EQ(Allocations(), 1u);
  // A list taken before the reservation does not know the Pod yet: nothing is released.
  EXPECT_FALSE(allocator_->Reconcile({}, listed_before));
  EXPECT_EQ(Allocations(), 1u);
  // One taken after it, without the Pod: the Pod is gone.
  EXPECT_TRUE(allocator_->Reconcile({}, std::chrono::steady_clock::now()));
  EXPECT_EQ(Allocations(), 0u);
}

TEST_F(AllocatorTest, ASidecarSeesItsOwnersCardWithoutACharge) {
  Json& pod = pods_.Add("p", {{"acme.example.com/accel.shared", "1"}}, "2026-01-01T00:00:00Z");
  pod["spec"]["containers"].push_back(
      {{"name", "sshd"},
       {"resources", {{"limits", {{"device.gpustack.ai/acme.visibility", "1"}}}}}});
  // Before the owner holds a card there is nothing to see.
  auto early = allocator_->Allocate(served_[ledger::Mode::kNone], {"x:0:0"});
  ASSERT_FALSE(early);
  EXPECT_EQ(early.code(), Code::kFailedPrecondition);
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kShared], Tokens(ledger::Mode::kShared, 1, 1)));
  const auto before = runtime_->WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); });
  auto sidecar = allocator_->Allocate(served_[ledger::Mode::kNone], {"x:0:0"});
  ASSERT_TRUE(sidecar) << sidecar.error();
  EXPECT_EQ(sidecar->owner.container, "sshd");
  EXPECT_EQ(Env(*sidecar, "FAKE_VISIBLE_DEVICES"), "acme-card-1");
  EXPECT_EQ(runtime_->WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); }), before);
  EXPECT_EQ(allocator_->Allocate(served_[ledger::Mode::kNone], {"x:0:0"}).code(),
            Code::kNotFound);  // served once
}

TEST_F(AllocatorTest, ADeletedPodIsReleasedAtOnce) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(allocator_->Allocate(served_[ledger::Mode::kExclusive],
                                   Tokens(ledger::Mode::kExclusive, 0, 1)));
  EXPECT_FALSE(allocator_->ReleaseDeleted({"uid-other"}));
  EXPECT_EQ(Allocations(), 1u);
  EXPECT_TRUE(allocator_->ReleaseDeleted({"uid-p"}));
  EXPECT_EQ(Allocations(), 0u);
}

TEST_F(AllocatorTest, AFinishedPodGivesBackItsSlice) {
  Json& pod = pods_.Add("p",
                        {{"acme.example.com/accel.sliced", "1"},
                         {"acme.example.com/accel.sliced.memory-percentage", "50"}},
                        "2026-01-01T00:00:00Z");
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1)));
  pod["status"]["phase"] = "Succeeded";
  EXPECT_TRUE(allocator_->Reconcile(pods_.pods, std::chrono::steady_clock::now()));
  const auto status = runtime_->WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); });
  EXPECT_EQ(status.groups.at(0).accelerators.at(0).allocated, 0);
}

// Gate 3 placed a Pod where a finished one had been; the watch that would release it lags, and
// the kubelet asks first: the fresh list an Allocate falls back on releases it before the fit.
TEST_F(AllocatorTest, AnAllocateSettlesFinishedPodsOfTheFreshListBeforeRefusing) {
  const std::map<std::string, std::string> seventy = {
      {"acme.example.com/accel.sliced", "1"},
      {"acme.example.com/accel.sliced.memory-percentage", "70"}};
  pods_.Add("done", seventy, "2026-01-01T00:00:00Z");
  pods_.cache = pods_.pods;
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1)));
  pods_.pods.front()["status"]["phase"] = "Succeeded";  // the apiserver's word, not yet the cache's
  pods_.Add("next", seventy, "2026-01-01T00:00:01Z");
  pods_.cache->push_back(pods_.pods.back());
  auto result =
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->pod, "ns/next");
  EXPECT_EQ(pods_.lists, 1);
  EXPECT_EQ(Allocations(), 1u);

  // A Pod still running keeps its slice: the next one is refused, naming the card's room.
  pods_.Add("third", seventy, "2026-01-01T00:00:02Z");
  auto refused =
      allocator_->Allocate(served_[ledger::Mode::kSliced], Tokens(ledger::Mode::kSliced, 0, 1));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.error().find("credits remaining"), std::string::npos) << refused.error();
}

// docs/decisions.md D13: gate 5 settles on the cards gate 3 counted.
TEST_F(AllocatorTest, PrefersTheCardsGateThreeChoseWhileTheyFit) {
  std::string second;
  runtime_->WithLedger([&](ledger::NodeLedger& l) { second = l.cards().at(1).card->id; });
  auto chosen_for = [&](const std::string& card) {
    ledger::Chosen chosen{"wl-1",
                          "main",
                          "node",
                          {{{"main", {{card, ledger::Mode::kSliced, 320000, 0, 100, {}, {}}}}}}};
    return ledger::ToAnnotation(chosen);
  };
  const Json limits = {{"acme.example.com/accel.sliced", "1"},
                       {"acme.example.com/accel.sliced.memory-percentage", "20"}};
  std::vector<std::string> all = Tokens(ledger::Mode::kSliced, 0, 8);
  for (const std::string& t : Tokens(ledger::Mode::kSliced, 1, 8)) all.push_back(t);
  auto card_of = [&](const std::vector<std::string>& ids) {
    return ParseTokenId(ids.at(0))->card_index;
  };
  // Without a choice the ledger takes the first card; with one, the chosen second card.
  pods_.Add("free", limits, "2026-01-01T00:00:00Z");
  EXPECT_EQ(card_of(allocator_->Prefer(served_[ledger::Mode::kSliced], all, {}, 1)), 0u);
  pods_.pods.clear();
  pods_.Add("pinned", limits, "2026-01-01T00:00:00Z")["metadata"]["annotations"] = {
      {ledger::kChosenAnnotation, chosen_for(second)}};
  EXPECT_EQ(card_of(allocator_->Prefer(served_[ledger::Mode::kSliced], all, {}, 1)), 1u);
  EXPECT_EQ(allocator_->chosen_honoured(), 1u);
  // The chosen card taken whole by someone else meanwhile: another card, and it is counted.
  runtime_->WithLedger([&](ledger::NodeLedger& l) {
    ledger::Request whole;
    whole.manufacturer = "acme";
    whole.base = "acme.example.com/accel";
    whole.cards = {second};
    ASSERT_TRUE(l.Reserve({"other", "main"}, whole));
  });
  EXPECT_EQ(card_of(allocator_->Prefer(served_[ledger::Mode::kSliced], all, {}, 1)), 0u);
  EXPECT_EQ(allocator_->chosen_refused(), 1u);
}

TEST_F(AllocatorTest, PrefersOneCardWithEnoughOfferedSlotsAndTheRoomiestWhenNobodyWaits) {
  // One slot offered on card 0 (the ledger's first fit) but two on card 1: the two must both
  // come from card 1, or the kubelet hands over a split that gate 5 has to refuse.
  pods_.Add("p", {{"acme.example.com/accel.shared", "2"}}, "2026-01-01T00:00:00Z");
  std::vector<std::string> offered = Tokens(ledger::Mode::kShared, 0, 1);
  for (const std::string& t : Tokens(ledger::Mode::kShared, 1, 2)) offered.push_back(t);
  std::vector<std::string> preferred =
      allocator_->Prefer(served_[ledger::Mode::kShared], offered, {}, 2);
  ASSERT_EQ(preferred.size(), 2u);
  EXPECT_EQ(ParseTokenId(preferred[0])->card_index, 1u);
  EXPECT_EQ(ParseTokenId(preferred[1])->card_index, 1u);
  EXPECT_TRUE(allocator_->Allocate(served_[ledger::Mode::kShared], preferred));
  // Nobody waits (a Pod the apiserver has not shown yet): the card with the most room, not the
  // kubelet's first; card 1 is now partly held, so card 0.
  pods_.pods.clear();
  std::vector<std::string> both = Tokens(ledger::Mode::kShared, 1, 1);
  both.push_back(Tokens(ledger::Mode::kShared, 0, 1).at(0));
  preferred = allocator_->Prefer(served_[ledger::Mode::kShared], both, {}, 1);
  ASSERT_EQ(preferred.size(), 1u);
  EXPECT_EQ(ParseTokenId(preferred[0])->card_index, 0u)
      << allocator_->ExplainOffer(served_[ledger::Mode::kShared], both);
  EXPECT_NE(allocator_->ExplainOffer(served_[ledger::Mode::kShared], both)
                .find("no waiting container identified"),
            std::string::npos);
}

}  // namespace
}  // namespace gpustack::node
