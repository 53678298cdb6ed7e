// The process's stop, asked once and seen by every wait at once. SIGINT and SIGTERM are taken by
// one thread that waits for them (sigwait), not by a handler: a handler may not notify a condition
// variable, so every wait would have to wake up now and then to look at a flag, and an idle
// daemon would never sleep (docs/footprint.md). Waits take ProcessStopToken() instead.
#ifndef GPUSTACK_HOST_COMMON_PROCESS_STOP_H_
#define GPUSTACK_HOST_COMMON_PROCESS_STOP_H_

#include <signal.h>

#include <chrono>
#include <stop_token>
#include <string_view>

namespace gpustack {

// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread started after it, and
// starts the thread that receives them. Each one received calls `on_signal` with its number (on
// that thread, so it may do anything), then asks the process to stop. Call first in main.
void ReceiveStopSignals(void (*on_signal)(int signal));

// The signal mask a child process should start with: ReceiveStopSignals' blocking is inherited
// across exec, so whatever the daemon starts must unblock them (posix_spawnattr_setsigmask).
void UnblockedSignalMask(sigset_t* mask);

void RequestProcessStop();
bool ProcessStopRequested();
std::stop_token ProcessStopToken();

// Sleeps until `until`, or less when `stop` is asked; false when it was.
bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop);
// Sleeps for `duration`, or less when the process stops; false when it did.
bool SleepUnlessStopped(std::chrono::milliseconds duration);

// Time since the process started: since its static initialisers ran, right after exec and the
// dynamic loader. Start-up figures count from here, not from a component's own start.
std::chrono::milliseconds SinceProcessStart();

// Names the calling thread in /proc (and so in top, perf and gdb), truncated to 15 bytes.
void NameThisThread(std::string_view name);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_PROCESS_STOP_H_
