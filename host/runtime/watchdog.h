// Hook calls under a deadline. A plugin runs in the host's process (the decision and its cost are
// in the README), so a hook that never returns would otherwise hold the caller forever: every call
// of a plugin runs on a thread of its own (one lane for calls, one for health polls) while the
// caller waits at most the deadline. A plugin that misses it is marked hung, reported, and never
// called again in this process; nothing ever waits for its stuck thread, shutdown included. Each
// call is recorded in the crash journal while it runs, so a crash names the plugin and hook.
// Health polls are the exception to "the caller waits": they run back to back on their lane, and
// the owner looks at their deadline with CheckHealthPolls (docs/footprint.md: a waiting caller
// would wake twice for every poll that found nothing).
#ifndef GPUSTACK_HOST_RUNTIME_WATCHDOG_H_
#define GPUSTACK_HOST_RUNTIME_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "host/runtime/backend.h"
#include "host/runtime/crash_journal.h"

namespace gpustack::runtime {

// The process's stop (host/common/process_stop.h) makes every waiting caller give up its call at
// once (CANCELLED) instead of at its deadline. The plugin is not marked hung for it; shutdown
// still runs, waited for two seconds at most.
bool StopRequested();

// Process-wide: how many threads were left inside a plugin (a hung hook or load, or one given up
// for a stop). A process with any must end with std::_Exit once its output is flushed: exit()
// would run static destructors and the dynamic loader's finalizers, which wait for the loader
// lock a hanging library constructor holds, so the process would never end.
int AbandonedThreads();

struct WatchdogOptions {
  std::chrono::milliseconds deadline{30'000};  // per call; a health poll adds its own timeout
  // Where calls are recorded; none when null. Shared: an abandoned call may still record its end.
  std::shared_ptr<CrashJournal> journal{};
  std::string library{};  // for the journal
  FileIdentity library_identity{};
};

// Loads a plugin (its library's constructors, negotiation and identify run in `load`) on a
// thread of its own, under the same deadline and crash journal as its hooks: a plugin that hangs
// or crashes while loading is named like one that does so in a hook. When the deadline passes,
// `*hung` is set and the loading thread is left behind.
Result<std::unique_ptr<PluginBackend>> GuardedLoad(
    const std::string& plugin, const WatchdogOptions& options,
    std::function<Result<std::unique_ptr<PluginBackend>>()> load, bool* hung);

class GuardedBackend final : public PluginBackend {
 public:
  GuardedBackend(std::unique_ptr<PluginBackend> inner, WatchdogOptions options);
  // Stops the lanes; when the plugin is hung, abandons them (and the plugin) instead of waiting.
  ~GuardedBackend() override;

  // True once a call missed its deadline.
  bool hung() const { return hung_.load(std::memory_order_acquire); }
  std::string hung_reason() const;
  // True while the health polls' lane is still busy: a poll inside the plugin, or the polls'
  // loop not yet ended.
  bool polling() const;

  // Health polls, one after another on the poll lane, until StopHealthPolls. `on_result` gets,
  // on that lane's thread, every poll that found events or failed (never an empty list). A plugin
  // that answers at once is polled once per `timeout`, and one that fails waits `timeout` too.
  using HealthHandler = std::function<void(Result<std::vector<sdk::HealthEvent>>)>;
  void StartHealthPolls(std::chrono::milliseconds timeout, HealthHandler on_result);
  // No handler runs once it returns. Waits for a poll inside the plugin to return, at most to its
  // deadline (the process's stop cuts the wait short; the destructor then abandons the lane).
  void StopHealthPolls();
  // Marks the plugin hung when a poll has been inside it longer than its timeout plus the
  // deadline. Otherwise, while polls run, when to look again.
  std::optional<std::chrono::steady_clock::time_point> CheckHealthPolls(
      std::chrono::steady_clock::time_point now);

  const PluginIdentity& identity() const override { return identity_; }
  bool Provides(Hook hook) const override { return inner_->Provides(hook); }
  Status Init(const PluginSettings& settings,
              const std::vector<pci::PciDevice>& inventory) override;
  void Shutdown() override;
  Result<std::vector<sdk::AcceleratorGroup>> Discover() override;
  Result<std::vector<sdk::ContainerEdit>> Grant(const sdk::Grant& grant) override;
  Result<std::vector<sdk::Partition>> ListPartitions(const std::string& card_id) override;
  Result<sdk::Partition> CreatePartition(const sdk::CreatePartitionRequest& request) override;
  Status DestroyPartition(const sdk::DestroyPartitionRequest& request) override;
  Result<client::MetricsSnapshot> SampleMetrics(const sdk::MetricsRequest& request) override;
  Result<std::vector<sdk::HealthEvent>> PollHealthEvents(uint32_t timeout_ms) override;
  Result<std::vector<sdk::DeviceNode>> ListDeviceNodes(
      const std::vector<std::string>& card_ids) override;
  Result<sdk::Slice> PrepareSlice(const sdk::PrepareSliceRequest& request) override;
  Status UnprepareSlice(const sdk::UnprepareSliceRequest& request) override;

  struct Lane;         // a thread and its one pending job
  struct HealthPolls;  // the polls' loop, shared with the lane's thread

 private:
  template <class R, class Fn>
  R Call(Lane& lane, Hook hook, std::chrono::milliseconds deadline, Fn&& fn);
  Error HungError(Hook hook) const;
  void MarkHung(Lane& lane, const std::string& reason);
  std::shared_ptr<HealthPolls> Health() const;

  std::shared_ptr<PluginBackend> inner_;  // shared with the lanes' jobs
  const PluginIdentity identity_;
  WatchdogOptions options_;
  std::unique_ptr<Lane> calls_;
  std::unique_ptr<Lane> polls_;
  mutable std::mutex health_mutex_;
  std::shared_ptr<HealthPolls> health_;  // while polls run; under health_mutex_
  uint64_t health_ticket_ = 0;           // the polls' job on polls_ (its owner's thread only)
  std::atomic<bool> hung_{false};
  mutable std::mutex reason_mutex_;
  std::string hung_reason_;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_WATCHDOG_H_
