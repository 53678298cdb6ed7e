#include <gtest/gtest.h>

#include "host/kube/list_page.h"
#include "host/kube/rate_limiter.h"
#include "host/kube/resource.h"
#include "host/kube/transport.h"
#include "host/kube/watch_decoder.h"

#include <fstream>

namespace gpustack::kube {
namespace {

TEST(Paths, CoreGroupsNamespacesAndSubresources) {
  EXPECT_EQ(CollectionPath(resources::Pods(), "ns"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(CollectionPath(resources::Pods(), ""), "/api/v1/pods");
  EXPECT_EQ(CollectionPath(resources::Nodes(), "ignored"), "/api/v1/nodes");
  EXPECT_EQ(ObjectPath(resources::InstanceTypes(), "", "a100", "status"),
            "/apis/worker.gpustack.ai/v1alpha1/instancetypes/a100/status");
  EXPECT_EQ(ObjectPath(resources::Leases(), "kube-system", "op"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/op");
  EXPECT_EQ(EscapeQueryValue("a=b,c!=d e/f"), "a%3Db%2Cc%21%3Dd%20e%2Ff");
}

TEST(ApiErrors, StatusReasonAndMessage) {
  Error e = ApiError(
      409,
      R"({"kind":"Status","status":"Failure","reason":"Conflict","message":"the object has been modified","code":409})",
      "PUT /x");
  EXPECT_EQ(e.http_status, 409);
  EXPECT_EQ(e.code, Code::kAborted) << "one canonical code beside the HTTP status";
  EXPECT_EQ(e.reason, "Conflict");
  EXPECT_EQ(e.message, "PUT /x: HTTP 409 Conflict: the object has been modified");
  EXPECT_TRUE(IsConflict(e));
  EXPECT_FALSE(IsNotFound(e));
  Error exists =
      ApiError(409, R"({"kind":"Status","reason":"AlreadyExists","message":"m"})", "POST /x");
  EXPECT_TRUE(IsAlreadyExists(exists));
  EXPECT_FALSE(IsConflict(exists));
  EXPECT_EQ(exists.code, Code::kAlreadyExists);
  EXPECT_EQ(ApiError(404, "{}", "GET /n").code, Code::kNotFound);
  EXPECT_EQ(ApiError(403, "{}", "GET /n").code, Code::kPermissionDenied);
  Error plain = ApiError(502, "bad gateway", "GET /y");
  EXPECT_EQ(plain.message, "GET /y: HTTP 502: bad gateway");
  EXPECT_TRUE(IsGone(ApiError(410, "{}", "GET /z")));
}

TEST(ObjectKeys, NamespacedAndClusterScoped) {
  EXPECT_EQ(ObjectKey(Json::parse(R"({"metadata":{"name":"a","namespace":"n"}})")), "n/a");
  EXPECT_EQ(ObjectKey(Json::parse(R"({"metadata":{"name":"node-1"}})")), "node-1");
}

TEST(WatchDecoder, EventsSplitAcrossPieces) {
  std::string stream =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
      "\n"
      R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"10"}}})"
      "\n";
  for (size_t cut = 1; cut < stream.size(); cut += 7) {
    WatchDecoder decoder;
    std::vector<std::pair<WatchEventType, std::string>> seen;
    auto collect = [&](WatchEvent& e) {
      seen.emplace_back(e.type, EventResourceVersion(e));
      return true;
    };
    ASSERT_TRUE(decoder.Feed(std::string_view(stream).substr(0, cut), collect));
    ASSERT_TRUE(decoder.Feed(std::string_view(stream).substr(cut), collect));
    ASSERT_EQ(seen.size(), 3u) << "cut at " << cut;
    EXPECT_EQ(seen[0], std::make_pair(WatchEventType::kAdded, std::string("5")));
    EXPECT_EQ(seen[1], std::make_pair(WatchEventType::kBookmark, std::string("9")));
    EXPECT_EQ(seen[2], std::make_pair(WatchEventType::kDeleted, std::string("10")));
    EXPECT_EQ(decoder.buffered(), 0u);
  }
}

TEST(WatchDecoder, ALargeEventInTinyPiecesIsDecodedOnce) {
  // 256 KiB of one event arriving 7 bytes at a time: the partial line is searched once, not
  // once per piece (tests/bench/watch_bench measures the cost).
  const std::string event = R"({"type":"ADDED","object":{"metadata":{"name":"big"},"data":")" +
                            std::string(256 * 1024, 'x') + "\"}}\n";
  WatchDecoder decoder;
  int seen = 0;
  for (size_t at = 0; at < event.size(); at += 7) {
    ASSERT_TRUE(decoder.Feed(std::string_view(event).substr(at, 7), [&](WatchEvent& e) {
      EXPECT_EQ(e.object["metadata"]["name"], "big");
      ++seen;
      return true;
    }));
  }
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(WatchDecoder, ErrorsAndEarlyStop) {
  WatchDecoder decoder;
  int count = 0;
  auto stop_after_one = [&](WatchEvent&) { return ++count < 1; };
  ASSERT_TRUE(decoder.Feed(R"({"type":"ADDED","object":{}})"
                           "\n"
                           R"({"type":"ADDED","object":{}})"
                           "\n",
                           stop_after_one));
  EXPECT_EQ(count, 1);
  WatchDecoder broken;
  auto bad = broken.Feed("{not json}\n", [](WatchEvent&) { return true; });
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("not a watch event"), std::string::npos);
  auto unknown = broken.Feed(R"({"type":"RENAMED","object":{}})"
                             "\n",
                             [](WatchEvent&) { return true; });
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown event type"), std::string::npos);
}

TEST(ListPage, HandsOutEachItemWholeAndInOrder) {
  // The items carry the shapes that could be mistaken for a page's own keys: an item's own
  // `items` and `metadata`, nested objects and arrays of objects.
  const std::string text = R"({"kind":"PodList","apiVersion":"v1",
    "metadata":{"resourceVersion":"42","continue":"next-page","remainingItemCount":3},
    "items":[
      {"metadata":{"name":"a","labels":{"x":"1"}},"items":[{"k":1},{"k":2}]},
      {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","ports":[{"p":80}]}]}},
      {}
    ]})";
  std::vector<Json> taken;
  auto page = DecodeListPage(text, [&](Json& item) { taken.push_back(std::move(item)); });
  ASSERT_TRUE(page) << page.error();
  EXPECT_EQ(page->resource_version, "42");
  EXPECT_EQ(page->continue_token, "next-page");
  EXPECT_EQ(page->items, 3u);
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0], Json::parse(R"({"metadata":{"name":"a","labels":{"x":"1"}},
                                       "items":[{"k":1},{"k":2}]})"));
  EXPECT_EQ(taken[1]["spec"]["containers"][0]["ports"][0]["p"], 80);
  EXPECT_EQ(taken[2], Json::object());
}

TEST(ListPage, TheMetadataMayComeAfterTheItemsAndTheLastPageHasNoContinue) {
  int taken = 0;
  auto page = DecodeListPage(R"({"items":[{"a":1}],"metadata":{"resourceVersion":"7"}})",
                             [&](Json&) { ++taken; });
  ASSERT_TRUE(page) << page.error();
  EXPECT_EQ(page->resource_version, "7");
  EXPECT_EQ(page->continue_token, "");
  EXPECT_EQ(taken, 1);
  for (const char* empty :
       {R"({"metadata":{},"items":[]})", R"({"metadata":{},"items":null})", R"({"metadata":{}})"}) {
    auto none = DecodeListPage(empty, [&](Json&) { ++taken; });
    ASSERT_TRUE(none) << empty << ": " << none.error();
    EXPECT_EQ(none->items, 0u) << empty;
  }
  EXPECT_EQ(taken, 1);
}

TEST(ListPage, WhatIsNotAListIsAnError) {
  for (const char* bad : {"", "{not json", "[]", R"({"items":[{"a":1},)",
                          R"({"items":[{"a":1},2]})", R"({"items":{"a":1}})",
                          R"({"items":[[{"a":1}]]})", R"({"items":[{"a":1}],"items":[{"b":2}]})"}) {
    auto page = DecodeListPage(bad, [](Json&) {});
    ASSERT_FALSE(page) << bad;
    EXPECT_NE(page.error().find("not a list"), std::string::npos) << page.error();
  }
  // An object under `items` (not an array) hands nothing out, whatever it nests.
  int taken = 0;
  auto nested = DecodeListPage(R"({"items":{"a":{"b":1}},"metadata":{"x":{"y":2}}})",
                               [&](Json&) { ++taken; });
  ASSERT_FALSE(nested);
  EXPECT_EQ(taken, 0);
}

TEST(TokenBucket, BurstThenRate) {
  auto t0 = TokenBucket::Clock::now();
  TokenBucket bucket(10, 3, t0);
  EXPECT_EQ(bucket.Reserve(t0), TokenBucket::Clock::duration::zero());
  EXPECT_EQ(bucket.Reserve(t0), TokenBucket::Clock::duration::zero());
  EXPECT_EQ(bucket.Reserve(t0), TokenBucket::Clock::duration::zero());
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(bucket.Reserve(t0));
  EXPECT_EQ(wait.count(), 100);
  auto second = std::chrono::duration_cast<std::chrono::milliseconds>(bucket.Reserve(t0));
  EXPECT_EQ(second.count(), 200);  // reservations queue behind each other
  // After a second idle, the bucket is full again but never over burst.
  auto later = t0 + std::chrono::seconds(10);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bucket.Reserve(later), TokenBucket::Clock::duration::zero()) << i;
  }
  EXPECT_GT(bucket.Reserve(later), TokenBucket::Clock::duration::zero());
  TokenBucket unlimited(0, 1, t0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(unlimited.Reserve(t0), TokenBucket::Clock::duration::zero());
  }
}

TEST(TokenSource, RereadsTheFileWhenInvalidated) {
  auto file = std::filesystem::temp_directory_path() / ("token-" + std::to_string(getpid()));
  std::ofstream(file) << "first\n";
  TokenSource source("", file.string(), std::chrono::seconds(3600));
  auto a = source.Token();
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(*a, "first");
  std::ofstream(file) << "second";
  EXPECT_EQ(*source.Token(), "first");  // cached
  source.Invalidate();
  EXPECT_EQ(*source.Token(), "second");
  std::ofstream(file) << "";
  source.Invalidate();
  auto empty = source.Token();
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("is empty"), std::string::npos);
  std::filesystem::remove(file);
  TokenSource fixed("abc", "");
  EXPECT_EQ(*fixed.Token(), "abc");
}

}  // namespace
}  // namespace gpustack::kube
