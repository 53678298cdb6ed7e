// The reconcilers' work queue (client-go's rate-limited queue): a key waiting to be processed is
// held once however often it is added; a key being processed is not handed to a second worker,
// and if added meanwhile it comes back once the first is Done. AddRateLimited delays a key by
// per-key exponential backoff, and by an overall token bucket, whichever is longer.
#ifndef GPUSTACK_HOST_KUBE_WORKQUEUE_H_
#define GPUSTACK_HOST_KUBE_WORKQUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "host/kube/rate_limiter.h"

namespace gpustack::kube {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{1000 * 1000};
  double qps = 10;
  int burst = 100;
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WorkQueue(WorkQueueOptions options = {});

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::duration delay);
  void AddRateLimited(const std::string& key);
  // The key succeeded: its backoff starts over.
  void Forget(const std::string& key);
  int Requeues(const std::string& key) const;

  // Blocks until a key is ready, or returns nothing once the queue is shut down.
  std::optional<std::string> Get();
  // The worker is finished with `key`.
  void Done(const std::string& key);
  void ShutDown();

  size_t Length() const;  // keys ready now

 private:
  void PromoteDueLocked(Clock::time_point now);
  void AddLocked(const std::string& key);

  WorkQueueOptions options_;
  TokenBucket bucket_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // waiting in queue_, or to be re-queued after Done
  std::set<std::string> processing_;  // handed to a worker
  std::multimap<Clock::time_point, std::string> waiting_;
  std::unordered_map<std::string, int> failures_;
  bool shutting_down_ = false;
};

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_WORKQUEUE_H_
