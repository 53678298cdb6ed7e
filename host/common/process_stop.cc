#include "host/common/process_stop.h"

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace gpustack {
namespace {

std::stop_source& Source() {
  static std::stop_source source;
  return source;
}

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void ReceiveStopSignals(void (*on_signal)(int signal)) {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, on_signal] {
    NameThisThread("gs-signals");
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      on_signal(signal);
      RequestProcessStop();
    }
  }).detach();  // blocked in sigwait to the process's end; it owns nothing
}

void UnblockedSignalMask(sigset_t* mask) {
  pthread_sigmask(SIG_SETMASK, nullptr, mask);
  sigdelset(mask, SIGINT);
  sigdelset(mask, SIGTERM);
}

void RequestProcessStop() { Source().request_stop(); }
bool ProcessStopRequested() { return Source().stop_requested(); }
std::stop_token ProcessStopToken() { return Source().get_token(); }

bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) {
  std::mutex mutex;
  std::condition_variable_any never;
  std::unique_lock lock(mutex);
  never.wait_until(lock, stop, until, [] { return false; });  // returns the predicate: false
  return !stop.stop_requested();
}

bool SleepUnlessStopped(std::chrono::milliseconds duration) {
  return SleepUntil(std::chrono::steady_clock::now() + duration, ProcessStopToken());
}

namespace {
// Set while the binary's static objects are initialised, before main.
const std::chrono::steady_clock::time_point kProcessStart = std::chrono::steady_clock::now();
}  // namespace

std::chrono::milliseconds SinceProcessStart() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               kProcessStart);
}

void NameThisThread(std::string_view name) {
  const std::string truncated(name.substr(0, 15));
  pthread_setname_np(pthread_self(), truncated.c_str());
}

}  // namespace gpustack
