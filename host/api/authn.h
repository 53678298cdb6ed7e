// Delegated authentication, as k8s.io/apiserver's request-header authenticator does it: the
// aggregating apiserver proves itself with its front-proxy client certificate (verified against
// requestheader-client-ca-file, its common name among requestheader-allowed-names) and names the
// user in header fields (requestheader-username-headers, -group-headers, -extra-headers-prefix),
// all read from kube-system/extension-apiserver-authentication. Anyone else is 401: the API is
// never anonymous. Pure.
#ifndef GPUSTACK_HOST_API_AUTHN_H_
#define GPUSTACK_HOST_API_AUTHN_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/https/server.h"

namespace gpustack::api {

inline constexpr const char* kAuthenticationConfigMap = "extension-apiserver-authentication";

struct RequestHeaderConfig {
  std::string client_ca;                   // PEM bundle
  std::vector<std::string> allowed_names;  // empty: any name the CA signed
  std::vector<std::string> username_headers, uid_headers, group_headers, extra_prefixes;
};

// From the ConfigMap's data; an error when it carries no requestheader-client-ca-file (the
// apiserver runs without a front proxy, so nothing can be authenticated).
Result<RequestHeaderConfig> RequestHeaderConfigFrom(const nlohmann::json& config_map);

struct UserInfo {
  std::string name, uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

// The user the request is made for; an Error with http_status 401 says why not.
Result<UserInfo> Authenticate(const RequestHeaderConfig& config, const https::Request& request);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_AUTHN_H_
