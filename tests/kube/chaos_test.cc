// Faults in the control plane (the testbed_chaos fixture, which these tests may restart and
// compact): an informer resumes its watch across an apiserver restart without listing again,
// and lists again after an etcd compaction made its resourceVersion too old (410 Gone).
#include <gtest/gtest.h>

#include <thread>

#include "host/kube/informer.h"
#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

using testing::ConfigMap;

const ResourceType kSecrets{"", "v1", "secrets", true};

Json Secret(const std::string& ns, const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"stringData", {{"k", "v"}}}};
}

Json Object(const ResourceType& type, const std::string& ns, const std::string& name) {
  return type.plural == "secrets" ? Secret(ns, name) : ConfigMap(ns, name);
}

// Starts an informer on `type`, restarts the apiserver, writes while the informer reconnects,
// and waits until the cache matches. Returns the informer's stats.
InformerStats ConvergeAcrossRestart(const ResourceType& type) {
  auto client = testing::TestbedClient({.qps = 0, .max_retries = 0});
  if (client == nullptr) {
    ADD_FAILURE() << "no client";
    return {};
  }
  std::string ns = testing::CreateNamespace(*client, "restart-" + type.plural);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(client->Create(type, Object(type, ns, "before-" + std::to_string(i))));
  }
  Informer informer(*client, type, ns,
                    {.initial_backoff = std::chrono::milliseconds(100),
                     .max_backoff = std::chrono::milliseconds(500)});
  informer.Start();
  EXPECT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(informer.Size(), 20u);

  EXPECT_EQ(testing::Testbed("restart", "kube-apiserver"), 0);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(client->Create(type, Object(type, ns, "after-" + std::to_string(i))));
  }
  EXPECT_TRUE(client->Delete(type, ns, "before-0"));
  EXPECT_TRUE(testing::WaitFor([&] {
    return informer.Size() == 39u && informer.Get(ns + "/after-19") != nullptr &&
           informer.Get(ns + "/before-0") == nullptr;
  })) << "cache has "
      << informer.Size();
  InformerStats stats = informer.Stats();
  EXPECT_GE(stats.watches, 2u);
  EXPECT_GE(stats.failures, 1u);  // the broken stream was noticed
  return stats;
}

TEST(Chaos, WatchResumesAcrossAnApiserverRestart) {
  // Secrets are watched straight from etcd here: the resourceVersion the informer holds is
  // still in etcd's history after the restart, so it resumes without listing again.
  InformerStats stats = ConvergeAcrossRestart(kSecrets);
  EXPECT_EQ(stats.lists, 1u) << "resumed from its resourceVersion, not by listing again";
}

TEST(Chaos, CachedWatchAcrossAnApiserverRestartConverges) {
  // The restarted apiserver's watch cache starts at etcd's current revision, so an older
  // resourceVersion is 410 Gone, as client-go reflectors see it too: the informer lists again.
  InformerStats stats = ConvergeAcrossRestart(resources::ConfigMaps());
  EXPECT_GE(stats.lists, 2u);
  std::printf("configmaps informer across a restart: %llu lists, %llu watches\n",
              static_cast<unsigned long long>(stats.lists),
              static_cast<unsigned long long>(stats.watches));
}

TEST(Chaos, GoneAfterCompactionListsAgain) {
  // Secrets bypass the apiserver's watch cache in this fixture (--watch-cache-sizes=secrets#0),
  // so a watch reads etcd's history, which a compaction removes.
  auto client = testing::TestbedClient({.qps = 0});
  ASSERT_NE(client, nullptr);
  std::string watched_ns = testing::CreateNamespace(*client, "gone");
  std::string other_ns = testing::CreateNamespace(*client, "busy");
  const ResourceType& secrets = kSecrets;
  auto secret = Secret;
  ASSERT_TRUE(client->Create(secrets, secret(watched_ns, "first")));

  // The raw client: a watch from a compacted resourceVersion is a 410.
  auto list = client->List(secrets, watched_ns);
  ASSERT_TRUE(list);
  // Two writes: a compaction keeps its own revision, and the watch starts one after the list.
  ASSERT_TRUE(client->Create(secrets, secret(other_ns, "advance-1")));
  ASSERT_TRUE(client->Create(secrets, secret(other_ns, "advance-2")));
  int status = 0;
  std::string revision = testing::Run(std::string(std::getenv("GPUSTACK_TESTBED_SCRIPT")) +
                                          " compact --dir " + testing::TestbedDir(),
                                      &status);
  ASSERT_EQ(status, 0) << revision;
  auto watched = client->Watch(secrets, watched_ns,
                               {.resource_version = list->resource_version, .timeout_seconds = 5},
                               [](WatchEvent&) { return true; });
  ASSERT_FALSE(watched) << "a watch from before the compaction was served";
  EXPECT_TRUE(IsGone(watched.failure())) << watched.error();

  // The informer: its watch (1 s long, so it reconnects often) sees nothing in its namespace
  // while another namespace moves etcd's revision on; after a compaction it must list again.
  Informer informer(*client, secrets, watched_ns, {.watch_timeout_seconds = 1});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client->Create(secrets, secret(other_ns, "busy-" + std::to_string(i))));
  }
  testing::Run(std::string(std::getenv("GPUSTACK_TESTBED_SCRIPT")) + " compact --dir " +
                   testing::TestbedDir(),
               &status);
  ASSERT_EQ(status, 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return informer.Stats().lists >= 2; }, std::chrono::seconds(20)))
      << "no relist after the compaction; lists=" << informer.Stats().lists;
  // And it still follows changes afterwards.
  ASSERT_TRUE(client->Create(secrets, secret(watched_ns, "second")));
  ASSERT_TRUE(client->Delete(secrets, watched_ns, "first"));
  ASSERT_TRUE(testing::WaitFor([&] {
    return informer.Get(watched_ns + "/second") != nullptr &&
           informer.Get(watched_ns + "/first") == nullptr;
  }));
}

}  // namespace
}  // namespace gpustack::kube
