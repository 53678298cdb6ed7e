// The Iluvatar plugin (iluvatar.com/gpu).
//
// It identifies itself; discovery, slicing and metrics through
// IXML (libixml.so) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class IluvatarPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "iluvatar",
        .display_name = "Iluvatar",
        .base_resource_name = "iluvatar.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1e3e},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit IluvatarPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(IluvatarPlugin)
