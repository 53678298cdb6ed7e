// The Huawei Ascend plugin (huawei.com/npu).
//
// It identifies itself; discovery, slicing and metrics through
// DCMI (libdcmi.so) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class AscendPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "ascend",
        .display_name = "Huawei Ascend",
        .base_resource_name = "huawei.com/npu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x19e5},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit AscendPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(AscendPlugin)
