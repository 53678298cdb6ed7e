#include "host/kube/resource.h"

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

Error ApiError(int http_status, std::string_view body, std::string_view what) {
  Error error;
  error.code = http_status;
  std::string message;
  Json status = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.value("kind", "") == "Status") {
    error.reason = status.value("reason", "");
    message = status.value("message", "");
  }
  if (message.empty()) {
    message = std::string(body.substr(0, 300));
  }
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

}  // namespace gpustack::kube
