#include "host/operator/settings.h"

#include "host/common/base64.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace gpustack::op {
namespace {

std::optional<bool> ParseBool(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return std::nullopt;
}

struct Binding {
  const char* name;
  bool Settings::*field;
};
constexpr Binding kBindings[] = {
    {"node-management-manual", &Settings::node_management_manual},
    {"instance-type-mixed-on-node", &Settings::mixed_on_node},
    {"instance-type-derived-from-node", &Settings::derived_from_node},
    {"instance-type-drain-when-no-flavors", &Settings::drain_when_no_flavors},
    {"instance-type-aware-cpu-manufacturer", &Settings::aware_cpu_manufacturer},
    {"workload-fit-affinity", &Settings::workload_fit_affinity},
    {"instance-privileged-allowed", &Settings::instance_privileged_allowed},
    {"instance-host-path-volume-allowed", &Settings::instance_host_path_volume_allowed},
    {"instance-general-resources-overcommit", &Settings::instance_resources_overcommit},
};

struct TextBinding {
  const char* name;
  std::string Settings::*field;
};
constexpr TextBinding kTextBindings[] = {
    {"instance-ssh-server-image", &Settings::instance_ssh_server_image},
    {"instance-access-static-address", &Settings::instance_access_static_address},
    {"instance-access-wildcard-dns", &Settings::instance_access_wildcard_dns},
    {"container-registry", &Settings::container_registry},
    {"container-namespace", &Settings::container_namespace},
    {"image-pull-secrets", &Settings::image_pull_secrets},
    {"image-pull-policy", &Settings::image_pull_policy},
};

// Whitespace around a value is a typo, never meant.
std::string Trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

const std::vector<SettingInfo>& KnownSettings() {
  static const std::vector<SettingInfo> known = {
      {"node-management-manual", "false",
       "When true, nodes are not labelled gpustack.ai/managed=true automatically; admins opt "
       "nodes in."},
      {"instance-type-mixed-on-node", "true",
       "An accelerated node also contributes its CPU to the CPU pools."},
      {"instance-type-derived-from-node", "true",
       "The operator authors InstanceTypes from the nodes and attaches the "
       "gpustack-node-devices check."},
      {"instance-type-drain-when-no-flavors", "true",
       "Drain a queue whose pool lost all its flavors before emptying its groups."},
      {"instance-type-aware-cpu-manufacturer", "false", "Split pools per CPU key."},
      {"workload-fit-affinity", "true", "Pin Workloads to nodes with a card that fits."},
      {"instance-privileged-allowed", "false", "Instances may ask for a privileged container."},
      {"instance-host-path-volume-allowed", "false",
       "Instances may mount host paths as additional volumes."},
      {"instance-general-resources-overcommit", "true",
       "Scale an Instance's requests below its limits (never above)."},
      {"instance-persistent-volume-placement", "true",
       "A persistent volume's node affinity drives its Instance's placement."},
      {"instance-ssh-server-image", DefaultSshServerImage(),
       "The image of the Instances' SSH sidecar.", false},
      {"instance-access-static-address", "", "A fixed address Instances are reached at.", false},
      {"instance-access-wildcard-dns", "",
       "A wildcard DNS domain (e.g. traefik.me): Instances are reached at <host-ip>.<domain>.",
       false},
      {"container-registry", "", "The registry built-in images are pulled from.", false},
      {"container-namespace", "", "The registry namespace of built-in images.", false},
      {"image-pull-secrets", "", "Secrets (comma-separated names) built-in images are pulled with.",
       false},
      {"image-pull-policy", "IfNotPresent", "The pull policy of built-in images.", false},
  };
  return known;
}

std::string DefaultSshServerImage() {
  return std::string("gpustack/gpustack-ssh-server:v") + GPUSTACK_VERSION;
}

std::string EnvironmentName(const std::string& setting) {
  std::string name = "GPUSTACK_";
  for (char c : setting) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

Result<std::map<std::string, std::string>> SeedValues(
    const std::function<std::string(const std::string&)>& getenv) {
  std::map<std::string, std::string> values;
  for (const SettingInfo& s : KnownSettings()) {
    std::string value = getenv(EnvironmentName(s.name));
    if (value.empty()) value = s.default_value;
    if (!s.boolean) {
      values[s.name] = value;
      continue;
    }
    if (!ParseBool(value)) {
      return Error{EnvironmentName(s.name) + "=" + value + ": not a boolean (true or false)",
                   Code::kInvalidArgument};
    }
    values[s.name] = *ParseBool(value) ? "true" : "false";
  }
  return values;
}

Settings ParseSettings(const std::map<std::string, std::string>& values,
                       std::vector<std::string>* problems) {
  Settings settings;
  for (const SettingInfo& s : KnownSettings()) {
    for (const TextBinding& b : kTextBindings)
      if (s.name == b.name) settings.*(b.field) = s.default_value;
  }
  for (const TextBinding& b : kTextBindings) {
    if (auto it = values.find(b.name); it != values.end()) settings.*(b.field) = Trimmed(it->second);
  }
  if (settings.instance_ssh_server_image.empty())
    settings.instance_ssh_server_image = DefaultSshServerImage();
  if (settings.image_pull_policy != "Always" && settings.image_pull_policy != "Never" &&
      settings.image_pull_policy != "IfNotPresent") {
    if (problems != nullptr && !settings.image_pull_policy.empty())
      problems->push_back("setting image-pull-policy = '" + settings.image_pull_policy +
                          "' is not Always, IfNotPresent or Never; keeping IfNotPresent");
    settings.image_pull_policy = "IfNotPresent";
  }
  for (const Binding& b : kBindings) {
    auto it = values.find(b.name);
    if (it == values.end()) continue;
    if (auto parsed = ParseBool(it->second)) {
      settings.*(b.field) = *parsed;
    } else if (problems != nullptr) {
      problems->push_back("setting " + std::string(b.name) + " = '" + it->second +
                          "' is not a boolean; keeping " +
                          (settings.*(b.field) ? "true" : "false"));
    }
  }
  return settings;
}

Settings SettingsFromSecret(const nlohmann::json* secret, std::vector<std::string>* problems) {
  std::map<std::string, std::string> values;
  if (secret != nullptr) {
    const nlohmann::json data = secret->value("data", nlohmann::json::object());
    for (const auto& [key, value] : data.items()) {
      if (!value.is_string()) continue;
      if (auto decoded = DecodeBase64(value.get<std::string>(), "setting " + key))
        values[key] = *decoded;
      else
        problems->push_back(decoded.error());
    }
  }
  return ParseSettings(values, problems);
}

}  // namespace gpustack::op
