// The client against a real kube-apiserver (the testbed_core fixture): verbs, conflicts,
// server-side apply, pagination, discovery, watch, and the errors a user sees.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

using testing::ConfigMap;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = testing::TestbedClient();
    ASSERT_NE(client_, nullptr);
    ns_ = testing::CreateNamespace(*client_, "client");
  }
  std::unique_ptr<Client> client_;
  std::string ns_;
  const ResourceType configmaps_ = resources::ConfigMaps();
};

TEST_F(ClientTest, CreateGetUpdatePatchDelete) {
  auto created = client_->Create(configmaps_, ConfigMap(ns_, "a", {{"k", "1"}}));
  ASSERT_TRUE(created) << created.error();
  std::string uid = (*created)["metadata"]["uid"];

  auto duplicate = client_->Create(configmaps_, ConfigMap(ns_, "a"));
  ASSERT_FALSE(duplicate);
  EXPECT_TRUE(IsAlreadyExists(duplicate.failure())) << duplicate.error();
  EXPECT_EQ(duplicate.failure().http_status, 409);

  auto got = client_->Get(configmaps_, ns_, "a");
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ((*got)["data"]["k"], "1");

  // Update with the current resourceVersion succeeds; a second with the same stale one conflicts.
  Json stale = *got;
  (*got)["data"]["k"] = "2";
  auto updated = client_->Update(configmaps_, *got);
  ASSERT_TRUE(updated) << updated.error();
  stale["data"]["k"] = "3";
  auto conflict = client_->Update(configmaps_, stale);
  ASSERT_FALSE(conflict);
  EXPECT_TRUE(IsConflict(conflict.failure())) << conflict.error();
  EXPECT_EQ(conflict.failure().reason, "Conflict");
  EXPECT_NE(conflict.error().find("the object has been modified"), std::string::npos)
      << conflict.error();

  auto merged =
      client_->Patch(configmaps_, ns_, "a", PatchType::kMerge, {{"data", {{"m", "merge"}}}});
  ASSERT_TRUE(merged) << merged.error();
  EXPECT_EQ((*merged)["data"]["k"], "2");
  EXPECT_EQ((*merged)["data"]["m"], "merge");
  auto json_patched = client_->Patch(configmaps_, ns_, "a", PatchType::kJson,
                                     Json::parse(R"([{"op":"remove","path":"/data/m"},
                                                     {"op":"test","path":"/data/k","value":"2"}])"));
  ASSERT_TRUE(json_patched) << json_patched.error();
  EXPECT_FALSE((*json_patched)["data"].contains("m"));
  auto failed_test = client_->Patch(configmaps_, ns_, "a", PatchType::kJson,
                                    Json::parse(R"([{"op":"test","path":"/data/k","value":"9"}])"));
  ASSERT_FALSE(failed_test);
  EXPECT_EQ(failed_test.failure().http_status, 422) << failed_test.error();

  // Delete preconditions: a wrong uid is refused, the right one deletes.
  auto wrong_uid =
      client_->Delete(configmaps_, ns_, "a", {.uid = "00000000-0000-0000-0000-000000000000"});
  ASSERT_FALSE(wrong_uid);
  EXPECT_EQ(wrong_uid.failure().http_status, 409) << wrong_uid.error();
  EXPECT_NE(wrong_uid.error().find("the UID in the precondition"), std::string::npos)
      << wrong_uid.error();
  auto stale_version = client_->Delete(configmaps_, ns_, "a", {.resource_version = "1"});
  ASSERT_FALSE(stale_version);
  EXPECT_EQ(stale_version.failure().http_status, 409);
  ASSERT_TRUE(client_->Delete(configmaps_, ns_, "a", {.uid = uid}));
  auto gone = client_->Get(configmaps_, ns_, "a");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(IsNotFound(gone.failure()));
  EXPECT_EQ(gone.failure().reason, "NotFound");
  EXPECT_NE(gone.error().find("configmaps \"a\" not found"), std::string::npos) << gone.error();
}

TEST_F(ClientTest, ServerSideApplyOwnsFieldsAndReportsConflicts) {
  Json mine = ConfigMap(ns_, "shared", {{"owned-by-a", "x"}, {"contested", "a"}});
  auto a = client_->Apply(configmaps_, mine, {.field_manager = "manager-a"});
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ((*a)["data"]["contested"], "a");

  Json theirs = ConfigMap(ns_, "shared", {{"contested", "b"}});
  auto conflict = client_->Apply(configmaps_, theirs, {.field_manager = "manager-b"});
  ASSERT_FALSE(conflict);
  EXPECT_TRUE(IsConflict(conflict.failure())) << conflict.error();
  EXPECT_NE(conflict.error().find("manager-a"), std::string::npos) << conflict.error();

  auto forced = client_->Apply(configmaps_, theirs, {.field_manager = "manager-b", .force = true});
  ASSERT_TRUE(forced) << forced.error();
  EXPECT_EQ((*forced)["data"]["contested"], "b");
  EXPECT_EQ((*forced)["data"]["owned-by-a"], "x");
  // Applying again without a field removes only what that manager owned.
  Json fewer = ConfigMap(ns_, "shared", {{"contested", "b"}});
  ASSERT_TRUE(client_->Apply(configmaps_, fewer, {.field_manager = "manager-a"}));
  auto after = client_->Get(configmaps_, ns_, "shared");
  ASSERT_TRUE(after);
  EXPECT_FALSE((*after)["data"].contains("owned-by-a")) << after->dump();

  auto no_manager = client_->Apply(configmaps_, mine, {});
  ASSERT_FALSE(no_manager);
  EXPECT_NE(no_manager.error().find("field manager"), std::string::npos);
}

TEST_F(ClientTest, ListPaginatesOverTwoThousandObjects) {
  ClientOptions fast;
  fast.qps = 0;  // unlimited, to fill the namespace quickly
  auto writer = testing::TestbedClient(fast);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 2000; i += 8) {
        if (!writer->Create(configmaps_, ConfigMap(ns_, "cm-" + std::to_string(i),
                                                   {{"i", std::to_string(i)}}))) {
          failures++;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  ASSERT_EQ(failures, 0);
  auto list = client_->List(configmaps_, ns_, {.page_size = 300});
  ASSERT_TRUE(list) << list.error();
  // 2000 ours + kube-root-ca.crt, if the controller-manager runs; never a duplicate.
  std::set<std::string> names;
  for (const Json& item : list->items) {
    names.insert(item["metadata"]["name"]);
  }
  EXPECT_EQ(names.size(), list->items.size());
  EXPECT_GE(list->items.size(), 2000u);
  EXPECT_EQ(list->pages, static_cast<int>((list->items.size() + 299) / 300));
  EXPECT_FALSE(list->resource_version.empty());
  auto selected =
      client_->List(configmaps_, ns_, {.field_selector = "metadata.name=cm-1234", .page_size = 10});
  ASSERT_TRUE(selected) << selected.error();
  ASSERT_EQ(selected->items.size(), 1u);
  EXPECT_EQ(selected->items[0]["data"]["i"], "1234");
}

TEST_F(ClientTest, DiscoverySaysWhatIsServed) {
  EXPECT_TRUE(*client_->IsServed(resources::ConfigMaps()));
  EXPECT_TRUE(*client_->IsServed(resources::Leases()));
  EXPECT_FALSE(*client_->IsServed({"", "v1", "no-such-things", true}));
  auto missing_group = client_->IsServed({"nothing.example.com", "v1", "things", true});
  ASSERT_TRUE(missing_group) << missing_group.error();
  EXPECT_FALSE(*missing_group);
}

TEST_F(ClientTest, WatchDeliversEventsInOrderAndBookmarks) {
  auto list = client_->List(configmaps_, ns_);
  ASSERT_TRUE(list);
  std::vector<std::string> seen;
  std::string last_rv;
  int bookmarks = 0;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(client_->Create(configmaps_, ConfigMap(ns_, "w")));
    EXPECT_TRUE(client_->Patch(configmaps_, ns_, "w", PatchType::kMerge, {{"data", {{"x", "y"}}}}));
    EXPECT_TRUE(client_->Delete(configmaps_, ns_, "w"));
  });
  // The apiserver sends a bookmark shortly before a watch's timeout.
  WatchOptions options{.resource_version = list->resource_version, .timeout_seconds = 4};
  auto watched = client_->Watch(configmaps_, ns_, options, [&](WatchEvent& e) {
    std::string rv = EventResourceVersion(e);
    EXPECT_FALSE(rv.empty());
    last_rv = rv;
    if (e.type == WatchEventType::kBookmark) {
      bookmarks++;
    } else {
      seen.push_back(std::to_string(static_cast<int>(e.type)) + ":" +
                     e.object["metadata"]["name"].get<std::string>());
    }
    return true;
  });
  writer.join();
  ASSERT_TRUE(watched) << watched.error();
  EXPECT_EQ(seen, (std::vector<std::string>{"0:w", "1:w", "2:w"}));
  EXPECT_GE(bookmarks, 1);

  // Resuming from the last resourceVersion delivers nothing old again.
  int replayed = 0;
  auto resumed = client_->Watch(
      configmaps_, ns_, {.resource_version = last_rv, .timeout_seconds = 1}, [&](WatchEvent& e) {
        replayed += e.type != WatchEventType::kBookmark;
        return true;
      });
  ASSERT_TRUE(resumed) << resumed.error();
  EXPECT_EQ(replayed, 0);
}

TEST_F(ClientTest, StopEndsAWatchAtOnce) {
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.request_stop();
  });
  auto start = std::chrono::steady_clock::now();
  auto watched = client_->Watch(
      configmaps_, ns_, {.timeout_seconds = 60}, [](WatchEvent&) { return true; },
      stop.get_token());
  stopper.join();
  ASSERT_TRUE(watched) << watched.error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// --- the errors a user sees ------------------------------------------------------------------

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A self-signed certificate and its key, in PEM, that the testbed CA knows nothing of.
struct Credentials {
  std::string cert;
  std::string key;
};
Credentials SelfSigned(const std::string& subject) {
  std::string dir = TempDir("self-signed");
  int status = 0;
  std::string output =
      testing::Run("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + dir + "/key.pem -out " +
                       dir + "/cert.pem -days 1 -subj " + subject,
                   &status);
  EXPECT_EQ(status, 0) << output;
  Credentials made{ReadFile(dir + "/cert.pem"), ReadFile(dir + "/key.pem")};
  std::filesystem::remove_all(dir);
  return made;
}

TEST(ClientErrors, WrongCertificateAuthority) {
  ClientConfig config = testing::TestbedConfig();
  config.ca_pem = SelfSigned("/CN=other-ca").cert;
  auto client = Client::Create(config);
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().http_status, 0);
  EXPECT_NE(got.error().find("the server's certificate was not accepted"), std::string::npos)
      << got.error();
  EXPECT_NE(got.error().find("certificate-authority"), std::string::npos) << got.error();
}

TEST(ClientErrors, BadCredentials) {
  // A client certificate from a CA the apiserver does not trust.
  Credentials intruder = SelfSigned("/O=system:masters/CN=intruder");
  ClientConfig config = testing::TestbedConfig();
  config.client_cert_pem = intruder.cert;
  config.client_key_pem = intruder.key;
  auto client = Client::Create(config);
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().http_status, 401) << got.error();
  EXPECT_NE(got.error().find("Unauthorized"), std::string::npos) << got.error();

  ClientConfig token = testing::TestbedConfig();
  token.client_cert_pem.clear();
  token.client_key_pem.clear();
  token.token = "not-a-token";
  auto with_token = Client::Create(token);
  ASSERT_TRUE(with_token);
  auto refused = (*with_token)->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.failure().http_status, 401) << refused.error();

  ClientConfig garbage = testing::TestbedConfig();
  garbage.client_key_pem = "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n";
  auto not_created = Client::Create(garbage);
  ASSERT_FALSE(not_created);
  EXPECT_NE(not_created.error().find("client key"), std::string::npos) << not_created.error();
}

TEST(ClientErrors, ServiceAccountTokenIsReadAgainAfterRotation) {
  auto admin = testing::TestbedClient();
  ASSERT_NE(admin, nullptr);
  std::string ns = testing::CreateNamespace(*admin, "token");
  Json account = {{"apiVersion", "v1"},
                  {"kind", "ServiceAccount"},
                  {"metadata", {{"name", "robot"}, {"namespace", ns}}}};
  ASSERT_TRUE(admin->Create({"", "v1", "serviceaccounts", true}, account));
  Json request = {{"apiVersion", "authentication.k8s.io/v1"},
                  {"kind", "TokenRequest"},
                  {"spec", {{"expirationSeconds", 600}}}};
  auto issued =
      admin->Request("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/robot/token", &request);
  ASSERT_TRUE(issued) << issued.error();
  std::string token = (*issued)["status"]["token"];

  std::string dir = TempDir("sa-token");
  std::ofstream(dir + "/token") << "an-old-token";
  ClientConfig config = testing::TestbedConfig();
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  config.token_file = dir + "/token";
  auto client = Client::Create(config);
  ASSERT_TRUE(client);
  auto before = (*client)->Get(resources::Namespaces(), "", ns);
  ASSERT_FALSE(before);
  EXPECT_EQ(before.failure().http_status, 401);
  // The kubelet rotates the file; the next 401 makes the client read it again.
  std::ofstream(dir + "/token") << token << "\n";
  auto after = (*client)->Get(resources::Namespaces(), "", ns);
  ASSERT_FALSE(after);
  // Authenticated now, but RBAC gives the account nothing: 403 names it.
  EXPECT_EQ(after.failure().http_status, 403) << after.error();
  EXPECT_EQ(after.failure().reason, "Forbidden");
  EXPECT_NE(after.error().find("system:serviceaccount:" + ns + ":robot"), std::string::npos)
      << after.error();
  std::filesystem::remove_all(dir);
}

// A TCP socket on a free loopback port; listening (connections wait in the backlog, never
// answered) or closed again (a port nobody listens on). The config points at it.
struct LoopbackPort {
  int fd = -1;
  ClientConfig config;
  ~LoopbackPort() {
    if (fd >= 0) {
      close(fd);
    }
  }
};
void OpenLoopbackPort(bool listening, LoopbackPort& port) {
  port.fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(port.fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(getsockname(port.fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  if (listening) {
    ASSERT_EQ(listen(port.fd, 16), 0);
  } else {
    close(port.fd);
    port.fd = -1;
  }
  port.config = testing::TestbedConfig();
  ASSERT_TRUE(
      ParseServerUrl("https://127.0.0.1:" + std::to_string(ntohs(address.sin_port)), port.config));
}

// A name is resolved (the apiserver's certificate names 127.0.0.1, so the name is checked
// against that address); an address literal is not, and starts no resolver thread.
TEST(ClientAddresses, ANameIsResolvedAndALiteralNeedsNoResolverThread) {
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                         std::filesystem::directory_iterator());
  };
  ClientConfig literal = testing::TestbedConfig();
  ASSERT_EQ(literal.host, "127.0.0.1");
  auto direct = Client::Create(literal);
  ASSERT_TRUE(direct) << direct.error();
  const auto before = threads();
  ASSERT_TRUE((*direct)->Get(resources::Namespaces(), "", "default"));
  EXPECT_EQ(threads(), before);  // Boost.Asio's resolver would have started one

  ClientConfig named = testing::TestbedConfig();
  ASSERT_TRUE(ParseServerUrl("https://localhost:" + named.port, named));
  named.tls_server_name = "127.0.0.1";
  auto resolved = Client::Create(named);
  ASSERT_TRUE(resolved) << resolved.error();
  auto got = (*resolved)->Get(resources::Namespaces(), "", "default");
  EXPECT_TRUE(got) << got.error();
}

TEST(ClientErrors, UnreachableServer) {
  LoopbackPort closed;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPort(false, closed));
  auto client = Client::Create(closed.config, {.max_retries = 1});
  ASSERT_TRUE(client);
  auto got = (*client)->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.failure().http_status, 0);
  EXPECT_NE(got.error().find("cannot connect to https://127.0.0.1:"), std::string::npos)
      << got.error();
  EXPECT_NE(got.error().find("refused"), std::string::npos) << got.error();
}

TEST(ClientErrors, DeadlineOnAServerThatNeverAnswers) {
  LoopbackPort silent;  // accepts (the kernel's backlog) but never speaks TLS
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPort(true, silent));
  auto client =
      Client::Create(silent.config, {.timeout = std::chrono::milliseconds(300), .max_retries = 0});
  ASSERT_TRUE(client);
  auto got = (*client)->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().find("deadline exceeded"), std::string::npos) << got.error();
}

}  // namespace
}  // namespace gpustack::kube
