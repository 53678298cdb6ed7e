// A token bucket: `qps` tokens a second, at most `burst` saved up. Client-side request limits
// (client-go's QPS/Burst) and the work queue's overall rate use it. The clock is injected so
// tests need no sleeping.
#ifndef GPUSTACK_HOST_KUBE_RATE_LIMITER_H_
#define GPUSTACK_HOST_KUBE_RATE_LIMITER_H_

#include <algorithm>
#include <chrono>
#include <mutex>

namespace gpustack::kube {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  TokenBucket(double qps, int burst, Clock::time_point now = Clock::now())
      : qps_(qps), burst_(std::max(burst, 1)), tokens_(burst_), updated_(now) {}

  // Takes a token and says how long to wait before using it (zero when one was saved up).
  // Reservations queue: each caller's wait accounts for those before it. qps <= 0: no limit.
  Clock::duration Reserve(Clock::time_point now = Clock::now()) {
    if (qps_ <= 0) {
      return Clock::duration::zero();
    }
    std::lock_guard lock(mutex_);
    double elapsed = std::chrono::duration<double>(now - updated_).count();
    if (elapsed > 0) {
      tokens_ = std::min<double>(burst_, tokens_ + elapsed * qps_);
      updated_ = now;
    }
    tokens_ -= 1;
    if (tokens_ >= 0) {
      return Clock::duration::zero();
    }
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(-tokens_ / qps_));
  }

 private:
  std::mutex mutex_;
  double qps_;
  int burst_;
  double tokens_;
  Clock::time_point updated_;
};

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_RATE_LIMITER_H_
