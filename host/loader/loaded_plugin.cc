#include "host/loader/loaded_plugin.h"

#include <utility>

namespace gpustack::loader {
namespace {

runtime::PluginIdentity IdentityOf(const client::Plugin& plugin) {
  runtime::PluginIdentity id;
  static_cast<client::Identity&>(id) = plugin.identity();
  id.abi =
      std::to_string(plugin.negotiated().major) + "." + std::to_string(plugin.negotiated().minor);
  return id;
}

}  // namespace

LoadedPlugin::LoadedPlugin(std::unique_ptr<client::Plugin> plugin)
    : plugin_(std::move(plugin)), identity_(IdentityOf(*plugin_)) {}

LoadedPlugin::~LoadedPlugin() { Shutdown(); }

bool LoadedPlugin::Provides(runtime::Hook hook) const { return plugin_->Provides(hook); }

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

Result<std::vector<sdk::AcceleratorGroup>> LoadedPlugin::Discover() { return plugin_->Discover(); }

Result<std::vector<sdk::ContainerEdit>> LoadedPlugin::Grant(const sdk::Grant& grant) {
  return plugin_->Grant(grant);
}

Result<std::vector<sdk::Partition>> LoadedPlugin::ListPartitions(const std::string& card_id) {
  return plugin_->ListPartitions(card_id);
}

Result<sdk::Partition> LoadedPlugin::CreatePartition(const sdk::CreatePartitionRequest& request) {
  return plugin_->CreatePartition(request);
}

Status LoadedPlugin::DestroyPartition(const sdk::DestroyPartitionRequest& request) {
  return plugin_->DestroyPartition(request);
}

Result<client::MetricsSnapshot> LoadedPlugin::SampleMetrics(const sdk::MetricsRequest& request) {
  return plugin_->SampleMetrics(request);
}

Result<std::vector<sdk::HealthEvent>> LoadedPlugin::PollHealthEvents(uint32_t timeout_ms) {
  return plugin_->PollHealthEvents(timeout_ms);
}

Result<std::vector<sdk::DeviceNode>> LoadedPlugin::ListDeviceNodes(
    const std::vector<std::string>& card_ids) {
  return plugin_->ListDeviceNodes(card_ids);
}

Result<sdk::Slice> LoadedPlugin::PrepareSlice(const sdk::PrepareSliceRequest& request) {
  return plugin_->PrepareSlice(request);
}

Status LoadedPlugin::UnprepareSlice(const sdk::UnprepareSliceRequest& request) {
  return plugin_->UnprepareSlice(request);
}

}  // namespace gpustack::loader
