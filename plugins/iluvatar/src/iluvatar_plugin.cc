// The Iluvatar CoreX plugin (iluvatar.com/gpu): discovery and metrics through IXML (libixml.so),
// which speaks NVML's API under NVML's own `nvml` names. It is loaded RTLD_LOCAL and called only
// through its own handle, so a process that also holds NVIDIA's NVML never mixes the two.
#include <gpustack/plugin.hpp>

#include <gpustack_support/nvml_family.h>

namespace {

constexpr const char* kInstallHint =
    "install the Iluvatar CoreX driver (libixml.so under /usr/local/corex)";

gpustack::support::NvmlFamilyTraits Traits() {
  return {
      .manufacturer = "iluvatar",
      .prefix = "nvml",
      .pci_vendor_ids = {0x1e3e},
      .library_candidates = {"/usr/local/corex/lib64/libixml.so", "/usr/local/corex/lib/libixml.so",
                             "libixml.so"},
      .preload_candidates = {},
      .install_hint = kInstallHint,
      // CoreX runs CUDA-compatible code, so the same HAMi-core shim budgets a slice.
      .logical_slice_count = 128,
      .cores_percentage_overcommit = true,
      .partitions = false,  // no partitioning is documented for CoreX
      .profile_probe_count = 0,
      .minor_offset = 0,  // /dev/iluvatar<minor>
      .family_name = {},
      .card_node = "iluvatar",
      // The ix-container-toolkit (RuntimeClass iluvatar) turns IX_VISIBLE_DEVICES into device
      // nodes; HAMi-core budgets slices on CoreX with NVIDIA's variables.
      .injection = {.shared_nodes = {"itrctl"},
                    .visible_env = "IX_VISIBLE_DEVICES",
                    .memory_env = "CUDA_DEVICE_MEMORY_LIMIT_",
                    .memory_suffix = "m",
                    .cores_env = "CUDA_DEVICE_SM_LIMIT"},
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
        .runtime_class = "iluvatar",
        .runtime_flags = GPUSTACK_RUNTIME_INJECTS_DEVICES,
        .install_hint = kInstallHint,
        // HAMi-core unchanged: CoreX's CUDA-compatible driver API lets one build serve every
        // card. Not shipped: plugins.config.iluvatar.enforcer (docs/enforcement.md).
        .enforcer =
            gpustack::sdk::Enforcer{
                .name = "hami-core",
                .files = {"libvgpu.so"},
                .preload = {"libvgpu.so"},
                .default_env = {"LIBCUDA_LOG_LEVEL=0",
                                "CUDA_DEVICE_MEMORY_SHARED_CACHE=/var/run/gpustack/enforcer/"
                                "cudevshr.cache"},
            },
    };
    return identity;
  }

  explicit IluvatarPlugin(const gpustack::sdk::Host& host) : NvmlFamilyPlugin(host, Traits()) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(IluvatarPlugin)
