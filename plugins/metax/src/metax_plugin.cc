// The MetaX plugin (metax-tech.com/gpu).
//
// It identifies itself; discovery, slicing and metrics through
// mxSml (libmxsml.so) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class MetaxPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "metax",
        .display_name = "MetaX",
        .base_resource_name = "metax-tech.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x9999},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit MetaxPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(MetaxPlugin)
