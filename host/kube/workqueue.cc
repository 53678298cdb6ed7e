#include "host/kube/workqueue.h"

#include <algorithm>
#include <cmath>

namespace gpustack::kube {

WorkQueue::WorkQueue(WorkQueueOptions options)
    : options_(options), bucket_(options.qps, options.burst) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.contains(key)) {
    return;
  }
  dirty_.insert(key);
  if (processing_.contains(key)) {
    return;  // re-queued by Done
  }
  queue_.push_back(key);
  changed_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mutex_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) {
    return;
  }
  if (delay <= Clock::duration::zero()) {
    AddLocked(key);
    return;
  }
  Clock::time_point due = Clock::now() + delay;
  // One pending delay per key: keep the earlier.
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->second == key) {
      if (it->first <= due) {
        return;
      }
      waiting_.erase(it);
      break;
    }
  }
  waiting_.emplace(due, key);
  changed_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  Clock::duration delay;
  {
    std::lock_guard lock(mutex_);
    int failures = failures_[key]++;
    double backoff_ms = options_.base_delay.count() * std::pow(2.0, std::min(failures, 40));
    delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(
        std::min<double>(backoff_ms, options_.max_delay.count())));
  }
  delay = std::max(delay, bucket_.Reserve());
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::Requeues(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteDueLocked(Clock::time_point now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    std::string key = waiting_.begin()->second;
    waiting_.erase(waiting_.begin());
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    PromoteDueLocked(Clock::now());
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      dirty_.erase(key);
      processing_.insert(key);
      return key;
    }
    if (shutting_down_) {
      return std::nullopt;
    }
    if (waiting_.empty()) {
      changed_.wait(lock);
    } else {
      // A copy: wait_until reads its deadline again after waking, and meanwhile another
      // consumer may have promoted (erased) the entry it came from.
      const Clock::time_point due = waiting_.begin()->first;
      changed_.wait_until(lock, due);
    }
  }
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    queue_.push_back(key);
    changed_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mutex_);
  shutting_down_ = true;
  waiting_.clear();
  changed_.notify_all();
}

size_t WorkQueue::Length() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

}  // namespace gpustack::kube
