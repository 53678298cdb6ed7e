#include "gpustack_support/ownership_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace gpustack::support {
namespace {

class OwnershipStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() /
                               ("owners-" + std::to_string(::getpid()));
};

TEST_F(OwnershipStoreTest, MissingFileIsEmptyAndRoundTrips) {
  OwnershipStore store(dir_ / "nested" / "owners");
  EXPECT_TRUE(store.Load().empty());
  const std::vector<OwnershipRecord> records = {
      {"GPU-1", 3, "3g.40gb", 4, 4, "pod:1234/main"},
      {"GPU-2", 1, "1g.10gb", 0, 1, "x"},
  };
  store.Save(records);
  EXPECT_EQ(store.Load(), records);
  store.Save({});
  EXPECT_TRUE(store.Load().empty());
  EXPECT_FALSE(std::filesystem::exists(store.file().string() + ".tmp"));
}

TEST_F(OwnershipStoreTest, CorruptFileIsAnErrorNotAnEmptyList) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "bad") << "something else\n";
  EXPECT_THROW(OwnershipStore(dir_ / "bad").Load(), std::runtime_error);
  std::ofstream(dir_ / "torn") << "gpustack-partition-owners v1\nGPU-1 3 3g.40gb\n";
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
    EXPECT_THROW(OwnershipStore(dir_ / "file" / "owners").Save({}), std::runtime_error);
    return;
  }
  EXPECT_THROW(OwnershipStore("/proc/owners").Save({}), std::runtime_error);
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
