// The DRA front end without a kubelet: a claim's cards are charged in the same ledger as the
// device plugin's, recorded before the answer, restored after a restart, and never given twice.
#include "host/node/dra_plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "host/dra/claims.h"
#include "host/dra/slices.h"
#include "host/node/tests/node_fixture.h"

namespace gpustack::node {
namespace {

namespace fs = std::filesystem;
using testing::MemoryPods;

constexpr const char* kNode = "test-node";

// A claim holding one share of `device` (consumable capacity), as the scheduler writes it.
Json ShareClaim(const std::string& uid, const std::string& device, const std::string& memory,
                const std::string& cores) {
  Json claim = {{"metadata", {{"namespace", "ns"}, {"name", "claim-" + uid}, {"uid", uid}}}};
  claim["status"]["allocation"]["devices"]["results"] = {
      {{"driver", "gpustack.ai"},
       {"request", "slice"},
       {"pool", "test-node/acme"},
       {"device", device},
       {"shareID", "share-" + uid},
       {"consumedCapacity", {{"memory", memory}, {"cores", cores}, {"slices", "1"}}}}};
  return claim;
}

Json Claim(const std::string& uid, const std::vector<std::string>& devices) {
  Json results = Json::array();
  for (const std::string& d : devices) {
    results.push_back(
        {{"driver", "gpustack.ai"}, {"request", "gpu"}, {"pool", "test-node/acme"}, {"device", d}});
  }
  return {{"metadata", {{"namespace", "ns"}, {"name", "claim-" + uid}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

class DraFrontEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dra-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "state");
    options_ = {.plugins_dir = dir_ / "plugins",
                .registry_dir = dir_ / "registry",
                .cdi_dir = dir_ / "cdi",
                .record = dir_ / "state" / "dra-claims.json"};
    fs::create_directories(options_.cdi_dir);
    Boot();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A (re)started daemon: a fresh runtime, allocator and front end over the same files.
  void Boot() {
    front_.reset();
    allocator_.reset();
    runtime_ = testing::AcmeRuntime(node_);
    ASSERT_NE(runtime_, nullptr);
    for (const ServedResource& r : ResourcesOf(runtime_->RunningIdentities().at(0), {}))
      served_[r.mode] = r;
    allocator_ = std::make_unique<Allocator>(*runtime_, pods_, AllocatorOptions{});
    front_ = std::make_unique<DraFrontEnd>(
        *runtime_, *allocator_,
        [this](const std::string& ns, const std::string& name) -> Result<Json> {
          ++reads_;
          for (const Json& c : claims_) {
            if (c["metadata"]["namespace"] == ns && c["metadata"]["name"] == name) return c;
          }
          return Error{"not found", Code::kNotFound};
        },
        kNode, options_);
  }

  dra::ClaimRef Ref(const std::string& uid) { return {"ns", "claim-" + uid, uid}; }

  // Who holds each card in the ledger: "claim:<uid>" or a Pod's uid.
  std::map<std::string, std::string> Holders() {
    return runtime_->WithLedger([](ledger::NodeLedger& ledger) {
      std::map<std::string, std::string> holders;
      for (const auto& [owner, allocation] : ledger.allocations()) {
        for (const ledger::Charge& c : allocation.charges)
          holders[c.accelerator_id] = owner.pod_uid;
      }
      return holders;
    });
  }

  std::vector<std::string> Tokens(ledger::Mode mode, uint32_t index) {
    std::vector<std::string> ids;
    runtime_->WithLedger([&](ledger::NodeLedger& ledger) {
      for (const Token& t : TokensOf(ledger, served_[mode])) {
        if (ids.empty() && ParseTokenId(t.id)->card_index == index) ids.push_back(t.id);
      }
    });
    return ids;
  }

  fs::path dir_;
  DraOptions options_;
  runtime::testing::Node node_;
  std::unique_ptr<runtime::NodeRuntime> runtime_;
  MemoryPods pods_;
  std::map<ledger::Mode, ServedResource> served_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<DraFrontEnd> front_;
  std::vector<Json> claims_;
  int reads_ = 0;
};

TEST_F(DraFrontEndTest, PreparesAClaimOnceRecordsItAndGivesItBack) {
  claims_.push_back(Claim("u1", {"card-0"}));
  const PrepareOutcome outcome = front_->Prepare(Ref("u1"));
  ASSERT_EQ(outcome.error, "");
  ASSERT_EQ(outcome.devices.size(), 1u);
  EXPECT_EQ(outcome.devices[0].device, "card-0");
  EXPECT_EQ(outcome.cdi_devices[0], std::vector<std::string>{"gpustack.ai/claim=u1"});
  EXPECT_EQ(Holders(), (std::map<std::string, std::string>{{"acme-card-0", "claim:u1"}}));
  // The container edits, as the engine will read them.
  std::ifstream spec_file(options_.cdi_dir / "gpustack.ai-claim_u1.json");
  const Json spec = Json::parse(spec_file);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"],
            (Json{"FAKE_VISIBLE_DEVICES=acme-card-0"}));
  // Recorded before the answer.
  std::ifstream record_file(options_.record);
  EXPECT_TRUE(Json::parse(record_file)["claims"].contains("u1"));

  // The kubelet asks again (its restart): the same answer, no second read, no second charge.
  const PrepareOutcome again = front_->Prepare(Ref("u1"));
  EXPECT_EQ(again.devices, outcome.devices);
  EXPECT_EQ(reads_, 1);

  // The device plugin's tokens show the card taken, and an Allocate of it is refused.
  runtime_->WithLedger([&](ledger::NodeLedger& ledger) {
    for (const Token& t : TokensOf(ledger, served_[ledger::Mode::kExclusive]))
      EXPECT_EQ(t.healthy, t.card_id != "acme-card-0") << t.id;
  });
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  auto refused =
      allocator_->Allocate(served_[ledger::Mode::kExclusive], Tokens(ledger::Mode::kExclusive, 0));
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(Holders().size(), 1u);

  EXPECT_EQ(front_->Unprepare(Ref("u1")), "");
  EXPECT_TRUE(Holders().empty());
  EXPECT_FALSE(fs::exists(options_.cdi_dir / "gpustack.ai-claim_u1.json"));
  EXPECT_EQ(front_->Unprepare(Ref("u1")), "");  // idempotent
  EXPECT_EQ(front_->prepared_claims(), 0u);
}

TEST_F(DraFrontEndTest, SharesOfOneCardAreSlicesWithTheirBudgets) {
  claims_.push_back(ShareClaim("s1", "card-0", "4Gi", "40"));
  claims_.push_back(ShareClaim("s2", "card-0", "8Gi", "50"));
  claims_.push_back(ShareClaim("s3", "card-0", "8Gi", "10"));  // 4 + 8 + 8 > 16 GiB
  const PrepareOutcome first = front_->Prepare(Ref("s1"));
  ASSERT_EQ(first.error, "");
  ASSERT_EQ(front_->Prepare(Ref("s2")).error, "");
  std::ifstream spec_file(options_.cdi_dir / "gpustack.ai-claim_s1.json");
  const Json env = Json::parse(spec_file)["devices"][0]["containerEdits"]["env"];
  EXPECT_NE(std::find(env.begin(), env.end(), "FAKE_MEMORY_LIMIT_MIB=4096"), env.end()) << env;
  const PrepareOutcome third = front_->Prepare(Ref("s3"));
  EXPECT_NE(third.error.find("ns/claim-s3"), std::string::npos) << third.error;
  runtime_->WithLedger([](ledger::NodeLedger& ledger) {
    ASSERT_EQ(ledger.allocations().size(), 2u);
    for (const auto& [owner, allocation] : ledger.allocations())
      EXPECT_EQ(allocation.charges.at(0).mode, ledger::Mode::kSliced) << owner.pod_uid;
  });
  // The device plugin offers the card in no mode while claims hold it.
  runtime_->WithLedger([&](ledger::NodeLedger& ledger) {
    for (const Token& t : TokensOf(ledger, served_[ledger::Mode::kSliced]))
      EXPECT_EQ(t.healthy, t.card_id != "acme-card-0") << t.id;
  });
  EXPECT_EQ(front_->Unprepare(Ref("s1")), "");
  EXPECT_EQ(front_->Prepare(Ref("s3")).error, "");  // room again
}

TEST_F(DraFrontEndTest, ACardAPodHoldsIsNeverGivenToAClaim) {
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kExclusive], Tokens(ledger::Mode::kExclusive, 1)));
  claims_.push_back(Claim("u1", {"card-1"}));
  const PrepareOutcome outcome = front_->Prepare(Ref("u1"));
  EXPECT_NE(outcome.error.find("ns/claim-u1"), std::string::npos) << outcome.error;
  EXPECT_EQ(Holders(), (std::map<std::string, std::string>{{"acme-card-1", "uid-p"}}));
  EXPECT_FALSE(fs::exists(options_.cdi_dir / "gpustack.ai-claim_u1.json"));
  EXPECT_EQ(front_->prepared_claims(), 0u);
  // The slice the node publishes leaves that card out.
  const std::vector<Json> slices = runtime_->WithLedger([](ledger::NodeLedger& ledger) {
    return dra::ResourceSlices(kNode, ledger.spec(), dra::HeldByPodsOf(ledger), 1);
  });
  ASSERT_EQ(slices.size(), 1u);
  ASSERT_EQ(slices[0]["spec"]["devices"].size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["devices"][0]["name"], "card-0");
}

TEST_F(DraFrontEndTest, BadClaimsAreRefusedWithTheirReason) {
  claims_.push_back(Claim("u1", {"card-7"}));
  EXPECT_NE(front_->Prepare(Ref("u1")).error.find("no device card-7"), std::string::npos);
  Json elsewhere = Claim("u2", {"card-0"});
  elsewhere["status"]["allocation"]["devices"]["results"][0]["pool"] = "other-node/acme";
  claims_.push_back(elsewhere);
  EXPECT_NE(front_->Prepare(Ref("u2")).error.find("not one of node test-node"), std::string::npos);
  EXPECT_NE(front_->Prepare(Ref("u3")).error.find("cannot read ResourceClaim ns/claim-u3"),
            std::string::npos);
  EXPECT_TRUE(Holders().empty());
}

TEST_F(DraFrontEndTest, ARestartRestoresPreparedClaimsBeforeAnythingIsServed) {
  claims_.push_back(Claim("u1", {"card-0"}));
  ASSERT_EQ(front_->Prepare(Ref("u1")).error, "");
  // A spec a crash left behind, which no record names.
  std::ofstream(options_.cdi_dir / "gpustack.ai-claim_lost.json") << "{}";
  Boot();
  EXPECT_TRUE(Holders().empty());  // a fresh ledger, before the restore
  auto restored = front_->Restore();
  ASSERT_TRUE(restored.ok()) << restored.error();
  EXPECT_EQ(*restored, 1u);
  EXPECT_EQ(Holders(), (std::map<std::string, std::string>{{"acme-card-0", "claim:u1"}}));
  EXPECT_FALSE(fs::exists(options_.cdi_dir / "gpustack.ai-claim_lost.json"));
  EXPECT_TRUE(fs::exists(options_.cdi_dir / "gpustack.ai-claim_u1.json"));
  // The kubelet prepares again after the restart: the record answers, the apiserver is not read.
  reads_ = 0;
  EXPECT_EQ(front_->Prepare(Ref("u1")).devices.size(), 1u);
  EXPECT_EQ(reads_, 0);
  EXPECT_EQ(front_->Unprepare(Ref("u1")), "");
  EXPECT_TRUE(Holders().empty());
}

TEST_F(DraFrontEndTest, ARecordedClaimWhoseCardAPodTookIsNotHandedOutAgain) {
  claims_.push_back(Claim("u1", {"card-0"}));
  ASSERT_EQ(front_->Prepare(Ref("u1")).error, "");
  Boot();
  // After the restart, a Pod's record is restored first and holds the claim's card.
  pods_.Add("p", {{"acme.example.com/accel", "1"}}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(
      allocator_->Allocate(served_[ledger::Mode::kExclusive], Tokens(ledger::Mode::kExclusive, 0)));
  auto restored = front_->Restore();
  ASSERT_TRUE(restored.ok()) << restored.error();
  EXPECT_EQ(*restored, 0u);  // kept in the record, not charged
  const PrepareOutcome again = front_->Prepare(Ref("u1"));
  EXPECT_NE(again.error.find("its cards are not free"), std::string::npos) << again.error;
  EXPECT_TRUE(again.devices.empty());
  EXPECT_EQ(Holders(), (std::map<std::string, std::string>{{"acme-card-0", "uid-p"}}));
  EXPECT_EQ(front_->Unprepare(Ref("u1")), "");  // the kubelet can still end it
  EXPECT_EQ(front_->prepared_claims(), 0u);
}

TEST_F(DraFrontEndTest, ARecordThatCannotBeReadStopsTheStart) {
  std::ofstream(options_.record) << "{\"version\": 1, \"claims\": [";
  auto restored = front_->Restore();
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.code(), Code::kDataLoss);
  EXPECT_NE(restored.error().find("dra-claims.json"), std::string::npos) << restored.error();
}

TEST_F(DraFrontEndTest, NoRecordNoDevices) {
  options_.record = dir_ / "missing-dir" / "dra-claims.json";
  Boot();
  claims_.push_back(Claim("u1", {"card-0"}));
  const PrepareOutcome outcome = front_->Prepare(Ref("u1"));
  EXPECT_NE(outcome.error.find("cannot record"), std::string::npos) << outcome.error;
  EXPECT_TRUE(Holders().empty());
  EXPECT_FALSE(fs::exists(options_.cdi_dir / "gpustack.ai-claim_u1.json"));
}

}  // namespace
}  // namespace gpustack::node
