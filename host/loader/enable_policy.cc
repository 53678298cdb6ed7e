#include "host/loader/enable_policy.h"

#include <nlohmann/json.hpp>

#include "host/loader/manifest.h"

namespace gpustack::loader {
namespace {

using nlohmann::json;

Result<EnableSetting> ParseSetting(std::string_view text, const std::string& where) {
  if (text == "auto") return EnableSetting::kAuto;
  if (text == "on" || text == "true") return EnableSetting::kOn;
  if (text == "off" || text == "false") return EnableSetting::kOff;
  return Error{where + ": \"" + std::string(text) + "\" is not one of auto, on, off"};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<NodeConfig> ParseNodeConfig(std::string_view json_text, const std::string& source) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Error{source + ": not a JSON object"};
  NodeConfig config;
  config.default_setting.source = "default";
  if (auto it = doc.find("default_enable"); it != doc.end()) {
    if (!it->is_string()) return Error{source + ": \"default_enable\" must be a string"};
    auto setting = ParseSetting(it->get<std::string>(), source + " default_enable");
    if (!setting) return Error{setting.error()};
    config.default_setting = {*setting, source};
  }
  auto plugins = doc.find("plugins");
  if (plugins == doc.end()) return config;
  if (!plugins->is_object()) return Error{source + ": \"plugins\" must be an object"};
  for (const auto& [name, entry] : plugins->items()) {
    const std::string where = source + " plugins." + name;
    if (!IsValidManufacturerKey(name)) return Error{where + ": not a manufacturer key"};
    if (!entry.is_object()) return Error{where + ": must be an object"};
    if (auto enable = entry.find("enable"); enable != entry.end()) {
      if (!enable->is_string()) return Error{where + ".enable: must be auto, on or off"};
      auto setting = ParseSetting(enable->get<std::string>(), where + ".enable");
      if (!setting) return Error{setting.error()};
      config.per_plugin[name] = {*setting, source};
    }
    if (auto settings = entry.find("config"); settings != entry.end()) {
      if (!settings->is_object()) return Error{where + ".config: must be an object"};
      for (const auto& [key, value] : settings->items()) {
        if (!value.is_string()) return Error{where + ".config." + key + ": must be a string"};
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
      return Error{source + ": \"" + std::string(item) + "\" is not <plugin>=<auto|on|off>"};
    }
    const std::string name(Trim(item.substr(0, eq)));
    auto setting = ParseSetting(Trim(item.substr(eq + 1)), source + " " + name);
    if (!setting) return Error{setting.error()};
    if (name == "*") {
      config.default_setting = {*setting, source};
      config.per_plugin.clear();  // "*" wins over everything set before it
    } else if (IsValidManufacturerKey(name)) {
      config.per_plugin[name] = {*setting, source};
    } else {
      return Error{source + ": \"" + name + "\" is not a plugin name"};
    }
  }
  return Ok{};
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

}  // namespace gpustack::loader
