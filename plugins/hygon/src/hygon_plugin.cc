// The Hygon plugin (hygon.com/dcu).
//
// It identifies itself; discovery, slicing and metrics through
// Hygon's rocm_smi (librocm_smi64.so) and libhydmi_mig.so are not implemented yet and answer
// UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class HygonPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "hygon",
        .display_name = "Hygon",
        .base_resource_name = "hygon.com/dcu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1d94},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit HygonPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(HygonPlugin)
