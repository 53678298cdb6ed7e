// A plugin library opened through the SDK's client, as a runtime backend: the one place where the
// plugin ABI's structs (through the SDK's value types) become the host's own types, and where the
// host services and the PCI inventory a plugin instance receives are kept alive.
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
  Result<std::vector<runtime::CardGroup>> Discover() override;
  Result<std::vector<runtime::ContainerEdit>> Grant(const runtime::GrantRequest& request) override;
  Result<std::vector<runtime::Partition>> ListPartitions(const std::string& card_id) override;
  Result<runtime::Partition> CreatePartition(const runtime::PartitionRequest& request) override;
  Status DestroyPartition(const runtime::PartitionRef& partition) override;
  Result<runtime::Samples> SampleMetrics(const std::vector<std::string>& card_ids,
                                         bool include_processes) override;
  Result<std::vector<runtime::HealthEvent>> PollHealthEvents(uint32_t timeout_ms) override;
  Result<std::vector<runtime::DeviceNode>> ListDeviceNodes(
      const std::vector<std::string>& card_ids) override;
  Result<runtime::Slice> PrepareSlice(const runtime::SliceRequest& request) override;
  Status UnprepareSlice(const runtime::SliceRef& slice) override;

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
