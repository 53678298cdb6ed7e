#include "host/api/http.h"

#include "host/api/documents.h"
#include "host/common/yaml.h"

namespace gpustack::api {

https::Response StatusResponse(int code, const std::string& reason, const std::string& message,
                               const Json& details) {
  return {code, StatusOf(code, reason, message, details).dump()};
}

https::Response ErrorResponse(const Error& error) {
  const int code = error.http_status ? error.http_status : 400;
  return StatusResponse(code, error.reason.empty() ? (code == 400 ? "BadRequest" : "InternalError")
                                                   : error.reason,
                        error.message);
}

https::Response JsonResponse(const Json& body, int code) { return {code, body.dump()}; }

https::Response InvalidResponse(const Kind& kind, const std::string& name, const std::string& field,
                                const std::string& value, const std::string& why) {
  const std::string message = kind.kind + "." + kind.group + " \"" + name + "\" is invalid: " +
                              field + ": Invalid value: \"" + value + "\": " + why;
  return StatusResponse(
      422, "Invalid", message,
      Json{{"name", name},
           {"group", kind.group},
           {"kind", kind.kind},
           {"causes", Json::array({{{"reason", "FieldValueInvalid"},
                                    {"message", "Invalid value: \"" + value + "\": " + why},
                                    {"field", field}}})}});
}

bool WantsTable(const https::Request& r) {
  return r.Header("accept").find("as=Table") != std::string::npos;
}

std::string DiscoveryVersion(const https::Request& r) {
  const std::string accept = r.Header("accept");
  for (size_t at = 0; at < accept.size();) {
    const size_t comma = accept.find(',', at);
    const std::string type =
        accept.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (type.find("as=APIGroupDiscoveryList") != std::string::npos) {
      if (type.find("v=v2beta1") != std::string::npos) return "v2beta1";
      if (type.find("v=v2") != std::string::npos) return "v2";
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return {};
}

Result<Json> ParseBody(const std::string& content_type, const std::string& body) {
  if (content_type.find("yaml") != std::string::npos) {
    auto documents = FromYaml(body);
    if (!documents) return Error{"the body is not YAML: " + documents.error()};
    if (documents->size() != 1) return Error{"the body must hold one YAML document"};
    return documents->front();
  }
  Json parsed = Json::parse(body, nullptr, false);
  if (parsed.is_discarded()) return Error{"the body is not JSON"};
  return parsed;
}

Result<Json> Patched(const Json& current, const std::string& content_type,
                     const std::string& body) {
  if (content_type.find("strategic-merge-patch") != std::string::npos) {
    Error e{"strategic merge patch is not supported here: use --type merge or --type json",
            Code::kInvalidArgument};
    e.http_status = 415;
    e.reason = "UnsupportedMediaType";
    return e;
  }
  auto patch = ParseBody(content_type, body);
  if (!patch) return patch.failure();
  try {
    if (content_type.find("json-patch") != std::string::npos) {
      if (!patch->is_array()) return Error{"a JSON patch is a list of operations"};
      return current.patch(*patch);
    }
    if (!patch->is_object()) return Error{"a merge or apply patch is an object"};
    Json out = current;
    out.merge_patch(*patch);
    return out;
  } catch (const std::exception& e) {
    Error error{std::string("the patch does not apply: ") + e.what()};
    error.http_status = 422;
    error.reason = "Invalid";
    return error;
  }
}

namespace {

void Unknown(const Json& value, const Json& schema, const std::string& path,
             std::vector<std::string>* out) {
  if (!schema.is_object() || schema.value("x-kubernetes-preserve-unknown-fields", false)) return;
  if (value.is_object() && schema.contains("properties")) {
    const Json& properties = schema["properties"];
    for (const auto& [key, v] : value.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!properties.contains(key)) {
        out->push_back(at);
      } else {
        Unknown(v, properties[key], at, out);
      }
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i)
      Unknown(value[i], schema["items"], path + "[" + std::to_string(i) + "]", out);
  }
}

}  // namespace

std::vector<std::string> UnknownFields(const Json& object, const Json& schema) {
  std::vector<std::string> out;
  Json trimmed = object;
  if (trimmed.is_object()) trimmed.erase("metadata");  // ObjectMeta is the apiserver's own
  Unknown(trimmed, schema, "", &out);
  return out;
}

Status CheckFields(const Json& object, const Kind& kind, const Query& query,
                   std::vector<std::string>* warnings) {
  const std::string mode = query.Get("fieldValidation");
  if (mode.empty() || mode == "Ignore") return Ok{};
  if (mode != "Strict" && mode != "Warn") {
    return Error{"fieldValidation must be Strict, Warn or Ignore, not " + mode};
  }
  const std::vector<std::string> unknown = UnknownFields(object, kind.schema);
  if (unknown.empty()) return Ok{};
  if (mode == "Warn") {
    for (const std::string& f : unknown) warnings->push_back("unknown field \"" + f + "\"");
    return Ok{};
  }
  std::string message = "strict decoding error: ";
  for (size_t i = 0; i < unknown.size(); ++i)
    message += (i ? ", " : "") + ("unknown field \"" + unknown[i] + "\"");
  return Error{message};
}

}  // namespace gpustack::api
