// What an API request asks for, read from its method, path and query the way k8s.io/apiserver's
// RequestInfoFactory reads them: the verb (get, list, watch, create, update, patch, delete,
// deletecollection), the group, version, namespace, resource, name and subresource. Pure; the
// fuzz target feeds it arbitrary paths.
#ifndef GPUSTACK_HOST_API_REQUEST_H_
#define GPUSTACK_HOST_API_REQUEST_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"

namespace gpustack::api {

// A query string's parameters, percent-decoded. A repeated one keeps its first value.
class Query {
 public:
  static Query Parse(std::string_view query);
  std::string Get(const std::string& name) const;  // empty when absent
  bool Has(const std::string& name) const { return values_.contains(name); }
  bool IsTrue(const std::string& name) const;  // "true" or "1"
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// "%2F" -> "/", "+" -> " "; an invalid escape stays as it is.
std::string PercentDecode(std::string_view text);

struct RequestInfo {
  bool resource_request = false;  // false: discovery, OpenAPI, health (a non-resource path)
  std::string verb;               // for a non-resource path: the lower-case HTTP method
  std::string group, version, ns, resource, name, subresource;
};

// The request's meaning; an Error (code kInvalidArgument) for a path that is not a well-formed
// API path (empty segments, "..", a namespace without a resource).
Result<RequestInfo> ParseRequestInfo(std::string_view method, std::string_view path,
                                     const Query& query);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_REQUEST_H_
