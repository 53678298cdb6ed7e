#include "host/kube/workqueue.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpustack::kube {
namespace {

TEST(WorkQueue, DeduplicatesWaitingKeys) {
  WorkQueue queue;
  queue.Add("a");
  queue.Add("b");
  queue.Add("a");
  EXPECT_EQ(queue.Length(), 2u);
  EXPECT_EQ(*queue.Get(), "a");
  EXPECT_EQ(*queue.Get(), "b");
  EXPECT_EQ(queue.Length(), 0u);
}

TEST(WorkQueue, AKeyInProcessIsNotHandedOutTwice) {
  WorkQueue queue;
  queue.Add("a");
  auto key = queue.Get();
  queue.Add("a");  // changed again while a worker holds it
  EXPECT_EQ(queue.Length(), 0u);
  queue.Done(*key);
  EXPECT_EQ(queue.Length(), 1u);  // back once the worker is done
  EXPECT_EQ(*queue.Get(), "a");
  queue.Done("a");
  EXPECT_EQ(queue.Length(), 0u);
}

TEST(WorkQueue, RateLimitedBackoffGrowsAndForgetResets) {
  WorkQueueOptions options;
  options.base_delay = std::chrono::milliseconds(20);
  WorkQueue queue(options);
  queue.AddRateLimited("k");
  queue.AddRateLimited("k");
  EXPECT_EQ(queue.Requeues("k"), 2);
  EXPECT_EQ(queue.Length(), 0u);  // delayed, not ready
  auto start = WorkQueue::Clock::now();
  EXPECT_EQ(*queue.Get(), "k");  // the earlier delay (20 ms) wins
  EXPECT_GE(WorkQueue::Clock::now() - start, std::chrono::milliseconds(10));
  queue.Done("k");
  queue.Forget("k");
  EXPECT_EQ(queue.Requeues("k"), 0);
}

TEST(WorkQueue, ShutDownWakesWorkers) {
  WorkQueue queue;
  std::optional<std::string> got = std::string("unset");
  std::thread worker([&] { got = queue.Get(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  queue.ShutDown();
  worker.join();
  EXPECT_FALSE(got.has_value());
  queue.Add("late");
  EXPECT_FALSE(queue.Get().has_value());
}

TEST(WorkQueue, ConcurrentWorkersProcessEveryKeyOnce) {
  WorkQueue queue;
  std::mutex mutex;
  std::map<std::string, int> active, processed;
  bool overlapped = false;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        {
          std::lock_guard lock(mutex);
          if (active[*key]++ > 0) {
            overlapped = true;
          }
          processed[*key]++;
        }
        std::this_thread::yield();
        {
          std::lock_guard lock(mutex);
          active[*key]--;
        }
        queue.Done(*key);
      }
    });
  }
  for (int i = 0; i < 1000; ++i) {
    queue.Add("key-" + std::to_string(i % 50));
  }
  while (queue.Length() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  queue.ShutDown();
  for (auto& w : workers) {
    w.join();
  }
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(processed.size(), 50u);
  for (const auto& [key, count] : processed) {
    EXPECT_GE(count, 1) << key;
  }
}

}  // namespace
}  // namespace gpustack::kube

namespace gpustack::kube {
namespace {

// Several workers waiting for delayed keys: one promotes (and erases) the entry another one's
// wait started from. The sanitizer build caught a wait that kept reading it.
TEST(WorkQueue, WorkersWaitingOnDelayedKeysEachGetThemOnce) {
  WorkQueue queue;
  std::mutex mutex;
  std::map<std::string, int> processed;
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        {
          std::lock_guard lock(mutex);
          processed[*key]++;
        }
        queue.Done(*key);
      }
    });
  }
  for (int i = 0; i < 300; ++i)
    queue.AddAfter("delayed-" + std::to_string(i), std::chrono::microseconds(100 * (i % 20)));
  for (int tries = 0; tries < 400; ++tries) {
    {
      std::lock_guard lock(mutex);
      if (processed.size() == 300u) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  queue.ShutDown();
  for (auto& w : workers) w.join();
  EXPECT_EQ(processed.size(), 300u);
  for (const auto& [key, count] : processed) EXPECT_EQ(count, 1) << key;
}

}  // namespace
}  // namespace gpustack::kube
