// The Iluvatar CoreX plugin (iluvatar.com/gpu): discovery and metrics through IXML (libixml.so),
// which speaks NVML's API under NVML's own `nvml` names. It is loaded RTLD_LOCAL and called only
// through its own handle, so a process that also holds NVIDIA's NVML never mixes the two.
#include <gpustack/plugin.hpp>

#include <gpustack_support/nvml_family.h>

namespace {

gpustack::support::NvmlFamilyTraits Traits() {
  return {
      .manufacturer = "iluvatar",
      .prefix = "nvml",
      .pci_vendor_ids = {0x1e3e},
      .library_env = "GPUSTACK_ILUVATAR_LIBRARY",
      .library_candidates = {"/usr/local/corex/lib64/libixml.so", "/usr/local/corex/lib/libixml.so",
                             "libixml.so"},
      .preload_candidates = {},
      .install_hint = "install the Iluvatar CoreX driver (libixml.so under /usr/local/corex)",
      // CoreX runs CUDA-compatible code, so the same HAMi-core shim budgets a slice.
      .logical_slice_count = 128,
      .cores_percentage_overcommit = true,
      .partitions = false,  // no partitioning is documented for CoreX
      .profile_probe_count = 0,
      .minor_offset = 0,  // /dev/iluvatar<minor>
      .family_name = {},
  };
}

class IluvatarPlugin final : public gpustack::support::NvmlFamilyPlugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "iluvatar",
        .display_name = "Iluvatar",
        .base_resource_name = "iluvatar.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1e3e},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
    };
    return identity;
  }

  explicit IluvatarPlugin(const gpustack::sdk::Host& host) : NvmlFamilyPlugin(host, Traits()) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(IluvatarPlugin)
