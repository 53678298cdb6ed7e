// The watchdog: a hook that does not return is abandoned at its deadline, the plugin is marked
// hung and never called again, and nothing waits for its stuck thread.
#include "host/runtime/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "host/runtime/testing/fake_backend.h"

namespace gpustack::runtime {
namespace {

using std::chrono::milliseconds;
using testing::FakeBackend;
using testing::MakeScript;

TEST(Watchdog, CallsPassThroughWhileThePluginAnswers) {
  auto script = MakeScript("acme", 0x1234, 2);
  GuardedBackend guarded(std::make_unique<FakeBackend>(script), {milliseconds(2000)});
  ASSERT_TRUE(guarded.Init({{"k", "v"}}, {}));
  EXPECT_EQ(script->settings.at("k"), "v");
  auto groups = guarded.Discover();
  ASSERT_TRUE(groups) << groups.error();
  EXPECT_EQ(CardCount(*groups), 2u);
  auto edits = guarded.Grant({"pod", "main", GPUSTACK_GRANT_EXCLUSIVE, {"acme-card-1"}});
  ASSERT_TRUE(edits);
  EXPECT_EQ(edits->at(0).value, "acme-card-1");
  EXPECT_FALSE(guarded.hung());
  guarded.Shutdown();
  EXPECT_EQ(script->shutdowns, 1);
}

TEST(Watchdog, AHungHookIsAbandonedAtItsDeadlineAndNeverCalledAgain) {
  auto script = MakeScript("acme", 0x1234, 1);
  script->delays[Hook::kDiscover] = std::chrono::minutes(10);
  auto guarded = std::make_unique<GuardedBackend>(std::make_unique<FakeBackend>(script),
                                                  WatchdogOptions{milliseconds(200)});
  ASSERT_TRUE(guarded->Init({}, {}));
  const int calls_before = script->calls;
  auto groups = guarded->Discover();
  ASSERT_FALSE(groups);
  EXPECT_EQ(groups.code(), Code::kDeadlineExceeded);
  EXPECT_EQ(groups.error(),
            "acme: discover did not return within 0.2 s; the plugin is marked hung and will not "
            "be called again");
  EXPECT_TRUE(guarded->hung());
  EXPECT_EQ(guarded->hung_reason(), "discover did not return within 0.2 s");

  auto again = guarded->SampleMetrics({});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.code(), Code::kUnavailable);
  EXPECT_NE(again.error().find("the plugin is hung"), std::string::npos) << again.error();
  EXPECT_EQ(script->calls, calls_before + 1) << "a hung plugin must not be called again";

  // Destroying it must not wait for the stuck call (ten minutes): ctest's timeout would say so.
  guarded.reset();
  script->release = true;  // let the abandoned thread end before the test binary does
}

TEST(Watchdog, AHealthPollHasItsOwnLaneAndTheTimeoutItAskedFor) {
  auto script = MakeScript("acme", 0x1234, 1);
  script->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  script->delays[Hook::kPollHealthEvents] = milliseconds(300);  // within timeout + deadline
  GuardedBackend guarded(std::make_unique<FakeBackend>(script), {milliseconds(200)});
  ASSERT_TRUE(guarded.Init({}, {}));
  auto events = guarded.PollHealthEvents(500);
  ASSERT_TRUE(events) << events.error();
  EXPECT_FALSE(guarded.hung());
}

TEST(Watchdog, HealthPollsRunBackToBackAndHandOnlyWhatTheyFound) {
  auto script = MakeScript("acme", 0x1234, 1);
  script->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  script->health_events.push_back({{"acme-card-0", GPUSTACK_HEALTH_UNHEALTHY, "xid 79"}});
  GuardedBackend guarded(std::make_unique<FakeBackend>(script), {milliseconds(2000)});
  ASSERT_TRUE(guarded.Init({}, {}));
  std::atomic<int> handed{0};
  std::vector<sdk::HealthEvent> seen;
  const int calls_before = script->calls;
  guarded.StartHealthPolls(milliseconds(20), [&](Result<std::vector<sdk::HealthEvent>> events) {
    ASSERT_TRUE(events) << events.error();
    seen = *events;
    ++handed;
  });
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_GE(script->calls - calls_before, 3) << "polled again after each poll";
  auto direct = guarded.PollHealthEvents(10);
  ASSERT_FALSE(direct);
  EXPECT_EQ(direct.code(), Code::kFailedPrecondition) << "the lane is the loop's";
  guarded.StopHealthPolls();
  EXPECT_EQ(handed, 1) << "the empty polls are not handed on";
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].reason, "xid 79");
  const int calls_after_stop = script->calls;
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(script->calls, calls_after_stop) << "no poll after StopHealthPolls";
  EXPECT_FALSE(guarded.hung());
  EXPECT_FALSE(guarded.CheckHealthPolls(std::chrono::steady_clock::now())) << "none runs";
}

TEST(Watchdog, AHealthPollThatOverrunsIsFoundHungByItsCheckNotByAWaitingThread) {
  auto script = MakeScript("acme", 0x1234, 1);
  script->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  script->delays[Hook::kPollHealthEvents] = std::chrono::minutes(10);
  auto guarded = std::make_unique<GuardedBackend>(std::make_unique<FakeBackend>(script),
                                                  WatchdogOptions{milliseconds(100)});
  ASSERT_TRUE(guarded->Init({}, {}));
  std::atomic<int> handed{0};
  guarded->StartHealthPolls(milliseconds(50), [&](auto) { ++handed; });
  std::this_thread::sleep_for(milliseconds(20));
  const auto started = std::chrono::steady_clock::now();
  auto due = guarded->CheckHealthPolls(started);
  ASSERT_TRUE(due);
  EXPECT_LE(*due, started + milliseconds(150)) << "the poll's timeout plus the deadline";
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(guarded->hung()) << "nothing waits for the poll: only a check finds it";
  EXPECT_FALSE(guarded->CheckHealthPolls(std::chrono::steady_clock::now()));
  EXPECT_TRUE(guarded->hung());
  EXPECT_EQ(guarded->hung_reason(), "poll health events did not return within 0.15 s");
  auto again = guarded->Discover();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.code(), Code::kUnavailable);
  guarded->StopHealthPolls();  // must not wait for the stuck poll
  guarded.reset();             // nor must this
  EXPECT_EQ(handed, 0);
  script->release = true;
}

TEST(Watchdog, StoppingHealthPollsWaitsForThePollInsideThePlugin) {
  auto script = MakeScript("acme", 0x1234, 1);
  script->identity.capabilities |= GPUSTACK_CAP_HEALTH_EVENTS;
  script->delays[Hook::kPollHealthEvents] = milliseconds(200);
  GuardedBackend guarded(std::make_unique<FakeBackend>(script), {milliseconds(2000)});
  ASSERT_TRUE(guarded.Init({}, {}));
  guarded.StartHealthPolls(milliseconds(10), [](auto) {});
  std::this_thread::sleep_for(milliseconds(50));
  guarded.StopHealthPolls();
  EXPECT_FALSE(guarded.polling()) << "the poll returned before StopHealthPolls did";
  EXPECT_FALSE(guarded.hung());
  auto direct = guarded.PollHealthEvents(10);
  EXPECT_TRUE(direct) << "the lane is free again: " << direct.error();
}

}  // namespace
}  // namespace gpustack::runtime
