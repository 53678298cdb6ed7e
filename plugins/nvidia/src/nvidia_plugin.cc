// The NVIDIA plugin (nvidia.com/gpu): discovery, grants, metrics and MIG partitions through NVML
// (libnvidia-ml.so.1), loaded at run time. See README.md for what is verified where.
#include <gpustack/plugin.hpp>

#include <gpustack_support/nvml_family.h>

namespace {

std::string ArchitectureName(unsigned architecture) {
  // nvmlDeviceArchitecture_t values.
  switch (architecture) {
    case 2:
      return "Kepler";
    case 3:
      return "Maxwell";
    case 4:
      return "Pascal";
    case 5:
      return "Volta";
    case 6:
      return "Turing";
    case 7:
      return "Ampere";
    case 8:
      return "Ada";
    case 9:
      return "Hopper";
    case 10:
      return "Blackwell";
    default:
      return {};
  }
}

constexpr const char* kInstallHint =
    "install the NVIDIA driver (nvidia-smi must work; it ships NVML) or run the device manager "
    "under the nvidia RuntimeClass";

gpustack::support::NvmlFamilyTraits Traits() {
  return {
      .manufacturer = "nvidia",
      .prefix = "nvml",
      .pci_vendor_ids = {0x10de},
      .library_candidates = {"libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                             "/usr/lib64/libnvidia-ml.so.1", "/usr/lib/wsl/lib/libnvidia-ml.so.1"},
      .preload_candidates = {},
      .install_hint = kInstallHint,
      .logical_slice_count = 128,
      .cores_percentage_overcommit = true,
      .partitions = true,
      .profile_probe_count = 0x12,  // NVML_GPU_INSTANCE_PROFILE_COUNT
      .minor_offset = 0,
      .family_name = ArchitectureName,
      .card_node = "nvidia",
      // The NVIDIA container toolkit (RuntimeClass nvidia) turns NVIDIA_VISIBLE_DEVICES into
      // device nodes and driver mounts; slices are budgeted by HAMi-core's environment
      // (docs/decisions.md D9), partitions named by their MIG device.
      .injection = {.shared_nodes = {"nvidiactl", "nvidia-uvm"},
                    .visible_env = "NVIDIA_VISIBLE_DEVICES",
                    .memory_env = "CUDA_DEVICE_MEMORY_LIMIT_",
                    .memory_suffix = "m",
                    .cores_env = "CUDA_DEVICE_SM_LIMIT",
                    .slice_env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
                    .partition_in_visible_env = true},
  };
}

class NvidiaPlugin final : public gpustack::support::NvmlMigFamilyPlugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "nvidia",
        .display_name = "NVIDIA",
        .base_resource_name = "nvidia.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x10de},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING |
                        GPUSTACK_CAP_PARTITIONING | GPUSTACK_CAP_PROCESS_METRICS |
                        GPUSTACK_CAP_HEALTH_EVENTS,
        .partition_kind = "mig",
        .runtime_class = "nvidia",
        .runtime_flags = GPUSTACK_RUNTIME_INJECTS_DRIVER,
        .install_hint = kInstallHint,
        // HAMi-core reads the budgets above inside the container. The operator does not ship it:
        // a node stages it from plugins.config.nvidia.enforcer (docs/enforcement.md), one build
        // per CUDA major. Its log level and its shared cache (the container's own working
        // directory) are defaults a container's own env may override.
        .enforcer =
            gpustack::sdk::Enforcer{
                .name = "hami-core",
                .files = {"libvgpu.so"},
                .preload = {"libvgpu.so"},
                .variant = GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR,
                .variant_prefix = "cuda-",
                .default_env = {"LIBCUDA_LOG_LEVEL=0",
                                "CUDA_DEVICE_MEMORY_SHARED_CACHE=/var/run/gpustack/enforcer/"
                                "cudevshr.cache"},
            },
    };
    return identity;
  }

  explicit NvidiaPlugin(const gpustack::sdk::Host& host) : NvmlMigFamilyPlugin(host, Traits()) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(NvidiaPlugin)
