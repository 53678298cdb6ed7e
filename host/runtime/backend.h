// One plugin as the node runtime sees it: its identity and its hooks, in the SDK's value types.
// Implementations: the dlopen'ed plugin (host/loader) and an in-memory fake for unit tests
// (runtime/testing). The runtime wraps every backend in a watchdog (watchdog.h), so a backend may
// assume its calls are serialized as plugin.h requires (health polls beside other calls) but
// must expect that a call it never returns from is abandoned.
#ifndef GPUSTACK_HOST_RUNTIME_BACKEND_H_
#define GPUSTACK_HOST_RUNTIME_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/pci/pci_inventory.h"
#include "host/runtime/types.h"

namespace gpustack::runtime {

class PluginBackend {
 public:
  virtual ~PluginBackend() = default;

  virtual const PluginIdentity& identity() const = 0;
  // Whether the plugin provides an optional hook (kInit and kShutdown always).
  virtual bool Provides(Hook hook) const = 0;

  // Creates the plugin's instance with its node settings and the host's PCI inventory.
  virtual Status Init(const PluginSettings& settings,
                      const std::vector<pci::PciDevice>& inventory) = 0;
  virtual void Shutdown() = 0;

  virtual Result<std::vector<sdk::AcceleratorGroup>> Discover() = 0;
  virtual Result<std::vector<sdk::ContainerEdit>> Grant(const sdk::Grant& grant) = 0;
  virtual Result<std::vector<sdk::Partition>> ListPartitions(const std::string& card_id) = 0;
  virtual Result<sdk::Partition> CreatePartition(const sdk::CreatePartitionRequest& request) = 0;
  virtual Status DestroyPartition(const sdk::DestroyPartitionRequest& request) = 0;
  // Every card when the request names none.
  virtual Result<client::MetricsSnapshot> SampleMetrics(const sdk::MetricsRequest& request) = 0;
  virtual Result<std::vector<sdk::HealthEvent>> PollHealthEvents(uint32_t timeout_ms) = 0;
  virtual Result<std::vector<sdk::DeviceNode>> ListDeviceNodes(
      const std::vector<std::string>& card_ids) = 0;
  virtual Result<sdk::Slice> PrepareSlice(const sdk::PrepareSliceRequest& request) = 0;
  virtual Status UnprepareSlice(const sdk::UnprepareSliceRequest& request) = 0;
};

}  // namespace gpustack::runtime

#endif  // GPUSTACK_HOST_RUNTIME_BACKEND_H_
