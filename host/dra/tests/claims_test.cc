// What a ResourceClaim asks of this node, and the record of what was prepared for it: read back
// exactly, and never guessed when it is damaged.
#include "host/dra/claims.h"

#include <gtest/gtest.h>

namespace gpustack::dra {
namespace {

const ClaimRef kRef{"team-a", "gpu", "uid-1"};

Json Claim(Json results) {
  return {{"metadata", {{"namespace", "team-a"}, {"name", "gpu"}, {"uid", "uid-1"}}},
          {"status", {{"allocation", {{"devices", {{"results", std::move(results)}}}}}}}};
}

Json Result(const char* driver, const char* request, const char* device) {
  return {{"driver", driver}, {"request", request}, {"pool", "n/nvidia"}, {"device", device}};
}

TEST(AllocatedDevices, AreThisDriversResultsInOrder) {
  const Json claim =
      Claim({Result("gpustack.ai", "gpus", "card-2"), Result("other.example.com", "nic", "eth0"),
             Result("gpustack.ai", "gpus", "card-0")});
  auto devices = AllocatedDevices(claim, kRef, "gpustack.ai");
  ASSERT_TRUE(devices.ok()) << devices.error();
  EXPECT_EQ(*devices, (std::vector<AllocatedDevice>{{"gpus", "n/nvidia", "card-2"},
                                                    {"gpus", "n/nvidia", "card-0"}}));
}

TEST(AllocatedDevices, RefuseWhatIsNotAClaimForThisDriver) {
  Json recreated = Claim({Result("gpustack.ai", "gpus", "card-0")});
  recreated["metadata"]["uid"] = "uid-2";
  EXPECT_EQ(AllocatedDevices(recreated, kRef, "gpustack.ai").code(), Code::kNotFound);
  Json pending = Claim(Json::array());
  pending.erase("status");
  auto unallocated = AllocatedDevices(pending, kRef, "gpustack.ai");
  EXPECT_EQ(unallocated.code(), Code::kFailedPrecondition);
  EXPECT_NE(unallocated.error().find("team-a/gpu"), std::string::npos) << unallocated.error();
  EXPECT_EQ(
      AllocatedDevices(Claim({Result("other.example.com", "nic", "eth0")}), kRef, "gpustack.ai")
          .code(),
      Code::kFailedPrecondition);
  Json admin = Result("gpustack.ai", "gpus", "card-0");
  admin["adminAccess"] = true;
  EXPECT_EQ(AllocatedDevices(Claim({admin}), kRef, "gpustack.ai").code(), Code::kInvalidArgument);
  Json odd_admin = Result("gpustack.ai", "gpus", "card-0");
  odd_admin["adminAccess"] = "yes";  // not a boolean: not admin access, and no exception
  EXPECT_TRUE(AllocatedDevices(Claim({odd_admin, 7}), kRef, "gpustack.ai").ok());
  Json incomplete = Result("gpustack.ai", "gpus", "card-0");
  incomplete.erase("pool");
  EXPECT_EQ(AllocatedDevices(Claim({incomplete}), kRef, "gpustack.ai").code(),
            Code::kInvalidArgument);
}

PreparedClaim Prepared(const std::string& uid, const std::string& card) {
  ledger::Allocation allocation{.owner = ClaimOwner(uid), .charges = {}};
  ledger::Charge charge;
  charge.accelerator_id = card;
  charge.mode = ledger::Mode::kExclusive;
  charge.credits = ledger::kCardCredits;
  allocation.charges.push_back(charge);
  AllocatedDevice device{"gpu", "n/nvidia", "card-0"};
  device.share_id = "s-" + uid;
  device.consumed = {{"memory", "1Gi"}};
  return {.ref = {"team-a", "claim-" + uid, uid},
          .devices = {device},
          .allocation = allocation,
          .cdi_devices = {"gpustack.ai/claim=" + uid}};
}

TEST(Record, ReadsBackWhatWasWritten) {
  std::map<std::string, PreparedClaim> claims = {{"u1", Prepared("u1", "GPU-0")},
                                                 {"u2", Prepared("u2", "GPU-1")}};
  std::vector<std::string> problems;
  auto read = ReadRecord(WriteRecord(claims), &problems);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(read->size(), 2u);
  const PreparedClaim& u2 = read->at("u2");
  EXPECT_EQ(u2.ref.Key(), "team-a/claim-u2");
  EXPECT_EQ(u2.ref.uid, "u2");
  EXPECT_EQ(u2.devices, claims["u2"].devices);
  EXPECT_EQ(u2.allocation, claims["u2"].allocation);
  EXPECT_EQ(u2.cdi_devices, claims["u2"].cdi_devices);
  EXPECT_TRUE(IsClaimOwner(u2.allocation.owner));
  EXPECT_FALSE(IsClaimOwner({"0b7c-pod-uid", "main"}));
}

TEST(Record, RefusesADamagedEntryAndKeepsTheOthers) {
  std::map<std::string, PreparedClaim> claims = {{"u1", Prepared("u1", "GPU-0")},
                                                 {"u2", Prepared("u2", "GPU-1")},
                                                 {"u3", Prepared("u3", "GPU-2")}};
  claims["u2"].allocation.owner = {"some-pod", "main"};  // not this claim's
  Json text = Json::parse(WriteRecord(claims));
  text["claims"]["u3"]["allocation"]["accelerators"][0]["allocated"] = 5;  // not a card
  std::vector<std::string> problems;
  auto read = ReadRecord(text.dump(), &problems);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->size(), 1u);
  EXPECT_TRUE(read->contains("u1"));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("claim u2"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("claim u3"), std::string::npos) << problems[1];
}

TEST(Record, RefusesAFileThatIsNoRecord) {
  for (const char* text :
       {"", "{", "[]", R"({"version": 2, "claims": {}})", R"({"version": 1})",
        R"({"version": "1", "claims": {}})", R"({"version": 1, "claims": []})"}) {
    EXPECT_EQ(ReadRecord(text, nullptr).code(), Code::kDataLoss) << text;
  }
}

TEST(Record, AnEntryOfTheWrongShapesIsRefusedNotThrown) {
  Json text = Json::parse(WriteRecord({{"u1", Prepared("u1", "GPU-0")}}));
  text["claims"]["u2"] = text["claims"]["u1"];
  text["claims"]["u2"]["allocation"]["podUID"] = "claim:u2";
  text["claims"]["u2"]["devices"] = Json::array({5, "x"});  // not device objects
  text["claims"]["u2"]["cdiDevices"] = "not a list";
  text["claims"]["u3"] = Json::array();
  std::vector<std::string> problems;
  auto read = ReadRecord(text.dump(), &problems);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->size(), 1u);
  EXPECT_EQ(problems.size(), 2u);
}

}  // namespace
}  // namespace gpustack::dra
