// The worker's online settings (docs/behaviour.md §10.1): kept in the Secret `gpustack-settings` of
// the system namespace, one key per setting, read on every reconcile so a change needs no restart.
// The first start seeds each from GPUSTACK_<UPPER_SNAKE> or its default; later starts only add
// the ones missing, so the environment never overwrites what an admin set. Pure.
#ifndef GPUSTACK_HOST_OPERATOR_SETTINGS_H_
#define GPUSTACK_HOST_OPERATOR_SETTINGS_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::op {

inline constexpr const char* kSettingsSecret = "gpustack-settings";

struct Settings {
  bool node_management_manual = false;
  bool mixed_on_node = true;
  bool derived_from_node = true;
  bool drain_when_no_flavors = true;
  bool aware_cpu_manufacturer = false;
  bool workload_fit_affinity = true;
  bool instance_privileged_allowed = false;        // read by the Instance webhook
  bool instance_host_path_volume_allowed = false;  // read by the Instance webhook
  // Read by the Instance controller (docs/behaviour.md §7).
  bool instance_resources_overcommit = true;
  std::string instance_ssh_server_image;
  std::string instance_access_static_address;
  std::string instance_access_wildcard_dns;
  std::string container_registry;   // replaces the registry of built-in images
  std::string container_namespace;  // replaces their namespace
  std::string image_pull_secrets;   // comma-separated Secret names for built-in images
  std::string image_pull_policy;
};

// The SSH sidecar image scripts/images.sh builds (the default of instance-ssh-server-image).
std::string DefaultSshServerImage();

struct SettingInfo {
  std::string name;  // "node-management-manual"
  std::string default_value;
  std::string description;
  bool boolean = true;  // else any string
  bool sensitive = false;
};
const std::vector<SettingInfo>& KnownSettings();

// GPUSTACK_NODE_MANAGEMENT_MANUAL for "node-management-manual".
std::string EnvironmentName(const std::string& setting);

// The values the first start writes (or a later one adds): the environment's, else the default.
// A bad environment value is an error naming the variable.
Result<std::map<std::string, std::string>> SeedValues(
    const std::function<std::string(const std::string&)>& getenv);

// Settings from the Secret's (decoded) values. A value that is not a boolean keeps the default
// and is reported in `problems` (a typo must not take the worker down, nor be silently taken).
Settings ParseSettings(const std::map<std::string, std::string>& values,
                       std::vector<std::string>* problems);

// Settings from the backing Secret's data (base64 values); no Secret: the defaults. A value that
// cannot be decoded is reported in `problems`.
Settings SettingsFromSecret(const nlohmann::json* secret, std::vector<std::string>* problems);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_SETTINGS_H_
