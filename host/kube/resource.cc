#include "host/kube/resource.h"

#include <ctime>

namespace gpustack::kube {

namespace resources {
ResourceType Namespaces() { return {"", "v1", "namespaces", false}; }
ResourceType Nodes() { return {"", "v1", "nodes", false}; }
ResourceType Pods() { return {"", "v1", "pods", true}; }
ResourceType ConfigMaps() { return {"", "v1", "configmaps", true}; }
ResourceType Leases() { return {"coordination.k8s.io", "v1", "leases", true}; }
ResourceType CustomResourceDefinitions() {
  return {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
}
ResourceType Devices() { return {"worker.gpustack.ai", "v1alpha1", "devices", false}; }
ResourceType InstanceTypes() { return {"worker.gpustack.ai", "v1alpha1", "instancetypes", false}; }
ResourceType Instances() { return {"worker.gpustack.ai", "v1alpha1", "instances", true}; }
ResourceType Events() { return {"", "v1", "events", true}; }
ResourceType Secrets() { return {"", "v1", "secrets", true}; }
ResourceType ResourceFlavors() { return {"kueue.x-k8s.io", "v1beta2", "resourceflavors", false}; }
ResourceType ClusterQueues() { return {"kueue.x-k8s.io", "v1beta2", "clusterqueues", false}; }
ResourceType LocalQueues() { return {"kueue.x-k8s.io", "v1beta2", "localqueues", true}; }
ResourceType Workloads() { return {"kueue.x-k8s.io", "v1beta2", "workloads", true}; }
ResourceType MutatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", false};
}
ResourceType ValidatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", false};
}
ResourceType AdmissionChecks() { return {"kueue.x-k8s.io", "v1beta2", "admissionchecks", false}; }
ResourceType ResourceSlices() { return {"resource.k8s.io", "v1", "resourceslices", false}; }
ResourceType ResourceClaims() { return {"resource.k8s.io", "v1", "resourceclaims", true}; }
}  // namespace resources

std::string CollectionPath(const ResourceType& type, std::string_view ns) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/";
  path += type.plural;
  return path;
}

std::string ObjectPath(const ResourceType& type, std::string_view ns, std::string_view name,
                       std::string_view subresource) {
  std::string path = CollectionPath(type, ns);
  path += "/";
  path += name;
  if (!subresource.empty()) {
    path += "/";
    path += subresource;
  }
  return path;
}

std::string EscapeQueryValue(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Code CodeOfHttpStatus(int http_status, std::string_view reason) {
  switch (http_status) {
    case 400:
      return Code::kInvalidArgument;
    case 401:
      return Code::kUnauthenticated;
    case 403:
      return Code::kPermissionDenied;
    case 404:
      return Code::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? Code::kAlreadyExists : Code::kAborted;
    case 410:
      return Code::kOutOfRange;  // the resourceVersion is too old: list again
    case 422:
      return Code::kInvalidArgument;
    case 429:
      return Code::kResourceExhausted;
    case 499:
      return Code::kCancelled;
    case 500:
      return Code::kInternal;
    case 501:
      return Code::kUnimplemented;
    case 503:
      return Code::kUnavailable;
    case 504:
      return Code::kDeadlineExceeded;
    default:
      if (http_status >= 200 && http_status < 300) return Code::kOk;
      return http_status >= 500 ? Code::kUnavailable : Code::kUnknown;
  }
}

Error ApiError(int http_status, std::string_view body, std::string_view what) {
  Error error;
  error.http_status = http_status;
  std::string message;
  Json status = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.value("kind", "") == "Status") {
    error.reason = status.value("reason", "");
    message = status.value("message", "");
  }
  if (message.empty()) {
    message = std::string(body.substr(0, 300));
  }
  error.code = CodeOfHttpStatus(http_status, error.reason);
  error.message = std::string(what) + ": HTTP " + std::to_string(http_status) +
                  (error.reason.empty() ? "" : " " + error.reason) +
                  (message.empty() ? "" : ": " + message);
  return error;
}

std::string ObjectKey(const Json& object) {
  const Json& metadata = object.contains("metadata") ? object["metadata"] : Json::object();
  std::string name = metadata.value("name", "");
  std::string ns = metadata.value("namespace", "");
  return ns.empty() ? name : ns + "/" + name;
}

bool ConditionIsTrue(const Json& object, std::string_view type) {
  if (!object.is_object()) return false;
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return false;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return false;
  for (const Json& c : *conditions)
    if (c.is_object() && c.value("type", "") == type) return c.value("status", "") == "True";
  return false;
}

std::string FormatTime(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::optional<std::chrono::system_clock::time_point> ParseTime(std::string_view text) {
  std::tm utc{};
  const std::string copy(text);
  const char* end = strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &utc);
  if (end == nullptr || (*end != 'Z' && *end != '.')) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&utc));
}

Json NewEvent(const Json& involved, std::string_view type, std::string_view reason,
              std::string_view message, std::string_view component, std::string_view instance) {
  const std::string now = FormatTime(std::chrono::system_clock::now());
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata",
           {{"generateName", involved.value("name", "") + "."},
            {"namespace", involved.value("namespace", "")}}},
          {"involvedObject", involved},
          {"type", type},
          {"reason", reason},
          {"message", message.substr(0, 1024)},
          {"source", {{"component", component}}},
          {"reportingComponent", component},
          {"reportingInstance", instance},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1}};
}

}  // namespace gpustack::kube
