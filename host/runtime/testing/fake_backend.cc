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
      return script_->identity.capabilities.health_events;
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

Result<std::vector<CardGroup>> FakeBackend::Discover() {
  Delay(Hook::kDiscover);
  std::lock_guard lock(script_->mutex);
  if (!script_->discover_errors.empty()) {
    Error e = script_->discover_errors.front();
    script_->discover_errors.pop_front();
    return e;
  }
  return script_->groups;
}

Result<std::vector<ContainerEdit>> FakeBackend::Grant(const GrantRequest& request) {
  Delay(Hook::kGrant);
  std::string visible;
  for (const std::string& id : request.card_ids) visible += (visible.empty() ? "" : ",") + id;
  std::vector<ContainerEdit> edits{{EditKind::kEnv, "FAKE_VISIBLE_DEVICES", visible}};
  if (request.mode == GrantMode::kSliced) {
    edits.push_back(
        {EditKind::kEnv, "FAKE_MEMORY_LIMIT_MIB", std::to_string(request.memory_limit_mib)});
  }
  return edits;
}

Result<std::vector<Partition>> FakeBackend::ListPartitions(const std::string&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Result<Partition> FakeBackend::CreatePartition(const PartitionRequest&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Status FakeBackend::DestroyPartition(const PartitionRef&) {
  return Error{"no partitions", Code::kUnimplemented};
}

Result<Samples> FakeBackend::SampleMetrics(const std::vector<std::string>& card_ids, bool) {
  Delay(Hook::kSampleMetrics);
  std::lock_guard lock(script_->mutex);
  Samples samples;
  for (const CardGroup& g : script_->groups) {
    for (const Card& c : g.cards) {
      if (!card_ids.empty() &&
          std::find(card_ids.begin(), card_ids.end(), c.id) == card_ids.end()) {
        continue;
      }
      DeviceSample s;
      s.card_id = c.id;
      s.memory_total_mib = static_cast<double>(c.memory_mib);
      s.health = c.health;
      samples.devices.push_back(s);
    }
  }
  return samples;
}

Result<std::vector<HealthEvent>> FakeBackend::PollHealthEvents(uint32_t timeout_ms) {
  Delay(Hook::kPollHealthEvents);
  {
    std::lock_guard lock(script_->mutex);
    if (!script_->health_events.empty()) {
      std::vector<HealthEvent> events = script_->health_events.front();
      script_->health_events.pop_front();
      return events;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint32_t>(timeout_ms, 20)));
  return std::vector<HealthEvent>{};
}

Result<std::vector<DeviceNode>> FakeBackend::ListDeviceNodes(const std::vector<std::string>&) {
  Delay(Hook::kListDeviceNodes);
  std::lock_guard lock(script_->mutex);
  std::vector<DeviceNode> nodes{{"", "fakectl"}};
  for (const CardGroup& g : script_->groups) {
    for (const Card& c : g.cards) nodes.push_back({c.id, "fake" + std::to_string(c.index)});
  }
  return nodes;
}

Result<Slice> FakeBackend::PrepareSlice(const SliceRequest&) {
  return Error{"no slice objects", Code::kUnimplemented};
}

Status FakeBackend::UnprepareSlice(const SliceRef&) {
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
  script->identity.version = "0.0.1";
  script->identity.pci_vendor_ids = {vendor_id};
  script->identity.abi = "1.1";
  CardGroup group;
  group.product = "Fake " + name + " 16G";
  group.memory_mib = 16384;
  for (int i = 0; i < cards; ++i) {
    Card card;
    card.id = name + "-card-" + std::to_string(i);
    card.index = static_cast<uint32_t>(i);
    card.physical_indexes = {static_cast<uint32_t>(i)};
    card.memory_mib = 16384;
    card.health = Health::kHealthy;
    group.cards.push_back(card);
  }
  if (cards > 0) script->groups.push_back(group);
  return script;
}

PluginCandidate CandidateOf(const FakeScript& script, const std::string& library_path) {
  return {script.identity.manufacturer, "fake:" + script.identity.manufacturer, library_path,
          script.identity.pci_vendor_ids, Ok{}};
}

}  // namespace gpustack::runtime::testing
