// The T-Head plugin (alibabacloud.com/ppu).
//
// It identifies itself; discovery, slicing, partitions and metrics through
// HGML (libhgml.so, after libuki.so) are not implemented yet and answer UNIMPLEMENTED (see
// README.md).
#include <gpustack/plugin.hpp>

namespace {

class TheadPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "thead",
        .display_name = "T-Head",
        .base_resource_name = "alibabacloud.com/ppu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1ded},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PARTITIONING,
        .partition_kind = "mig",
    };
    return identity;
  }

  explicit TheadPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(TheadPlugin)
