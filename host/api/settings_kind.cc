#include "host/api/settings_kind.h"

#include <algorithm>

#include "host/common/base64.h"
#include "host/common/json_path.h"

namespace gpustack::api {

Kind SettingKind() {
  Kind k;
  k.group = kSettingsGroup;
  k.resource = "settings";
  k.singular = "setting";
  k.kind = "Setting";
  k.list_kind = "SettingList";
  k.namespaced = true;
  k.short_names = {"set"};
  k.verbs = {"get", "list", "patch", "update", "watch"};
  k.schema = {
      {"type", "object"},
      {"description",
       "An online setting of the operator (docs/behaviour.md §10.1), in the system namespace."},
      {"properties",
       {{"apiVersion", {{"type", "string"}}},
        {"kind", {{"type", "string"}}},
        {"metadata", {{"type", "object"}}},
        {"spec",
         {{"type", "object"},
          {"properties",
           {{"value",
             {{"type", "string"},
              {"description", "The new value (write-only: status.value shows it)."}}}}}}},
        {"status",
         {{"type", "object"},
          {"properties",
           {{"description", {{"type", "string"}}},
            {"editable", {{"type", "boolean"}}},
            {"sensitive", {{"type", "boolean"}}},
            {"value", {{"type", "string"}, {"description", "Masked when sensitive."}}}}}}}}}};
  k.columns = Json::array({{{"name", "Value"}, {"type", "string"}, {"jsonPath", ".status.value"}},
                           {{"name", "Editable"}, {"type", "boolean"}, {"jsonPath", ".status.editable"}},
                           {{"name", "Description"},
                            {"type", "string"},
                            {"jsonPath", ".status.description"},
                            {"priority", 1}}});
  return k;
}

std::vector<Json> DeriveSettings(const Json* secret, const std::vector<SettingSpec>& specs,
                                 const std::string& system_namespace) {
  std::vector<Json> out;
  for (const SettingSpec& s : specs) {
    std::string value = s.default_value;
    if (secret) {
      const Json& stored = JsonAt(*secret, {"data", s.name});
      if (stored.is_string()) {
        if (auto decoded = DecodeBase64(stored.get<std::string>(), s.name)) value = *decoded;
      }
    }
    Json metadata = {{"name", s.name}, {"namespace", system_namespace}};
    if (secret) {
      const std::string created = StringAt(*secret, {"metadata", "creationTimestamp"});
      if (!created.empty()) metadata["creationTimestamp"] = created;
    }
    out.push_back({{"apiVersion", std::string(kSettingsGroup) + "/" + kServedVersion},
                   {"kind", "Setting"},
                   {"metadata", metadata},
                   {"spec", Json::object()},
                   {"status",
                    {{"description", s.description},
                     {"editable", s.editable},
                     {"sensitive", s.sensitive},
                     {"value", s.sensitive && !value.empty() ? kMasked : value}}}});
  }
  return out;
}

Result<std::string> SettingValue(const SettingSpec& spec, const Json& written) {
  if (spec.type == "boolean") {
    if (written.is_boolean()) return std::string(written.get<bool>() ? "true" : "false");
    if (written.is_string()) {
      std::string v = written.get<std::string>();
      std::transform(v.begin(), v.end(), v.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (v == "true" || v == "false") return v;
    }
    return Error{spec.name + " is a boolean setting: the value must be \"true\" or \"false\""};
  }
  if (!written.is_string())
    return Error{spec.name + " is a string setting: the value must be a string"};
  return written.get<std::string>();
}

namespace {

const SettingSpec* Find(const std::vector<SettingSpec>& specs, const std::string& name) {
  for (const SettingSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

std::string Shown(const Json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

}  // namespace

std::unique_ptr<Backend> SettingsBackend(kube::Client& client, const std::string& system_namespace,
                                         std::vector<SettingSpec> specs, size_t events_kept) {
  DerivedKind derived;
  derived.sources = {{kube::resources::Secrets(), system_namespace, "",
                      std::string("metadata.name=") + kSettingsSecretName}};
  derived.derive = [specs, system_namespace](const std::vector<std::vector<ObjectPtr>>& sources) {
    const Json* secret = sources[0].empty() ? nullptr : sources[0].front().get();
    return DeriveSettings(secret, specs, system_namespace);
  };
  const Kind kind = SettingKind();
  derived.write = [specs, system_namespace, kind](kube::Client& client, const Call& call,
                                                  const ObjectPtr& current) -> https::Response {
    const SettingSpec* spec = Find(specs, call.info.name);
    if (!current || !spec || call.info.ns != system_namespace) {
      return StatusResponse(404, "NotFound",
                            "settings.gpustack.ai \"" + call.info.name + "\" not found" +
                                (call.info.ns != system_namespace
                                     ? " (settings live in namespace " + system_namespace + ")"
                                     : ""),
                            Json{{"name", call.info.name}, {"group", kind.group}, {"kind", "settings"}});
    }
    Json desired;
    if (call.info.verb == "update") {
      auto body = ParseBody(call.request.Header("content-type"), call.request.body);
      if (!body) return ErrorResponse(body.failure());
      desired = std::move(*body);
      if (desired.value("kind", "") != "Setting" ||
          desired.value("apiVersion", "") != kind.ApiVersion())
        return StatusResponse(400, "BadRequest",
                              "the body must be a Setting of " + kind.ApiVersion());
    } else {
      Json base = *current;
      base["metadata"].erase("resourceVersion");
      auto patched = Patched(base, call.request.Header("content-type"), call.request.body);
      if (!patched) return ErrorResponse(patched.failure());
      desired = std::move(*patched);
    }
    if (StringAt(desired, {"metadata", "name"}) != call.info.name)
      return StatusResponse(400, "BadRequest", "the name in the body does not match the path");
    std::vector<std::string> warnings;
    if (Status fields = CheckFields(desired, kind, call.query, &warnings); !fields)
      return StatusResponse(400, "BadRequest", fields.error());
    const Json& written = JsonAt(desired, {"spec", "value"});
    if (written.is_null()) {  // nothing to change
      https::Response same = JsonResponse(*current);
      for (const auto& w : warnings) same.headers.emplace_back("Warning", "299 - \"" + w + "\"");
      return same;
    }
    auto value = SettingValue(*spec, written);
    if (!value) return InvalidResponse(kind, spec->name, "spec.value", Shown(written), value.error());
    if (!spec->editable)
      return InvalidResponse(kind, spec->name, "spec.value", Shown(written),
                             spec->name + " is not editable");
    // One key of the Secret; a resourceVersion the client sent is the Secret's precondition.
    Json patch = {{"stringData", {{spec->name, *value}}}};
    const std::string rv = StringAt(desired, {"metadata", "resourceVersion"});
    if (!rv.empty()) patch["metadata"] = {{"resourceVersion", rv}};
    kube::HttpRequest out{"PATCH",
                          kube::ObjectPath(kube::resources::Secrets(), system_namespace,
                                           kSettingsSecretName),
                          patch.dump(), "application/merge-patch+json"};
    if (!call.query.Get("dryRun").empty()) out.target += "?dryRun=All";
    https::Response answer = Relay(client, out, [&](Json secret) {
      for (Json& s : DeriveSettings(&secret, {*spec}, system_namespace)) {
        s["metadata"]["resourceVersion"] = StringAt(secret, {"metadata", "resourceVersion"});
        return s;
      }
      return Json();
    });
    for (const auto& w : warnings) answer.headers.emplace_back("Warning", "299 - \"" + w + "\"");
    return answer;
  };
  return MakeDerivedBackend(client, kind, std::move(derived), events_kept);
}

}  // namespace gpustack::api
