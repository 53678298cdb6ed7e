// The AMD plugin (amd.com/gpu): discovery and metrics through ROCm SMI (librocm_smi64.so), with
// compute units and the gfx target from the KFD topology. See README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/rocm_family.h>

namespace {

constexpr const char* kInstallHint = "load the amdgpu driver and install ROCm (rocm-smi-lib)";

std::string Family(const std::string& gfx) {
  if (gfx == "gfx942" || gfx == "gfx950") return "CDNA3";
  if (gfx == "gfx90a") return "CDNA2";
  if (gfx == "gfx908") return "CDNA";
  if (gfx.rfind("gfx9", 0) == 0) return "GCN";
  if (gfx.rfind("gfx101", 0) == 0) return "RDNA";
  if (gfx.rfind("gfx103", 0) == 0) return "RDNA2";
  if (gfx.rfind("gfx11", 0) == 0) return "RDNA3";
  if (gfx.rfind("gfx12", 0) == 0) return "RDNA4";
  return {};
}

class AmdPlugin final : public gpustack::support::RocmFamilyPlugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "amd",
        .display_name = "AMD",
        .base_resource_name = "amd.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1002},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
        .runtime_class = "amd",  // not required: the grant injects the device nodes
        .install_hint = kInstallHint,
        // The CU mask binds compute in ROCr itself; VRAM binds only through GPUStack's libvrocm
        // shim, which keeps its ledger in the container's working directory. Not shipped: a
        // node stages it from plugins.config.amd.enforcer (docs/enforcement.md).
        .enforcer =
            gpustack::sdk::Enforcer{
                .name = "vrocm",
                .files = {"libvrocm.so"},
                .preload = {"libvrocm.so"},
                .workdir_env = "VROCM_LEDGER_PATH",
                .default_env = {"LIBVROCM_LOG_LEVEL=1"},
            },
    };
    return identity;
  }

  explicit AmdPlugin(const gpustack::sdk::Host& host)
      : RocmFamilyPlugin(
            host,
            {
                .manufacturer = "amd",
                .library = {.pci_vendor_ids = {0x1002},
                            .candidates = {"/opt/rocm/lib/librocm_smi64.so", "librocm_smi64.so"},
                            .preload = {},
                            .install_hint = kInstallHint},
                // A CU mask plus a memory shim budgets a slice; compute
                // budgets may overlap (the upstream detect sample: 128).
                .logical_slice_count = 128,
                .cores_percentage_overcommit = true,
                .family_name = Family,
                // Plain runc works when the grant carries /dev/kfd and the card's DRM nodes;
                // ROCr picks the card by UUID, and libvrocm budgets a slice's VRAM.
                .injection = {.shared_nodes = {"kfd"},
                              .inject_nodes = true,
                              .visible_env = "ROCR_VISIBLE_DEVICES",
                              .fixed_env = {{"AMD_VISIBLE_DEVICES", "none"}},
                              .memory_env = "VROCM_DEVICE_MEMORY_LIMIT_"},
            }) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(AmdPlugin)
