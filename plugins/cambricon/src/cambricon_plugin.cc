// The Cambricon plugin (cambricon.com/mlu).
//
// It identifies itself; discovery, slicing and metrics through
// CNDev (libcndev.so) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class CambriconPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "cambricon",
        .display_name = "Cambricon",
        .base_resource_name = "cambricon.com/mlu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0xcabc},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit CambriconPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(CambriconPlugin)
