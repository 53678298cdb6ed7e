// Where the API server is and how to authenticate to it: kubeconfig files (KUBECONFIG, merged as
// kubectl does) or the in-cluster service account. Parsing is pure; loading reads files.
#ifndef GPUSTACK_HOST_KUBE_CONFIG_H_
#define GPUSTACK_HOST_KUBE_CONFIG_H_

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/base64.h"
#include "host/common/result.h"

namespace gpustack::kube {

struct ClientConfig {
  std::string server;  // https://host[:port][/prefix], as written
  std::string host;    // without brackets for IPv6
  std::string port;    // "443" when the URL has none
  std::string path_prefix;
  std::string ca_pem;  // empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // overrides the name checked in the server's certificate
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // a fixed bearer token
  std::string token_file;  // re-read when it may have rotated (service-account tokens)
  std::string namespace_name = "default";
  std::string source;  // "kubeconfig <path> context <name>" or "in-cluster", for messages
};

// Splits https://host:port/prefix. Only https is accepted: every server we talk to has TLS.
Status ParseServerUrl(std::string_view url, ClientConfig& config);

// One kubeconfig document. `base_dir` resolves relative file references, as kubectl does.
// `context` empty means current-context.
Result<ClientConfig> ParseKubeconfig(std::string_view yaml_text,
                                     const std::filesystem::path& base_dir,
                                     std::string_view context = {});

// KUBECONFIG's files (colon-separated; for each named entry the first file wins, as kubectl
// merges) or ~/.kube/config.
Result<ClientConfig> LoadKubeconfig(const std::vector<std::filesystem::path>& files,
                                    std::string_view context = {});

// The Pod's service account: KUBERNETES_SERVICE_HOST/PORT and, under `account_dir`, token,
// ca.crt and namespace. The token is referenced as a file so that rotation is picked up.
Result<ClientConfig> LoadInClusterConfig(
    const std::map<std::string, std::string>& environment,
    const std::filesystem::path& account_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// What kubectl and client-go do: KUBECONFIG, then in-cluster, then ~/.kube/config.
Result<ClientConfig> LoadDefaultConfig();

using gpustack::DecodeBase64;  // host/common/base64.h
using gpustack::EncodeBase64;

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_CONFIG_H_
