#include "host/runtime/quarantine.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpustack::runtime {
namespace {

namespace fs = std::filesystem;

class QuarantineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("quarantine-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(QuarantineTest, SavedEntriesComeBackAndOnlyTheOwnerCanEditThem) {
  QuarantineStore store(dir_ / "quarantine.json");
  store.Put({"acme", "/opt/acme.so", {1, 2, 3, 4}, "discover", "it crashed", "2026-12-03"});
  ASSERT_TRUE(store.Save());
  struct stat info {};
  ASSERT_EQ(::stat((dir_ / "quarantine.json").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "whoever can write it can lift a quarantine";
  QuarantineStore again(dir_ / "quarantine.json");
  ASSERT_TRUE(again.Load());
  ASSERT_NE(again.Find("acme"), nullptr);
  EXPECT_EQ(again.Find("acme")->identity, (FileIdentity{1, 2, 3, 4}));
  EXPECT_EQ(again.Find("acme")->hook, "discover");
}

TEST_F(QuarantineTest, AnEntryEditedToTheWrongTypeIsNamedAndTheOthersKept) {
  std::ofstream(dir_ / "quarantine.json")
      << R"({"plugins": [{"plugin": "acme", "library": "/a.so", "inode": "123"},
                         {"plugin": "beta", "library": "/b.so", "inode": 7}]})";
  QuarantineStore store(dir_ / "quarantine.json");
  const Status loaded = store.Load();  // must not throw
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.code(), Code::kDataLoss);
  EXPECT_NE(loaded.error().find("\"inode\":\"123\""), std::string::npos) << loaded.error();
  EXPECT_EQ(store.Find("acme"), nullptr);
  ASSERT_NE(store.Find("beta"), nullptr);
  EXPECT_EQ(store.Find("beta")->identity.inode, 7u);
}

}  // namespace
}  // namespace gpustack::runtime
