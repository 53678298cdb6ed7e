// An in-memory plugin for the runtime's unit tests: it answers from a script of cards and
// failures, and can hang or take as long as a test needs, so the runtime's rules (last good,
// watchdog, conflicts, health) are tested without loading any library.
#ifndef GPUSTACK_HOST_RUNTIME_TESTING_FAKE_BACKEND_H_
#define GPUSTACK_HOST_RUNTIME_TESTING_FAKE_BACKEND_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "host/runtime/backend.h"
#include "host/runtime/plugin_source.h"

namespace gpustack::runtime::testing {

// What a fake plugin does; tests change it between calls (it is shared with the backend).
struct FakeScript {
  std::mutex mutex;
  PluginIdentity identity;
  std::vector<sdk::AcceleratorGroup> groups;
  std::optional<Error> init_error;
  std::deque<Error> discover_errors;                 // the next passes fail with these, in order
  std::map<Hook, std::chrono::milliseconds> delays;  // a call takes this long
  std::map<Hook, int> signals;       // a call raises this signal, on its own thread (a crash)
  std::atomic<bool> release{false};  // ends every delay at once
  std::deque<std::vector<sdk::HealthEvent>> health_events;
  PluginSettings settings;  // what Init received
  std::atomic<int> calls{0};
  std::atomic<int> shutdowns{0};
};

class FakeBackend final : public PluginBackend {
 public:
  explicit FakeBackend(std::shared_ptr<FakeScript> script) : script_(std::move(script)) {}

  const PluginIdentity& identity() const override { return script_->identity; }
  bool Provides(Hook hook) const override;
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

 private:
  void Delay(Hook hook);
  std::shared_ptr<FakeScript> script_;
};

// A source of fake plugins: each candidate loads the fake backend of its script.
class FakeSource final : public PluginSource {
 public:
  struct Entry {
    PluginCandidate candidate;
    std::shared_ptr<FakeScript> script;  // null: Load fails
  };
  explicit FakeSource(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  std::vector<std::string> Places() const override { return {"(fake)"}; }
  std::vector<PluginCandidate> Find(std::vector<SourceProblem>* problems) override;
  Result<std::unique_ptr<PluginBackend>> Load(const PluginCandidate& candidate) override;

 private:
  std::vector<Entry> entries_;
};

// A script for a plugin `name` of vendor `vendor_id` with `cards` cards of one product.
std::shared_ptr<FakeScript> MakeScript(const std::string& name, uint16_t vendor_id, int cards);
// The candidate of a script (library_path empty unless given).
PluginCandidate CandidateOf(const FakeScript& script, const std::string& library_path = {});

}  // namespace gpustack::runtime::testing

#endif  // GPUSTACK_HOST_RUNTIME_TESTING_FAKE_BACKEND_H_
