#include "host/api/documents.h"

#include "host/kube/resource.h"

namespace gpustack::api {
namespace {

const std::string kGroupVersion = std::string(kGroup) + "/" + kServedVersion;

std::string SchemaName(const Kind& kind) {
  // The reverse-domain name the apiserver gives CRD schemas: ai.gpustack.worker.v1.Instance.
  return std::string("ai.gpustack.worker.") + kServedVersion + "." + kind.kind;
}

Json GroupVersionKind(const Kind& kind) {
  return Json::array({{{"group", kGroup}, {"version", kServedVersion}, {"kind", kind.kind}}});
}

std::vector<std::string> SubresourceVerbs(const std::string& subresource) {
  if (subresource == "status") return {"get", "patch", "update"};
  return {"get"};
}

std::string SubresourceKind(const Kind& kind, const std::string& subresource) {
  return subresource == "metrics" ? kind.kind + "Metrics" : kind.kind;
}

// OpenAPI v2 cannot say what v3 can: drop it, as the apiserver does for CRDs.
void ToSwagger2(Json& schema) {
  if (!schema.is_object()) return;
  for (const char* v3_only : {"oneOf", "anyOf", "allOf", "not", "nullable",
                              "x-kubernetes-validations"})
    schema.erase(v3_only);
  for (auto& [key, value] : schema.items()) {
    if (key == "properties" && value.is_object()) {
      for (auto& [name, property] : value.items()) ToSwagger2(property);
    } else if ((key == "items" || key == "additionalProperties") && value.is_object()) {
      ToSwagger2(value);
    }
  }
}

Json WithIdentity(const Kind& kind) {
  Json schema = kind.schema;
  schema["x-kubernetes-group-version-kind"] = GroupVersionKind(kind);
  return schema;
}

}  // namespace

Json GroupList(const std::vector<Kind>&) {
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", Json::array({Group()})}};
}

Json Group() {
  const Json version = {{"groupVersion", kGroupVersion}, {"version", kServedVersion}};
  return {{"kind", "APIGroup"},
          {"apiVersion", "v1"},
          {"name", kGroup},
          {"versions", Json::array({version})},
          {"preferredVersion", version}};
}

Json ResourceList(const std::vector<Kind>& kinds) {
  Json resources = Json::array();
  for (const Kind& k : kinds) {
    resources.push_back({{"name", k.resource},
                         {"singularName", k.singular},
                         {"namespaced", k.namespaced},
                         {"kind", k.kind},
                         {"verbs", k.verbs},
                         {"shortNames", k.short_names},
                         {"categories", Json::array({kCategory})}});
    for (const std::string& sub : k.subresources) {
      resources.push_back({{"name", k.resource + "/" + sub},
                           {"singularName", ""},
                           {"namespaced", k.namespaced},
                           {"kind", SubresourceKind(k, sub)},
                           {"verbs", SubresourceVerbs(sub)}});
    }
  }
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", kGroupVersion},
          {"resources", resources}};
}

Json AggregatedDiscovery(const std::vector<Kind>& kinds, const std::string& api_version) {
  Json resources = Json::array();
  for (const Kind& k : kinds) {
    Json subresources = Json::array();
    for (const std::string& sub : k.subresources) {
      subresources.push_back(
          {{"subresource", sub},
           {"responseKind",
            {{"group", kGroup}, {"version", kServedVersion}, {"kind", SubresourceKind(k, sub)}}},
           {"verbs", SubresourceVerbs(sub)}});
    }
    resources.push_back(
        {{"resource", k.resource},
         {"responseKind", {{"group", kGroup}, {"version", kServedVersion}, {"kind", k.kind}}},
         {"scope", k.namespaced ? "Namespaced" : "Cluster"},
         {"singularResource", k.singular},
         {"verbs", k.verbs},
         {"shortNames", k.short_names},
         {"categories", Json::array({kCategory})},
         {"subresources", subresources}});
  }
  const Json version = {
      {"version", kServedVersion}, {"resources", resources}, {"freshness", "Current"}};
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", api_version},
          {"metadata", Json::object()},
          {"items", Json::array({{{"metadata", {{"name", kGroup}}},
                                  {"versions", Json::array({version})}}})}};
}

Json OpenApiV2(const std::vector<Kind>& kinds) {
  Json definitions = Json::object();
  for (const Kind& k : kinds) {
    Json schema = WithIdentity(k);
    ToSwagger2(schema);
    definitions[SchemaName(k)] = schema;
    definitions[SchemaName(k) + "List"] = {
        {"type", "object"},
        {"required", {"items"}},
        {"properties",
         {{"apiVersion", {{"type", "string"}}},
          {"kind", {{"type", "string"}}},
          {"metadata", {{"type", "object"}}},
          {"items", {{"type", "array"}, {"items", {{"$ref", "#/definitions/" + SchemaName(k)}}}}}}},
        {"x-kubernetes-group-version-kind",
         Json::array({{{"group", kGroup}, {"version", kServedVersion}, {"kind", k.list_kind}}})}};
  }
  return {{"swagger", "2.0"},
          {"info", {{"title", "gpustack-operator worker"}, {"version", kServedVersion}}},
          {"paths", Json::object()},
          {"definitions", definitions}};
}

Json OpenApiV3Index(const std::string& hash) {
  const std::string path = std::string("apis/") + kGroup + "/" + kServedVersion;
  return {{"paths", {{path, {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + hash}}}}}};
}

Json OpenApiV3(const std::vector<Kind>& kinds) {
  Json schemas = Json::object();
  Json paths = Json::object();
  for (const Kind& k : kinds) {
    schemas[SchemaName(k)] = WithIdentity(k);
    const std::string ref = "#/components/schemas/" + SchemaName(k);
    const std::string base = std::string("/apis/") + kGroup + "/" + kServedVersion +
                             (k.namespaced ? "/namespaces/{namespace}/" : "/") + k.resource;
    const Json ok = {{"200",
                      {{"description", "OK"},
                       {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}};
    // kubectl explain finds a resource's kind from its get operation, then the schema.
    const Json gvk = {{"group", kGroup}, {"version", kServedVersion}, {"kind", k.kind}};
    paths[base + "/{name}"] = {{"get",
                                {{"operationId", "read" + k.kind},
                                 {"responses", ok},
                                 {"x-kubernetes-action", "get"},
                                 {"x-kubernetes-group-version-kind", gvk}}}};
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "gpustack-operator worker"}, {"version", kServedVersion}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

std::string HumanAge(std::chrono::seconds age) {
  const long long s = age.count();
  if (s < 0) return "0s";
  if (s < 120) return std::to_string(s) + "s";
  const long long m = s / 60, h = s / 3600, d = s / 86400;
  if (m < 10) return std::to_string(m) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  if (m < 180) return std::to_string(m) + "m";
  if (h < 8) return std::to_string(h) + "h" + (m % 60 ? std::to_string(m % 60) + "m" : "");
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) return std::to_string(d) + "d" + (h % 24 ? std::to_string(h % 24) + "h" : "");
  if (d < 365 * 2) return std::to_string(d) + "d";
  return std::to_string(d / 365) + "y";
}

Json EvaluateColumn(const Json& object, const std::string& json_path) {
  const Json* at = &object;
  size_t i = 0;
  const std::string& p = json_path;
  while (i < p.size() && at) {
    if (p[i] == '.') {
      const size_t end = p.find_first_of(".[", i + 1);
      const std::string key = p.substr(i + 1, end == std::string::npos ? end : end - i - 1);
      at = at->is_object() && at->contains(key) ? &(*at)[key] : nullptr;
      i = end == std::string::npos ? p.size() : end;
    } else if (p[i] == '[') {
      const size_t close = p.find(']', i);
      if (close == std::string::npos) return nullptr;
      const std::string inner = p.substr(i + 1, close - i - 1);
      i = close + 1;
      if (!at->is_array()) return nullptr;
      if (!inner.empty() && inner.front() == '?') {
        // [?(@.key==value)]: the first element that matches.
        const size_t eq = inner.find("==");
        if (inner.rfind("?(@.", 0) != 0 || eq == std::string::npos || inner.back() != ')')
          return nullptr;
        const std::string key = inner.substr(4, eq - 4);
        std::string want = inner.substr(eq + 2, inner.size() - eq - 3);
        const Json* match = nullptr;
        for (const Json& e : *at) {
          if (!e.is_object() || !e.contains(key)) continue;
          const Json& v = e[key];
          const std::string have = v.is_string() ? v.get<std::string>() : v.dump();
          if (want.size() >= 2 && (want.front() == '\'' || want.front() == '"'))
            want = want.substr(1, want.size() - 2);
          if (have == want) {
            match = &e;
            break;
          }
        }
        at = match;
      } else {
        char* end = nullptr;
        const long index = std::strtol(inner.c_str(), &end, 10);
        at = (end && *end == '\0' && index >= 0 && static_cast<size_t>(index) < at->size())
                 ? &(*at)[static_cast<size_t>(index)]
                 : nullptr;
      }
    } else {
      return nullptr;
    }
  }
  return at ? *at : Json();
}

Json TableOf(const Kind& kind, const std::vector<Json>& objects, const std::string& include_object,
             const std::string& resource_version, const std::string& continue_token,
             std::chrono::system_clock::time_point now) {
  Json definitions = Json::array({{{"name", "Name"},
                                   {"type", "string"},
                                   {"format", "name"},
                                   {"description", "Name must be unique within a namespace."},
                                   {"priority", 0}}});
  for (const Json& c : kind.columns) {
    definitions.push_back({{"name", c.value("name", "")},
                           {"type", c.value("type", "string") == "date" ? "date"
                                                                         : c.value("type", "string")},
                           {"format", c.value("format", "")},
                           {"description", c.value("description", "")},
                           {"priority", c.value("priority", 0)}});
  }
  Json rows = Json::array();
  for (const Json& object : objects) {
    Json cells = Json::array({object["metadata"].value("name", "")});
    for (const Json& c : kind.columns) {
      Json value = EvaluateColumn(object, c.value("jsonPath", ""));
      if (c.value("type", "") == "date" && value.is_string()) {
        auto t = kube::ParseTime(value.get<std::string>());
        value = t ? Json(HumanAge(std::chrono::duration_cast<std::chrono::seconds>(now - *t)))
                  : Json("<invalid>");
      }
      cells.push_back(value);
    }
    Json row = {{"cells", cells}};
    if (include_object == "Object") {
      row["object"] = object;
    } else if (include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", object["metadata"]}};
    }
    rows.push_back(row);
  }
  Json metadata = {{"resourceVersion", resource_version}};
  if (!continue_token.empty()) metadata["continue"] = continue_token;
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", metadata},
          {"columnDefinitions", definitions},
          {"rows", rows}};
}

Json StatusOf(int code, const std::string& reason, const std::string& message,
              const Json& details) {
  Json status = {{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", Json::object()},
                 {"status", "Failure"},
                 {"message", message},
                 {"reason", reason},
                 {"code", code}};
  if (!details.is_null()) status["details"] = details;
  return status;
}

}  // namespace gpustack::api
