// Setting (gpustack.ai/v1, docs/behaviour.md §10.1): one object per online setting, in the system
// namespace, backed by one key of the Secret gpustack-settings. spec.value is write-only; status
// says the value (masked when sensitive), whether it is editable, and what it means. Writes are
// update and patch (merge, JSON and apply); a value of the wrong type is refused naming the
// setting and the type. The worker's reconcilers and webhooks read the Secret, so a change takes
// effect without a restart.
#ifndef GPUSTACK_HOST_API_SETTINGS_KIND_H_
#define GPUSTACK_HOST_API_SETTINGS_KIND_H_

#include <memory>
#include <string>
#include <vector>

#include "host/api/backend.h"

namespace gpustack::api {

inline constexpr const char* kSettingsSecretName = "gpustack-settings";
inline constexpr const char* kMasked = "******";

struct SettingSpec {
  std::string name;
  std::string default_value;
  std::string description;
  std::string type = "boolean";  // or "string"
  bool editable = true;
  bool sensitive = false;
};

Kind SettingKind();

// The Setting objects of `specs` from the Secret (null: every setting at its default). Pure.
std::vector<Json> DeriveSettings(const Json* secret, const std::vector<SettingSpec>& specs,
                                 const std::string& system_namespace);

// The value to store for `spec` from what a client wrote (a string, or a JSON boolean for a
// boolean setting), or why it is refused. Pure.
Result<std::string> SettingValue(const SettingSpec& spec, const Json& written);

std::unique_ptr<Backend> SettingsBackend(kube::Client& client, const std::string& system_namespace,
                                         std::vector<SettingSpec> specs, size_t events_kept);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_SETTINGS_KIND_H_
