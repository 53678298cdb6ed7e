#include <gpustack/client/manifest.hpp>
#include <gpustack/small_file.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <limits>

namespace gpustack::client {
namespace {

using nlohmann::json;

Error Invalid(std::string message) { return Error{std::move(message), Code::kInvalidArgument}; }

Result<uint32_t> ReadUint32(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return Invalid(where + ": missing \"" + key + "\"");
  if (!it->is_number_unsigned() || it->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return Invalid(where + ": \"" + key + "\" must be a non-negative integer, got " + it->dump());
  }
  return static_cast<uint32_t>(it->get<uint64_t>());
}

Result<uint16_t> ParseVendorId(const json& value, const std::string& where) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    const size_t digits = text.size() - 2;
    if (text.size() >= 3 && text.size() <= 6 && (text[1] == 'x' || text[1] == 'X') &&
        text[0] == '0' &&
        text.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos && digits >= 1) {
      return static_cast<uint16_t>(std::stoul(text.substr(2), nullptr, 16));
    }
  }
  return Invalid(where + ": PCI vendor id " + value.dump() + " is not a \"0xNNNN\" hex string");
}

}  // namespace

bool IsValidManufacturerKey(std::string_view key) {
  if (key.empty() || key.size() > 63 || key.front() == '-' || key.back() == '-') return false;
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

std::string FormatVendorId(uint16_t id) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%04x", id);
  return text;
}

Result<Manifest> ParseManifest(std::string_view text, const std::filesystem::path& manifest_path) {
  const std::string where = "manifest " + manifest_path.string();
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return Invalid(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) return Invalid(where + ": top level must be a JSON object");

  auto format = ReadUint32(doc, "format_version", where);
  if (!format) return format.failure();
  if (*format != 1) {
    return Invalid(where + ": format_version " + std::to_string(*format) +
                   " is not supported (this host reads 1)");
  }

  Manifest m;
  m.manifest_path = manifest_path;
  auto name = doc.find("name");
  if (name == doc.end() || !name->is_string() ||
      !IsValidManufacturerKey(name->get<std::string>())) {
    return Invalid(where + ": \"name\" must be a manufacturer key of [a-z0-9-] (e.g. \"nvidia\")");
  }
  m.name = name->get<std::string>();

  auto library = doc.find("library");
  if (library == doc.end() || !library->is_string() || library->get<std::string>().empty()) {
    return Invalid(where + ": \"library\" must name the plugin's shared library");
  }
  m.library = library->get<std::string>();
  // The library must sit beside its manifest: no paths, so a manifest cannot point elsewhere.
  if (m.library.find('/') != std::string::npos || m.library == "." || m.library == "..") {
    return Invalid(where + ": \"library\" must be a file name in the manifest's directory, not \"" +
                   m.library + "\"");
  }
  m.library_path = manifest_path.parent_path() / m.library;

  auto abi = doc.find("abi");
  if (abi == doc.end() || !abi->is_object()) {
    return Invalid(where + ": \"abi\" must be an object {\"major\": N, \"minor\": N}");
  }
  auto major = ReadUint32(*abi, "major", where + " abi");
  if (!major) return major.failure();
  auto minor = ReadUint32(*abi, "minor", where + " abi");
  if (!minor) return minor.failure();
  m.abi_major = *major;
  m.abi_minor = *minor;

  auto ids = doc.find("pci_vendor_ids");
  if (ids != doc.end()) {
    if (!ids->is_array()) return Invalid(where + ": \"pci_vendor_ids\" must be an array");
    for (const json& id : *ids) {
      auto parsed = ParseVendorId(id, where);
      if (!parsed) return parsed.failure();
      m.pci_vendor_ids.push_back(*parsed);
    }
  }
  return m;
}

Result<Manifest> ReadManifest(const std::filesystem::path& manifest_path) {
  std::string why;
  const auto text = sdk::ReadSmallFile(manifest_path.string(), kMaxManifestBytes, &why);
  if (!text) {
    return Invalid("manifest " + manifest_path.string() + ": cannot be read: " + why);
  }
  return ParseManifest(*text, manifest_path);
}

}  // namespace gpustack::client
