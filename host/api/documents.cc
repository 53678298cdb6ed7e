#include "host/api/documents.h"

#include <set>

#include "host/kube/resource.h"

namespace gpustack::api {
namespace {

// The reverse-domain name the apiserver gives schemas: worker.gpustack.ai/v1 Instance is
// ai.gpustack.worker.v1.Instance.
std::string SchemaName(const std::string& group, const std::string& kind) {
  std::string reversed;
  size_t end = group.size();
  while (end != std::string::npos && end > 0) {
    const size_t dot = group.rfind('.', end - 1);
    const size_t start = dot == std::string::npos ? 0 : dot + 1;
    reversed += (reversed.empty() ? "" : ".") + group.substr(start, end - start);
    end = dot == std::string::npos ? std::string::npos : dot;
  }
  return reversed + "." + kServedVersion + "." + kind;
}

Json Gvk(const std::string& group, const std::string& kind) {
  return {{"group", group}, {"version", kServedVersion}, {"kind", kind}};
}

std::vector<std::string> SubresourceVerbs(const Kind& kind, const std::string& subresource) {
  if (subresource == "status" && kind.Allows("update")) return {"get", "patch", "update"};
  return {"get"};
}

std::string SubresourceKind(const Kind& kind, const std::string& subresource) {
  return subresource == "metrics" ? kind.kind + "Metrics" : kind.kind;
}

// OpenAPI v2 cannot say what v3 can: drop it, as the apiserver does for CRDs.
void ToSwagger2(Json& schema) {
  if (!schema.is_object()) return;
  for (const char* v3_only :
       {"oneOf", "anyOf", "allOf", "not", "nullable", "x-kubernetes-validations"})
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
  schema["x-kubernetes-group-version-kind"] = Json::array({Gvk(kind.group, kind.kind)});
  return schema;
}

std::vector<const Kind*> Of(const std::vector<Kind>& kinds, const std::string& group) {
  std::vector<const Kind*> out;
  for (const Kind& k : kinds)
    if (k.group == group) out.push_back(&k);
  return out;
}

}  // namespace

std::vector<std::string> Groups(const std::vector<Kind>& kinds) {
  std::vector<std::string> groups;
  for (const Kind& k : kinds)
    if (std::find(groups.begin(), groups.end(), k.group) == groups.end()) groups.push_back(k.group);
  return groups;
}

Json GroupList(const std::vector<Kind>& kinds) {
  Json groups = Json::array();
  for (const std::string& g : Groups(kinds)) groups.push_back(Group(g));
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

Json Group(const std::string& group) {
  const Json version = {{"groupVersion", group + "/" + kServedVersion},
                        {"version", kServedVersion}};
  return {{"kind", "APIGroup"},
          {"apiVersion", "v1"},
          {"name", group},
          {"versions", Json::array({version})},
          {"preferredVersion", version}};
}

Json ResourceList(const std::vector<Kind>& kinds, const std::string& group) {
  Json resources = Json::array();
  for (const Kind* k : Of(kinds, group)) {
    Json resource = {{"name", k->resource},
                     {"singularName", k->singular},
                     {"namespaced", k->namespaced},
                     {"kind", k->kind},
                     {"verbs", k->verbs},
                     {"categories", Json::array({kCategory})}};
    if (!k->short_names.empty()) resource["shortNames"] = k->short_names;
    resources.push_back(resource);
    for (const std::string& sub : k->subresources) {
      resources.push_back({{"name", k->resource + "/" + sub},
                           {"singularName", ""},
                           {"namespaced", k->namespaced},
                           {"kind", SubresourceKind(*k, sub)},
                           {"verbs", SubresourceVerbs(*k, sub)}});
    }
  }
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group + "/" + kServedVersion},
          {"resources", resources}};
}

Json AggregatedDiscovery(const std::vector<Kind>& kinds, const std::string& api_version) {
  Json items = Json::array();
  for (const std::string& group : Groups(kinds)) {
    Json resources = Json::array();
    for (const Kind* k : Of(kinds, group)) {
      Json subresources = Json::array();
      for (const std::string& sub : k->subresources) {
        subresources.push_back({{"subresource", sub},
                                {"responseKind", Gvk(group, SubresourceKind(*k, sub))},
                                {"verbs", SubresourceVerbs(*k, sub)}});
      }
      Json resource = {{"resource", k->resource},
                       {"responseKind", Gvk(group, k->kind)},
                       {"scope", k->namespaced ? "Namespaced" : "Cluster"},
                       {"singularResource", k->singular},
                       {"verbs", k->verbs},
                       {"categories", Json::array({kCategory})},
                       {"subresources", subresources}};
      if (!k->short_names.empty()) resource["shortNames"] = k->short_names;
      resources.push_back(resource);
    }
    const Json version = {
        {"version", kServedVersion}, {"resources", resources}, {"freshness", "Current"}};
    items.push_back({{"metadata", {{"name", group}}}, {"versions", Json::array({version})}});
  }
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", api_version},
          {"metadata", Json::object()},
          {"items", items}};
}

Json OpenApiV2(const std::vector<Kind>& kinds) {
  Json definitions = Json::object();
  for (const Kind& k : kinds) {
    Json schema = WithIdentity(k);
    ToSwagger2(schema);
    const std::string name = SchemaName(k.group, k.kind);
    definitions[name] = schema;
    definitions[SchemaName(k.group, k.list_kind)] = {
        {"type", "object"},
        {"required", {"items"}},
        {"properties",
         {{"apiVersion", {{"type", "string"}}},
          {"kind", {{"type", "string"}}},
          {"metadata", {{"type", "object"}}},
          {"items", {{"type", "array"}, {"items", {{"$ref", "#/definitions/" + name}}}}}}},
        {"x-kubernetes-group-version-kind", Json::array({Gvk(k.group, k.list_kind)})}};
  }
  // The aggregator keeps only the definitions its paths reach: every kind gets its read and list.
  Json paths = Json::object();
  for (const Kind& k : kinds) {
    const std::string base = "/apis/" + k.group + "/" + kServedVersion +
                             (k.namespaced ? "/namespaces/{namespace}/" : "/") + k.resource;
    const auto operation = [&](const std::string& id, const std::string& action,
                               const std::string& kind_name) {
      return Json{{"operationId", id},
                  {"produces", {"application/json"}},
                  {"responses",
                   {{"200",
                     {{"description", "OK"},
                      {"schema", {{"$ref", "#/definitions/" + SchemaName(k.group, kind_name)}}}}}}},
                  {"x-kubernetes-action", action},
                  {"x-kubernetes-group-version-kind", Gvk(k.group, kind_name)}};
    };
    paths[base] = {{"get", operation("list" + k.kind, "list", k.list_kind)}};
    paths[base + "/{name}"] = {{"get", operation("read" + k.kind, "get", k.kind)}};
  }
  return {{"swagger", "2.0"},
          {"info", {{"title", "gpustack-operator worker"}, {"version", kServedVersion}}},
          {"paths", paths},
          {"definitions", definitions}};
}

Json OpenApiV3Index(const std::vector<Kind>& kinds,
                    const std::function<std::string(const std::string&)>& hash_of) {
  Json paths = Json::object();
  for (const std::string& group : Groups(kinds)) {
    const std::string path = "apis/" + group + "/" + kServedVersion;
    paths[path] = {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + hash_of(group)}};
  }
  return {{"paths", paths}};
}

Json OpenApiV3(const std::vector<Kind>& kinds, const std::string& group) {
  Json schemas = Json::object();
  Json paths = Json::object();
  for (const Kind* k : Of(kinds, group)) {
    const std::string name = SchemaName(group, k->kind);
    schemas[name] = WithIdentity(*k);
    const std::string ref = "#/components/schemas/" + name;
    const std::string base = "/apis/" + group + "/" + kServedVersion +
                             (k->namespaced ? "/namespaces/{namespace}/" : "/") + k->resource;
    const Json ok = {{"200",
                      {{"description", "OK"},
                       {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}};
    // kubectl explain finds a resource's kind from its get operation, then the schema.
    paths[base + "/{name}"] = {{"get",
                                {{"operationId", "read" + k->kind},
                                 {"responses", ok},
                                 {"x-kubernetes-action", "get"},
                                 {"x-kubernetes-group-version-kind", Gvk(group, k->kind)}}}};
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
        if (want.size() >= 2 && (want.front() == '\'' || want.front() == '"'))
          want = want.substr(1, want.size() - 2);
        const Json* match = nullptr;
        for (const Json& e : *at) {
          if (!e.is_object() || !e.contains(key)) continue;
          const Json& v = e[key];
          if ((v.is_string() ? v.get<std::string>() : v.dump()) == want) {
            match = &e;
            break;
          }
        }
        at = match;
      } else {
        char* end = nullptr;
        const long index = std::strtol(inner.c_str(), &end, 10);
        at = (end && *end == '\0' && !inner.empty() && index >= 0 &&
              static_cast<size_t>(index) < at->size())
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
                           {"type", c.value("type", "string")},
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
