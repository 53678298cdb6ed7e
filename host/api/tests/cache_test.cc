#include "host/api/cache.h"

#include "host/api/backend.h"

#include <gtest/gtest.h>

namespace gpustack::api {
namespace {

nlohmann::json Object(const std::string& name, uint64_t version, const std::string& ns = "n") {
  return {{"metadata",
           {{"name", name}, {"namespace", ns}, {"resourceVersion", std::to_string(version)}}}};
}

struct Recorder {
  std::vector<std::string> seen;  // "TYPE name@version"
  bool open = true;
  Watcher watcher(std::function<bool(const ServedObject&)> wants = {}) {
    return {std::move(wants), [this](const WatchEvent& e) {
              seen.push_back(e.type + " " + (e.object ? e.object->selectable.name : "") + "@" +
                             std::to_string(e.resource_version));
              return open;
            }};
  }
};

// A served object keeps its text packed and serves it back as it was (host/common/packed_text.h).
TEST(ServedObject, ServesItsTextAsItWasSerialized) {
  nlohmann::json large = Object("large", 7);
  large["metadata"]["labels"] = {{"app", "x"}};
  for (int i = 0; i < 200; ++i)
    large["spec"]["cards"].push_back({{"index", i}, {"model", "NVIDIA H100 80GB HBM3"}});
  const ServedObject served = ServedObjectOf(large);
  EXPECT_TRUE(served.text.compressed());
  EXPECT_EQ(served.text.Text(), large.dump());
  EXPECT_EQ(served.Parse(), large);
  EXPECT_EQ(served.resource_version, 7u);
  ASSERT_NE(served.selectable.Label("app"), nullptr);
}

// A watch from a version replays what came after it, a watch from 0 starts with the state, and
// one from before what is kept is told 410 (the client lists again).
TEST(ServedCache, WatchFromAVersionReplaysFromZeroListsAndTooOldIsGone) {
  ServedCache cache(3);
  cache.Upsert(Object("a", 10));  // the initial list: state, not history
  cache.MarkSynced(12);
  EXPECT_EQ(cache.resource_version(), 12u);
  cache.Upsert(Object("b", 13));
  cache.Upsert(Object("a", 14));
  cache.Remove(Object("b", 15));

  Recorder from_zero;
  ASSERT_TRUE(cache.Watch(0, from_zero.watcher()));
  EXPECT_EQ(from_zero.seen, (std::vector<std::string>{"ADDED a@14"}));

  Recorder from_13;
  ASSERT_TRUE(cache.Watch(13, from_13.watcher()));
  EXPECT_EQ(from_13.seen, (std::vector<std::string>{"MODIFIED a@14", "DELETED b@15"}));

  Recorder other;
  auto too_old = cache.Watch(11, other.watcher());
  ASSERT_FALSE(too_old);
  EXPECT_EQ(too_old.failure().http_status, 410);
  EXPECT_TRUE(cache.Watch(12, other.watcher()));  // exactly the list's version: fine

  // Live events reach the watchers that want them; a gone watcher is dropped.
  Recorder only_c;
  ASSERT_TRUE(cache.Watch(
      15, only_c.watcher([](const ServedObject& o) { return o.selectable.name == "c"; })));
  from_13.open = false;
  cache.Upsert(Object("c", 16));
  cache.Upsert(Object("d", 17));
  EXPECT_EQ(only_c.seen, (std::vector<std::string>{"ADDED c@16"}));
  EXPECT_EQ(from_zero.seen.back(), "ADDED d@17");
  EXPECT_EQ(cache.watchers(), 3u);  // from_zero, other and only_c: from_13 went

  // Three events kept: 15, 16, 17. 13 is gone now.
  EXPECT_FALSE(cache.Watch(13, other.watcher()));
  EXPECT_TRUE(cache.Watch(14, other.watcher()));

  cache.Advance(20);  // a bookmark from the informer
  cache.Bookmark();
  EXPECT_EQ(only_c.seen.back(), "BOOKMARK @20");
  const auto snapshot = cache.List();
  EXPECT_EQ(snapshot.resource_version, 20u);
  ASSERT_EQ(snapshot.objects.size(), 3u);  // a, c, d
  EXPECT_EQ(snapshot.objects[0]->key(), "n/a");
  EXPECT_EQ(snapshot.objects[0]->Parse(), Object("a", 14));
  EXPECT_NE(cache.Get("n/c"), nullptr);
  EXPECT_EQ(cache.Get("n/b"), nullptr);
  // A cluster-scoped object (a Devices object) is kept by its name alone.
  cache.Upsert(Object("node-1", 21, ""));
  ASSERT_NE(cache.Get("node-1"), nullptr);
  EXPECT_EQ(cache.Get("node-1")->key(), "node-1");
}

// History keeps each version as served: a watch that resumes gets the object as it was at that
// version, not the current one.
TEST(ServedCache, AResumedWatchGetsEachVersionAsItWas) {
  ServedCache cache(10);
  cache.MarkSynced(5);
  auto labelled = [](uint64_t version, const std::string& team) {
    nlohmann::json o = Object("a", version);
    o["metadata"]["labels"] = {{"team", team}};
    return o;
  };
  cache.Upsert(labelled(6, "red"));
  cache.Upsert(labelled(7, "blue"));
  cache.Remove(labelled(8, "green"));
  std::vector<nlohmann::json> replayed;
  ASSERT_TRUE(cache.Watch(5, {{}, [&](const WatchEvent& e) {
                                replayed.push_back(e.object->Parse());
                                return true;
                              }}));
  ASSERT_EQ(replayed.size(), 3u);
  EXPECT_EQ(replayed[0], labelled(6, "red"));
  EXPECT_EQ(replayed[1], labelled(7, "blue"));
  EXPECT_EQ(replayed[2], labelled(8, "green"));
  // A watcher's filter sees the replayed versions too.
  Recorder blue;
  ASSERT_TRUE(cache.Watch(5, blue.watcher([](const ServedObject& o) {
    const std::string* team = o.selectable.Label("team");
    return team && *team == "blue";
  })));
  EXPECT_EQ(blue.seen, (std::vector<std::string>{"MODIFIED a@7"}));
}

// The informer listed again (after a 410 of its own) and replays differences with older
// versions: history before that can no longer be replayed.
TEST(ServedCache, OutOfOrderEventsEndTheReplayableHistory) {
  ServedCache cache(10);
  cache.MarkSynced(5);
  cache.Upsert(Object("a", 6));
  cache.Upsert(Object("b", 7));
  cache.Remove(Object("a", 6));  // a relist's synthetic delete carries the old version
  Recorder before;
  EXPECT_FALSE(cache.Watch(5, before.watcher()));
  Recorder after;
  EXPECT_TRUE(cache.Watch(7, after.watcher()));
}

}  // namespace
}  // namespace gpustack::api

namespace gpustack::api {
namespace {

// A backend that only keeps objects: enough for read-your-writes.
class KeepingBackend : public Backend {
 public:
  KeepingBackend() : Backend(Kind{}, 10) {}
  void Start() override {}
  void Stop() override {}
  void Tick() override {}
  https::Response Write(const Call&) override { return {}; }
};

// A write is served until the cache has caught up with it, and never after: an object deleted
// since (its finalizer removed by a controller) must not come back from the write's answer.
TEST(Backend, ReadYourWritesUntilTheCacheCatchesUp) {
  KeepingBackend b;
  b.cache().MarkSynced(1);
  b.Remember(Object("a", 5));  // the delete's answer: deletionTimestamp set, a finalizer left
  EXPECT_EQ(b.Recent("n/a", nullptr)->resource_version, 5u);
  b.cache().Upsert(Object("a", 4));
  EXPECT_EQ(b.Recent("n/a", b.cache().Get("n/a"))->resource_version, 5u);
  b.cache().Upsert(Object("a", 6));  // the finalizer removed
  b.cache().Remove(Object("a", 7));  // gone
  EXPECT_EQ(b.Recent("n/a", b.cache().Get("n/a")), nullptr);
  // Gone before the cache ever held it: the cache's version passing the write's says so.
  b.Remember(Object("b", 8));
  EXPECT_NE(b.Recent("n/b", nullptr), nullptr);
  b.cache().Advance(9);
  EXPECT_EQ(b.Recent("n/b", nullptr), nullptr);
}

}  // namespace
}  // namespace gpustack::api
