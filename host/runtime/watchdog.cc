#include "host/runtime/watchdog.h"

#include <signal.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::runtime {
namespace {

std::atomic<int> g_abandoned{0};

void NoteAbandoned() { g_abandoned.fetch_add(1, std::memory_order_acq_rel); }

using Clock = std::chrono::steady_clock;

// An alternate signal stack for a lane's thread, so that a stack overflow in plugin code still
// reaches the crash reporter.
class SignalStack {
 public:
  SignalStack() : memory_(64 * 1024) {
    stack_t stack{};
    stack.ss_sp = memory_.data();
    stack.ss_size = memory_.size();
    installed_ = ::sigaltstack(&stack, nullptr) == 0;
  }
  ~SignalStack() {
    if (!installed_) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
  }
  SignalStack(const SignalStack&) = delete;
  SignalStack& operator=(const SignalStack&) = delete;

 private:
  std::vector<char> memory_;
  bool installed_ = false;
};

std::string Seconds(std::chrono::milliseconds d) {
  const double s = static_cast<double>(d.count()) / 1000.0;
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

}  // namespace

bool StopRequested() { return ProcessStopRequested(); }
int AbandonedThreads() { return g_abandoned.load(std::memory_order_acquire); }

struct GuardedBackend::Lane {
  // Shared with the lane's thread, which outlives the backend when a call hangs.
  struct State {
    std::mutex mutex;
    std::condition_variable wake;      // a job arrived, or stop
    std::condition_variable_any done;  // a job finished (waited for with the process's stop)
    // Jobs in order: one runs while the next waits when a caller gave up on a call (stop).
    std::deque<std::function<void()>> jobs;
    uint64_t submitted = 0;
    uint64_t finished = 0;
    bool stop = false;
  };

  Lane(CrashJournal::Slot* journal_slot, std::string thread_name)
      : slot(journal_slot), name(std::move(thread_name)) {}

  void Start() {
    if (thread.joinable()) return;
    thread = std::thread([s = state, name = name] {
      NameThisThread(name);
      SignalStack alternate;
      std::unique_lock lock(s->mutex);
      for (;;) {
        s->wake.wait(lock, [&] { return s->stop || !s->jobs.empty(); });
        if (s->jobs.empty()) return;  // stop
        std::function<void()> job = std::move(s->jobs.front());
        s->jobs.pop_front();
        lock.unlock();
        job();
        lock.lock();
        ++s->finished;
        s->done.notify_all();
      }
    });
  }
  // Queues `job`; its ticket, which `finished` reaches when it has run.
  uint64_t Submit(std::function<void()> job) {
    uint64_t ticket = 0;
    {
      std::lock_guard lock(state->mutex);
      state->jobs.push_back(std::move(job));
      ticket = ++state->submitted;
    }
    state->wake.notify_one();
    return ticket;
  }
  // A call is still running (or waiting) that its caller gave up on.
  bool Busy() {
    std::lock_guard lock(state->mutex);
    return state->finished < state->submitted;
  }

  std::shared_ptr<State> state = std::make_shared<State>();
  std::thread thread;  // started on first use
  std::mutex serial;   // one caller at a time on this lane
  CrashJournal::Slot* slot;
  std::string name;  // of its thread: <manufacturer>-call or -poll
};

struct GuardedBackend::HealthPolls {
  static constexpr int64_t kNotInside = std::numeric_limits<int64_t>::min();

  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds limit{0};  // a poll inside the plugin longer than this is hung
  std::mutex mutex;
  std::condition_variable_any wake;  // stop
  std::atomic<bool> stop{false};     // set under `mutex`, read without it too
  std::mutex handler_mutex;          // held while the handler runs
  HealthHandler handler;
  std::atomic<int64_t> inside_since{kNotInside};  // steady clock ticks, while inside the plugin
};

namespace {

// A backend whose thread may still be inside the plugin is kept until the process ends, never
// destroyed under it; held here (not merely leaked) so that it stays reachable.
void KeepForever(std::shared_ptr<PluginBackend> backend) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<PluginBackend>>();  // NOLINT: never freed
  std::lock_guard lock(mutex);
  kept->push_back(std::move(backend));
}

// On a stop request, shutdown still runs, but is waited for this long at most.
constexpr std::chrono::milliseconds kStopGrace{2'000};

}  // namespace

GuardedBackend::GuardedBackend(std::unique_ptr<PluginBackend> inner, WatchdogOptions options)
    : inner_(std::move(inner)), identity_(inner_->identity()), options_(std::move(options)) {
  CrashJournal* journal = options_.journal.get();
  auto claim = [&] {
    return journal == nullptr ? nullptr
                              : journal->Claim(identity_.manufacturer, options_.library,
                                               options_.library_identity);
  };
  calls_ = std::make_unique<Lane>(claim(), identity_.manufacturer + "-call");
  polls_ = std::make_unique<Lane>(claim(), identity_.manufacturer + "-poll");
  if (journal != nullptr) journal->NoteCode(calls_->slot);  // its own threads' faults, too
}

GuardedBackend::~GuardedBackend() {
  StopHealthPolls();
  if (hung() || calls_->Busy() || polls_->Busy()) {
    // A thread may still be inside the plugin: never wait for it, and never destroy what it may
    // still touch. The plugin, its lanes and their journal slots stay to the process's end.
    KeepForever(std::move(inner_));
    for (Lane* lane : {calls_.get(), polls_.get()}) {
      {
        std::lock_guard lock(lane->state->mutex);
        lane->state->stop = true;  // the thread ends once its call returns, if it ever does
      }
      lane->state->wake.notify_all();
      if (lane->thread.joinable()) {
        lane->thread.detach();
        NoteAbandoned();
      }
    }
    return;
  }
  for (Lane* lane : {calls_.get(), polls_.get()}) {
    {
      std::lock_guard lock(lane->state->mutex);
      lane->state->stop = true;
    }
    lane->state->wake.notify_all();
    if (lane->thread.joinable()) lane->thread.join();
    if (options_.journal != nullptr) options_.journal->Release(lane->slot);
  }
}

bool GuardedBackend::polling() const { return polls_->Busy(); }

std::string GuardedBackend::hung_reason() const {
  std::lock_guard lock(reason_mutex_);
  return hung_reason_;
}

Error GuardedBackend::HungError(Hook hook) const {
  return Error{identity_.manufacturer + ": " + std::string(HookName(hook)) +
                   " not called: the plugin is hung (" + hung_reason() +
                   "); restart the device manager to try it again",
               Code::kUnavailable};
}

template <class R, class Fn>
R GuardedBackend::Call(Lane& lane, Hook hook, std::chrono::milliseconds deadline, Fn&& fn) {
  std::unique_lock serial(lane.serial);
  if (hung()) return HungError(hook);
  // A stop request cuts short the calls in flight, but shutdown still runs, briefly.
  const bool stoppable = hook != Hook::kShutdown;
  const std::string name(HookName(hook));
  if (stoppable && StopRequested()) {
    return Error{identity_.manufacturer + ": " + name + " not called: stopping", Code::kCancelled};
  }
  if (!stoppable && StopRequested()) deadline = std::min(deadline, kStopGrace);
  lane.Start();
  // Everything the job touches is owned by the job: an abandoned call may finish long after the
  // caller (and this backend) are gone.
  auto result = std::make_shared<std::optional<R>>();
  const uint64_t ticket =
      lane.Submit([result, inner = inner_, journal = options_.journal, slot = lane.slot, hook,
                   manufacturer = identity_.manufacturer, fn = std::forward<Fn>(fn)]() mutable {
        if (journal != nullptr) journal->Enter(slot, hook);
        try {
          result->emplace(fn(*inner));
        } catch (const std::exception& e) {  // the backend's own code, never the plugin's
          result->emplace(Error{manufacturer + ": " + std::string(HookName(hook)) + ": " + e.what(),
                                Code::kInternal});
        }
        if (journal != nullptr) journal->Leave(slot);
      });

  const auto until = Clock::now() + deadline;
  std::unique_lock lock(lane.state->mutex);
  auto finished = [&] { return lane.state->finished >= ticket; };
  // The process's stop wakes the wait at once: nothing here wakes up only to look.
  const bool done = stoppable
                        ? lane.state->done.wait_until(lock, ProcessStopToken(), until, finished)
                        : lane.state->done.wait_until(lock, until, finished);
  if (!done && stoppable && StopRequested()) {
    // Not hung: the process is ending. The call runs on; shutdown waits for it briefly.
    return Error{identity_.manufacturer + ": " + name + " interrupted: stopping", Code::kCancelled};
  }
  if (done) return std::move(**result);
  lock.unlock();
  const std::string abandoned = name + " did not return within " + Seconds(deadline);
  MarkHung(lane, abandoned);
  return Error{identity_.manufacturer + ": " + abandoned +
                   "; the plugin is marked hung and will not be called again",
               Code::kDeadlineExceeded};
}

void GuardedBackend::MarkHung(Lane& lane, const std::string& reason) {
  {
    std::lock_guard lock(reason_mutex_);
    if (hung()) return;  // the first reason stands
    hung_reason_ = reason;
    hung_.store(true, std::memory_order_release);
  }
  if (options_.journal != nullptr) options_.journal->MarkHung(lane.slot);
  if (std::shared_ptr<HealthPolls> polls = Health()) {
    {  // no further poll, and no handler for one that returns late
      std::lock_guard lock(polls->mutex);
      polls->stop = true;
    }
    polls->wake.notify_all();
  }
  Logger("watchdog")
      ->error("plugin {} is hung: {}; it will not be called again", identity_.manufacturer, reason);
}

std::shared_ptr<GuardedBackend::HealthPolls> GuardedBackend::Health() const {
  std::lock_guard lock(health_mutex_);
  return health_;
}

void GuardedBackend::StartHealthPolls(std::chrono::milliseconds timeout, HealthHandler on_result) {
  if (Health() != nullptr || hung()) return;
  auto polls = std::make_shared<HealthPolls>();
  polls->timeout = timeout;
  polls->limit = timeout + options_.deadline;
  polls->handler = std::move(on_result);
  {
    std::lock_guard lock(health_mutex_);
    health_ = polls;
  }
  polls_->Start();
  // Owns what it touches: a poll may return long after this backend is gone.
  health_ticket_ = polls_->Submit([polls, inner = inner_, journal = options_.journal,
                                   slot = polls_->slot, manufacturer = identity_.manufacturer] {
    const auto timeout_ms = static_cast<uint32_t>(polls->timeout.count());
    while (!polls->stop && !StopRequested()) {
      const auto asked = Clock::now();
      polls->inside_since.store(asked.time_since_epoch().count(), std::memory_order_release);
      if (journal != nullptr) journal->Enter(slot, Hook::kPollHealthEvents);
      Result<std::vector<sdk::HealthEvent>> events = std::vector<sdk::HealthEvent>{};
      try {
        events = inner->PollHealthEvents(timeout_ms);
      } catch (const std::exception& e) {  // the backend's own code, never the plugin's
        events = Error{manufacturer + ": poll health events: " + e.what(), Code::kInternal};
      }
      if (journal != nullptr) journal->Leave(slot);
      polls->inside_since.store(HealthPolls::kNotInside, std::memory_order_release);
      const bool failed = !events;
      const bool found = !failed && !events->empty();
      if (failed || found) {
        std::lock_guard handling(polls->handler_mutex);
        if (polls->handler && !polls->stop) polls->handler(std::move(events));
      }
      if (found) continue;  // there may be more
      // Never flat out: a plugin that answers at once, or fails, is asked again a timeout later.
      const auto until = failed ? Clock::now() + polls->timeout : asked + polls->timeout;
      std::unique_lock lock(polls->mutex);
      polls->wake.wait_until(lock, ProcessStopToken(), until, [&] { return polls->stop.load(); });
    }
  });
}

void GuardedBackend::StopHealthPolls() {
  std::shared_ptr<HealthPolls> polls = Health();
  if (polls == nullptr) return;
  {
    std::lock_guard lock(polls->mutex);
    polls->stop = true;
  }
  polls->wake.notify_all();
  {
    std::lock_guard handling(polls->handler_mutex);  // waits for a handler that runs
    polls->handler = nullptr;
  }
  // The loop ends once the poll inside the plugin returns: waited for up to its deadline, unless
  // the plugin is hung (never waited for).
  if (!hung()) {
    std::unique_lock lock(polls_->state->mutex);
    const bool ended =
        polls_->state->done.wait_until(lock, ProcessStopToken(), Clock::now() + polls->limit,
                                       [&] { return polls_->state->finished >= health_ticket_; });
    lock.unlock();
    if (!ended && !StopRequested()) {
      MarkHung(*polls_, "poll health events did not return within " + Seconds(polls->limit));
    }
  }
  std::lock_guard lock(health_mutex_);
  health_ = nullptr;
}

std::optional<Clock::time_point> GuardedBackend::CheckHealthPolls(Clock::time_point now) {
  std::shared_ptr<HealthPolls> polls = Health();
  if (polls == nullptr || hung()) return std::nullopt;
  const int64_t since = polls->inside_since.load(std::memory_order_acquire);
  if (since == HealthPolls::kNotInside) return now + polls->limit;  // between two polls
  const Clock::time_point due = Clock::time_point(Clock::duration(since)) + polls->limit;
  if (now < due) return due;
  MarkHung(*polls_, "poll health events did not return within " + Seconds(polls->limit));
  return std::nullopt;
}

Result<std::unique_ptr<PluginBackend>> GuardedLoad(
    const std::string& plugin, const WatchdogOptions& options,
    std::function<Result<std::unique_ptr<PluginBackend>>()> load, bool* hung) {
  using Loaded = Result<std::unique_ptr<PluginBackend>>;
  struct State {  // shared with the loading thread, which may outlive this call
    std::mutex mutex;
    std::condition_variable_any done;
    std::optional<Loaded> result;
  };
  *hung = false;
  auto state = std::make_shared<State>();
  CrashJournal::Slot* slot =
      options.journal == nullptr
          ? nullptr
          : options.journal->Claim(plugin, options.library, options.library_identity);
  std::thread thread([state, load = std::move(load), journal = options.journal, slot, plugin] {
    NameThisThread("load-" + plugin);
    SignalStack alternate;
    if (journal != nullptr) journal->Enter(slot, Hook::kLoad);
    Loaded loaded = Error{"not loaded"};
    try {
      loaded = load();
    } catch (const std::exception& e) {  // the host's own code, never the plugin's
      loaded = Error{plugin + ": load: " + e.what(), Code::kInternal};
    }
    if (journal != nullptr) journal->Leave(slot);
    std::lock_guard lock(state->mutex);
    state->result.emplace(std::move(loaded));
    state->done.notify_all();
  });
  std::unique_lock lock(state->mutex);
  const auto until = Clock::now() + options.deadline;
  if (state->done.wait_until(lock, ProcessStopToken(), until,
                             [&] { return bool(state->result); })) {
    Loaded loaded = std::move(*state->result);
    lock.unlock();
    thread.join();
    if (options.journal != nullptr) options.journal->Release(slot);
    return loaded;
  }
  lock.unlock();
  thread.detach();  // it owns what it touches; the slot stays claimed
  NoteAbandoned();
  if (StopRequested()) return Error{plugin + ": load interrupted: stopping", Code::kCancelled};
  *hung = true;
  if (options.journal != nullptr) options.journal->MarkHung(slot);
  const std::string reason = "loading did not finish within " + Seconds(options.deadline);
  Logger("watchdog")->error("plugin {} is hung: {}", plugin, reason);
  return Error{plugin + ": " + reason + "; the plugin is marked hung", Code::kDeadlineExceeded};
}

Status GuardedBackend::Init(const PluginSettings& settings,
                            const std::vector<pci::PciDevice>& inventory) {
  return Call<Status>(
      *calls_, Hook::kInit, options_.deadline,
      [settings, inventory](PluginBackend& b) { return b.Init(settings, inventory); });
}

void GuardedBackend::Shutdown() {
  (void)Call<Status>(*calls_, Hook::kShutdown, options_.deadline, [](PluginBackend& b) {
    b.Shutdown();
    return Status(Ok{});
  });
}

Result<std::vector<sdk::AcceleratorGroup>> GuardedBackend::Discover() {
  return Call<Result<std::vector<sdk::AcceleratorGroup>>>(
      *calls_, Hook::kDiscover, options_.deadline, [](PluginBackend& b) { return b.Discover(); });
}

Result<std::vector<sdk::ContainerEdit>> GuardedBackend::Grant(const sdk::Grant& grant) {
  return Call<Result<std::vector<sdk::ContainerEdit>>>(
      *calls_, Hook::kGrant, options_.deadline,
      [grant](PluginBackend& b) { return b.Grant(grant); });
}

Result<std::vector<sdk::Partition>> GuardedBackend::ListPartitions(const std::string& card_id) {
  return Call<Result<std::vector<sdk::Partition>>>(
      *calls_, Hook::kListPartitions, options_.deadline,
      [card_id](PluginBackend& b) { return b.ListPartitions(card_id); });
}

Result<sdk::Partition> GuardedBackend::CreatePartition(const sdk::CreatePartitionRequest& request) {
  return Call<Result<sdk::Partition>>(
      *calls_, Hook::kCreatePartition, options_.deadline,
      [request](PluginBackend& b) { return b.CreatePartition(request); });
}

Status GuardedBackend::DestroyPartition(const sdk::DestroyPartitionRequest& request) {
  return Call<Status>(*calls_, Hook::kDestroyPartition, options_.deadline,
                      [request](PluginBackend& b) { return b.DestroyPartition(request); });
}

Result<client::MetricsSnapshot> GuardedBackend::SampleMetrics(const sdk::MetricsRequest& request) {
  return Call<Result<client::MetricsSnapshot>>(
      *calls_, Hook::kSampleMetrics, options_.deadline,
      [request](PluginBackend& b) { return b.SampleMetrics(request); });
}

Result<std::vector<sdk::HealthEvent>> GuardedBackend::PollHealthEvents(uint32_t timeout_ms) {
  if (Health() != nullptr) {  // the lane is the polls' loop's
    return Error{identity_.manufacturer + ": poll health events: polls already run",
                 Code::kFailedPrecondition};
  }
  return Call<Result<std::vector<sdk::HealthEvent>>>(
      *polls_, Hook::kPollHealthEvents, options_.deadline + std::chrono::milliseconds(timeout_ms),
      [timeout_ms](PluginBackend& b) { return b.PollHealthEvents(timeout_ms); });
}

Result<std::vector<sdk::DeviceNode>> GuardedBackend::ListDeviceNodes(
    const std::vector<std::string>& card_ids) {
  return Call<Result<std::vector<sdk::DeviceNode>>>(
      *calls_, Hook::kListDeviceNodes, options_.deadline,
      [card_ids](PluginBackend& b) { return b.ListDeviceNodes(card_ids); });
}

Result<sdk::Slice> GuardedBackend::PrepareSlice(const sdk::PrepareSliceRequest& request) {
  return Call<Result<sdk::Slice>>(*calls_, Hook::kPrepareSlice, options_.deadline,
                                  [request](PluginBackend& b) { return b.PrepareSlice(request); });
}

Status GuardedBackend::UnprepareSlice(const sdk::UnprepareSliceRequest& request) {
  return Call<Status>(*calls_, Hook::kUnprepareSlice, options_.deadline,
                      [request](PluginBackend& b) { return b.UnprepareSlice(request); });
}

}  // namespace gpustack::runtime
