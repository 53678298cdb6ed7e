// The AMD plugin (amd.com/gpu).
//
// It identifies itself; discovery, slicing and metrics through
// amdsmi (libamd_smi.so) or rocm_smi (librocm_smi64.so) are not implemented yet and answer
// UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class AmdPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "amd",
        .display_name = "AMD",
        .base_resource_name = "amd.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1002},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit AmdPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(AmdPlugin)
