#include "host/kube/config.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "host/common/files.h"

namespace gpustack::kube {
namespace {

constexpr size_t kMaxConfigFile = 4 << 20;  // a kubeconfig, a certificate, a token

// A file the config names, bounded; an empty one is an error, never "not given" (an empty CA
// file must not quietly fall back to the system's trust store).
Result<std::string> ReadFile(const std::filesystem::path& path, std::string_view what) {
  auto text = ReadSmallFile(path, kMaxConfigFile, what);
  if (!text) return std::move(text).failure().WithContext("cannot read ");
  if (text->empty()) {
    return Error{std::string(what) + " " + path.string() + " is empty", Code::kInvalidArgument};
  }
  return text;
}

std::string Scalar(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  return value && value.IsScalar() ? value.as<std::string>() : std::string();
}

// `<field>-data` (base64 inline) wins over `<field>` (a file, relative to the kubeconfig).
Result<std::string> DataOrFile(const YAML::Node& node, const std::string& field,
                               const std::filesystem::path& base_dir) {
  std::string data = Scalar(node, (field + "-data").c_str());
  if (!data.empty()) {
    return DecodeBase64(data, field + "-data");
  }
  std::string file = Scalar(node, field.c_str());
  if (file.empty()) {
    return std::string();
  }
  std::filesystem::path path(file);
  if (path.is_relative()) {
    path = base_dir / path;
  }
  return ReadFile(path, field);
}

// kubectl's merge: for each named cluster, user and context the first file that defines it
// wins; current-context comes from the first file that sets one. Relative paths stay relative
// to the file that held them, so each entry remembers its directory.
struct MergedConfig {
  std::string current_context;
  std::map<std::string, std::pair<YAML::Node, std::filesystem::path>> clusters, users, contexts;
};

void MergeFile(const YAML::Node& doc, const std::filesystem::path& dir, MergedConfig& merged) {
  if (merged.current_context.empty()) {
    merged.current_context = Scalar(doc, "current-context");
  }
  auto merge = [&](const char* list_key, const char* body,
                   std::map<std::string, std::pair<YAML::Node, std::filesystem::path>>& into) {
    const YAML::Node list = doc[list_key];
    if (!list || !list.IsSequence()) {
      return;
    }
    for (const auto& entry : list) {
      std::string name = Scalar(entry, "name");
      if (!name.empty() && entry[body] && !into.contains(name)) {
        into.emplace(name, std::make_pair(entry[body], dir));
      }
    }
  };
  merge("clusters", "cluster", merged.clusters);
  merge("users", "user", merged.users);
  merge("contexts", "context", merged.contexts);
}

Result<ClientConfig> Resolve(const MergedConfig& merged, std::string_view wanted,
                             const std::string& origin) {
  std::string context_name = wanted.empty() ? merged.current_context : std::string(wanted);
  if (context_name.empty()) {
    return Error{origin + ": no current-context, and no context was named"};
  }
  auto context = merged.contexts.find(context_name);
  if (context == merged.contexts.end()) {
    return Error{origin + ": context \"" + context_name + "\" is not defined"};
  }
  const YAML::Node& ctx = context->second.first;
  std::string cluster_name = Scalar(ctx, "cluster");
  auto cluster = merged.clusters.find(cluster_name);
  if (cluster == merged.clusters.end()) {
    return Error{origin + ": context \"" + context_name + "\" names cluster \"" + cluster_name +
                 "\", which is not defined"};
  }
  ClientConfig config;
  config.source = origin + " context " + context_name;
  const YAML::Node& c = cluster->second.first;
  if (Status url = ParseServerUrl(Scalar(c, "server"), config); !url) {
    return url.failure().WithContext(config.source + ": ");
  }
  auto ca = DataOrFile(c, "certificate-authority", cluster->second.second);
  if (!ca) {
    return ca.failure().WithContext(config.source + ": ");
  }
  config.ca_pem = std::move(*ca);
  config.insecure_skip_tls_verify = Scalar(c, "insecure-skip-tls-verify") == "true";
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    // kubectl refuses this too: which of the two was meant is anyone's guess.
    return Error{config.source +
                 ": insecure-skip-tls-verify and a certificate authority together; "
                 "remove one"};
  }
  config.tls_server_name = Scalar(c, "tls-server-name");
  if (std::string ns = Scalar(ctx, "namespace"); !ns.empty()) {
    config.namespace_name = ns;
  }

  std::string user_name = Scalar(ctx, "user");
  if (user_name.empty()) {
    return config;  // anonymous
  }
  auto user = merged.users.find(user_name);
  if (user == merged.users.end()) {
    return Error{config.source + ": user \"" + user_name + "\" is not defined"};
  }
  const YAML::Node& u = user->second.first;
  const std::filesystem::path& user_dir = user->second.second;
  if (u["exec"] || u["auth-provider"]) {
    return Error{config.source + ": user \"" + user_name +
                 "\" uses exec or auth-provider credentials, which are not supported; use a "
                 "client certificate or a token"};
  }
  auto cert = DataOrFile(u, "client-certificate", user_dir);
  auto key = DataOrFile(u, "client-key", user_dir);
  if (!cert) {
    return cert.failure().WithContext(config.source + ": ");
  }
  if (!key) {
    return key.failure().WithContext(config.source + ": ");
  }
  if (cert->empty() != key->empty()) {
    return Error{config.source + ": user \"" + user_name +
                 "\" has a client certificate or a key, but not both"};
  }
  config.client_cert_pem = std::move(*cert);
  config.client_key_pem = std::move(*key);
  config.token = Scalar(u, "token");
  if (std::string file = Scalar(u, "tokenFile"); !file.empty()) {
    std::filesystem::path path(file);
    config.token_file = (path.is_relative() ? user_dir / path : path).string();
  }
  return config;
}

Result<YAML::Node> ParseYaml(std::string_view text, const std::string& origin) {
  try {
    YAML::Node doc = YAML::Load(std::string(text));
    if (!doc.IsMap()) {
      return Error{origin + ": not a kubeconfig (expected a YAML mapping)"};
    }
    return doc;
  } catch (const YAML::Exception& e) {
    return Error{origin + ": " + e.what()};
  }
}

}  // namespace

Status ParseServerUrl(std::string_view url, ClientConfig& config) {
  constexpr std::string_view kScheme = "https://";
  if (url.empty()) {
    return Error{"the cluster has no server URL"};
  }
  if (!url.starts_with(kScheme)) {
    return Error{"server \"" + std::string(url) + "\" is not an https:// URL"};
  }
  config.server = std::string(url);
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  config.path_prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (config.path_prefix.ends_with('/')) {
    config.path_prefix.pop_back();
  }
  if (authority.starts_with('[')) {  // [IPv6]:port
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Error{"server \"" + std::string(url) + "\" has an unclosed IPv6 bracket"};
    }
    config.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    config.port = after.starts_with(':') ? std::string(after.substr(1)) : "443";
  } else {
    if (authority.find(':') != authority.rfind(':')) {
      return Error{"server \"" + std::string(url) +
                   "\": an IPv6 address needs brackets, as in https://[fd00::1]:6443"};
    }
    size_t colon = authority.rfind(':');
    config.host = std::string(authority.substr(0, colon));
    config.port =
        colon == std::string_view::npos ? "443" : std::string(authority.substr(colon + 1));
  }
  if (config.host.empty()) {
    return Error{"server \"" + std::string(url) + "\" has no host"};
  }
  if (config.port.empty() || config.port.size() > 5 ||
      config.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(config.port) == 0 || std::stoul(config.port) > 65535) {
    return Error{"server \"" + std::string(url) + "\" has an invalid port"};
  }
  return Ok{};
}

Result<ClientConfig> ParseKubeconfig(std::string_view yaml_text,
                                     const std::filesystem::path& base_dir,
                                     std::string_view context) {
  auto doc = ParseYaml(yaml_text, "kubeconfig");
  if (!doc) {
    return doc.failure();
  }
  MergedConfig merged;
  MergeFile(*doc, base_dir, merged);
  return Resolve(merged, context, "kubeconfig");
}

Result<ClientConfig> LoadKubeconfig(const std::vector<std::filesystem::path>& files,
                                    std::string_view context) {
  MergedConfig merged;
  std::string origin;
  for (const auto& file : files) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      continue;  // kubectl skips missing entries of KUBECONFIG
    }
    auto text = ReadFile(file, "kubeconfig");
    if (!text) {
      return text.failure();
    }
    auto doc = ParseYaml(*text, "kubeconfig " + file.string());
    if (!doc) {
      return doc.failure();
    }
    MergeFile(*doc, std::filesystem::absolute(file).parent_path(), merged);
    origin += (origin.empty() ? "kubeconfig " : ":") + file.string();
  }
  if (origin.empty()) {
    std::string names;
    for (const auto& file : files) {
      names += (names.empty() ? "" : ", ") + file.string();
    }
    return Error{"no kubeconfig found (looked for " + names + ")"};
  }
  return Resolve(merged, context, origin);
}

Result<ClientConfig> LoadInClusterConfig(const std::map<std::string, std::string>& environment,
                                         const std::filesystem::path& account_dir) {
  auto host = environment.find("KUBERNETES_SERVICE_HOST");
  auto port = environment.find("KUBERNETES_SERVICE_PORT");
  if (host == environment.end() || port == environment.end() || host->second.empty()) {
    return Error{"not running in a cluster (KUBERNETES_SERVICE_HOST/PORT are not set)"};
  }
  bool ipv6 = host->second.find(':') != std::string::npos;
  ClientConfig config;
  config.source = "in-cluster service account";
  std::string url =
      "https://" + (ipv6 ? "[" + host->second + "]" : host->second) + ":" + port->second;
  if (Status parsed = ParseServerUrl(url, config); !parsed) {
    return parsed.failure().WithContext(config.source + ": ");
  }
  auto ca = ReadFile(account_dir / "ca.crt", "service-account CA");
  if (!ca) {
    return ca.failure();
  }
  config.ca_pem = std::move(*ca);
  config.token_file = (account_dir / "token").string();
  if (!std::filesystem::exists(config.token_file)) {
    return Error{"no service-account token at " + config.token_file};
  }
  if (auto ns = ReadFile(account_dir / "namespace", "namespace"); ns && !ns->empty()) {
    config.namespace_name = *ns;
    while (!config.namespace_name.empty() &&
           std::isspace(static_cast<unsigned char>(config.namespace_name.back()))) {
      config.namespace_name.pop_back();
    }
  }
  return config;
}

Result<ClientConfig> LoadDefaultConfig() {
  if (const char* list = std::getenv("KUBECONFIG"); list != nullptr && *list != '\0') {
    std::vector<std::filesystem::path> files;
    std::string_view rest(list);
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      if (std::string_view one = rest.substr(0, colon); !one.empty()) {
        files.emplace_back(one);
      }
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
    return LoadKubeconfig(files);
  }
  std::map<std::string, std::string> environment;
  for (const char* name : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    if (const char* value = std::getenv(name)) {
      environment[name] = value;
    }
  }
  if (environment.size() == 2) {
    return LoadInClusterConfig(environment);
  }
  const char* home = std::getenv("HOME");
  return LoadKubeconfig({std::filesystem::path(home ? home : "/") / ".kube" / "config"});
}

}  // namespace gpustack::kube
