#include "host/api/kinds.h"

#include <algorithm>

#include "host/api/embedded_crds.h"
#include "host/common/yaml.h"

namespace gpustack::api {
namespace {

std::vector<std::string> Strings(const nlohmann::json& value) {
  std::vector<std::string> out;
  if (value.is_array())
    for (const auto& v : value)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace

bool Kind::Allows(const std::string& verb) const {
  return std::find(verbs.begin(), verbs.end(), verb) != verbs.end();
}

Result<Kind> KindFromCrd(const std::string& yaml) {
  auto documents = FromYaml(yaml);
  if (!documents) return documents.failure();
  if (documents->size() != 1) return Error{"a CRD file must hold one document"};
  const nlohmann::json& crd = documents->front();
  const nlohmann::json spec = crd.value("spec", nlohmann::json::object());
  const nlohmann::json names = spec.value("names", nlohmann::json::object());
  Kind kind;
  kind.resource = names.value("plural", "");
  kind.singular = names.value("singular", "");
  kind.kind = names.value("kind", "");
  kind.list_kind = names.value("listKind", kind.kind + "List");
  kind.short_names = Strings(names.value("shortNames", nlohmann::json::array()));
  kind.namespaced = spec.value("scope", "") == "Namespaced";
  if (kind.resource.empty() || kind.kind.empty() || spec.value("group", "") != kGroup)
    return Error{"not a " + std::string(kGroup) + " CRD"};
  for (const auto& version : spec.value("versions", nlohmann::json::array())) {
    if (version.value("name", "") != kStorageVersion) continue;
    kind.schema = version.value("schema", nlohmann::json::object())
                      .value("openAPIV3Schema", nlohmann::json::object());
    kind.columns = version.value("additionalPrinterColumns", nlohmann::json::array());
    if (version.value("subresources", nlohmann::json::object()).contains("status"))
      kind.subresources.push_back("status");
  }
  if (kind.schema.empty())
    return Error{"the " + kind.kind + " CRD has no " + std::string(kStorageVersion) + " schema"};
  kind.storage = {kGroup, kStorageVersion, kind.resource, kind.namespaced};
  kind.verbs = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
  return kind;
}

Result<std::vector<Kind>> ServedKinds() {
  std::vector<Kind> kinds;
  for (std::string_view text : EmbeddedCrds()) {
    auto kind = KindFromCrd(std::string(text));
    if (!kind) return kind.failure().WithContext("the compiled-in CRDs: ");
    // Instances gain the metrics subresource (docs/behaviour.md §8.1).
    if (kind->kind == "Instance") kind->subresources.push_back("metrics");
    // The node daemons write Devices: v1 only shows them.
    if (kind->kind == "Devices") kind->verbs = {"get", "list", "watch"};
    kinds.push_back(std::move(*kind));
  }
  return kinds;
}

}  // namespace gpustack::api
