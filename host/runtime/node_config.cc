#include "host/runtime/node_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <gpustack/client/manifest.hpp>

#include "host/common/file_trust.h"
#include "host/common/files.h"

namespace gpustack::runtime {
namespace {

using client::FormatVendorId;
using client::IsValidManufacturerKey;
using nlohmann::json;

Error Invalid(std::string message) { return Error{std::move(message), Code::kInvalidArgument}; }

Result<EnableSetting> ParseSetting(std::string_view text, const std::string& where) {
  if (text == "auto") return EnableSetting::kAuto;
  if (text == "on" || text == "true") return EnableSetting::kOn;
  if (text == "off" || text == "false") return EnableSetting::kOff;
  return Invalid(where + ": \"" + std::string(text) + "\" is not one of auto, on, off");
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<NodeConfig> ParseNodeConfig(std::string_view json_text, const std::string& source) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Invalid(source + ": not a JSON object");
  NodeConfig config;
  config.default_setting.source = "default";
  for (const auto& [key, value] : doc.items()) {
    if (key != "version" && key != "default_enable" && key != "plugins" && key != "nodes") {
      return Invalid(source + ": unknown key \"" + key +
                     "\" (expected version, default_enable, plugins, nodes)");
    }
  }
  // The schema's version: a later one may mean something this daemon would misread.
  if (auto version = doc.find("version"); version != doc.end() && *version != kNodeConfigVersion) {
    return Invalid(source + ": version " + version->dump() + " is not one this daemon reads (" +
                   kNodeConfigVersion + ")");
  }
  config.source = source;
  if (auto nodes = doc.find("nodes"); nodes != doc.end()) {
    if (!nodes->is_object()) return Invalid(source + ": \"nodes\" must be an object");
    for (const auto& [node, entry] : nodes->items()) {
      const std::string where = source + " nodes." + node;
      if (!entry.is_object()) return Invalid(where + ": must be an object of <plugin>: setting");
      std::string overrides;
      for (const auto& [name, value] : entry.items()) {
        if (!value.is_string()) return Invalid(where + "." + name + ": must be auto, on or off");
        overrides += (overrides.empty() ? "" : ",") + name + "=" + value.get<std::string>();
      }
      NodeConfig scratch;  // validated now, so a bad entry fails every node, not only its own
      if (auto s = ApplyEnableOverrides(scratch, overrides, where); !s) return s.failure();
      config.per_node[node] = overrides;
    }
  }
  if (auto it = doc.find("default_enable"); it != doc.end()) {
    if (!it->is_string()) return Invalid(source + ": \"default_enable\" must be a string");
    auto setting = ParseSetting(it->get<std::string>(), source + " default_enable");
    if (!setting) return setting.failure();
    config.default_setting = {*setting, source};
  }
  auto plugins = doc.find("plugins");
  if (plugins == doc.end()) return config;
  if (!plugins->is_object()) return Invalid(source + ": \"plugins\" must be an object");
  for (const auto& [name, entry] : plugins->items()) {
    const std::string where = source + " plugins." + name;
    if (!IsValidManufacturerKey(name)) return Invalid(where + ": not a manufacturer key");
    if (!entry.is_object()) return Invalid(where + ": must be an object");
    for (const auto& [key, value] : entry.items()) {
      if (key != "enable" && key != "config") {
        return Invalid(where + ": unknown key \"" + key + "\" (expected enable, config)");
      }
    }
    if (auto enable = entry.find("enable"); enable != entry.end()) {
      if (!enable->is_string()) return Invalid(where + ".enable: must be auto, on or off");
      auto setting = ParseSetting(enable->get<std::string>(), where + ".enable");
      if (!setting) return setting.failure();
      config.per_plugin[name] = {*setting, source};
    }
    if (auto settings = entry.find("config"); settings != entry.end()) {
      if (!settings->is_object()) return Invalid(where + ".config: must be an object");
      for (const auto& [key, value] : settings->items()) {
        if (!value.is_string()) return Invalid(where + ".config." + key + ": must be a string");
        config.plugin_settings[name][key] = value.get<std::string>();
      }
    }
  }
  return config;
}

Status ApplyEnableOverrides(NodeConfig& config, std::string_view overrides,
                            const std::string& source) {
  while (!overrides.empty()) {
    const size_t comma = overrides.find(',');
    const std::string_view item = Trim(overrides.substr(0, comma));
    overrides = comma == std::string_view::npos ? std::string_view{} : overrides.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Invalid(source + ": \"" + std::string(item) + "\" is not <plugin>=<auto|on|off>");
    }
    const std::string name(Trim(item.substr(0, eq)));
    auto setting = ParseSetting(Trim(item.substr(eq + 1)), source + " " + name);
    if (!setting) return setting.failure();
    if (name == "*") {
      config.default_setting = {*setting, source};
      config.per_plugin.clear();  // "*" wins over everything set before it
    } else if (IsValidManufacturerKey(name)) {
      config.per_plugin[name] = {*setting, source};
    } else {
      return Invalid(source + ": \"" + name + "\" is not a plugin name");
    }
  }
  return Ok{};
}

Status ApplyNodeSection(NodeConfig& config, const std::string& node_name) {
  auto it = config.per_node.find(node_name);
  if (it == config.per_node.end()) return Ok{};
  return ApplyEnableOverrides(config, it->second, config.source + " nodes." + node_name);
}

LabelOverrides EnableOverridesFromLabels(const std::map<std::string, std::string>& labels) {
  LabelOverrides out;
  const std::string_view prefix = kPluginLabelPrefix;
  for (const auto& [key, value] : labels) {
    if (!key.starts_with(prefix)) continue;
    const std::string name = key.substr(prefix.size());
    NodeConfig scratch;
    const std::string source = "node label " + key;
    if (name == "*" || name.find_first_of(",=") != std::string::npos) {
      out.problems.push_back(source + ": not a plugin name; the label is ignored");
      continue;
    }
    if (auto s = ApplyEnableOverrides(scratch, name + "=" + value, source); !s) {
      out.problems.push_back(s.error() + "; the label is ignored");
      continue;
    }
    out.overrides.emplace_back(source, name + "=" + value);
  }
  return out;
}

EnableDecision Decide(const NodeConfig& config, const std::string& plugin_name,
                      const std::vector<uint16_t>& pci_vendor_ids,
                      const std::vector<pci::PciDevice>& inventory) {
  auto it = config.per_plugin.find(plugin_name);
  const SourcedSetting& chosen =
      it != config.per_plugin.end() ? it->second : config.default_setting;
  switch (chosen.setting) {
    case EnableSetting::kOn:
      return {true, "forced on by " + chosen.source};
    case EnableSetting::kOff:
      return {false, "forced off by " + chosen.source};
    case EnableSetting::kAuto:
      break;
  }
  if (pci_vendor_ids.empty()) {
    return {false, "auto: the plugin claims no PCI vendor id; enable it explicitly"};
  }
  std::string ids;
  for (uint16_t id : pci_vendor_ids) ids += (ids.empty() ? "" : ", ") + FormatVendorId(id);
  std::vector<std::string> found;
  for (const pci::PciDevice& device : inventory) {
    for (uint16_t id : pci_vendor_ids) {
      if (device.vendor_id == id) found.push_back(device.bus_id);
    }
  }
  if (found.empty()) return {false, "auto: no PCI device of vendor " + ids};
  std::string list;
  for (const std::string& bus : found) list += (list.empty() ? "" : ", ") + bus;
  return {true, "auto: " + std::to_string(found.size()) + " PCI device(s) of vendor " + ids + " (" +
                    list + ")"};
}

Result<NodeConfig> LoadNodeConfig(const std::filesystem::path& path, uid_t trusted_uid) {
  const std::string source = "node config " + path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Error{source + " does not exist", Code::kNotFound};
  }
  if (auto trusted = CheckTrusted(path, trusted_uid); !trusted) {
    return Error{source + " refused: " + trusted.error(), Code::kInvalidArgument};
  }
  auto text = ReadSmallFile(path, kMaxNodeConfigBytes, "node config");
  if (!text) return text.failure();
  return ParseNodeConfig(*text, source);
}

namespace {

// GPUSTACK_<NAME>_<suffix>, the name upper-cased with '-' as '_'.
std::string PluginVariable(const std::string& plugin_name, std::string_view suffix) {
  std::string name = "GPUSTACK_";
  for (char c : plugin_name) {
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name + "_" + std::string(suffix);
}

bool IsResourceName(std::string_view name) {  // <domain>/<name>, as Kubernetes extended resources
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string_view::npos || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/' ||
           c == '_' || (c >= 'A' && c <= 'Z');
  });
}

bool IsLowerToken(std::string_view s) {  // a partition kind or a RuntimeClass name
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

}  // namespace

std::string LibraryVariable(const std::string& plugin_name) {
  return PluginVariable(plugin_name, "LIBRARY");
}

Result<std::optional<std::vector<uint16_t>>> VendorIdsOverride(
    const std::string& manufacturer, const std::function<std::string(const std::string&)>& env) {
  const std::string variable = PluginVariable(manufacturer, "PCI_VENDOR_ID");
  const std::string value = env ? env(variable) : "";
  if (value.empty()) return std::optional<std::vector<uint16_t>>{};
  std::vector<uint16_t> ids;
  std::string_view rest = value;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (const size_t underscore = item.find('_'); underscore != std::string_view::npos) {
      item = item.substr(underscore + 1);  // <class>_<vendor>: the class is the scan's business
    }
    if (item.starts_with("0x") || item.starts_with("0X")) item.remove_prefix(2);
    unsigned id = 0;
    const bool hex =
        !item.empty() && item.size() <= 4 && std::all_of(item.begin(), item.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) != 0;
        });
    if (!hex || std::sscanf(std::string(item).c_str(), "%x", &id) != 1) {
      return Invalid(variable + "=\"" + value + "\": \"" + std::string(item) +
                     "\" is not a PCI vendor id (four hex digits, e.g. 10de or 0x10de)");
    }
    ids.push_back(static_cast<uint16_t>(id));
  }
  if (ids.empty()) return Invalid(variable + "=\"" + value + "\": no PCI vendor id");
  return std::optional<std::vector<uint16_t>>{std::move(ids)};
}

Status ApplyIdentityOverrides(PluginIdentity& identity,
                              const std::function<std::string(const std::string&)>& env) {
  if (!env) return Ok{};
  const std::string& key = identity.manufacturer;
  if (auto v = PluginVariable(key, "ACCELERATABLE_RESOURCE_NAME"); !env(v).empty()) {
    if (!IsResourceName(env(v))) {
      return Invalid(v + "=\"" + env(v) + "\" is not a resource name (<domain>/<name>)");
    }
    identity.base_resource_name = env(v);
  }
  if (auto v = PluginVariable(key, "PARTITION_KIND"); !env(v).empty()) {
    if (!IsLowerToken(env(v))) {
      return Invalid(v + "=\"" + env(v) + "\" is not a partition kind (lower-case, e.g. mig)");
    }
    identity.partition_kind = env(v);
  }
  if (auto v = PluginVariable(key, "ACCELERATABLE_RUNTIME_NAME"); !env(v).empty()) {
    if (!IsLowerToken(env(v))) {
      return Invalid(v + "=\"" + env(v) + "\" is not a RuntimeClass name");
    }
    identity.runtime_class = env(v);
  }
  auto ids = VendorIdsOverride(key, env);
  if (!ids) return ids.failure();
  if (*ids) identity.pci_vendor_ids = **ids;
  return Ok{};
}

ResolvedSettings SettingsFor(const NodeConfig& config, const std::string& plugin_name,
                             const std::function<std::string(const std::string&)>& env) {
  ResolvedSettings out;
  if (auto it = config.plugin_settings.find(plugin_name); it != config.plugin_settings.end()) {
    out.settings = it->second;
  }
  if (auto it = out.settings.find(kLibraryPathSetting);
      it != out.settings.end() && !it->second.empty()) {
    out.library_source = "node config plugins." + plugin_name + ".config.library_path";
  } else if (const std::string variable = LibraryVariable(plugin_name);
             env && !env(variable).empty()) {
    out.settings[kLibraryPathSetting] = env(variable);
    out.library_source = variable;
  }
  return out;
}

}  // namespace gpustack::runtime
