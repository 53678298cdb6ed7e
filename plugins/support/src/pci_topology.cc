#include "gpustack_support/pci_topology.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace gpustack::support {
namespace {

bool IsHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses the number after `prefix` in a directory name such as "card1" or "renderD128".
std::optional<uint32_t> Suffix(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size()) return std::nullopt;
  uint32_t value = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9' || value > 100'000'000) return std::nullopt;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  return value;
}

}  // namespace

std::optional<std::string> NormalizeBusId(std::string_view text) {
  // [domain:]bus:device.function
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function = text.substr(dot + 1);
  std::string_view head = text.substr(0, dot);
  const size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  const std::string_view device = head.substr(c2 + 1);
  head = head.substr(0, c2);
  const size_t c1 = head.rfind(':');
  const std::string_view bus = c1 == std::string_view::npos ? head : head.substr(c1 + 1);
  std::string_view domain = c1 == std::string_view::npos ? "0" : head.substr(0, c1);
  if (!IsHex(domain) || !IsHex(bus) || !IsHex(device) || !IsHex(function)) return std::nullopt;
  while (domain.size() > 4 && domain.front() == '0') domain.remove_prefix(1);
  if (domain.size() > 4 || bus.size() > 2 || device.size() > 2 || function.size() != 1) {
    return std::nullopt;
  }
  auto pad = [](std::string_view s, size_t width) {
    return std::string(width - s.size(), '0') + Lower(s);
  };
  std::string out =
      pad(domain, 4) + ":" + pad(bus, 2) + ":" + pad(device, 2) + "." + Lower(function);
  return out;
}

std::string BusIdFromBdfId(uint64_t bdfid) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04x:%02x:%02x.%x",
                static_cast<unsigned>((bdfid >> 32) & 0xffff),
                static_cast<unsigned>((bdfid >> 8) & 0xff),
                static_cast<unsigned>((bdfid >> 3) & 0x1f), static_cast<unsigned>(bdfid & 0x7));
  return buffer;
}

const gpustack_pci_device* FindPci(std::span<const gpustack_pci_device* const> devices,
                                   std::string_view bus_id) {
  for (const gpustack_pci_device* device : devices) {
    const std::string_view id = device->bus_id.data == nullptr
                                    ? std::string_view{}
                                    : std::string_view(device->bus_id.data, device->bus_id.size);
    if (id == bus_id) return device;
  }
  return nullptr;
}

bool HasVendorDevice(std::span<const gpustack_pci_device* const> devices,
                     std::span<const uint16_t> vendor_ids) {
  for (const gpustack_pci_device* device : devices) {
    for (uint16_t id : vendor_ids) {
      if (device->vendor_id == id) return true;
    }
  }
  return false;
}

DrmNodes ReadDrmNodes(const std::string& sysfs_path) {
  DrmNodes nodes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sysfs_path + "/drm", ec)) {
    const std::string name = entry.path().filename().string();
    if (auto card = Suffix(name, "card")) nodes.card = card;
    if (auto render = Suffix(name, "renderD")) nodes.render = render;
  }
  return nodes;
}

std::string ReadCpuAffinity(const std::string& sysfs_path) {
  std::ifstream in(sysfs_path + "/local_cpulist");
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0)
    line.pop_back();
  return line;
}

std::string ReadPciRootId(const std::string& sysfs_path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(sysfs_path, ec);
  if (ec) return {};
  bool after_bridge = false;
  for (const auto& part : resolved) {
    const std::string name = part.string();
    if (after_bridge) {
      // A device on the root bus itself has no root port above it.
      if (part == resolved.filename()) return {};
      return NormalizeBusId(name).value_or("");
    }
    after_bridge = name.rfind("pci", 0) == 0 && name.find(':') != std::string::npos;
  }
  return {};
}

}  // namespace gpustack::support
