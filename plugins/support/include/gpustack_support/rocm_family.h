// Discovery and metrics for the manufacturers whose management library is ROCm SMI: AMD
// (librocm_smi64.so) and Hygon (hyhal's librocm_smi64.so). What ROCm SMI does not say (compute
// units, gfx target) comes from the KFD topology in sysfs, which is where ROCr reads it too.
#ifndef GPUSTACK_SUPPORT_ROCM_FAMILY_H_
#define GPUSTACK_SUPPORT_ROCM_FAMILY_H_

#include <gpustack/plugin.hpp>
#include <gpustack/plugin_util.hpp>

#include <functional>
#include <string>
#include <vector>

#include "gpustack_support/injection.h"
#include "gpustack_support/rocm_smi_api.h"

namespace gpustack::support {

struct RocmFamilyTraits {
  std::string manufacturer{};  // "amd"
  sdk::LibraryRequirements library{};
  uint32_t logical_slice_count = 0;
  bool cores_percentage_overcommit = false;
  // The product family from the gfx target ("gfx1101" -> "RDNA3"); empty when unknown.
  std::function<std::string(const std::string& gfx)> family_name{};
  // How containers get the cards; each card's DRM nodes (dri/card<N>, dri/renderD<M>) are added.
  Injection injection{};
};

// What the KFD topology says about one GPU (sysfs class/kfd/kfd/topology/nodes/<n>/properties).
struct KfdNode {
  uint32_t compute_units = 0;
  std::string gfx_target{};  // "gfx1101"
};
// The KFD node of the GPU at `bus_id` under `sysfs_root`; empty fields when not found.
KfdNode ReadKfdNode(const std::string& sysfs_root, const std::string& bus_id);
// "gfx1101" from KFD's gfx_target_version 110001 (major, minor, stepping; minor and stepping
// in hex).
std::string GfxTarget(uint32_t gfx_target_version);

class RocmFamilyPlugin : public sdk::Plugin {
 public:
  RocmFamilyPlugin(const sdk::Host& host, RocmFamilyTraits traits);
  ~RocmFamilyPlugin() override;

  void Discover(sdk::DiscoverySink& sink) override;
  void Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) override;
  void ListDeviceNodes(const std::vector<std::string>& ids, sdk::DeviceNodeSink& sink) override;
  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override;

 private:
  struct Card {
    std::string uuid;
    uint32_t index = 0;     // the library's device index
    uint32_t position = 0;  // the index it was reported at
    bool answered = true;   // false: it failed to read at the last discovery
    uint32_t drm_card = 0;
    uint32_t drm_render = 0;
  };
  bool EnsureLoaded();
  std::string StatusText(rsmi::Status status) const;
  [[noreturn]] void Fail(const std::string& what, rsmi::Status status) const;
  const Card& FindCard(std::string_view uuid);
  InjectedCard Injected(const Card& card) const;

  sdk::Host host_;
  RocmFamilyTraits traits_;
  sdk::LazyLibrary library_;
  bool initialized_ = false;
  rsmi::Api api_{};
  std::vector<Card> cards_{};
  sdk::CardBook book_;
};

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_ROCM_FAMILY_H_
