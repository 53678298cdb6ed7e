// One loaded plugin behind a C++ interface. The rest of the host talks to plugins only through
// this class, never through the C table: it checks every struct size, turns statuses into
// Results carrying the plugin's message, and copies plugin output into owned values.
#ifndef GPUSTACK_HOST_LOADER_PLUGIN_H_
#define GPUSTACK_HOST_LOADER_PLUGIN_H_

#include <gpustack/plugin.h>
#include <gpustack/plugin_types.hpp>

#include <boost/dll/shared_library.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/loader/host_services.h"
#include "host/loader/manifest.h"
#include "host/pci/pci_inventory.h"

namespace gpustack::loader {

struct AbiVersion {
  uint32_t major = GPUSTACK_PLUGIN_ABI_MAJOR;
  uint32_t minor = GPUSTACK_PLUGIN_ABI_MINOR;
};

struct PluginIdentity {
  std::string manufacturer;
  std::string display_name;
  std::string base_resource_name;
  std::string plugin_version;
  std::vector<uint16_t> pci_vendor_ids;
  gpustack_capabilities capabilities = 0;
  std::string partition_kind;
};

struct MetricsSnapshot {
  std::vector<sdk::DeviceSample> devices;
  std::vector<sdk::ProcessSample> processes;
};

// Thread-safe: calls are serialized as plugin.h requires, except PollHealthEvents, which may run
// beside them; Shutdown (and the destructor) waits until every running call has returned.
class Plugin {
 public:
  // Made by Load() (loader.h) once negotiation and identify succeeded.
  Plugin(Manifest manifest, boost::dll::shared_library library, const gpustack_plugin_api& api,
         AbiVersion negotiated, PluginIdentity identity);
  ~Plugin();  // shuts the instance down; the library unloads last
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const PluginIdentity& identity() const { return identity_; }
  AbiVersion negotiated() const { return negotiated_; }
  bool initialized() const { return initialized_; }

  // Creates the plugin's instance with its settings and the host's PCI inventory.
  Status Init(std::map<std::string, std::string> settings,
              const std::vector<pci::PciDevice>& inventory);
  void Shutdown();

  Result<std::vector<sdk::AcceleratorGroup>> Discover();
  Result<std::vector<sdk::ContainerEdit>> Grant(const sdk::Grant& grant);
  Result<std::vector<sdk::Partition>> ListPartitions(std::string_view accelerator_id);
  Result<sdk::Partition> CreatePartition(const sdk::CreatePartitionRequest& request);
  Status DestroyPartition(const sdk::DestroyPartitionRequest& request);
  Result<MetricsSnapshot> SampleMetrics(const sdk::MetricsRequest& request);
  Result<std::vector<sdk::HealthEvent>> PollHealthEvents(uint32_t timeout_ms);

 private:
  // The error for a non-OK status from `hook`, with the plugin's last_error_message.
  Error CallError(const char* hook, gpustack_status status) const;
  // The result of a call that reported through a sink: invalid output first, then the status.
  Status Outcome(const char* hook, gpustack_status status, const std::string& output_problem) const;
  Error Missing(const char* hook) const;  // for an optional hook the table leaves NULL
  Status RequireInstance(const char* hook) const;

  // Declared first so it is destroyed last. The loader pins every plugin (RTLD_NODELETE), so
  // closing this handle never unmaps plugin code.
  boost::dll::shared_library library_;
  Manifest manifest_;
  gpustack_plugin_api api_;  // the known prefix of the plugin's table
  AbiVersion negotiated_;
  PluginIdentity identity_;

  mutable std::shared_mutex lifecycle_;  // Init/Shutdown exclusive, every call shared
  std::mutex calls_;                     // serializes the calls other than PollHealthEvents

  // State of the current instance; host services and the inventory outlive it.
  std::unique_ptr<HostServices> services_;
  std::vector<std::string> pci_strings_;
  std::vector<gpustack_pci_device> pci_devices_;
  std::vector<const gpustack_pci_device*> pci_device_ptrs_;
  gpustack_plugin_instance* instance_ = nullptr;
  bool initialized_ = false;
};

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_PLUGIN_H_
