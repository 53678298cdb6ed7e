#include "host/kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace gpustack::kube {
namespace {

// "hello" and "world" in base64, standing in for PEM blocks.
constexpr const char* kKubeconfig = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443/prefix/
    certificate-authority-data: aGVsbG8=
- name: remote
  cluster:
    server: https://[fd00::1]
    insecure-skip-tls-verify: true
    tls-server-name: api.example
users:
- name: admin
  user:
    client-certificate-data: aGVsbG8=
    client-key-data: d29ybGQ=
- name: robot
  user:
    token: s3cret
contexts:
- name: dev
  context: {cluster: local, user: admin, namespace: team-a}
- name: prod
  context: {cluster: remote, user: robot}
)";

TEST(Kubeconfig, CurrentContextWithInlineCertificates) {
  auto config = ParseKubeconfig(kKubeconfig, "/nowhere");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->host, "127.0.0.1");
  EXPECT_EQ(config->port, "6443");
  EXPECT_EQ(config->path_prefix, "/prefix");
  EXPECT_EQ(config->ca_pem, "hello");
  EXPECT_EQ(config->client_cert_pem, "hello");
  EXPECT_EQ(config->client_key_pem, "world");
  EXPECT_EQ(config->namespace_name, "team-a");
  EXPECT_TRUE(config->token.empty());
}

TEST(Kubeconfig, NamedContextWithTokenAndIpv6) {
  auto config = ParseKubeconfig(kKubeconfig, "/nowhere", "prod");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->host, "fd00::1");
  EXPECT_EQ(config->port, "443");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->tls_server_name, "api.example");
  EXPECT_EQ(config->token, "s3cret");
  EXPECT_EQ(config->namespace_name, "default");
}

TEST(Kubeconfig, ClearErrors) {
  auto missing = ParseKubeconfig(kKubeconfig, "/nowhere", "staging");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("context \"staging\" is not defined"), std::string::npos);

  auto http = ParseKubeconfig(R"(
current-context: c
clusters: [{name: x, cluster: {server: "http://127.0.0.1:8080"}}]
contexts: [{name: c, context: {cluster: x}}]
)",
                              "/");
  ASSERT_FALSE(http);
  EXPECT_NE(http.error().find("is not an https:// URL"), std::string::npos) << http.error();

  auto exec = ParseKubeconfig(R"(
current-context: c
clusters: [{name: x, cluster: {server: "https://h"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: c, context: {cluster: x, user: u}}]
)",
                              "/");
  ASSERT_FALSE(exec);
  EXPECT_NE(exec.error().find("exec or auth-provider"), std::string::npos) << exec.error();

  auto half = ParseKubeconfig(R"(
current-context: c
clusters: [{name: x, cluster: {server: "https://h"}}]
users: [{name: u, user: {client-certificate-data: aGVsbG8=}}]
contexts: [{name: c, context: {cluster: x, user: u}}]
)",
                              "/");
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().find("not both"), std::string::npos) << half.error();

  auto bad_base64 = ParseKubeconfig(R"(
current-context: c
clusters: [{name: x, cluster: {server: "https://h", certificate-authority-data: "a!b"}}]
contexts: [{name: c, context: {cluster: x}}]
)",
                                    "/");
  ASSERT_FALSE(bad_base64);
  EXPECT_NE(bad_base64.error().find("not valid base64"), std::string::npos) << bad_base64.error();

  EXPECT_FALSE(ParseKubeconfig("[1, 2", "/"));
  EXPECT_FALSE(ParseKubeconfig("just a string", "/"));
}

TEST(Kubeconfig, FilesRelativeToTheKubeconfigAndFirstFileWins) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kubeconfig-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "pki");
  std::ofstream(dir / "pki" / "ca.crt") << "CA-FROM-FILE";
  std::ofstream(dir / "first") << R"(
current-context: one
clusters: [{name: x, cluster: {server: "https://first", certificate-authority: pki/ca.crt}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: one, context: {cluster: x, user: u}}]
)";
  std::ofstream(dir / "second") << R"(
current-context: two
clusters: [{name: x, cluster: {server: "https://second"}}, {name: y, cluster: {server: "https://y"}}]
contexts: [{name: two, context: {cluster: y}}]
)";
  auto merged = LoadKubeconfig({dir / "missing", dir / "first", dir / "second"});
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_EQ(merged->host, "first");
  EXPECT_EQ(merged->ca_pem, "CA-FROM-FILE");
  EXPECT_EQ(merged->token_file, (dir / "token").string());
  auto other = LoadKubeconfig({dir / "first", dir / "second"}, "two");
  ASSERT_TRUE(other) << other.error();
  EXPECT_EQ(other->host, "y");
  auto none = LoadKubeconfig({dir / "missing"});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no kubeconfig found"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(InClusterConfig, ServiceAccountFiles) {
  auto dir = std::filesystem::temp_directory_path() / ("sa-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ca.crt") << "CA";
  std::ofstream(dir / "token") << "tok\n";
  std::ofstream(dir / "namespace") << "gpustack-system\n";
  auto config = LoadInClusterConfig(
      {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, dir);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token_file, (dir / "token").string());
  EXPECT_EQ(config->namespace_name, "gpustack-system");
  auto v6 = LoadInClusterConfig(
      {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, dir);
  ASSERT_TRUE(v6) << v6.error();
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_FALSE(LoadInClusterConfig({}, dir));
  std::filesystem::remove_all(dir);
}

TEST(ServerUrl, RejectsBadPorts) {
  ClientConfig config;
  EXPECT_FALSE(ParseServerUrl("https://h:0", config));
  EXPECT_FALSE(ParseServerUrl("https://h:99999", config));
  EXPECT_FALSE(ParseServerUrl("https://h:x", config));
  EXPECT_FALSE(ParseServerUrl("https://", config));
  EXPECT_FALSE(ParseServerUrl("https://[::1", config));
  EXPECT_FALSE(ParseServerUrl("https://h:123456789012345678901234567890", config));
  EXPECT_FALSE(ParseServerUrl("https://fd00::1", config));
  EXPECT_TRUE(ParseServerUrl("https://h:1", config));
}

}  // namespace
}  // namespace gpustack::kube
