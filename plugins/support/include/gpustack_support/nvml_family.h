// One implementation of discovery, metrics and MIG-style partitions for every library that speaks
// NVML's API: NVIDIA (NVML), Iluvatar (ixml, NVML names) and T-Head (HGML, `hgml` names). The
// vendor plugins differ only in their traits.
#ifndef GPUSTACK_SUPPORT_NVML_FAMILY_H_
#define GPUSTACK_SUPPORT_NVML_FAMILY_H_

#include <gpustack/plugin.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpustack_support/nvml_api.h"
#include "gpustack_support/ownership_store.h"
#include "gpustack_support/plugin_library.h"

namespace gpustack::support {

struct NvmlFamilyTraits {
  std::string manufacturer;              // "nvidia": also the partition table key
  std::string prefix;                    // "nvml" or "hgml"
  std::vector<uint16_t> pci_vendor_ids;  // a node without them needs no library
  std::string library_env;               // "GPUSTACK_NVIDIA_LIBRARY"
  std::vector<std::string> library_candidates;
  std::vector<std::string> preload_candidates;  // opened first, best effort (T-Head's libuki)
  std::string install_hint;                     // appended to "library not found" errors
  uint32_t logical_slice_count = 0;             // per card, when not partitioned
  bool cores_percentage_overcommit = false;
  bool partitions = false;           // query and drive MIG through the library
  unsigned profile_probe_count = 0;  // profile indexes to probe (ids may be sparse)
  // /dev node number from the driver's minor: NVIDIA and Iluvatar use it as is; T-Head's card
  // node is the minor minus one.
  int minor_offset = 0;
  // The product family from nvmlDeviceGetArchitecture ("Ampere"); empty when unknown.
  std::function<std::string(unsigned architecture)> family_name;
};

class NvmlFamilyPlugin : public sdk::Plugin {
 public:
  NvmlFamilyPlugin(const sdk::Host& host, NvmlFamilyTraits traits);
  ~NvmlFamilyPlugin() override;

  void Discover(sdk::DiscoverySink& sink) override;
  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override;
  void ListPartitions(std::string_view accelerator_id, sdk::PartitionSink& sink) override;
  void CreatePartition(const sdk::CreatePartitionRequest& request,
                       sdk::PartitionSink& sink) override;
  void DestroyPartition(const sdk::DestroyPartitionRequest& request) override;

 private:
  struct DriverProfile {
    sdk::PartitionProfile profile;  // name, geometry, legal placements from the driver
    unsigned creation_id = 0;       // what Create* takes
  };
  struct Card {
    std::string uuid;
    nvml::Device handle = nullptr;
    bool partitioned = false;
    std::vector<DriverProfile> profiles;
  };
  struct LivePartition {
    sdk::Partition partition;
    nvml::GpuInstance instance = nullptr;
    unsigned instance_id = 0;
  };

  // Loads and initializes the library. False when it is missing on a node that has none of the
  // vendor's PCI devices (nothing to report); throws UNAVAILABLE when devices need it.
  bool EnsureLoaded();
  [[noreturn]] void Fail(gpustack_status code, const std::string& what, nvml::Return r) const;
  std::string ErrorText(nvml::Return r) const;
  std::vector<DriverProfile> QueryProfiles(nvml::Device device, const std::string& product) const;
  Card& FindCard(std::string_view uuid);
  void RefreshCards();
  std::vector<LivePartition> Live(const Card& card) const;
  std::optional<std::string> FindMigDeviceUuid(const Card& card, unsigned instance_id) const;
  std::string MigDeviceUuid(const Card& card, unsigned instance_id) const;  // or a stand-in
  std::vector<LivePartition> ListInstances(const Card& card) const;         // without owners
  std::vector<OwnershipRecord> LoadOwners() const;
  void UpdateOwners(const std::function<void(std::vector<OwnershipRecord>&)>& change) const;

  sdk::Host host_;
  NvmlFamilyTraits traits_;
  PluginLibrary library_;
  nvml::Api api_{};
  bool initialized_ = false;
  std::vector<Card> cards_;  // from the last discovery, in enumeration order
  std::unique_ptr<OwnershipStore> owners_;
};

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_NVML_FAMILY_H_
