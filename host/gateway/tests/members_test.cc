#include "host/gateway/members.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "host/gateway/gateway.h"
#include "host/https/certs.h"

namespace gpustack::gateway {
namespace {

namespace fs = std::filesystem;

TEST(MembersConfig, NamesEachBadEntryAndKeepsTheRest) {
  const std::string text = R"(clusters:
- name: a10g
  kubeconfig: members/a10g.yaml
- name: h100
  kubeconfig: /etc/h100.yaml
  context: admin@h100
- name: Bad_Name
  kubeconfig: x.yaml
- name: a10g
  kubeconfig: again.yaml
- name: t4
- just a string
)";
  auto config = ParseMembersConfig(text, "/etc/gateway", ConnMode::kLoopback);
  ASSERT_TRUE(config) << config.error();
  ASSERT_EQ(config->members.size(), 2u);
  EXPECT_EQ(config->members[0].name, "a10g");
  EXPECT_EQ(config->members[0].kubeconfig, fs::path("/etc/gateway/members/a10g.yaml"));
  EXPECT_EQ(config->members[1].kubeconfig, fs::path("/etc/h100.yaml"));
  EXPECT_EQ(config->members[1].context, "admin@h100");
  EXPECT_EQ(config->invalid.size(), 3u + 1u);
  EXPECT_NE(config->invalid["Bad_Name"].find("DNS label"), std::string::npos);
  EXPECT_NE(config->invalid["t4"].find("needs a `kubeconfig`"), std::string::npos);
  EXPECT_NE(config->invalid["#5"].find("must be an object"), std::string::npos);
  EXPECT_NE(config->invalid["a10g#3"].find("used by an earlier entry"), std::string::npos);
  // The duplicate is reported under its name; the first entry stays.
  EXPECT_EQ(config->members[0].kubeconfig, fs::path("/etc/gateway/members/a10g.yaml"));
}

TEST(MembersConfig, AFileThatIsNotAConfigIsAnError) {
  EXPECT_FALSE(ParseMembersConfig("clusters: [unclosed", "/", ConnMode::kLoopback));
  auto none = ParseMembersConfig("members: []", "/", ConnMode::kLoopback);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no `clusters` list"), std::string::npos);
  EXPECT_FALSE(ParseMembersConfig("- a\n- b\n", "/", ConnMode::kLoopback));
  // An empty list is a valid config: a gateway with no members yet.
  auto empty = ParseMembersConfig("clusters: []", "/", ConnMode::kLoopback);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->members.empty());
}

TEST(MembersConfig, GpustackApiModeReachesTheServersClusterProxy) {
  auto config = ParseMembersConfig("clusters:\n- name: a\n  token: s3cret\n- name: b\n", "/",
                                   ConnMode::kGpustackApi);
  ASSERT_TRUE(config);
  ASSERT_EQ(config->members.size(), 1u);
  EXPECT_NE(config->invalid["b"].find("needs a `token`"), std::string::npos);
  Connection connection{.mode = ConnMode::kGpustackApi, .gpustack_api_host = "gpustack.local"};
  auto client = MemberClientConfig(config->members[0], connection);
  ASSERT_TRUE(client) << client.error();
  EXPECT_EQ(client->host, "gpustack.local");
  EXPECT_EQ(client->port, "30080");
  EXPECT_EQ(client->path_prefix, "/v2/clusters/a/proxy");
  EXPECT_EQ(client->token, "s3cret");
}

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

template <class Predicate>
bool Eventually(Predicate p) {
  for (int i = 0; i < 100; ++i) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p();
}

// The gateway follows its config file: a member added, one whose kubeconfig cannot be read
// (named, the others kept), one that cannot be reached (Connecting, with the reason), a
// half-written file (kept as it was), and a member removed, all without a restart.
TEST(Gateway, FollowsItsConfigFileWithoutARestart) {
  const fs::path dir = TempDir("gateway-config");
  // A server nobody listens on: refused at once.
  Write(dir / "unreachable.yaml", R"(apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
users:
- name: u
  user:
    token: t
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
)");
  Write(dir / "clusters.yaml", "clusters:\n- name: far\n  kubeconfig: unreachable.yaml\n");
  Gateway gateway({.config = dir / "clusters.yaml",
                   .connection = {.readiness_timeout = std::chrono::milliseconds(500),
                                  .probe_every = std::chrono::milliseconds(100)},
                   .config_check_every = std::chrono::milliseconds(50)});
  ASSERT_TRUE(gateway.Start());
  auto state_of = [&](const std::string& name) {
    const Json clusters = gateway.Clusters();
    for (const Json& item : clusters["items"])
      if (item["name"] == name) return item;
    return Json();
  };
  ASSERT_TRUE(Eventually([&] {
    const Json far = state_of("far");
    return far.is_object() && !far.value("reason", "").empty();
  })) << gateway.Clusters().dump();
  EXPECT_EQ(state_of("far")["state"], "Connecting");
  EXPECT_TRUE(gateway.AggregatedInstanceTypes({})["items"].empty());

  Write(dir / "clusters.yaml",
        "clusters:\n- name: far\n  kubeconfig: unreachable.yaml\n- name: broken\n  kubeconfig: "
        "missing.yaml\n");
  ASSERT_TRUE(Eventually([&] { return state_of("broken")["state"] == "Invalid"; }));
  EXPECT_NE(state_of("broken")["reason"].get<std::string>().find("missing.yaml"),
            std::string::npos);
  EXPECT_EQ(state_of("far")["state"], "Connecting");

  Write(dir / "clusters.yaml", "clusters: [unclosed");
  ASSERT_TRUE(Eventually([&] { return gateway.Clusters().contains("configError"); }));
  EXPECT_FALSE(state_of("broken").is_null());  // kept as it was

  Write(dir / "clusters.yaml", "clusters:\n- name: broken\n  kubeconfig: missing.yaml\n");
  ASSERT_TRUE(Eventually([&] { return state_of("far").is_null(); }));
  EXPECT_FALSE(gateway.Clusters().contains("configError"));
  auto list = gateway.ClusterList("instances", {}, "");
  ASSERT_TRUE(list);
  EXPECT_EQ((*list)["kind"], "ClusterInstanceList");
  EXPECT_FALSE(gateway.ClusterList("secrets", {}, ""));
  gateway.Stop();
  fs::remove_all(dir);
}

// A config path that is not a regular file (a FIFO planted there) is refused at start, not read
// forever; a config that goes missing is reported, and cleared once it is back unchanged.
TEST(Gateway, AHostileOrMissingConfigIsSaidAndNeverHangs) {
  const fs::path dir = TempDir("gateway-hostile");
  ASSERT_EQ(mkfifo((dir / "fifo.yaml").c_str(), 0600), 0);
  Gateway hostile({.config = dir / "fifo.yaml"});
  Status refused = hostile.Start();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("fifo.yaml"), std::string::npos) << refused.error();

  Write(dir / "clusters.yaml", "clusters: []\n");
  Gateway gateway(
      {.config = dir / "clusters.yaml", .config_check_every = std::chrono::milliseconds(50)});
  ASSERT_TRUE(gateway.Start());
  fs::rename(dir / "clusters.yaml", dir / "away.yaml");
  ASSERT_TRUE(Eventually([&] { return gateway.Clusters().contains("configError"); }));
  fs::rename(dir / "away.yaml", dir / "clusters.yaml");
  EXPECT_TRUE(Eventually([&] { return !gateway.Clusters().contains("configError"); }));
  gateway.Stop();
  fs::remove_all(dir);
}

// With a client CA, the views answer only clients whose certificate it signed; health does not
// need one.
TEST(Gateway, AClientCaGuardsTheViews) {
  const fs::path dir = TempDir("gateway-ca");
  Write(dir / "clusters.yaml", "clusters: []\n");
  auto ca = https::MakeCertificateAuthority("gateway-clients", std::chrono::hours(1));
  auto other = https::MakeCertificateAuthority("someone-else", std::chrono::hours(1));
  ASSERT_TRUE(ca && other);
  auto client = https::MakeClientCertificate(*ca, "gpustack-server", std::chrono::hours(1));
  auto stranger = https::MakeClientCertificate(*other, "stranger", std::chrono::hours(1));
  ASSERT_TRUE(client && stranger);
  Gateway gateway({.config = dir / "clusters.yaml", .client_ca = ca->cert_pem});
  ASSERT_TRUE(gateway.Start());
  auto answer = [&](const std::string& path, std::vector<std::string> chain) {
    for (const https::Route& route : gateway.Routes()) {
      if (route.path != path) continue;
      https::Request request{"GET", path, "", ""};
      request.peer_certificates = std::move(chain);
      return route.handler(request);
    }
    return https::Response{404, "no route"};
  };
  EXPECT_EQ(answer("/apis/clusters", {}).status, 401);
  EXPECT_EQ(answer("/apis/instancetypes", {stranger->cert_pem}).status, 401);
  const https::Response allowed = answer("/apis/instancetypes", {client->cert_pem});
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(answer("/apis/clusters", {client->cert_pem}).status, 200);
  EXPECT_EQ(answer("/livez", {}).status, 200);
  gateway.Stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpustack::gateway
