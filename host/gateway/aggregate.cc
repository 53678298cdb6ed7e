#include "host/gateway/aggregate.h"

#include <algorithm>
#include <map>

#include "host/api/kinds.h"
#include "host/common/json_path.h"
#include "host/kube/quantity.h"

namespace gpustack::gateway {
namespace {

constexpr const char* kOnceMax = "onceMaxRequest";
constexpr const char* kRemaining = "remaining";
constexpr const char* kRemainingProfiles = "remainingProfiles";

// A view figure as a whole number: the worker writes integers, an int-or-string may be "7".
int64_t Figure(const Json& status, const std::string& view, const char* field) {
  return kube::WholeOf(JsonAt(status, {view, field})).value_or(0);
}

bool IsProfileList(const Json& property) {
  const Json& item = JsonAt(property, {"items", "properties"});
  return property.value("type", "") == "array" && item.contains("name") && item.contains("count");
}

// name -> count of a {name, count} list; names keep their order of first appearance elsewhere.
void AddProfiles(const Json& list, std::map<std::string, int64_t>& into, bool count_it) {
  if (!list.is_array()) return;
  for (const Json& p : list) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
    int64_t& sum = into[p["name"].get<std::string>()];
    if (count_it) sum += kube::WholeOf(p.value("count", Json(0))).value_or(0);
  }
}

Json ProfileList(const std::map<std::string, int64_t>& profiles, bool cap_at_one) {
  Json out = Json::array();
  for (const auto& [name, count] : profiles)
    out.push_back({{"name", name}, {"count", cap_at_one ? std::min<int64_t>(count, 1) : count}});
  return out;
}

// The view the partition profiles of a bundle come from (acceleratorPartitioned).
const View* PartitionView(const StatusShape& shape) {
  for (const View& v : shape.views)
    if (std::find(v.profile_lists.begin(), v.profile_lists.end(), kRemainingProfiles) !=
        v.profile_lists.end())
      return &v;
  return nullptr;
}

// Where a bundle keeps a partition view's profiles, beside the view's own figure.
std::string ProfilesKey(const View& v) { return v.name + "Profiles"; }

bool Acceleratable(const Json& spec) { return BoolAt(spec, {"acceleratable"}); }

// What tiers and types are ranked by: whole cards, or for a CPU type, cores.
int64_t Primary(const Json& status, bool acceleratable) {
  return Figure(status, acceleratable ? "accelerator" : "cpu", kOnceMax);
}

// Every profile name any candidate offers, at 0.
std::map<std::string, int64_t> ZeroProfiles(const std::map<std::string, int64_t>& names) {
  std::map<std::string, int64_t> zero;
  for (const auto& [name, ignored] : names) zero[name] = 0;
  return zero;
}

// One candidate's `field` (onceMaxRequest or remaining) of every view, as a bundle: the view's
// figure, and for the partition view its remainingProfiles (capped at 1 in a request: can one
// request get this profile).
Json Bundle(const Json& status, const char* field, const StatusShape& shape,
            const std::map<std::string, int64_t>& profile_names) {
  Json bundle = Json::object();
  const View* partition = PartitionView(shape);
  for (const View& v : shape.views) {
    bundle[v.name] = Figure(status, v.name, field);
    if (&v != partition) continue;
    std::map<std::string, int64_t> profiles = ZeroProfiles(profile_names);
    AddProfiles(JsonAt(status, {v.name, kRemainingProfiles}), profiles, true);
    bundle[ProfilesKey(v)] = ProfileList(profiles, /*cap_at_one=*/field == std::string(kOnceMax));
  }
  return bundle;
}

// The largest request one candidate can take: its onceMaxRequest bundle, and `allocation`.
Json OnceMaxBundle(const Json& status, const Json& spec, const StatusShape& shape,
                   const std::map<std::string, int64_t>& profile_names) {
  Json bundle = Bundle(status, kOnceMax, shape, profile_names);
  // The allocation that request is: `units` of the type's unit, and its local storage.
  const bool acceleratable = Acceleratable(spec);
  const int64_t units = Primary(status, acceleratable);
  const int64_t unit_cpu = kube::WholeOf(JsonAt(spec, {"unitResources", "cpu"})).value_or(0);
  const int64_t unit_ram_milli = kube::MilliOf(JsonAt(spec, {"unitResources", "ram"})).value_or(0);
  bundle["allocation"] = {
      {"accelerator", acceleratable ? units : 0},
      {"cpu", acceleratable ? units * unit_cpu : units},
      {"ram", units > 0 ? kube::FormatBytes(units * (unit_ram_milli / 1000)) : std::string("0")},
      {"localStorage", units > 0 ? JsonAt(spec, {"localStorage"}) : Json("0")}};
  return bundle;
}

Json ZeroBundle(const StatusShape& shape, const std::map<std::string, int64_t>& profile_names) {
  return Bundle(Json::object(), kRemaining, shape, profile_names);
}

// The request bundle of a tier or type with nothing counted: nothing can be asked for.
Json NoRequest(const StatusShape& shape, const std::map<std::string, int64_t>& profile_names) {
  Json bundle = ZeroBundle(shape, profile_names);
  bundle["allocation"] = {{"accelerator", 0}, {"cpu", 0}, {"ram", "0"}, {"localStorage", "0"}};
  return bundle;
}

// Adds `from` into `into`, view by view (profiles by name).
void AddBundle(Json& into, const Json& from, const StatusShape& shape) {
  const View* partition = PartitionView(shape);
  for (const View& v : shape.views) {
    into[v.name] = into[v.name].get<int64_t>() + from[v.name].get<int64_t>();
    if (&v != partition) continue;
    std::map<std::string, int64_t> sum;
    AddProfiles(into[ProfilesKey(v)], sum, true);
    AddProfiles(from[ProfilesKey(v)], sum, true);
    into[ProfilesKey(v)] = ProfileList(sum, false);
  }
}

bool AllZero(const Json& bundle, const StatusShape& shape) {
  const View* partition = PartitionView(shape);
  for (const View& v : shape.views) {
    if (bundle[v.name].get<int64_t>() != 0) return false;
    if (&v != partition) continue;
    for (const Json& p : bundle[ProfilesKey(v)])
      if (p.value("count", 0) != 0) return false;
  }
  return true;
}

Json CandidateEntry(const Candidate& c, const Json& status, const StatusShape& shape,
                    bool counted) {
  Json entry = {{"cluster", c.cluster},
                {"name", StringAt(*c.type, {"metadata", "name"})},
                {"phase", StringAt(status, {"phase"})},
                {"counted", counted}};
  if (c.freshness.stale) {
    entry["stale"] = true;
    entry["staleSince"] = c.freshness.since;
  }
  for (const View& v : shape.views)
    if (status.contains(v.name)) entry[v.name] = status[v.name];
  return entry;
}

}  // namespace

StatusShape StatusShapeOf(const Json& schema) {
  StatusShape shape;
  const Json& properties = JsonAt(schema, {"properties", "status", "properties"});
  if (!properties.is_object()) return shape;
  for (const auto& [name, property] : properties.items()) {
    const Json& fields = JsonAt(property, {"properties"});
    if (!fields.is_object() || !fields.contains(kRemaining)) {
      shape.others.push_back(name);
      continue;
    }
    View view{name, {}};
    for (const auto& [field, field_schema] : fields.items())
      if (IsProfileList(field_schema)) view.profile_lists.push_back(field);
    shape.views.push_back(std::move(view));
  }
  return shape;
}

Result<StatusShape> InstanceTypeStatusShape() {
  auto kinds = api::ServedKinds();
  if (!kinds) return kinds.failure();
  for (const api::Kind& k : *kinds)
    if (k.kind == "InstanceType") return StatusShapeOf(k.schema);
  return Error{"the compiled-in CRDs hold no InstanceType"};
}

Json AggregateInstanceType(const std::string& name, const std::vector<Candidate>& candidates,
                           const StatusShape& shape) {
  Json spec = Json::object();
  Json detail;
  std::map<std::string, int64_t> profile_names;  // every profile any member offers
  const View* partition = PartitionView(shape);
  for (const Candidate& c : candidates) {
    if (spec.empty()) spec = JsonAt(*c.type, {"spec"});
    const Json& status = JsonAt(*c.type, {"status"});
    if (detail.is_null() && !StringAt(status, {"detail", "manufacturer"}).empty())
      detail = status["detail"];
    if (partition)
      AddProfiles(JsonAt(status, {partition->name, kRemainingProfiles}), profile_names, false);
  }
  const bool acceleratable = Acceleratable(spec);

  // Tiers by the whole-card onceMaxRequest each member reports.
  std::map<int64_t, std::vector<const Candidate*>> by_key;
  for (const Candidate& c : candidates)
    by_key[Figure(JsonAt(*c.type, {"status"}), "accelerator", kOnceMax)].push_back(&c);

  struct Tier {
    int64_t primary = 0;
    Json json;
  };
  std::vector<Tier> tiers;
  Json stale_members = Json::array();
  for (const auto& [key, members] : by_key) {
    Json remaining = ZeroBundle(shape, profile_names);
    Json entries = Json::array();
    const Json* best = nullptr;
    const Json* best_spec = nullptr;
    int64_t best_primary = -1;
    for (const Candidate* c : members) {
      const Json& status = JsonAt(*c->type, {"status"});
      const bool counted = !c->freshness.stale && StringAt(status, {"phase"}) == "Active";
      entries.push_back(CandidateEntry(*c, status, shape, counted));
      if (!counted) continue;
      const Json figures = Bundle(status, kRemaining, shape, profile_names);
      AddBundle(remaining, figures, shape);
      const int64_t primary = Primary(status, acceleratable);
      if (primary > best_primary) {
        best_primary = primary;
        best = &status;
        best_spec = &JsonAt(*c->type, {"spec"});
      }
    }
    Json once = best ? OnceMaxBundle(*best, *best_spec, shape, profile_names)
                     : NoRequest(shape, profile_names);
    tiers.push_back({std::max<int64_t>(best_primary, 0),
                     {{"key", key},
                      {kOnceMax, std::move(once)},
                      {kRemaining, std::move(remaining)},
                      {"candidates", std::move(entries)}}});
  }

  for (const Candidate& c : candidates)
    if (c.freshness.stale)
      stale_members.push_back(
          {{"cluster", c.cluster}, {"since", c.freshness.since}, {"reason", c.freshness.reason}});

  // The type's figures: the largest tier's request, every tier's remaining.
  Json once = NoRequest(shape, profile_names);
  Json remaining = ZeroBundle(shape, profile_names);
  int64_t best_primary = -1;
  Json tier_list = Json::array();
  for (Tier& t : tiers) {
    AddBundle(remaining, t.json[kRemaining], shape);
    const Json& tier_once = t.json[kOnceMax];
    if (!AllZero(tier_once, shape) && t.primary > best_primary) {
      best_primary = t.primary;
      once = tier_once;
    }
    tier_list.push_back(std::move(t.json));
  }
  Json status = {{kOnceMax, std::move(once)},
                 {kRemaining, std::move(remaining)},
                 {"tiers", std::move(tier_list)},
                 {"staleMembers", std::move(stale_members)}};
  if (!detail.is_null()) status["detail"] = detail;
  return {{"name", name}, {"spec", spec}, {"status", status}};
}

std::vector<Json> AggregateInstanceTypes(const std::vector<Candidate>& candidates,
                                         const StatusShape& shape) {
  std::map<std::string, std::vector<Candidate>> by_name;
  for (const Candidate& c : candidates)
    by_name[StringAt(*c.type, {"metadata", "name"})].push_back(c);
  std::vector<Json> out;
  for (const auto& [name, members] : by_name)
    out.push_back(AggregateInstanceType(name, members, shape));
  std::stable_sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    return BoolAt(a, {"spec", "acceleratable"}) > BoolAt(b, {"spec", "acceleratable"});
  });
  return out;
}

}  // namespace gpustack::gateway
