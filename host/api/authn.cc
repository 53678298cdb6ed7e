#include "host/api/authn.h"

#include <algorithm>

#include "host/api/request.h"
#include "host/https/certs.h"

namespace gpustack::api {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The ConfigMap keeps each list as a JSON array in a string.
std::vector<std::string> ListAt(const nlohmann::json& data, const char* key) {
  auto found = data.find(key);
  if (found == data.end() || !found->is_string()) return {};
  auto parsed = nlohmann::json::parse(found->get<std::string>(), nullptr, false);
  std::vector<std::string> out;
  if (!parsed.is_array()) return out;
  for (const auto& v : parsed)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

Error Unauthorized(const std::string& why) {
  Error e{"Unauthorized: " + why, Code::kUnauthenticated};
  e.http_status = 401;
  return e;
}

}  // namespace

Result<RequestHeaderConfig> RequestHeaderConfigFrom(const nlohmann::json& config_map) {
  const nlohmann::json data = config_map.value("data", nlohmann::json::object());
  RequestHeaderConfig c;
  c.client_ca = data.value("requestheader-client-ca-file", "");
  if (c.client_ca.empty())
    return Error{std::string("kube-system/") + kAuthenticationConfigMap +
                 " has no requestheader-client-ca-file: the apiserver runs without "
                 "--requestheader-client-ca-file, so no aggregated request can be authenticated"};
  c.allowed_names = ListAt(data, "requestheader-allowed-names");
  for (auto [key, list] : {std::pair{"requestheader-username-headers", &c.username_headers},
                           {"requestheader-uid-headers", &c.uid_headers},
                           {"requestheader-group-headers", &c.group_headers},
                           {"requestheader-extra-headers-prefix", &c.extra_prefixes}}) {
    for (const std::string& h : ListAt(data, key)) list->push_back(Lower(h));
  }
  if (c.username_headers.empty())
    return Error{std::string("kube-system/") + kAuthenticationConfigMap +
                 " names no requestheader-username-headers"};
  return c;
}

Result<UserInfo> Authenticate(const RequestHeaderConfig& config, const https::Request& request) {
  if (request.peer_certificates.empty()) return Unauthorized("no front-proxy client certificate");
  auto name = https::VerifyClientCertificate(request.peer_certificates, config.client_ca);
  if (!name) return Unauthorized(name.error());
  if (!config.allowed_names.empty() &&
      std::find(config.allowed_names.begin(), config.allowed_names.end(), *name) ==
          config.allowed_names.end())
    return Unauthorized("client certificate " + *name + " is not an allowed front proxy");
  UserInfo user;
  for (const std::string& h : config.username_headers) {
    user.name = request.Header(h);
    if (!user.name.empty()) break;
  }
  if (user.name.empty()) return Unauthorized("the front proxy named no user");
  for (const std::string& h : config.uid_headers) {
    user.uid = request.Header(h);
    if (!user.uid.empty()) break;
  }
  for (const auto& [key, value] : request.headers) {
    if (std::find(config.group_headers.begin(), config.group_headers.end(), key) !=
        config.group_headers.end()) {
      user.groups.push_back(value);
      continue;
    }
    for (const std::string& prefix : config.extra_prefixes) {
      if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0) {
        user.extra[PercentDecode(key.substr(prefix.size()))].push_back(value);
        break;
      }
    }
  }
  // As k8s.io/apiserver's AuthenticatedGroupAdder: whoever is authenticated is in
  // system:authenticated (what system:discovery and system:basic-user are bound to).
  if (std::find(user.groups.begin(), user.groups.end(), "system:authenticated") ==
      user.groups.end())
    user.groups.push_back("system:authenticated");
  return user;
}

}  // namespace gpustack::api
