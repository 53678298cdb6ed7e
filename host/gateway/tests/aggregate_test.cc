#include "host/gateway/aggregate.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpustack::gateway {
namespace {

const StatusShape& Shape() {
  static const StatusShape shape = [] {
    auto s = InstanceTypeStatusShape();
    EXPECT_TRUE(s) << s.error();
    return *s;
  }();
  return shape;
}

Json Figures(int64_t once, int64_t remaining, int64_t capacity) {
  return {{"onceMaxRequest", once}, {"remaining", remaining}, {"capacity", capacity}};
}

// A member's v1 InstanceType as the worker writes it.
Json Type(const std::string& name, Json ex, Json sh, Json sl, Json pt, Json cpu,
          const std::string& phase = "Active", bool acceleratable = true) {
  Json spec = {{"acceleratable", acceleratable},
               {"os", "linux"},
               {"arch", "amd64"},
               {"unitResources",
                {{"cpu", acceleratable ? "8" : "1"}, {"ram", acceleratable ? "64Gi" : "2Gi"}}},
               {"localStorage", "100Gi"}};
  if (acceleratable) spec["acceleratorGroup"] = "nvidia-a10g";
  return {
      {"apiVersion", "worker.gpustack.ai/v1"},
      {"kind", "InstanceType"},
      {"metadata", {{"name", name}}},
      {"spec", spec},
      {"status",
       {{"phase", phase},
        {"detail", {{"manufacturer", acceleratable ? "nvidia" : ""}, {"product", "NVIDIA-A10G"}}},
        {"accelerator", ex},
        {"acceleratorShared", sh},
        {"acceleratorSliced", sl},
        {"acceleratorPartitioned", pt},
        {"cpu", cpu}}}};
}

Json NoPartitions() {
  return {{"onceMaxRequest", 0},
          {"remaining", 0},
          {"capacity", 0},
          {"remainingProfiles", Json::array()},
          {"allocatedProfiles", Json::array()}};
}

Candidate Of(const std::string& cluster, Json type, Freshness freshness = {}) {
  return {cluster, std::make_shared<const Json>(std::move(type)), freshness};
}

const std::string kA10g = "gpustack--nvidia-a10g-linux-amd64";

// Two members offer the A10G pool: cluster a10g one idle card on one node; cluster t4-a10g five
// cards over two nodes, four on the best one, one of those sliced to 20 %. Hand-computed:
//   tier 1 (a10g): once EX 1 / SH 10 / SL 100, remaining 1 / 10 / 100
//   tier 4 (t4-a10g): once EX 4 / SH 40 / SL 100, remaining 4 / 40 / 480
//   type: once from tier 4; remaining 5 / 50 / 580.
TEST(Aggregate, TiersByWholeCardOnceMaxWithSumsHandComputed) {
  std::vector<Candidate> candidates = {
      Of("a10g", Type(kA10g, Figures(1, 1, 1), Figures(10, 10, 10), Figures(100, 100, 100),
                      NoPartitions(), Figures(0, 0, 0))),
      Of("t4-a10g", Type(kA10g, Figures(4, 4, 5), Figures(40, 40, 50), Figures(100, 480, 500),
                         NoPartitions(), Figures(0, 0, 0)))};
  const Json a = AggregateInstanceType(kA10g, candidates, Shape());
  EXPECT_EQ(a["name"], kA10g);
  EXPECT_EQ(a["spec"]["acceleratorGroup"], "nvidia-a10g");
  EXPECT_EQ(a["status"]["detail"]["manufacturer"], "nvidia");
  const Json& tiers = a["status"]["tiers"];
  ASSERT_EQ(tiers.size(), 2u) << a.dump(2);
  EXPECT_EQ(tiers[0]["key"], 1);
  EXPECT_EQ(tiers[0]["candidates"][0]["cluster"], "a10g");
  EXPECT_EQ(tiers[0]["remaining"]["acceleratorSliced"], 100);
  EXPECT_EQ(tiers[1]["key"], 4);
  EXPECT_EQ(tiers[1]["onceMaxRequest"]["accelerator"], 4);
  EXPECT_EQ(tiers[1]["onceMaxRequest"]["acceleratorShared"], 40);
  EXPECT_EQ(tiers[1]["remaining"]["acceleratorSliced"], 480);
  const Json& once = a["status"]["onceMaxRequest"];
  EXPECT_EQ(once["accelerator"], 4);
  EXPECT_EQ(once["acceleratorSliced"], 100);
  // Four units of 8 CPU / 64Gi, and the type's local storage.
  EXPECT_EQ(once["allocation"],
            (Json{{"accelerator", 4}, {"cpu", 32}, {"ram", "256Gi"}, {"localStorage", "100Gi"}}));
  const Json& remaining = a["status"]["remaining"];
  EXPECT_EQ(remaining["accelerator"], 5);
  EXPECT_EQ(remaining["acceleratorShared"], 50);
  EXPECT_EQ(remaining["acceleratorSliced"], 580);
  EXPECT_EQ(remaining["cpu"], 0);
  EXPECT_TRUE(a["status"]["staleMembers"].empty());
  // The larger member stale: its tier keeps its place, empty; the type offers what is left.
  candidates[1].freshness = {true, "2026-12-06T09:00:00Z", "Stale"};
  const Json b = AggregateInstanceType(kA10g, candidates, Shape());
  ASSERT_EQ(b["status"]["tiers"].size(), 2u);
  EXPECT_EQ(b["status"]["tiers"][0]["key"], 1);
  EXPECT_EQ(b["status"]["tiers"][1]["key"], 4);
  EXPECT_EQ(b["status"]["tiers"][1]["remaining"]["accelerator"], 0);
  EXPECT_EQ(b["status"]["onceMaxRequest"]["accelerator"], 1);
  // A tier with nothing counted offers an empty allocation.
  EXPECT_EQ(b["status"]["tiers"][1]["onceMaxRequest"]["accelerator"], 0);
  EXPECT_EQ(b["status"]["tiers"][1]["onceMaxRequest"]["allocation"],
            (Json{{"accelerator", 0}, {"cpu", 0}, {"ram", "0"}, {"localStorage", "0"}}));
  EXPECT_EQ(b["status"]["remaining"]["accelerator"], 1);
}

// A stale member and an Inactive one are listed with why, and count for nothing.
TEST(Aggregate, StaleAndInactiveMembersAreListedButNotCounted) {
  std::vector<Candidate> candidates = {
      Of("a", Type(kA10g, Figures(2, 2, 2), Figures(20, 20, 20), Figures(100, 200, 200),
                   NoPartitions(), Figures(0, 0, 0))),
      Of("b",
         Type(kA10g, Figures(2, 2, 2), Figures(20, 20, 20), Figures(100, 200, 200), NoPartitions(),
              Figures(0, 0, 0)),
         {true, "2026-12-06T09:00:00Z", "Stale: connection refused"}),
      Of("c", Type(kA10g, Figures(2, 2, 2), Figures(20, 20, 20), Figures(100, 200, 200),
                   NoPartitions(), Figures(0, 0, 0), "Inactive"))};
  const Json a = AggregateInstanceType(kA10g, candidates, Shape());
  ASSERT_EQ(a["status"]["tiers"].size(), 1u);
  const Json& tier = a["status"]["tiers"][0];
  EXPECT_EQ(tier["remaining"]["accelerator"], 2);
  EXPECT_EQ(tier["remaining"]["acceleratorSliced"], 200);
  ASSERT_EQ(tier["candidates"].size(), 3u);
  EXPECT_EQ(tier["candidates"][0]["counted"], true);
  EXPECT_EQ(tier["candidates"][1]["counted"], false);
  EXPECT_EQ(tier["candidates"][1]["stale"], true);
  EXPECT_EQ(tier["candidates"][1]["staleSince"], "2026-12-06T09:00:00Z");
  EXPECT_EQ(tier["candidates"][2]["counted"], false);
  EXPECT_EQ(tier["candidates"][2]["phase"], "Inactive");
  EXPECT_EQ(a["status"]["staleMembers"],
            (Json::array({{{"cluster", "b"},
                           {"since", "2026-12-06T09:00:00Z"},
                           {"reason", "Stale: connection refused"}}})));
  // Every member stale: nothing to offer, nothing remaining.
  for (Candidate& c : candidates) c.freshness = {true, "2026-12-06T09:00:00Z", "Stale"};
  const Json none = AggregateInstanceType(kA10g, candidates, Shape());
  EXPECT_EQ(none["status"]["onceMaxRequest"]["accelerator"], 0);
  EXPECT_EQ(none["status"]["remaining"]["accelerator"], 0);
}

Json Partitions(std::vector<std::pair<std::string, int>> remaining) {
  Json list = Json::array();
  for (auto& [name, count] : remaining) list.push_back({{"name", name}, {"count", count}});
  return {{"onceMaxRequest", 1},
          {"remaining", 1},
          {"capacity", 7},
          {"remainingProfiles", list},
          {"allocatedProfiles", Json::array()}};
}

// Partition profiles are summed by name over the counted members; the request bundle says which
// profiles one request can get (0 or 1).
TEST(Aggregate, PartitionProfilesAreSummedByName) {
  const std::string h100 = "gpustack--nvidia-h100-linux-amd64";
  std::vector<Candidate> candidates = {
      Of("a", Type(h100, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0),
                   Partitions({{"1g.10gb", 6}, {"2g.20gb", 2}, {"3g.40gb", 0}}), Figures(0, 0, 0))),
      Of("b", Type(h100, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0),
                   Partitions({{"1g.10gb", 7}, {"2g.20gb", 3}, {"3g.40gb", 2}}), Figures(0, 0, 0))),
      Of("c", Type(h100, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0),
                   Partitions({{"1g.10gb", 2}, {"7g.80gb", 1}}), Figures(0, 0, 0), "Inactive"))};
  const Json a = AggregateInstanceType(h100, candidates, Shape());
  const Json expected_remaining = Json::array({{{"name", "1g.10gb"}, {"count", 13}},
                                               {{"name", "2g.20gb"}, {"count", 5}},
                                               {{"name", "3g.40gb"}, {"count", 2}},
                                               {{"name", "7g.80gb"}, {"count", 0}}});
  EXPECT_EQ(a["status"]["remaining"]["acceleratorPartitionedProfiles"], expected_remaining)
      << a.dump(2);
  // The view's own figure is summed too (1 + 1; c is inactive).
  EXPECT_EQ(a["status"]["remaining"]["acceleratorPartitioned"], 2);
  EXPECT_EQ(a["status"]["onceMaxRequest"]["acceleratorPartitioned"], 1);
  EXPECT_EQ(a["status"]["onceMaxRequest"]["acceleratorPartitionedProfiles"],
            (Json::array({{{"name", "1g.10gb"}, {"count", 1}},
                          {{"name", "2g.20gb"}, {"count", 1}},
                          {{"name", "3g.40gb"}, {"count", 0}},
                          {{"name", "7g.80gb"}, {"count", 0}}})));
}

// CPU types have no cards: one tier, ranked by cores.
TEST(Aggregate, CpuTypesFormOneTierRankedByCores) {
  const std::string generic = "gpustack--generic-linux-amd64";
  std::vector<Candidate> candidates = {
      Of("a", Type(generic, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0), NoPartitions(),
                   Figures(4, 4, 4), "Active", false)),
      Of("b", Type(generic, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0), NoPartitions(),
                   Figures(48, 64, 72), "Active", false))};
  const Json a = AggregateInstanceType(generic, candidates, Shape());
  ASSERT_EQ(a["status"]["tiers"].size(), 1u);
  EXPECT_EQ(a["status"]["onceMaxRequest"]["cpu"], 48);
  EXPECT_EQ(a["status"]["onceMaxRequest"]["allocation"]["cpu"], 48);
  EXPECT_EQ(a["status"]["onceMaxRequest"]["allocation"]["ram"], "96Gi");
  EXPECT_EQ(a["status"]["remaining"]["cpu"], 68);
  // Accelerated types come first in the list.
  candidates.push_back(Of("a", Type(kA10g, Figures(1, 1, 1), Figures(10, 10, 10),
                                    Figures(100, 100, 100), NoPartitions(), Figures(0, 0, 0))));
  const std::vector<Json> all = AggregateInstanceTypes(candidates, Shape());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["name"], kA10g);
  EXPECT_EQ(all[1]["name"], generic);
}

// The invariant of docs/behaviour.md §11: every status view of the InstanceType CRD is
// aggregated. The views come from the CRD compiled in; each is given a different remaining in
// two members and must come out summed, and its onceMaxRequest copied. A status property that
// is not a view must be one this list knows (a new one needs a decision here: view or not).
TEST(Aggregate, EveryViewTheCrdDeclaresIsSummed) {
  const std::vector<std::string> known_others = {"columns", "detail", "entrance", "phase",
                                                 "phaseMessage"};
  std::vector<std::string> others = Shape().others;
  std::sort(others.begin(), others.end());
  EXPECT_EQ(others, known_others);
  ASSERT_GE(Shape().views.size(), 5u);
  for (const View& v : Shape().views) {
    SCOPED_TRACE(v.name);
    Json a = Type(kA10g, Figures(0, 0, 0), Figures(0, 0, 0), Figures(0, 0, 0), NoPartitions(),
                  Figures(0, 0, 0));
    Json b = a;
    a["status"][v.name] = Figures(1, 3, 9);
    b["status"][v.name] = Figures(1, 4, 9);
    if (!v.profile_lists.empty()) {
      a["status"][v.name]["remainingProfiles"] = {{{"name", "p"}, {"count", 3}}};
      b["status"][v.name]["remainingProfiles"] = {{{"name", "p"}, {"count", 4}}};
    }
    const Json out = AggregateInstanceType(kA10g, {Of("a", a), Of("b", b)}, Shape());
    EXPECT_EQ(out["status"]["remaining"][v.name], 7);
    EXPECT_EQ(out["status"]["onceMaxRequest"][v.name], 1);
    if (!v.profile_lists.empty()) {
      EXPECT_EQ(out["status"]["remaining"][v.name + "Profiles"],
                (Json::array({{{"name", "p"}, {"count", 7}}})));
    }
  }
}

// A view added to the schema is aggregated with no change to the gateway.
TEST(Aggregate, AViewAddedToTheSchemaIsAggregated) {
  auto kinds_schema = [] {
    Json view = {{"type", "object"},
                 {"properties",
                  {{"onceMaxRequest", {{"x-kubernetes-int-or-string", true}}},
                   {"remaining", {{"x-kubernetes-int-or-string", true}}},
                   {"capacity", {{"x-kubernetes-int-or-string", true}}}}}};
    return Json{{"properties",
                 {{"status",
                   {{"properties",
                     {{"phase", {{"type", "string"}}},
                      {"accelerator", view},
                      {"acceleratorTimeSliced", view}}}}}}}};
  }();
  const StatusShape shape = StatusShapeOf(kinds_schema);
  ASSERT_EQ(shape.views.size(), 2u);
  Json a = Type(kA10g, Figures(1, 1, 1), Figures(0, 0, 0), Figures(0, 0, 0), NoPartitions(),
                Figures(0, 0, 0));
  a["status"]["acceleratorTimeSliced"] = Figures(2, 5, 8);
  Json b = a;
  b["status"]["acceleratorTimeSliced"] = Figures(3, 6, 8);
  const Json out = AggregateInstanceType(kA10g, {Of("a", a), Of("b", b)}, shape);
  EXPECT_EQ(out["status"]["remaining"]["acceleratorTimeSliced"], 11);
  EXPECT_EQ(out["status"]["tiers"][0]["candidates"][1]["acceleratorTimeSliced"]["remaining"], 6);
}

}  // namespace
}  // namespace gpustack::gateway
