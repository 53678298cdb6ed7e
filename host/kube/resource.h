// Addressing in the Kubernetes REST API: which resource, and the paths of its collections,
// objects and subresources. Pure functions.
#ifndef GPUSTACK_HOST_KUBE_RESOURCE_H_
#define GPUSTACK_HOST_KUBE_RESOURCE_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack::kube {

using Json = nlohmann::json;

struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
};

// The kinds this project reads and writes.
namespace resources {
ResourceType Namespaces();
ResourceType Nodes();
ResourceType Pods();
ResourceType ConfigMaps();
ResourceType Leases();
ResourceType CustomResourceDefinitions();
ResourceType Devices();
ResourceType InstanceTypes();
ResourceType Instances();
ResourceType Secrets();
ResourceType Events();
// Kueue's kinds, kueue.x-k8s.io/v1beta2.
ResourceType ResourceFlavors();
ResourceType ClusterQueues();
ResourceType LocalQueues();
ResourceType Workloads();
ResourceType AdmissionChecks();
ResourceType MutatingWebhookConfigurations();
ResourceType ValidatingWebhookConfigurations();
// Dynamic Resource Allocation, resource.k8s.io/v1.
ResourceType ResourceSlices();
ResourceType ResourceClaims();
}  // namespace resources

// /api/v1[/namespaces/<ns>]/<plural> or /apis/<group>/<version>[/namespaces/<ns>]/<plural>.
// `ns` is ignored for cluster-scoped resources; empty means all namespaces.
std::string CollectionPath(const ResourceType& type, std::string_view ns);
std::string ObjectPath(const ResourceType& type, std::string_view ns, std::string_view name,
                       std::string_view subresource = {});

// Percent-encodes a query parameter value (selectors carry '=', ',' and '!').
std::string EscapeQueryValue(std::string_view value);

// The Status reasons a caller branches on.
inline bool IsNotFound(const Error& e) { return e.http_status == 404; }
inline bool IsConflict(const Error& e) {
  return e.http_status == 409 && e.reason != "AlreadyExists";
}
inline bool IsAlreadyExists(const Error& e) { return e.reason == "AlreadyExists"; }
inline bool IsGone(const Error& e) {
  return e.http_status == 410 || e.reason == "Expired" || e.reason == "Gone";
}
inline bool IsInvalid(const Error& e) { return e.http_status == 422 || e.reason == "Invalid"; }

// The canonical code of an HTTP status (the gRPC mapping; 409 splits on the Status reason).
Code CodeOfHttpStatus(int http_status, std::string_view reason);

// An Error from an HTTP status and its body: a Status object's reason and message where the
// server sent one, the code from CodeOfHttpStatus. `what` names the request ("GET /api/v1/...").
Error ApiError(int http_status, std::string_view body, std::string_view what);

// metadata.namespace + "/" + metadata.name, or the name alone (client-go's key).
std::string ObjectKey(const Json& object);

// Whether `object`'s status holds the condition `type` with status "True".
bool ConditionIsTrue(const Json& object, std::string_view type);

// A metav1.Time, as conditions and status timestamps carry it: "2026-12-05T05:17:18Z".
std::string FormatTime(std::chrono::system_clock::time_point time);
// FormatTime's inverse (whole seconds; a fraction is ignored); nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> ParseTime(std::string_view text);

// A core/v1 Event about `involved` (apiVersion, kind, name, namespace, uid), from `component`;
// the message cut to 1 KiB.
Json NewEvent(const Json& involved, std::string_view type, std::string_view reason,
              std::string_view message, std::string_view component, std::string_view instance);

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_RESOURCE_H_
