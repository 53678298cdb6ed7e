#include "host/loader/loaded_plugin.h"

#include <utility>

namespace gpustack::loader {
namespace {

using runtime::Health;

Health ToHealth(gpustack_health health) {
  switch (health) {
    case GPUSTACK_HEALTH_HEALTHY:
      return Health::kHealthy;
    case GPUSTACK_HEALTH_UNHEALTHY:
      return Health::kUnhealthy;
    default:
      return Health::kUnknown;
  }
}

runtime::PartitionMode ToMode(gpustack_partition_mode mode) {
  switch (mode) {
    case GPUSTACK_PARTITION_MODE_DISABLED:
      return runtime::PartitionMode::kDisabled;
    case GPUSTACK_PARTITION_MODE_ENABLED:
      return runtime::PartitionMode::kEnabled;
    case GPUSTACK_PARTITION_MODE_PENDING:
      return runtime::PartitionMode::kPending;
    default:
      return runtime::PartitionMode::kUnsupported;
  }
}

runtime::PluginIdentity ToIdentity(const client::Identity& id, client::AbiVersion abi) {
  runtime::PluginIdentity out;
  out.manufacturer = id.manufacturer;
  out.display_name = id.display_name;
  out.base_resource_name = id.base_resource_name;
  out.version = id.plugin_version;
  out.pci_vendor_ids = id.pci_vendor_ids;
  auto has = [&](gpustack_capabilities bit) { return (id.capabilities & bit) != 0; };
  out.capabilities = {has(GPUSTACK_CAP_SHARED),        has(GPUSTACK_CAP_LOGICAL_SLICING),
                      has(GPUSTACK_CAP_PARTITIONING),  has(GPUSTACK_CAP_PROCESS_METRICS),
                      has(GPUSTACK_CAP_HEALTH_EVENTS), has(GPUSTACK_CAP_SLICE_OBJECTS)};
  out.partition_kind = id.partition_kind;
  out.runtime_class = id.runtime_class;
  out.runtime_injects_driver = (id.runtime_flags & GPUSTACK_RUNTIME_INJECTS_DRIVER) != 0;
  out.runtime_injects_devices = (id.runtime_flags & GPUSTACK_RUNTIME_INJECTS_DEVICES) != 0;
  out.install_hint = id.install_hint;
  out.one_card_per_container = (id.admission_flags & GPUSTACK_ADMIT_ONE_CARD_PER_CONTAINER) != 0;
  out.min_slice_memory_percentage = id.min_slice_memory_percentage;
  out.abi = std::to_string(abi.major) + "." + std::to_string(abi.minor);
  return out;
}

runtime::CardGroup ToGroup(const sdk::AcceleratorGroup& g) {
  runtime::CardGroup out{g.product,        g.family,          g.memory_mib,         g.cores,
                         g.driver_version, g.runtime_version, g.compute_capability, {}};
  for (const sdk::Accelerator& a : g.accelerators) {
    runtime::Card card;
    card.id = a.id;
    card.index = a.index;
    card.physical_indexes = a.physical_indexes;
    card.memory_mib = a.memory_mib;
    card.pci_bus_id = a.pci_bus_id;
    card.pci_root_id = a.pci_root_id;
    card.pci_class = a.pci_class;
    card.numa_affinity = a.numa_affinity;
    card.cpu_affinity = a.cpu_affinity;
    card.health = ToHealth(a.health);
    card.health_reason = a.health_reason;
    card.logical_slice_count = a.logical_slice_count;
    card.cores_percentage_overcommit = a.cores_percentage_overcommit;
    card.partition_mode = ToMode(a.partition_mode);
    for (const sdk::PartitionProfile& p : a.partition_profiles) {
      ledger::PartitionProfile profile{p.name,          p.memory_mib, p.compute_slices,
                                       p.memory_slices, p.max_count,  {}};
      for (const gpustack_placement& pl : p.placements) {
        profile.placements.push_back({pl.start, pl.length});
      }
      card.partition_profiles.push_back(std::move(profile));
    }
    out.cards.push_back(std::move(card));
  }
  return out;
}

runtime::Partition ToPartition(const sdk::Partition& p) {
  return {p.accelerator_id, p.id, p.profile, {p.placement.start, p.placement.length}, p.owner};
}

gpustack_grant_mode ToGrantMode(runtime::GrantMode mode) {
  switch (mode) {
    case runtime::GrantMode::kShared:
      return GPUSTACK_GRANT_SHARED;
    case runtime::GrantMode::kSliced:
      return GPUSTACK_GRANT_SLICED;
    case runtime::GrantMode::kPartitioned:
      return GPUSTACK_GRANT_PARTITIONED;
    case runtime::GrantMode::kExclusive:
      break;
  }
  return GPUSTACK_GRANT_EXCLUSIVE;
}

runtime::EditKind ToEditKind(gpustack_edit_kind kind) {
  switch (kind) {
    case GPUSTACK_EDIT_MOUNT:
      return runtime::EditKind::kMount;
    case GPUSTACK_EDIT_DEVICE_NODE:
      return runtime::EditKind::kDeviceNode;
    case GPUSTACK_EDIT_ANNOTATION:
      return runtime::EditKind::kAnnotation;
    case GPUSTACK_EDIT_CDI_DEVICE:
      return runtime::EditKind::kCdiDevice;
    default:
      return runtime::EditKind::kEnv;
  }
}

client::Hook ToClientHook(runtime::Hook hook) {
  switch (hook) {
    case runtime::Hook::kGrant:
      return client::Hook::kGrant;
    case runtime::Hook::kListPartitions:
      return client::Hook::kListPartitions;
    case runtime::Hook::kCreatePartition:
      return client::Hook::kCreatePartition;
    case runtime::Hook::kDestroyPartition:
      return client::Hook::kDestroyPartition;
    case runtime::Hook::kSampleMetrics:
      return client::Hook::kSampleMetrics;
    case runtime::Hook::kPollHealthEvents:
      return client::Hook::kPollHealthEvents;
    case runtime::Hook::kListDeviceNodes:
      return client::Hook::kListDeviceNodes;
    case runtime::Hook::kPrepareSlice:
      return client::Hook::kPrepareSlice;
    case runtime::Hook::kUnprepareSlice:
      return client::Hook::kUnprepareSlice;
    default:
      return client::Hook::kDiscover;
  }
}

}  // namespace

LoadedPlugin::LoadedPlugin(std::unique_ptr<client::Plugin> plugin)
    : plugin_(std::move(plugin)),
      identity_(ToIdentity(plugin_->identity(), plugin_->negotiated())) {}

LoadedPlugin::~LoadedPlugin() { Shutdown(); }

bool LoadedPlugin::Provides(runtime::Hook hook) const {
  if (hook == runtime::Hook::kInit || hook == runtime::Hook::kShutdown) return true;
  return plugin_->Provides(ToClientHook(hook));
}

Status LoadedPlugin::Init(const runtime::PluginSettings& settings,
                          const std::vector<pci::PciDevice>& inventory) {
  if (plugin_->initialized()) return plugin_->Init(nullptr, {});  // says "init called twice"
  services_ = std::make_unique<HostServices>(identity_.manufacturer, settings);
  // Two passes: the string storage must be complete before views into it are taken.
  pci_strings_.clear();
  for (const pci::PciDevice& d : inventory) {
    pci_strings_.push_back(d.bus_id);
    pci_strings_.push_back(d.sysfs_path);
  }
  pci_devices_.clear();
  for (size_t i = 0; i < inventory.size(); ++i) {
    const pci::PciDevice& d = inventory[i];
    pci_devices_.push_back(
        gpustack_pci_device{sizeof(gpustack_pci_device), nullptr, sdk::Str(pci_strings_[2 * i]),
                            d.vendor_id, d.device_id, d.class_code, d.subsystem_vendor_id,
                            d.subsystem_device_id, d.numa_node, sdk::Str(pci_strings_[2 * i + 1])});
  }
  pci_device_ptrs_.clear();
  for (const gpustack_pci_device& d : pci_devices_) pci_device_ptrs_.push_back(&d);
  auto status = plugin_->Init(services_->table(), pci_device_ptrs_);
  if (!status) services_.reset();
  return status;
}

void LoadedPlugin::Shutdown() {
  plugin_->Shutdown();
  services_.reset();
}

Result<std::vector<runtime::CardGroup>> LoadedPlugin::Discover() {
  auto groups = plugin_->Discover();
  if (!groups) return std::move(groups).failure();
  std::vector<runtime::CardGroup> out;
  for (const sdk::AcceleratorGroup& g : *groups) out.push_back(ToGroup(g));
  return out;
}

Result<std::vector<runtime::ContainerEdit>> LoadedPlugin::Grant(
    const runtime::GrantRequest& request) {
  auto edits = plugin_->Grant({request.pod_uid, request.container, ToGrantMode(request.mode),
                               request.card_ids, request.memory_limit_mib, request.cores_percentage,
                               request.partition_id, request.slice_id});
  if (!edits) return std::move(edits).failure();
  std::vector<runtime::ContainerEdit> out;
  for (const sdk::ContainerEdit& e : *edits) {
    out.push_back({ToEditKind(e.kind), e.key, e.value, e.host_path, e.container_path, e.permissions,
                   e.read_only});
  }
  return out;
}

Result<std::vector<runtime::Partition>> LoadedPlugin::ListPartitions(const std::string& card_id) {
  auto partitions = plugin_->ListPartitions(card_id);
  if (!partitions) return std::move(partitions).failure();
  std::vector<runtime::Partition> out;
  for (const sdk::Partition& p : *partitions) out.push_back(ToPartition(p));
  return out;
}

Result<runtime::Partition> LoadedPlugin::CreatePartition(const runtime::PartitionRequest& request) {
  auto created = plugin_->CreatePartition({request.card_id,
                                           request.profile,
                                           {request.placement.start, request.placement.length},
                                           request.owner});
  if (!created) return std::move(created).failure();
  return ToPartition(*created);
}

Status LoadedPlugin::DestroyPartition(const runtime::PartitionRef& partition) {
  return plugin_->DestroyPartition({partition.card_id, partition.partition_id, partition.owner});
}

Result<runtime::Samples> LoadedPlugin::SampleMetrics(const std::vector<std::string>& card_ids,
                                                     bool include_processes) {
  auto snapshot = plugin_->SampleMetrics({card_ids, include_processes});
  if (!snapshot) return std::move(snapshot).failure();
  runtime::Samples out;
  for (const sdk::DeviceSample& s : snapshot->devices) {
    out.devices.push_back({s.accelerator_id, s.timestamp_ns, s.memory_total_mib, s.memory_used_mib,
                           s.memory_utilization_percent, s.cores_utilization_percent,
                           s.temperature_celsius, s.power_watts, ToHealth(s.health)});
  }
  for (const sdk::ProcessSample& p : snapshot->processes) {
    out.processes.push_back(
        {p.accelerator_id, p.partition_id, p.pid, p.memory_used_mib, p.cores_utilization_percent});
  }
  out.warnings = std::move(snapshot->warnings);
  return out;
}

Result<std::vector<runtime::HealthEvent>> LoadedPlugin::PollHealthEvents(uint32_t timeout_ms) {
  auto events = plugin_->PollHealthEvents(timeout_ms);
  if (!events) return std::move(events).failure();
  std::vector<runtime::HealthEvent> out;
  for (const sdk::HealthEvent& e : *events) {
    out.push_back({e.accelerator_id, ToHealth(e.health), e.reason});
  }
  return out;
}

Result<std::vector<runtime::DeviceNode>> LoadedPlugin::ListDeviceNodes(
    const std::vector<std::string>& card_ids) {
  auto nodes = plugin_->ListDeviceNodes(card_ids);
  if (!nodes) return std::move(nodes).failure();
  std::vector<runtime::DeviceNode> out;
  for (const sdk::DeviceNode& n : *nodes) out.push_back({n.accelerator_id, n.path});
  return out;
}

Result<runtime::Slice> LoadedPlugin::PrepareSlice(const runtime::SliceRequest& request) {
  auto slice = plugin_->PrepareSlice(
      {request.card_id, request.memory_limit_mib, request.cores_percentage, request.owner});
  if (!slice) return std::move(slice).failure();
  return runtime::Slice{slice->accelerator_id, slice->id};
}

Status LoadedPlugin::UnprepareSlice(const runtime::SliceRef& slice) {
  return plugin_->UnprepareSlice({slice.card_id, slice.slice_id, slice.owner});
}

}  // namespace gpustack::loader
