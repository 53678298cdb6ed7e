// The host's PCI inventory: every function of the accelerator-bearing classes, scanned once with
// libpci and handed to every plugin, so all plugins see the same devices and tests can point the
// scan at a fixture sysfs tree.
#ifndef GPUSTACK_HOST_PCI_PCI_INVENTORY_H_
#define GPUSTACK_HOST_PCI_PCI_INVENTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::pci {

struct PciDevice {
  std::string bus_id;  // "0000:3b:00.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;  // 24-bit: base class, subclass, prog-if
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  int32_t numa_node = -1;
  std::string sysfs_path;
};

struct ScanOptions {
  // Root of the sysfs tree; the scan reads <root>/bus/pci. "/sys" on a real host.
  std::string sysfs_root = "/sys";
  // Base-class prefixes (two hex digits each) to keep: network, display, co-processor,
  // processing accelerator. Empty keeps every function.
  std::vector<std::string> class_prefixes = {"02", "03", "0b", "12"};
};

// Scans PCI. A missing or malformed tree is an error, never a process exit.
Result<std::vector<PciDevice>> Scan(const ScanOptions& options);

// Parses "02,03,0b,12" into prefixes; an entry that is not two hex digits is an error.
Result<std::vector<std::string>> ParseClassPrefixes(const std::string& text);

}  // namespace gpustack::pci

#endif  // GPUSTACK_HOST_PCI_PCI_INVENTORY_H_
