// The T-Head PPU plugin (alibabacloud.com/ppu): discovery, metrics and MIG partitions through HGML
// (libhgml.so, which needs libuki.so loaded first), NVML's API under an `hgml` prefix.
//
// Two T-Head rules live in the traits: the card's device node /dev/alixpu_ppu<N> is the driver's
// minor minus one, and profile ids are sparse, so every id is probed and matched by name
// ("MIG 4g48gb" is published as 4g.48gb).
#include <gpustack/plugin.hpp>

#include <gpustack_support/nvml_family.h>

namespace {

constexpr const char* kInstallHint = "install the PPU driver (libhgml.so and libuki.so)";

gpustack::support::NvmlFamilyTraits Traits() {
  return {
      .manufacturer = "thead",
      .prefix = "hgml",
      .pci_vendor_ids = {0x1ded},
      .library_candidates = {"libhgml.so", "/usr/lib/libhgml.so", "/usr/lib64/libhgml.so"},
      .preload_candidates = {"libuki.so", "/usr/lib/libuki.so", "/usr/lib64/libuki.so"},
      .install_hint = kInstallHint,
      .logical_slice_count = 0,  // no logical slicing is known for PPU
      .cores_percentage_overcommit = false,
      .partitions = true,
      .profile_probe_count = 85,
      .minor_offset = -1,
      .family_name = {},
      .card_node = "alixpu_ppu",
      // No vendor runtime: the grant carries the device nodes (docs/behaviour.md §6.3, §6.4).
      .injection = {.shared_nodes = {"alixpu", "alixpu_ctl"}, .inject_nodes = true},
  };
}

class TheadPlugin final : public gpustack::support::NvmlMigFamilyPlugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "thead",
        .display_name = "T-Head",
        .base_resource_name = "alibabacloud.com/ppu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1ded},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_PARTITIONING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "mig",
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit TheadPlugin(const gpustack::sdk::Host& host) : NvmlMigFamilyPlugin(host, Traits()) {}
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(TheadPlugin)
