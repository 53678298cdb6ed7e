// The HTTP side every kind shares: Status answers, JSON answers, what the client accepts, and
// reading a write's body (JSON or YAML) and applying a patch to an object, as the apiserver does
// for merge, JSON and apply patches. Pure.
#ifndef GPUSTACK_HOST_API_HTTP_H_
#define GPUSTACK_HOST_API_HTTP_H_

#include <nlohmann/json.hpp>

#include <string>

#include "host/api/kinds.h"
#include "host/api/request.h"
#include "host/common/result.h"
#include "host/https/server.h"

namespace gpustack::api {

using Json = nlohmann::json;

// One API call, as the backends see it.
struct Call {
  const https::Request& request;
  const RequestInfo& info;
  const Query& query;
};

https::Response StatusResponse(int code, const std::string& reason, const std::string& message,
                               const Json& details = Json());
// An Error as a Status: its http_status (400 when none) and reason (BadRequest when none).
https::Response ErrorResponse(const Error& error);
https::Response JsonResponse(const Json& body, int code = 200);
// 422 Invalid for `kind` `name`, one cause per field problem ({field, message}).
https::Response InvalidResponse(const Kind& kind, const std::string& name, const std::string& field,
                                const std::string& value, const std::string& why);

bool WantsTable(const https::Request& request);
// "v2" or "v2beta1" when the client asks for the aggregated discovery document.
std::string DiscoveryVersion(const https::Request& request);

// A whole object from a write's body (JSON, or YAML for apply patches).
Result<Json> ParseBody(const std::string& content_type, const std::string& body);
// `current` with the patch applied: merge patch (RFC 7386), JSON patch (RFC 6902), or an apply
// patch taken as the fields it names (merged; no field ownership). A strategic merge patch is
// 415, as for custom resources.
Result<Json> Patched(const Json& current, const std::string& content_type, const std::string& body);

// Unknown fields of `object` against `schema` (an OpenAPI v3 object schema): "spec.foo".
std::vector<std::string> UnknownFields(const Json& object, const Json& schema);
// What fieldValidation asks for unknown fields: Strict refuses (an Error; the caller answers
// 400), Warn adds one line per field to `warnings` (the caller sends them as Warning headers),
// Ignore and no parameter pass.
Status CheckFields(const Json& object, const Kind& kind, const Query& query,
                   std::vector<std::string>* warnings);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_HTTP_H_
