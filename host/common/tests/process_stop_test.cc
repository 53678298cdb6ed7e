// The process stop wakes what waits for it; gtest_discover_tests runs each test in a process of
// its own, so asking for the stop here ends nothing else.
#include "host/common/process_stop.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

namespace gpustack {
namespace {

TEST(ProcessStop, ASleepOfAnHourEndsWhenTheStopIsAsked) {
  bool slept_through = true;
  std::thread sleeper([&] { slept_through = SleepUnlessStopped(std::chrono::hours(1)); });
  RequestProcessStop();  // before or during the sleep: either way it must end now
  sleeper.join();        // a sleep that did not wake would hold the test to its timeout
  EXPECT_FALSE(slept_through);
  EXPECT_TRUE(ProcessStopRequested());
  EXPECT_TRUE(ProcessStopToken().stop_requested());
}

TEST(ProcessStop, ASleepWithoutAStopRunsItsCourse) {
  EXPECT_TRUE(SleepUnlessStopped(std::chrono::milliseconds(1)));
  EXPECT_FALSE(ProcessStopRequested());
}

TEST(ProcessStop, ASleepOnItsOwnTokenEndsWithThatStopAlone) {
  std::stop_source own;
  std::atomic<bool> slept_through{true};
  std::thread sleeper([&] {
    slept_through =
        SleepUntil(std::chrono::steady_clock::now() + std::chrono::hours(1), own.get_token());
  });
  own.request_stop();  // a sleep that did not wake would hold the test to its timeout
  sleeper.join();
  EXPECT_FALSE(slept_through);  // it says it was stopped (the leader's renewal loop relies on it)
  EXPECT_FALSE(ProcessStopRequested());
  EXPECT_FALSE(SleepUntil(std::chrono::steady_clock::now(), own.get_token()));
  std::stop_source other;
  EXPECT_TRUE(SleepUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(1),
                         other.get_token()));
}

TEST(ProcessStop, ThreadsAreNamedForProfilesAndTruncatedToTheKernelsLimit) {
  std::string name;
  std::thread([&] {
    NameThisThread("health-a-very-long-manufacturer");
    std::ifstream comm("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
    std::getline(comm, name);
  }).join();
  EXPECT_EQ(name, "health-a-very-l");
}

TEST(ProcessStop, ChildrenStartWithTheStopSignalsUnblocked) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  sigset_t child;
  UnblockedSignalMask(&child);
  EXPECT_EQ(sigismember(&child, SIGTERM), 0);
  EXPECT_EQ(sigismember(&child, SIGINT), 0);
  EXPECT_EQ(sigismember(&child, SIGUSR1), 1);  // what else was blocked stays as it was
}

}  // namespace
}  // namespace gpustack
