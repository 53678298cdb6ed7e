// The Moore Threads plugin (mthreads.com/gpu).
//
// It identifies itself; discovery, slicing and metrics through
// MTML (libmtml.so) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class MthreadsPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "mthreads",
        .display_name = "Moore Threads",
        .base_resource_name = "mthreads.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1ed5},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit MthreadsPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(MthreadsPlugin)
