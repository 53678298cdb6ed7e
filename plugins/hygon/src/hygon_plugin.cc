// The Hygon DCU plugin (hygon.com/dcu): discovery and metrics through hyhal's ROCm SMI
// (librocm_smi64.so, the same API as AMD's), with compute units and the gfx target from the KFD
// topology. Hygon's MIG library (libhydmi_mig.so) is not driven yet; see README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/rocm_family.h>

namespace {

constexpr const char* kInstallHint = "install the Hygon DCU driver and DTK (hyhal)";

class HygonPlugin final : public gpustack::support::RocmFamilyPlugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "hygon",
        .display_name = "Hygon",
        .base_resource_name = "hygon.com/dcu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1d94},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
        .runtime_class = "hygon",  // not required: the grant injects the device nodes
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit HygonPlugin(const gpustack::sdk::Host& host)
      : RocmFamilyPlugin(
            host,
            {
                .manufacturer = "hygon",
                .library = {.pci_vendor_ids = {0x1d94},
                            .candidates = {"/opt/hyhal/lib/librocm_smi64.so",
                                           "/opt/dtk/lib/librocm_smi64.so", "librocm_smi64.so"},
                            .preload = {},
                            .install_hint = kInstallHint},
                // vDCU: a CU mask plus memory; no compute overcommit.
                .logical_slice_count = 4,
                .cores_percentage_overcommit = false,
                .family_name = [](const std::string&) { return std::string("DCU"); },
                // No runtime needed: the grant carries /dev/kfd, /dev/mkfd and the DRM nodes.
                .injection = {.shared_nodes = {"kfd", "mkfd"}, .inject_nodes = true},
            }) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(HygonPlugin)
