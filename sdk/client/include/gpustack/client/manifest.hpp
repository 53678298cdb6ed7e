// The JSON manifest beside each plugin library, read BEFORE the library is loaded so the host can
// list, skip and report plugins without running vendor code:
//   {"format_version": 1, "name": "nvidia", "library": "libgpustack_plugin_nvidia.so",
//    "abi": {"major": 1, "minor": 0}, "pci_vendor_ids": ["0x10de"]}
// Unknown keys are ignored (newer manifests stay readable).
#ifndef GPUSTACK_CLIENT_MANIFEST_HPP_
#define GPUSTACK_CLIENT_MANIFEST_HPP_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gpustack/client/result.hpp>

namespace gpustack::client {

struct Manifest {
  std::string name;     // manufacturer key, [a-z0-9-]
  std::string library;  // a file name in the manifest's directory
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::vector<uint16_t> pci_vendor_ids;
  std::filesystem::path manifest_path;
  std::filesystem::path library_path;  // manifest's directory / library
};

// A manifest is a few hundred bytes; a larger file is refused rather than read.
constexpr size_t kMaxManifestBytes = 64 * 1024;

// Parses manifest text; `manifest_path` names the file in messages and locates the library.
Result<Manifest> ParseManifest(std::string_view text, const std::filesystem::path& manifest_path);
// Reads a manifest: a regular file of at most kMaxManifestBytes (never a FIFO or a device).
Result<Manifest> ReadManifest(const std::filesystem::path& manifest_path);

bool IsValidManufacturerKey(std::string_view key);
std::string FormatVendorId(uint16_t id);  // "0x10de"

}  // namespace gpustack::client

#endif  // GPUSTACK_CLIENT_MANIFEST_HPP_
