// The NVIDIA plugin (nvidia.com/gpu).
//
// It identifies itself; discovery, slicing, partitions and metrics through
// NVML (libnvidia-ml.so.1) are not implemented yet and answer UNIMPLEMENTED (see README.md).
#include <gpustack/plugin.hpp>

namespace {

class NvidiaPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "nvidia",
        .display_name = "NVIDIA",
        .base_resource_name = "nvidia.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x10de},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PARTITIONING,
        .partition_kind = "mig",
    };
    return identity;
  }

  explicit NvidiaPlugin(const gpustack::sdk::Host& /*host*/) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(NvidiaPlugin)
