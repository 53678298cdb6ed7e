#include "host/runtime/testing/fake_backend.h"

#include <csignal>

#include <thread>

namespace gpustack::runtime::testing {

bool FakeBackend::Provides(Hook hook) const {
  switch (hook) {
    case Hook::kListPartitions:
    case Hook::kCreatePartition:
    case Hook::kDestroyPartition:
    case Hook::kPrepareSlice:
    case Hook::kUnprepareSlice:
      return false;
    case Hook::kPollHealthEvents:
      return script_->identity.Has(GPUSTACK_CAP_HEALTH_EVENTS);
    default:
      return true;
  }
}

namespace {

// What the script says a call of `hook` does besides answering: take time, or crash.
void Act(FakeScript& script, Hook hook) {
  ++script.calls;
  std::chrono::milliseconds delay{0};
  {
    std::lock_guard lock(script.mutex);
    if (auto it = script.delays.find(hook); it != script.delays.end()) delay = it->second;
    if (auto it = script.signals.find(hook); it != script.signals.end()) ::raise(it->second);
  }
  const auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until && !script.release) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

void FakeBackend::Delay(Hook hook) { Act(*script_, hook); }

Status FakeBackend::Init(const PluginSettings& settings, const std::vector<pci::PciDevice>&) {
  Delay(Hook::kInit);
  std::lock_guard lock(script_->mutex);
  script_->settings = settings;
  if (script_->init_error) return *script_->init_error;
  return Ok{};
}

void FakeBackend::Shutdown() {
  Delay(Hook::kShutdown);
  ++script_->shutdowns;
}

Result<std::vector<sdk::AcceleratorGroup>> FakeBackend::Discover() {
  Delay(Hook::kDiscover);
  std::lock_guard lock(script_->mutex);
  if (!script_->discover_errors.empty()) {
    Error e = script_->discover_errors.front();
    script_->discover_errors.pop_front();
    return e;
  }
  return script_->groups;
}

Result<std::vector<sdk::ContainerEdit>> FakeBackend::Grant(const sdk::Grant& grant) {
  Delay(Hook::kGrant);
  std::string visible;
  for (const std::string& id : grant.accelerator_ids) visible += (visible.empty() ? "" : ",") + id;
  std::vector<sdk::ContainerEdit> edits{{GPUSTACK_EDIT_ENV, "FAKE_VISIBLE_DEVICES", visible}};
  if (grant.mode == GPUSTACK_GRANT_SLICED) {
    edits.push_back(
        {GPUSTACK_EDIT_ENV, "FAKE_MEMORY_LIMIT_MIB", std::to_string(grant.memory_limit_mib)});
  }
  return edits;
}

Result<std::vector<sdk::Partition>> FakeBackend::ListPartitions(const std::string&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Result<sdk::Partition> FakeBackend::CreatePartition(const sdk::CreatePartitionRequest&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Status FakeBackend::DestroyPartition(const sdk::DestroyPartitionRequest&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Result<client::MetricsSnapshot> FakeBackend::SampleMetrics(const sdk::MetricsRequest& request) {
  Delay(Hook::kSampleMetrics);
  std::lock_guard lock(script_->mutex);
  client::MetricsSnapshot samples;
  for (const sdk::AcceleratorGroup& g : script_->groups) {
    for (const sdk::Accelerator& c : g.accelerators) {
      if (!request.Wants(c.id)) continue;
      sdk::DeviceSample s;
      s.accelerator_id = c.id;
      s.memory_total_mib = static_cast<double>(c.memory_mib);
      s.health = c.health;
      samples.devices.push_back(s);
    }
  }
  return samples;
}

Result<std::vector<sdk::HealthEvent>> FakeBackend::PollHealthEvents(uint32_t timeout_ms) {
  Delay(Hook::kPollHealthEvents);
  {
    std::lock_guard lock(script_->mutex);
    if (!script_->health_events.empty()) {
      std::vector<sdk::HealthEvent> events = script_->health_events.front();
      script_->health_events.pop_front();
      return events;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint32_t>(timeout_ms, 20)));
  return std::vector<sdk::HealthEvent>{};
}

Result<std::vector<sdk::DeviceNode>> FakeBackend::ListDeviceNodes(const std::vector<std::string>&) {
  Delay(Hook::kListDeviceNodes);
  std::lock_guard lock(script_->mutex);
  std::vector<sdk::DeviceNode> nodes{{"", "fakectl"}};
  for (const sdk::AcceleratorGroup& g : script_->groups) {
    for (const sdk::Accelerator& c : g.accelerators)
      nodes.push_back({c.id, "fake" + std::to_string(c.index)});
  }
  return nodes;
}

Result<sdk::Slice> FakeBackend::PrepareSlice(const sdk::PrepareSliceRequest&) {
  return Error{"no slice objects", Code::kUnimplemented};
}

Status FakeBackend::UnprepareSlice(const sdk::UnprepareSliceRequest&) {
  return Error{"no slice objects", Code::kUnimplemented};
}

std::vector<PluginCandidate> FakeSource::Find(std::vector<SourceProblem>*) {
  std::vector<PluginCandidate> out;
  for (const Entry& e : entries_) out.push_back(e.candidate);
  return out;
}

Result<std::unique_ptr<PluginBackend>> FakeSource::Load(const PluginCandidate& candidate) {
  for (const Entry& e : entries_) {
    if (e.candidate.origin != candidate.origin) continue;
    if (e.script == nullptr) {
      return Error{candidate.name + ": cannot be loaded (fake)", Code::kFailedPrecondition};
    }
    Act(*e.script, Hook::kLoad);
    return std::unique_ptr<PluginBackend>(std::make_unique<FakeBackend>(e.script));
  }
  return Error{candidate.origin + ": unknown fake", Code::kNotFound};
}

std::shared_ptr<FakeScript> MakeScript(const std::string& name, uint16_t vendor_id, int cards) {
  auto script = std::make_shared<FakeScript>();
  script->identity.manufacturer = name;
  script->identity.display_name = "Fake " + name;
  script->identity.base_resource_name = name + ".example.com/accel";
  script->identity.plugin_version = "0.0.1";
  script->identity.pci_vendor_ids = {vendor_id};
  script->identity.abi = "1.1";
  sdk::AcceleratorGroup group;
  group.product = "Fake " + name + " 16G";
  group.memory_mib = 16384;
  for (int i = 0; i < cards; ++i) {
    sdk::Accelerator card;
    card.id = name + "-card-" + std::to_string(i);
    card.index = static_cast<uint32_t>(i);
    card.physical_indexes = {static_cast<uint32_t>(i)};
    card.memory_mib = 16384;
    card.health = GPUSTACK_HEALTH_HEALTHY;
    group.accelerators.push_back(card);
  }
  if (cards > 0) script->groups.push_back(group);
  return script;
}

PluginCandidate CandidateOf(const FakeScript& script, const std::string& library_path) {
  return {script.identity.manufacturer, "fake:" + script.identity.manufacturer, library_path,
          script.identity.pci_vendor_ids, Ok{}};
}

}  // namespace gpustack::runtime::testing
