// v1 <-> v1alpha1 (kinds.h): apart from the kind table so that the fuzz build takes it alone.
#include "host/api/kinds.h"

namespace gpustack::api {
namespace {

const std::string kServedApiVersion = std::string(kGroup) + "/" + kServedVersion;
const std::string kStorageApiVersion = std::string(kGroup) + "/" + kStorageVersion;

void RenameVersion(nlohmann::json& object, const std::string& from, const std::string& to) {
  if (!object.is_object()) return;
  auto api_version = object.find("apiVersion");
  if (api_version != object.end() && *api_version == from) *api_version = to;
  auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object()) {
    auto managed = metadata->find("managedFields");
    if (managed != metadata->end() && managed->is_array()) {
      for (auto& entry : *managed) {
        auto v = entry.is_object() ? entry.find("apiVersion") : entry.end();
        if (entry.is_object() && v != entry.end() && *v == from) *v = to;
      }
    }
  }
  auto items = object.find("items");
  if (items != object.end() && items->is_array()) {
    for (auto& item : *items) RenameVersion(item, from, to);
  }
}

}  // namespace

nlohmann::json ToServed(nlohmann::json object) {
  RenameVersion(object, kStorageApiVersion, kServedApiVersion);
  return object;
}

nlohmann::json ToStorage(nlohmann::json object) {
  RenameVersion(object, kServedApiVersion, kStorageApiVersion);
  return object;
}

}  // namespace gpustack::api
