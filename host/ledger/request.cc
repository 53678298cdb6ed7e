#include "host/ledger/request.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "host/kube/quantity.h"

namespace gpustack::ledger {
namespace {

using nlohmann::json;

constexpr int64_t kMaxQuantity = std::numeric_limits<int32_t>::max();

// The accelerator keys of one container, sorted out per manufacturer.
struct Keys {
  const ResourceKind* kind = nullptr;
  std::map<std::string, json> values;  // suffix ("", ".shared", ".sliced.memory-mib", ...) -> value
  std::vector<std::string> profiles;  // partition profile names, from <base>.partitioned.<kind>-<p>
  std::map<std::string, json> profile_values;
  std::set<Mode> modes;
};

struct Container {
  std::string name;
  std::string path;  // "spec.containers[1]"
  enum Group { kInit, kApp, kSidecar } group = kApp;
  std::optional<Keys> keys;  // set when the container names any accelerator key
};

std::string Invalid(const std::string& path, const std::string& key, const json& value,
                    const std::string& reason) {
  const std::string shown = value.is_string() ? value.get<std::string>() : value.dump();
  return path + ".resources.limits[" + key + "]: Invalid value: \"" + shown + "\": " + reason;
}

// Reads the accelerator keys from a container's limits (requests when limits lack them: extended
// resources must be equal in both, and the API server enforces it).
Result<std::optional<Keys>> ReadKeys(const json& container, const std::string& path,
                                     const std::vector<ResourceKind>& kinds) {
  std::optional<Keys> keys;
  const json* resources = container.contains("resources") ? &container["resources"] : nullptr;
  if (resources == nullptr || !resources->is_object()) return keys;
  std::map<std::string, json> merged;
  for (const char* section : {"requests", "limits"}) {  // limits win
    auto it = resources->find(section);
    if (it == resources->end() || !it->is_object()) continue;
    for (const auto& [key, value] : it->items()) merged[key] = value;
  }
  for (const auto& [key, value] : merged) {
    for (const ResourceKind& kind : kinds) {
      if (key != kind.base && key.rfind(kind.base + ".", 0) != 0) continue;
      const std::string suffix = key.substr(kind.base.size());
      const std::string profile_prefix = ".partitioned." + kind.partition_kind + "-";
      std::optional<Mode> mode;
      std::string profile;
      if (suffix.empty()) {
        mode = Mode::kExclusive;
      } else if (suffix == ".shared") {
        mode = Mode::kShared;
      } else if (suffix == ".sliced" || suffix == ".sliced.memory-percentage" ||
                 suffix == ".sliced.memory-mib" || suffix == ".sliced.cores-percentage") {
        mode = Mode::kSliced;
      } else if (suffix == ".partitioned") {
        mode = Mode::kPartitioned;
      } else if (!kind.partition_kind.empty() && suffix.rfind(profile_prefix, 0) == 0 &&
                 suffix.size() > profile_prefix.size()) {
        mode = Mode::kPartitioned;
        profile = suffix.substr(profile_prefix.size());
      } else if (kind.partition_kind.empty() && suffix.rfind(".partitioned.", 0) == 0 &&
                 suffix != ".partitioned.units") {
        mode = Mode::kPartitioned;  // refused below: this manufacturer does not partition
      }
      // ".sliced.units"/".partitioned.units" are derived (overwritten); anything else under the
      // base is not an accelerator mode (e.g. the legacy ".sliced.mig-<p>"): neither counts.
      if (!mode) continue;
      if (!keys) {
        keys.emplace();
        keys->kind = &kind;
      } else if (keys->kind != &kind) {
        return Error{path +
                     ".resources.limits: Forbidden: a container may request accelerators "
                     "of one manufacturer, found " +
                     keys->kind->base + " and " + kind.base};
      }
      keys->modes.insert(*mode);
      if (!profile.empty()) {
        keys->profiles.push_back(profile);
        keys->profile_values[profile] = value;
        continue;
      }
      keys->values[suffix] = value;
    }
  }
  return keys;
}

std::string ModeList(const std::set<Mode>& modes) {
  std::string out = "[";
  for (Mode m : modes) out += (out.size() > 1 ? " " : "") + std::string(ModeKey(m));
  return out + "]";
}

// One container's keys of one mode, read with the errors the webhook returns.
struct KeyReader {
  const Container& c;
  const Keys& k;
  const std::string& base;

  bool Has(const std::string& suffix) const { return k.values.count(suffix) > 0; }
  Result<int64_t> Count(const std::string& suffix, int64_t max) const {
    auto parsed = ParseCount(k.values.at(suffix), max);
    if (!parsed) return Error{Invalid(c.path, base + suffix, k.values.at(suffix), parsed.error())};
    return parsed;
  }
  std::string Refuse(const std::string& suffix, const std::string& why) const {
    return Invalid(c.path, base + suffix, k.values.at(suffix), why);
  }
};

Status FoldExclusive(const KeyReader& keys, Request& r) {
  auto n = keys.Count("", kMaxQuantity);
  if (!n) return n.failure();
  r.count = static_cast<uint32_t>(*n);
  return Ok{};
}

Status FoldShared(const KeyReader& keys, Request& r) {
  auto n = keys.Count(".shared", kMaxQuantity);
  if (!n) return n.failure();
  if (*n > kSharedSlots) {
    return Error{keys.Refuse(
        ".shared", "a shared request takes 1 to 10 of one accelerator's ownership slots")};
  }
  r.count = static_cast<uint32_t>(*n);
  return Ok{};
}

Status FoldSliced(const KeyReader& keys, const FoldContext& fold, Request& r) {
  const std::string& base = keys.base;
  const std::string& path = keys.c.path;
  if (!keys.Has(".sliced")) {
    return Error{path + ".resources.limits: Required value: a " + base +
                 ".sliced request must set " + base + ".sliced: \"1\""};
  }
  auto n = keys.Count(".sliced", kMaxQuantity);
  if (!n) return n.failure();
  if (*n != 1) {
    return Error{keys.Refuse(".sliced",
                             "a logical slice request is always a single accelerator; "
                             "multi-accelerator logical slicing is not supported yet")};
  }
  const bool has_percent = keys.Has(".sliced.memory-percentage");
  const bool has_mib = keys.Has(".sliced.memory-mib");
  if (!has_percent && !has_mib) {
    return Error{path + ".resources.limits: Required value: a " + base +
                 ".sliced request must set " + base + ".sliced.memory-percentage or " + base +
                 ".sliced.memory-mib"};
  }
  if (has_percent && has_mib) {
    return Error{path + ".resources.limits: Forbidden: cannot set both " + base +
                 ".sliced.memory-percentage and " + base + ".sliced.memory-mib"};
  }
  if (has_percent) {
    auto p = keys.Count(".sliced.memory-percentage", 100);
    if (!p) return p.failure();
    r.memory_percentage = static_cast<uint32_t>(*p);
  } else {
    if (fold.card_memory_mib == 0) {
      return Error{path + ".resources.limits[" + base +
                   ".sliced.memory-mib]: Forbidden: the pool's card memory is unknown, so a MiB "
                   "budget cannot be folded; use " +
                   base + ".sliced.memory-percentage"};
    }
    auto m = keys.Count(".sliced.memory-mib", static_cast<int64_t>(fold.card_memory_mib));
    if (!m) return m.failure();
    r.memory_mib = static_cast<uint64_t>(*m);
  }
  if (keys.Has(".sliced.cores-percentage")) {
    auto cores = keys.Count(".sliced.cores-percentage", 100);
    if (!cores) return cores.failure();
    r.cores_percentage = static_cast<uint32_t>(*cores);
  }
  r.units = SliceUnits(r.memory_percentage, r.memory_mib, fold.card_memory_mib);
  return Ok{};
}

Status FoldPartitioned(const KeyReader& keys, const FoldContext& fold, Request& r) {
  const std::string& base = keys.base;
  const std::string& path = keys.c.path;
  const ResourceKind& kind = *keys.k.kind;
  if (kind.partition_kind.empty()) {
    return Error{path + ".resources.limits[" + base + ".partitioned]: Forbidden: " +
                     kind.manufacturer + " cards are not partitioned (hardware partitions " +
                     "exist for manufacturers whose plugin has a partition kind); request " + base +
                     " or " + base + ".sliced",
                 Code::kInvalidArgument};
  }
  if (!keys.Has(".partitioned")) {
    return Error{path + ".resources.limits: Required value: a " + base +
                 ".partitioned.<kind>-<profile> request must also set " + base +
                 ".partitioned: \"1\""};
  }
  auto n = keys.Count(".partitioned", kMaxQuantity);
  if (!n) return n.failure();
  if (*n != 1) {
    return Error{keys.Refuse(".partitioned",
                             "a partition request is always a single accelerator; request one "
                             "Pod per instance")};
  }
  if (keys.k.profiles.empty()) {
    return Error{path + ".resources.limits: Required value: a " + base +
                 ".partitioned request must name a profile, e.g. " + base +
                 ".partitioned.<kind>-<profile>"};
  }
  r.profile = keys.k.profiles.front();
  const std::string key = base + ".partitioned." + kind.partition_kind + "-" + r.profile;
  const json& value = keys.k.profile_values.at(r.profile);
  auto one = ParseCount(value, kMaxQuantity);
  if (!one) return Error{Invalid(path, key, value, one.error())};
  if (*one != 1) {
    return Error{
        Invalid(path, key, value, "a partition profile request must be exactly 1 instance")};
  }
  const PartitionProfile* profile = nullptr;
  std::string offered;
  for (const PartitionProfile& p : fold.offered_profiles) {
    if (p.name == r.profile) profile = &p;
    offered += (offered.empty() ? "" : " ") + p.name;
  }
  if (profile == nullptr || fold.card_memory_mib == 0) {
    return Error{path + ".resources.limits[" + key + "]: Unsupported value: \"" + r.profile +
                 "\": the pool offers no such partition profile; offered: [" + offered + "]"};
  }
  r.units = PartitionUnits(profile->memory_mib, fold.card_memory_mib);
  return Ok{};
}

// Validates one container's keys of one mode and folds them into a Request.
Result<Request> BuildRequest(const Container& c, const FoldContext& fold) {
  const Keys& k = *c.keys;
  Request r;
  r.manufacturer = k.kind->manufacturer;
  r.base = k.kind->base;
  r.mode = *k.modes.begin();
  const KeyReader keys{c, k, r.base};
  Status folded = Error{"a request needs a mode"};
  switch (r.mode) {
    case Mode::kExclusive:
      folded = FoldExclusive(keys, r);
      break;
    case Mode::kShared:
      folded = FoldShared(keys, r);
      break;
    case Mode::kSliced:
      folded = FoldSliced(keys, fold, r);
      break;
    case Mode::kPartitioned:
      folded = FoldPartitioned(keys, fold, r);
      break;
    case Mode::kNone:  // keys always name a mode
      break;
  }
  if (!folded) return folded.failure();
  return r;
}

}  // namespace

int64_t SliceUnits(uint32_t memory_percentage, uint64_t memory_mib, uint64_t card_memory_mib) {
  if (memory_percentage > 0) return static_cast<int64_t>(memory_percentage) * kCreditsPerPercent;
  if (card_memory_mib == 0) return 0;
  // 128-bit product: MiB x 1.6M overflows 64 bits only past 10^13 MiB, but be exact anyway.
  return static_cast<int64_t>(static_cast<unsigned __int128>(memory_mib) * kCardCredits /
                              card_memory_mib);
}

int64_t PartitionUnits(uint64_t profile_memory_mib, uint64_t card_memory_mib) {
  return std::min<int64_t>(SliceUnits(0, profile_memory_mib, card_memory_mib), kCardCredits);
}

Result<int64_t> ParseCount(const json& value, int64_t max) {
  if (!value.is_string() && !value.is_number()) return Error{"must be a quantity"};
  auto quantity = kube::Quantity::FromJson(value);
  // A count is digits: "2", or "2000m" as the apiserver may write it; never "2k" or "2Gi".
  if (!quantity || (!quantity->suffix().empty() && quantity->suffix() != "m"))
    return Error{"must be a whole number written in digits (no unit suffix)"};
  auto n = quantity->Whole();
  if (!n) return Error{"must be a whole number"};
  if (*n <= 0) return Error{"must be positive"};
  if (*n > max) return Error{"must be at most " + std::to_string(max)};
  return *n;
}

Result<std::vector<ContainerRequest>> ParsePodRequests(const json& pod,
                                                       const std::vector<ResourceKind>& kinds,
                                                       const FoldContext& fold) {
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) {
    return Error{"spec: Required value: the Pod has no spec"};
  }
  const json& spec = pod["spec"];
  std::vector<Container> containers;
  for (const char* list : {"initContainers", "containers"}) {
    auto it = spec.find(list);
    if (it == spec.end()) continue;
    if (!it->is_array())
      return Error{std::string("spec.") + list + ": Invalid value: must be a list"};
    for (size_t i = 0; i < it->size(); ++i) {
      const json& cj = (*it)[i];
      Container c;
      c.path = std::string("spec.") + list + "[" + std::to_string(i) + "]";
      if (!cj.is_object()) return Error{c.path + ": Invalid value: must be an object"};
      for (const char* field : {"name", "restartPolicy"}) {
        if (cj.contains(field) && !cj[field].is_string()) {
          return Error{c.path + "." + field + ": Invalid value: must be a string"};
        }
      }
      c.name = cj.contains("name") ? cj["name"].get<std::string>() : "";
      const bool restartable =
          cj.contains("restartPolicy") && cj["restartPolicy"].get<std::string>() == "Always";
      if (std::string(list) == "containers") {
        c.group = Container::kApp;
      } else {
        c.group = restartable ? Container::kSidecar : Container::kInit;
      }
      auto keys = ReadKeys(cj, c.path, kinds);
      if (!keys) return Error{keys.error()};
      c.keys = std::move(keys).value();
      containers.push_back(std::move(c));
    }
  }

  // Rule 7: a native sidecar holds no accelerator.
  for (const Container& c : containers) {
    if (c.group == Container::kSidecar && c.keys) {
      return Error{c.path +
                   ".resources.limits: Forbidden: a restartable init container (a native "
                   "sidecar) may not request an accelerator; move the request to an app "
                   "container"};
    }
  }
  // Rule 1: one mode (in the Pod and in each container), one container group.
  std::set<Mode> modes;
  bool init_requests = false, app_requests = false;
  for (const Container& c : containers) {
    if (!c.keys) continue;
    modes.insert(c.keys->modes.begin(), c.keys->modes.end());
    (c.group == Container::kInit ? init_requests : app_requests) = true;
  }
  if (modes.empty()) return std::vector<ContainerRequest>{};
  if (modes.size() > 1) {
    return Error{"spec: Forbidden: a Pod may request only one accelerator family, found " +
                 ModeList(modes)};
  }
  if (init_requests && app_requests) {
    return Error{
        "spec.initContainers: Forbidden: accelerator requests must sit in one container "
        "group; the init containers must give up theirs (devices are held for the Pod's "
        "lifetime and the scheduler charges max(sum of init, sum of app) once)"};
  }
  // Rule 4: one partition profile in the whole Pod.
  std::set<std::string> profiles;
  for (const Container& c : containers) {
    if (c.keys) profiles.insert(c.keys->profiles.begin(), c.keys->profiles.end());
  }
  if (profiles.size() > 1) {
    std::string list;
    for (const std::string& p : profiles) list += (list.empty() ? "" : " ") + p;
    return Error{"spec: Forbidden: a Pod may request only one partition profile, found [" + list +
                 "]"};
  }
  // Rule 6: at most one container asks for a slicing mode.
  const Mode mode = *modes.begin();
  if (mode == Mode::kSliced || mode == Mode::kPartitioned) {
    const auto slicing = std::count_if(containers.begin(), containers.end(),
                                       [](const Container& c) { return c.keys.has_value(); });
    if (slicing > 1) {
      return Error{"spec: Forbidden: at most one container may request a slicing family, found " +
                   std::to_string(slicing)};
    }
  }
  // Rules 2, 3, 5 and the budgets, per container.
  std::vector<ContainerRequest> out;
  for (const Container& c : containers) {
    if (!c.keys) continue;
    auto request = BuildRequest(c, fold);
    if (!request) return Error{request.error()};
    out.push_back({c.name, std::move(request).value()});
  }
  return out;
}

}  // namespace gpustack::ledger
