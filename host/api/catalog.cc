#include "host/api/catalog.h"

#include "host/common/base64.h"
#include "host/common/json_path.h"

namespace gpustack::api {
namespace {

constexpr const char* kGeneralPrefix = "general.feature.gpustack.ai/";
constexpr const char* kAcceleratablePrefix = "acceleratable.feature.gpustack.ai/";
constexpr const char* kNote = "note.gpustack.ai/";

Json StringProperty() { return {{"type", "string"}}; }

// The key of the one identity label under `prefix` (value "true"; the .count and .capacity
// labels under the same prefix carry numbers).
std::string IdentityKey(const Json& labels, const std::string& prefix) {
  for (const auto& [key, value] : labels.items()) {
    if (key.rfind(prefix, 0) == 0 && value == "true") return key.substr(prefix.size());
  }
  return {};
}

}  // namespace

Kind FlavorKind() {
  Kind k;
  k.resource = "instancetypeflavors";
  k.singular = "instancetypeflavor";
  k.kind = "InstanceTypeFlavor";
  k.list_kind = "InstanceTypeFlavorList";
  k.short_names = {"instypeflavor"};
  k.verbs = {"get", "list", "watch"};
  k.schema = {
      {"type", "object"},
      {"description",
       "A pool the nodes offer (docs/behaviour.md §2.3), derived from the ResourceFlavors: what "
       "an administrator authors an InstanceType against."},
      {"properties",
       {{"apiVersion", StringProperty()},
        {"kind", StringProperty()},
        {"metadata", {{"type", "object"}}},
        {"spec",
         {{"type", "object"},
          {"properties",
           {{"acceleratorGroup", {{"type", "string"}, {"description", "The aKey."}}},
            {"acceleratable", {{"type", "boolean"}}},
            {"manufacturer", {{"type", "string"}, {"description", "generic for CPU pools."}}},
            {"product", StringProperty()},
            {"family", StringProperty()},
            {"memory", {{"type", "string"}, {"description", "Per card."}}},
            {"cores", {{"type", "integer"}}},
            {"sliceable", {{"type", "boolean"}, {"description", "Takes logical slices."}}},
            {"generalGroup", {{"type", "string"}, {"description", "The gKey, or generic."}}}}}}}}}};
  for (const char* column : {"GeneralGroup", "AcceleratorGroup", "Acceleratable", "Manufacturer",
                             "Product", "Memory", "Cores", "Sliceable"}) {
    std::string field(column);
    field[0] = static_cast<char>(std::tolower(field[0]));
    const std::string type = field == "cores" ? "integer"
                             : field == "acceleratable" || field == "sliceable" ? "boolean"
                                                                                 : "string";
    k.columns.push_back({{"name", column}, {"type", type}, {"jsonPath", ".spec." + field}});
  }
  return k;
}

std::vector<Json> DeriveFlavorCatalog(const std::vector<ObjectPtr>& flavors, bool aware) {
  std::map<std::string, Json> entries;
  for (const ObjectPtr& f : flavors) {
    const Json* labels = ObjectAt(*f, {"metadata", "labels"});
    if (!labels) continue;
    const std::string gkey = IdentityKey(*labels, kGeneralPrefix);
    const std::string akey = IdentityKey(*labels, kAcceleratablePrefix);
    if (gkey.empty()) continue;  // not one of ours
    const std::string general = aware ? gkey : "generic";
    const std::string name = "gpustack--" + (akey.empty() ? general
                                             : aware      ? gkey + "--" + akey
                                                          : akey);
    if (entries.contains(name)) continue;  // one entry per pool; the flavors differ in count
    const Json notes = JsonAt(*f, {"metadata", "annotations"}).is_object()
                           ? JsonAt(*f, {"metadata", "annotations"})
                           : Json::object();
    auto note = [&](const char* key) { return notes.value(std::string(kNote) + key, ""); };
    Json spec = {{"acceleratable", !akey.empty()},
                 {"generalGroup", general},
                 {"manufacturer", akey.empty() ? "generic" : note("manufacturer")},
                 {"sliceable", note("sliceable") == "true"}};
    if (!akey.empty()) {
      spec["acceleratorGroup"] = akey;
      spec["product"] = note("product");
      if (!note("family").empty()) spec["family"] = note("family");
      spec["memory"] = note("memory");
      spec["cores"] = std::strtoll(note("cores").c_str(), nullptr, 10);
    }
    Json metadata = {{"name", name}};
    const std::string created = StringAt(*f, {"metadata", "creationTimestamp"});
    if (!created.empty()) metadata["creationTimestamp"] = created;
    entries[name] = {{"apiVersion", std::string(kGroup) + "/" + kServedVersion},
                     {"kind", "InstanceTypeFlavor"},
                     {"metadata", metadata},
                     {"spec", spec}};
  }
  std::vector<Json> out;
  for (auto& [name, entry] : entries) out.push_back(std::move(entry));
  return out;
}

std::unique_ptr<Backend> FlavorCatalog(kube::Client& client, const std::string& system_namespace,
                                       size_t events_kept) {
  DerivedKind derived;
  derived.sources = {
      {{"kueue.x-k8s.io", "v1beta2", "resourceflavors", false},
       "",
       "resource.gpustack.ai/type=nodes",
       "",
       /*optional=*/true},
      {kube::resources::Secrets(), system_namespace, "", "metadata.name=gpustack-settings"}};
  derived.derive = [](const std::vector<std::vector<ObjectPtr>>& sources) {
    bool aware = false;
    for (const ObjectPtr& secret : sources[1]) {
      const std::string encoded =
          StringAt(*secret, {"data", "instance-type-aware-cpu-manufacturer"});
      auto value = DecodeBase64(encoded, "instance-type-aware-cpu-manufacturer");
      aware = value && *value == "true";
    }
    return DeriveFlavorCatalog(sources[0], aware);
  };
  // Without Kueue there are no flavors: the rest of the API must not wait for them.
  derived.required_for_readiness = false;
  return MakeDerivedBackend(client, FlavorKind(), std::move(derived), events_kept);
}

}  // namespace gpustack::api
