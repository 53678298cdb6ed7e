#include "host/dra/cdi_spec.h"

namespace gpustack::dra {

std::string CdiDeviceName(const std::string& claim_uid) {
  return std::string(kCdiKind) + "=" + claim_uid;
}

namespace {
constexpr std::string_view kSpecPrefix = "gpustack.ai-claim_", kSpecSuffix = ".json";
}

std::string CdiSpecFileName(const std::string& claim_uid) {
  return std::string(kSpecPrefix) + claim_uid + std::string(kSpecSuffix);
}

std::optional<std::string> ClaimOfCdiSpecFile(std::string_view file_name) {
  if (!file_name.starts_with(kSpecPrefix) || !file_name.ends_with(kSpecSuffix) ||
      file_name.size() == kSpecPrefix.size() + kSpecSuffix.size())
    return std::nullopt;
  file_name.remove_prefix(kSpecPrefix.size());
  file_name.remove_suffix(kSpecSuffix.size());
  return std::string(file_name);
}

nlohmann::json ClaimCdiSpec(const std::string& claim_uid,
                            const std::vector<sdk::ContainerEdit>& edits,
                            std::vector<std::string>* dropped) {
  using Json = nlohmann::json;
  Json env = Json::array(), nodes = Json::array(), mounts = Json::array();
  for (const sdk::ContainerEdit& edit : edits) {
    switch (edit.kind) {
      case GPUSTACK_EDIT_ENV:
        env.push_back(edit.key + "=" + edit.value);
        break;
      case GPUSTACK_EDIT_DEVICE_NODE:
        nodes.push_back(
            {{"path", edit.container_path.empty() ? edit.host_path : edit.container_path},
             {"hostPath", edit.host_path},
             {"permissions", edit.permissions.empty() ? "rw" : edit.permissions}});
        break;
      case GPUSTACK_EDIT_MOUNT:
        mounts.push_back({{"hostPath", edit.host_path},
                          {"containerPath", edit.container_path},
                          {"options", {edit.read_only ? "ro" : "rw", "nosuid", "nodev", "bind"}}});
        break;
      case GPUSTACK_EDIT_ANNOTATION:
        if (dropped != nullptr) dropped->push_back("annotation " + edit.key);
        break;
      default:  // CDI devices are named beside this one
        break;
    }
  }
  Json container_edits = Json::object();
  if (!env.empty()) container_edits["env"] = env;
  if (!nodes.empty()) container_edits["deviceNodes"] = nodes;
  if (!mounts.empty()) container_edits["mounts"] = mounts;
  // 0.5.0: the lowest version with hostPath on device nodes.
  return {{"cdiVersion", "0.5.0"},
          {"kind", kCdiKind},
          {"devices", {{{"name", claim_uid}, {"containerEdits", container_edits}}}}};
}

}  // namespace gpustack::dra
