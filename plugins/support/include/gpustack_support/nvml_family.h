// One implementation of discovery, grants, device nodes and metrics for every library that speaks
// NVML's API: NVIDIA (NVML), Iluvatar (ixml, NVML names) and T-Head (HGML, `hgml` names), and of
// MIG-style partitions for the two that partition (NvmlMigFamilyPlugin). The vendor plugins differ
// only in their traits.
#ifndef GPUSTACK_SUPPORT_NVML_FAMILY_H_
#define GPUSTACK_SUPPORT_NVML_FAMILY_H_

#include <gpustack/plugin.hpp>
#include <gpustack/plugin_util.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpustack_support/injection.h"
#include "gpustack_support/nvml_api.h"
#include "gpustack_support/ownership_store.h"

namespace gpustack::support {

struct NvmlFamilyTraits {
  std::string manufacturer{};              // "nvidia": also the partition table key
  std::string prefix{};                    // "nvml" or "hgml"
  std::vector<uint16_t> pci_vendor_ids{};  // a node without them needs no library
  std::vector<std::string> library_candidates{};
  std::vector<std::string> preload_candidates{};  // opened first, best effort (T-Head's libuki)
  std::string install_hint{};                     // appended to "library not found" errors
  uint32_t logical_slice_count = 0;               // per card, when not partitioned
  bool cores_percentage_overcommit = false;
  bool partitions = false;           // query and drive MIG through the library
  unsigned profile_probe_count = 0;  // profile indexes to probe (ids may be sparse)
  // /dev node number from the driver's minor: NVIDIA and Iluvatar use it as is; T-Head's card
  // node is the minor minus one.
  int minor_offset = 0;
  // The product family from nvmlDeviceGetArchitecture ("Ampere"); empty when unknown.
  std::function<std::string(unsigned architecture)> family_name{};
  std::string card_node{};  // the card's device node before its number: "nvidia" -> /dev/nvidia0
  Injection injection{};    // how containers get the cards (the card's own node is added to it)
};

class NvmlFamilyPlugin : public sdk::Plugin {
 public:
  NvmlFamilyPlugin(const sdk::Host& host, NvmlFamilyTraits traits);
  ~NvmlFamilyPlugin() override;

  void Discover(sdk::DiscoverySink& sink) override;
  void Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) override;
  void ListDeviceNodes(const std::vector<std::string>& ids, sdk::DeviceNodeSink& sink) override;
  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override;
  // XID critical errors through the driver's event sets (used where the plugin claims
  // GPUSTACK_CAP_HEALTH_EVENTS); a card that goes unhealthy comes back when discovery reads it
  // healthy again.
  void PollHealthEvents(uint32_t timeout_ms, sdk::HealthSink& sink) override;

 protected:
  struct DriverProfile {
    sdk::PartitionProfile profile;  // name, geometry, legal placements from the driver
    unsigned creation_id = 0;       // what Create* takes
  };
  struct Card {
    std::string uuid;
    uint32_t index = 0;             // as reported
    nvml::Device handle = nullptr;  // null: the card did not answer this pass (reported unhealthy)
    uint32_t node = 0;              // /dev/<card_node><node>
    bool partitioned = false;
    std::vector<DriverProfile> profiles;
  };

  // Loads and initializes the library. False when it is missing on a node that has none of the
  // vendor's PCI devices (nothing to report); throws UNAVAILABLE when devices need it.
  bool EnsureLoaded();
  [[noreturn]] void Fail(gpustack_status code, const std::string& what, nvml::Return r) const;
  std::string ErrorText(nvml::Return r) const;
  Card& FindCard(std::string_view uuid);
  void RefreshCards();
  InjectedCard Injected(const Card& card) const;

  sdk::Host host_;
  NvmlFamilyTraits traits_;
  sdk::LazyLibrary library_;
  nvml::Api api_{};
  bool initialized_ = false;
  std::atomic<bool> loaded_{false};  // api_ is complete and the library initialized
  std::vector<Card> cards_{};        // from the last discovery, in enumeration order
  sdk::CardBook book_;               // every card as last read, by the library's index

 private:
  std::vector<DriverProfile> QueryProfiles(nvml::Device device, const std::string& product) const;
  // Reads card `i`: the card, or the first query that failed ("uuid: GPU is lost (15)").
  struct Read {
    sdk::Accelerator accelerator;
    sdk::AcceleratorGroup group;
    std::string product;
    Card card;
    std::string failure;
    bool skip = false;  // no usable device node: left out on purpose
  };
  Read ReadCard(unsigned i, const std::string& driver, int cuda);

  std::mutex events_mutex_;  // the health thread's own state
  nvml::EventSet events_ = nullptr;
  std::map<nvml::Device, std::string> event_cards_;  // uuid by handle
};

// The family with MIG-style partitions (NVIDIA, T-Head): created, listed and destroyed through
// the library, with ownership recorded by the plugin.
class NvmlMigFamilyPlugin : public NvmlFamilyPlugin {
 public:
  NvmlMigFamilyPlugin(const sdk::Host& host, NvmlFamilyTraits traits);

  void ListPartitions(std::string_view accelerator_id, sdk::PartitionSink& sink) override;
  void CreatePartition(const sdk::CreatePartitionRequest& request,
                       sdk::PartitionSink& sink) override;
  void DestroyPartition(const sdk::DestroyPartitionRequest& request) override;

 private:
  struct LivePartition {
    sdk::Partition partition;
    nvml::GpuInstance instance = nullptr;
    unsigned instance_id = 0;
  };
  std::vector<LivePartition> Live(const Card& card) const;
  std::vector<LivePartition> ListInstances(const Card& card) const;  // without owners
  std::vector<OwnershipRecord> LoadOwners() const;
  void UpdateOwners(const std::function<void(std::vector<OwnershipRecord>&)>& change) const;

  std::unique_ptr<OwnershipStore> owners_;
};

// The MIG device UUID of GPU instance `instance_id` on `card`, if it has one.
std::optional<std::string> FindMigDeviceUuid(const nvml::Api& api, nvml::Device card,
                                             unsigned instance_id);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_NVML_FAMILY_H_
