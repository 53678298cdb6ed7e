// The documents the API answers with besides objects, built from the kind table: discovery
// (legacy APIGroupList / APIGroup / APIResourceList, and the aggregated apidiscovery.k8s.io/v2
// document kubectl asks for), OpenAPI v2 and v3 (so `kubectl explain` works), server-side Tables
// (printer columns), and metav1.Status errors. Pure.
#ifndef GPUSTACK_HOST_API_DOCUMENTS_H_
#define GPUSTACK_HOST_API_DOCUMENTS_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "host/api/kinds.h"

namespace gpustack::api {

using Json = nlohmann::json;

// The groups of `kinds`, in their order.
std::vector<std::string> Groups(const std::vector<Kind>& kinds);
Json GroupList(const std::vector<Kind>& kinds);
Json Group(const std::string& group);
Json ResourceList(const std::vector<Kind>& kinds, const std::string& group);
// `api_version` is apidiscovery.k8s.io/v2 or /v2beta1 (the same shape).
Json AggregatedDiscovery(const std::vector<Kind>& kinds, const std::string& api_version);

Json OpenApiV2(const std::vector<Kind>& kinds);
// /openapi/v3: one path per group, each with the hash of its document (clients cache by it).
Json OpenApiV3Index(const std::vector<Kind>& kinds,
                    const std::function<std::string(const std::string& group)>& hash_of);
Json OpenApiV3(const std::vector<Kind>& kinds, const std::string& group);

// A Table of `objects` (served form) with the kind's printer columns, Name first.
// `include_object`: "None", "Metadata" (the default) or "Object".
Json TableOf(const Kind& kind, const std::vector<Json>& objects, const std::string& include_object,
             const std::string& resource_version, const std::string& continue_token,
             std::chrono::system_clock::time_point now);

// A printer column's JSONPath (".status.hostIPs[0].ip", ".status.ports[?(@.port==22)].nodePort")
// on an object; null when it selects nothing.
Json EvaluateColumn(const Json& object, const std::string& json_path);

// metav1.Status for a failure: `reason` (NotFound, Forbidden, Invalid ...), `code`, and causes.
Json StatusOf(int code, const std::string& reason, const std::string& message,
              const Json& details = Json());

// k8s' HumanDuration: "45s", "3m20s", "5h", "2d3h".
std::string HumanAge(std::chrono::seconds age);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_DOCUMENTS_H_
