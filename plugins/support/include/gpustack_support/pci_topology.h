// PCI identity and topology helpers shared by the plugins: one spelling of a bus id, and what a
// device's sysfs directory says about it (DRM nodes, NUMA, CPU affinity, root port).
#ifndef GPUSTACK_SUPPORT_PCI_TOPOLOGY_H_
#define GPUSTACK_SUPPORT_PCI_TOPOLOGY_H_

#include <gpustack/plugin.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpustack::support {

// "00000000:3B:00.0", "0000:3b:00.0" or "3b:00.0" -> "0000:3b:00.0"; nullopt when malformed.
std::optional<std::string> NormalizeBusId(std::string_view text);

// rocm_smi's BDFID: domain << 32 | bus << 8 | device << 3 | function.
std::string BusIdFromBdfId(uint64_t bdfid);

// The host's PCI function with this (normalized) bus id, or nullptr.
const gpustack_pci_device* FindPci(std::span<const gpustack_pci_device* const> devices,
                                   std::string_view bus_id);

// True when the inventory holds a function of one of `vendor_ids`.
bool HasVendorDevice(std::span<const gpustack_pci_device* const> devices,
                     std::span<const uint16_t> vendor_ids);

struct DrmNodes {
  std::optional<uint32_t> card;    // /dev/dri/card<N>
  std::optional<uint32_t> render;  // /dev/dri/renderD<M>
};
// Reads <sysfs_path>/drm/: the numbers the device nodes use (never an enumeration index).
DrmNodes ReadDrmNodes(const std::string& sysfs_path);

// <sysfs_path>/local_cpulist ("0-23,48-71"); empty when absent.
std::string ReadCpuAffinity(const std::string& sysfs_path);

// The root port above the device: the first bus id below the pciDDDD:BB host bridge in the
// resolved path ("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0" -> "0000:3a:00.0");
// empty when the path does not say.
std::string ReadPciRootId(const std::string& sysfs_path);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_PCI_TOPOLOGY_H_
