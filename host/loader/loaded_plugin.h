// A plugin library opened through the SDK's client, as a runtime backend. The SDK client turns the
// ABI's C structs into the SDK's value types (the one conversion); this adapter hands them on as
// they are, and keeps alive the host services and the PCI inventory a plugin instance receives.
#ifndef GPUSTACK_HOST_LOADER_LOADED_PLUGIN_H_
#define GPUSTACK_HOST_LOADER_LOADED_PLUGIN_H_

#include <gpustack/client/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

#include "host/loader/host_services.h"
#include "host/runtime/backend.h"

namespace gpustack::loader {

class LoadedPlugin final : public runtime::PluginBackend {
 public:
  explicit LoadedPlugin(std::unique_ptr<client::Plugin> plugin);
  ~LoadedPlugin() override;

  const client::Plugin& client() const { return *plugin_; }

  const runtime::PluginIdentity& identity() const override { return identity_; }
  bool Provides(runtime::Hook hook) const override;
  Status Init(const runtime::PluginSettings& settings,
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
  // What an instance points to; declared before plugin_ so it outlives the instance.
  std::unique_ptr<HostServices> services_;
  std::vector<std::string> pci_strings_;
  std::vector<gpustack_pci_device> pci_devices_;
  std::vector<const gpustack_pci_device*> pci_device_ptrs_;
  std::unique_ptr<client::Plugin> plugin_;
  runtime::PluginIdentity identity_;
};

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_LOADED_PLUGIN_H_
