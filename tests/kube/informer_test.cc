// The informer against a real apiserver: its cache converges on what the server holds while
// objects are created, changed and deleted concurrently; indexers, handlers and the work queue
// keep up.
#include "host/kube/informer.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "host/kube/workqueue.h"
#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

using testing::ConfigMap;

std::map<std::string, std::string> VersionsOnServer(Client& client, const std::string& ns) {
  std::map<std::string, std::string> versions;
  auto list = client.List(resources::ConfigMaps(), ns);
  EXPECT_TRUE(list) << list.error();
  for (const Json& item : list->items) {
    versions[ObjectKey(item)] = item["metadata"]["resourceVersion"];
  }
  return versions;
}

std::map<std::string, std::string> VersionsInCache(const Informer& informer) {
  std::map<std::string, std::string> versions;
  for (const ObjectPtr& object : informer.List()) {
    versions[ObjectKey(*object)] = (*object)["metadata"]["resourceVersion"];
  }
  return versions;
}

std::vector<std::string> GroupOf(const Json& o) {
  const Json& data = o.contains("data") ? o["data"] : Json::object();
  return data.contains("group") ? std::vector<std::string>{data["group"]}
                                : std::vector<std::string>{};
}

TEST(Informer, ConvergesWithConcurrentWritesAndFeedsAWorkQueue) {
  auto client = testing::TestbedClient({.qps = 0});
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "informer");
  const ResourceType configmaps = resources::ConfigMaps();
  for (int i = 0; i < 100; ++i) {  // present before the informer starts: they arrive by the list
    ASSERT_TRUE(client->Create(configmaps, ConfigMap(ns, "pre-" + std::to_string(i),
                                                     {{"group", "g" + std::to_string(i % 4)}})));
  }

  Informer informer(*client, configmaps, ns, {.page_size = 30});
  informer.AddIndexer("group", GroupOf);
  WorkQueue queue;
  std::atomic<int> adds{0}, updates{0}, deletes{0};
  informer.AddEventHandler({.on_add =
                                [&](const ObjectPtr& o) {
                                  adds++;
                                  queue.Add(ObjectKey(*o));
                                },
                            .on_update =
                                [&](const ObjectPtr&, const ObjectPtr& o) {
                                  updates++;
                                  queue.Add(ObjectKey(*o));
                                },
                            .on_delete =
                                [&](const ObjectPtr& o) {
                                  deletes++;
                                  queue.Add(ObjectKey(*o));
                                }});
  // A reconciler: takes keys and counts them; the queue hands each key to one worker at a time.
  std::atomic<int> reconciled{0};
  std::thread worker([&] {
    while (auto key = queue.Get()) {
      reconciled++;
      queue.Done(*key);
    }
  });
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(adds.load(), static_cast<int>(VersionsOnServer(*client, ns).size()));

  // Concurrent writers: create 200, change 100 (regrouping), delete 60.
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t; i < 200; i += 4) {
        EXPECT_TRUE(client->Create(
            configmaps,
            ConfigMap(ns, "new-" + std::to_string(i), {{"group", "g" + std::to_string(i % 4)}})));
      }
      for (int i = t; i < 100; i += 4) {
        EXPECT_TRUE(client->Patch(configmaps, ns, "pre-" + std::to_string(i), PatchType::kMerge,
                                  {{"data", {{"group", "moved"}}}}));
      }
      for (int i = t; i < 60; i += 4) {
        EXPECT_TRUE(client->Delete(configmaps, ns, "new-" + std::to_string(i)));
      }
    });
  }
  for (auto& w : writers) {
    w.join();
  }
  auto expected = VersionsOnServer(*client, ns);
  ASSERT_TRUE(testing::WaitFor([&] { return VersionsInCache(informer) == expected; }))
      << "cache has " << informer.Size() << " objects, server " << expected.size();
  EXPECT_EQ(deletes.load(), 60);
  EXPECT_GE(updates.load(), 100);
  EXPECT_EQ(informer.ByIndex("group", "moved").size(), 100u);
  size_t grouped = 0;
  for (int g = 0; g < 4; ++g) {
    grouped += informer.ByIndex("group", "g" + std::to_string(g)).size();
  }
  EXPECT_EQ(grouped, 200u - 60u);  // the moved ones left their old groups
  auto one = informer.Get(ns + "/new-199");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ((*one)["data"]["group"], "g3");
  EXPECT_EQ(informer.Get(ns + "/new-0"), nullptr);
  ASSERT_TRUE(testing::WaitFor([&] { return queue.Length() == 0 && reconciled.load() > 0; }));
  EXPECT_EQ(informer.Stats().lists, 1u);  // no relist was needed
  informer.Stop();
  queue.ShutDown();
  worker.join();
}

// A transform (the worker's projections) sees every object before the cache and the handlers do:
// each listed item as its page arrives, and each watch event.
TEST(Informer, CachesAndHandsOnlyTransformedObjects) {
  auto client = testing::TestbedClient({.qps = 0});
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "transform");
  const ResourceType configmaps = resources::ConfigMaps();
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE(client->Create(configmaps, ConfigMap(ns, "listed-" + std::to_string(i),
                                                     {{"group", "g"}, {"bulk", "dropped"}})));
  std::atomic<int> transformed{0}, untransformed_seen{0};
  InformerOptions options{.page_size = 10};
  options.transform = [&](Json& object) {
    ++transformed;
    object["data"].erase("bulk");
    object["metadata"].erase("managedFields");
  };
  Informer informer(*client, configmaps, ns, options);
  auto check = [&](const ObjectPtr& o) {
    if ((*o)["data"].contains("bulk") || (*o)["metadata"].contains("managedFields"))
      ++untransformed_seen;
  };
  informer.AddEventHandler({.on_add = check,
                            .on_update = [&](const ObjectPtr&, const ObjectPtr& o) { check(o); },
                            .on_delete = check});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(transformed.load(), 25);  // once per listed item, not again on the way in
  ASSERT_TRUE(
      client->Create(configmaps, ConfigMap(ns, "watched", {{"group", "g"}, {"bulk", "x"}})));
  for (int i = 0; i < 300 && informer.Get(ns + "/watched") == nullptr; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(informer.Get(ns + "/watched"), nullptr);
  for (const ObjectPtr& o : informer.List()) {
    check(o);
    EXPECT_EQ((*o)["data"]["group"], "g");
  }
  EXPECT_EQ(untransformed_seen.load(), 0);
  informer.Stop();
}

// A typed record instead of the object (the worker's bound Pods): each object, transformed, is
// projected once, and the cache, its index and the handlers hold records only.
struct GroupRecord {
  std::string key, version, group;
};
std::string CacheKey(const GroupRecord& r) { return r.key; }
std::string CacheVersion(const GroupRecord& r) { return r.version; }

TEST(Informer, CachesTypedRecordsProjectedFromEachObject) {
  auto client = testing::TestbedClient({.qps = 0});
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "records");
  const ResourceType configmaps = resources::ConfigMaps();
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(client->Create(configmaps, ConfigMap(ns, "listed-" + std::to_string(i),
                                                     {{"group", "g" + std::to_string(i % 3)}})));
  std::atomic<int> projected{0};
  BasicInformer<GroupRecord> informer(*client, configmaps, ns, {.page_size = 5}, [&](Json&& o) {
    ++projected;
    return GroupRecord{ObjectKey(o), o["metadata"].value("resourceVersion", ""),
                       o["data"].value("group", "")};
  });
  informer.AddIndexer("group", [](const GroupRecord& r) { return std::vector{r.group}; });
  std::mutex mutex;
  std::vector<std::string> deleted;
  informer.AddEventHandler({.on_delete = [&](const std::shared_ptr<const GroupRecord>& r) {
    std::lock_guard lock(mutex);
    deleted.push_back(r->key + " in " + r->group);
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(projected.load(), 12);
  EXPECT_EQ(informer.Size(), 12u);
  EXPECT_EQ(informer.ByIndex("group", "g0").size(), 4u);
  ASSERT_NE(informer.Get(ns + "/listed-3"), nullptr);
  EXPECT_EQ(informer.Get(ns + "/listed-3")->group, "g0");

  // A change moves the record in the index; a deletion hands the handlers its last record.
  ASSERT_TRUE(client->Patch(configmaps, ns, "listed-0", PatchType::kMerge,
                            Json{{"data", {{"group", "g1"}}}}));
  ASSERT_TRUE(client->Delete(configmaps, ns, "listed-1"));
  auto settled = [&] {
    auto changed = informer.Get(ns + "/listed-0");
    return informer.Size() == 11 && changed != nullptr && changed->group == "g1";
  };
  for (int i = 0; i < 300 && !settled(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(informer.Size(), 11u);
  EXPECT_EQ(informer.ByIndex("group", "g0").size(), 3u);
  EXPECT_EQ(informer.ByIndex("group", "g1").size(), 4u);  // listed-0 in, listed-1 out
  EXPECT_EQ(informer.Get(ns + "/listed-0")->group, "g1");
  informer.Stop();
  EXPECT_EQ(deleted, std::vector<std::string>{ns + "/listed-1 in g1"});
}

// Informers of the same objects share one list and watch (the worker and the v1 API both cache
// Devices): a second one joins at a list it asks for, with its own transform and handlers, and
// the first sees no event from that list; one with other selectors runs its own; when the one
// that runs the watch stops, the other takes it over.
TEST(Informer, InformersOfTheSameObjectsShareOneListAndWatch) {
  auto client = testing::TestbedClient({.qps = 0});
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "shared");
  const ResourceType configmaps = resources::ConfigMaps();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(client->Create(
        configmaps, ConfigMap(ns, "listed-" + std::to_string(i), {{"group", "g"}, {"bulk", "x"}})));
  std::atomic<int> first_adds{0}, first_updates{0}, second_adds{0};
  Informer first(*client, configmaps, ns, {.page_size = 5});
  first.AddEventHandler(
      {.on_add = [&](const ObjectPtr&) { ++first_adds; },
       .on_update = [&](const ObjectPtr&, const ObjectPtr&) { ++first_updates; }});
  first.Start();
  ASSERT_TRUE(first.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(first.Stats().lists, 1u);

  InformerOptions trimmed{.page_size = 5};
  trimmed.transform = [](Json& object) { object["data"].erase("bulk"); };
  Informer second(*client, configmaps, ns, trimmed);
  second.AddEventHandler({.on_add = [&](const ObjectPtr&) { ++second_adds; }});
  Informer other(*client, configmaps, ns, {.label_selector = "none=here", .page_size = 5});
  second.Start();
  other.Start();
  ASSERT_TRUE(second.WaitForSync(std::chrono::seconds(30)));
  ASSERT_TRUE(other.WaitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(second.Size(), 20u);
  EXPECT_EQ(second_adds.load(), 20);
  EXPECT_FALSE(second.Get(ns + "/listed-0")->at("data").contains("bulk"));  // its own transform
  EXPECT_TRUE(first.Get(ns + "/listed-0")->at("data").contains("bulk"));
  // Listed again for the second, which ran no list itself; the first commits that list last.
  for (int i = 0; i < 500 && first.Stats().lists < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(first.Stats().lists, 2u);
  EXPECT_EQ(second.Stats().lists, 2u);
  EXPECT_EQ(first_adds.load(), 20);  // the second list changed nothing the first had
  EXPECT_EQ(first_updates.load(), 0);
  EXPECT_EQ(other.Stats().lists, 1u);  // other selectors: a list and watch of its own
  EXPECT_EQ(other.Size(), 0u);

  auto wait_for = [&](Informer& informer, const std::string& key) {
    for (int i = 0; i < 500 && informer.Get(key) == nullptr; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return informer.Get(key) != nullptr;
  };
  ASSERT_TRUE(client->Create(configmaps, ConfigMap(ns, "watched", {{"bulk", "x"}})));
  EXPECT_TRUE(wait_for(first, ns + "/watched"));
  EXPECT_TRUE(wait_for(second, ns + "/watched"));
  // The versions move once every cache has the event: the same, once both are there.
  for (int i = 0; i < 500 && second.Stats().resource_version != first.Stats().resource_version; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(second.Stats().resource_version, first.Stats().resource_version);

  // The first stops: the second runs the list and watch from now on.
  first.Stop();
  ASSERT_TRUE(client->Create(configmaps, ConfigMap(ns, "after", {{"bulk", "x"}})));
  EXPECT_TRUE(wait_for(second, ns + "/after"));
  EXPECT_EQ(first.Get(ns + "/after"), nullptr);
  EXPECT_EQ(second.Stats().lists, 3u);  // its own first list: nothing it had came again
  EXPECT_EQ(second_adds.load(), 22);
  second.Stop();
  other.Stop();
}

}  // namespace
}  // namespace gpustack::kube
