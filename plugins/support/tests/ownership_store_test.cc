#include "gpustack_support/ownership_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace gpustack::support {
namespace {

class OwnershipStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("owners-" + std::to_string(::getpid()));
};

TEST_F(OwnershipStoreTest, MissingFileIsEmptyAndRoundTrips) {
  OwnershipStore store(dir_ / "nested" / "owners");
  EXPECT_TRUE(store.Load().empty());
  const std::vector<OwnershipRecord> records = {
      {"GPU-1", 3, "MIG-aaaa", "3g.40gb", 4, 4, "pod:1234/main"},
      {"GPU-2", 1, "MIG-bbbb", "1g.10gb", 0, 1, "x"},
  };
  store.Update([&](std::vector<OwnershipRecord>& r) { r = records; });
  EXPECT_EQ(store.Load(), records);
  store.Update([&](std::vector<OwnershipRecord>& r) {
    EXPECT_EQ(r, records);  // the change sees what is on disk
    r.erase(r.begin());
  });
  EXPECT_EQ(store.Load(), std::vector<OwnershipRecord>{records[1]});
  store.Update([](std::vector<OwnershipRecord>& r) { r.clear(); });
  EXPECT_TRUE(store.Load().empty());
  for (const auto& entry : std::filesystem::directory_iterator(store.file().parent_path())) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST_F(OwnershipStoreTest, CorruptFileIsAnErrorNotAnEmptyList) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "bad") << "something else\n";
  EXPECT_THROW(OwnershipStore(dir_ / "bad").Load(), std::runtime_error);
  std::ofstream(dir_ / "torn") << "gpustack-partition-owners v1\nGPU-1 3 MIG-a 3g.40gb\n";
  try {
    OwnershipStore(dir_ / "torn").Load();
    FAIL() << "a torn line must not load";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST_F(OwnershipStoreTest, UnwritableDirectoryIsAClearError) {
  if (::geteuid() == 0) {
    // root writes anywhere; use a path under a regular file instead.
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "file") << "x";
    EXPECT_THROW(OwnershipStore(dir_ / "file" / "owners").Update([](auto&) {}), std::runtime_error);
    return;
  }
  EXPECT_THROW(OwnershipStore("/proc/owners").Update([](auto&) {}), std::runtime_error);
}

TEST_F(OwnershipStoreTest, AFailedChangeLeavesTheFileAsItWas) {
  OwnershipStore store(dir_ / "owners");
  store.Update([](auto& r) { r.push_back({"GPU-1", 1, "MIG-a", "7g.80gb", 0, 8, "p"}); });
  EXPECT_THROW(store.Update([](auto& r) {
    r.clear();
    throw std::runtime_error("changed my mind");
  }),
               std::runtime_error);
  EXPECT_EQ(store.Load().size(), 1u);
}

TEST_F(OwnershipStoreTest, AMalformedRecordIsNeverWritten) {
  OwnershipStore store(dir_ / "owners");
  store.Update([](auto& r) { r.push_back({"GPU-1", 1, "MIG-a", "7g.80gb", 0, 8, "p"}); });
  EXPECT_THROW(store.Update([](auto& r) { r.push_back(OwnershipRecord{}); }), std::runtime_error);
  EXPECT_THROW(store.Update([](auto& r) {
    r.push_back({"GPU 2", 1, "MIG-b", "x", 0, 1, "p"});
  }),
               std::runtime_error);
  EXPECT_EQ(store.Load().size(), 1u) << "the file still loads";
}

TEST(OwnerTag, OnlySingleTokens) {
  EXPECT_TRUE(ValidOwnerTag("pod:0b5c-11/main"));
  EXPECT_FALSE(ValidOwnerTag(""));
  EXPECT_FALSE(ValidOwnerTag("two words"));
  EXPECT_FALSE(ValidOwnerTag("new\nline"));
  EXPECT_FALSE(ValidOwnerTag(std::string(254, 'a')));
}

}  // namespace
}  // namespace gpustack::support
