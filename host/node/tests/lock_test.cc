// One daemon per node: the state-directory lock names its holder, and the lock on the kubelet's
// directory holds even when a file in it is removed.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "host/node/daemon.h"

namespace gpustack::node {
namespace {

namespace fs = std::filesystem;

class LockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpustack-lock-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LockTest, ASecondDaemonIsRefusedNamingTheFirst) {
  auto first = LockNode(dir_ / "serve.lock");
  ASSERT_TRUE(first) << first.error();
  auto second = LockNode(dir_ / "serve.lock");
  ASSERT_FALSE(second);
  EXPECT_EQ(second.code(), Code::kAlreadyExists);
  EXPECT_NE(second.error().find("pid " + std::to_string(getpid())), std::string::npos)
      << second.error();
  close(*first);
  auto third = LockNode(dir_ / "serve.lock");  // released with its holder
  ASSERT_TRUE(third) << third.error();
  close(*third);
}

TEST_F(LockTest, TheDirectoryLockSurvivesWhatTheKubeletDeletes) {
  auto first = LockDirectory(dir_);
  ASSERT_TRUE(first) << first.error();
  fs::remove_all(dir_ / "anything");
  auto second = LockDirectory(dir_);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.code(), Code::kAlreadyExists);
  close(*first);
  EXPECT_FALSE(LockDirectory(dir_ / "missing"));
}

}  // namespace
}  // namespace gpustack::node
