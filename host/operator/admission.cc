#include "host/operator/admission.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <variant>

#include "host/common/base64.h"
#include "host/common/json_path.h"
#include "host/kube/quantity.h"

namespace gpustack::op {
namespace {

std::vector<ledger::ResourceKind> KindsOf(const ManufacturerTable& table) {
  std::vector<ledger::ResourceKind> kinds;
  for (const auto& [key, m] : table) kinds.push_back(m.Kind());
  return kinds;
}

// The affinities a request implies: shared N >= 2 needs N free slots on one card (docs/decisions.md
// D1), a slice of U units a card with U free units.
struct FitNeeds {
  int64_t shared_slots = 0;
  int64_t sliced_units = 0;
};
FitNeeds NeedsOf(const std::vector<ledger::ContainerRequest>& requests) {
  FitNeeds needs;
  for (const auto& r : requests) {
    if (r.request.mode == ledger::Mode::kShared)
      needs.shared_slots = std::max<int64_t>(needs.shared_slots, r.request.count);
    if (r.request.mode == ledger::Mode::kSliced)
      needs.sliced_units = std::max(needs.sliced_units, r.request.units);
  }
  return needs;
}

// ANDs the fit requirements into `pod_spec`; true when it changed.
bool AddFitAffinity(Json& pod_spec, const FitNeeds& needs, const std::string& akey) {
  bool changed = false;
  if (needs.shared_slots >= 2)
    changed |= AddRequiredGt(pod_spec, kSharedFitPrefix + akey, needs.shared_slots - 1);
  if (needs.sliced_units > 0)
    changed |= AddRequiredGt(pod_spec, kSlicedFitPrefix + akey, needs.sliced_units - 1);
  return changed;
}

}  // namespace

std::string ManufacturerOf(const Json& instance_type, const ManufacturerTable& table) {
  if (std::string m = StringAt(instance_type, {"status", "detail", "manufacturer"}); !m.empty())
    return m;
  const std::string akey = StringAt(instance_type, {"spec", "acceleratorGroup"});
  for (const auto& [key, m] : table) {
    if (akey.rfind(key + "-", 0) == 0) return key;
  }
  return {};
}

namespace {

// The derived keys of one request, as the container must carry them.
std::map<std::string, std::string> DerivedKeys(const ledger::Request& r) {
  std::map<std::string, std::string> keys;
  if (r.mode == ledger::Mode::kSliced) {
    keys[r.base + ".sliced.units"] = std::to_string(r.units);
    keys[r.base + ".sliced.cores-percentage"] = std::to_string(r.cores_percentage);
  } else if (r.mode == ledger::Mode::kPartitioned) {
    keys[r.base + ".partitioned.units"] = std::to_string(r.units);
  }
  return keys;
}

// Whether a quantity the apiserver holds ("320k", canonical) is `value` ("320000").
bool SameQuantity(const Json& have, const std::string& value) {
  auto a = kube::MilliOf(have), b = kube::MilliOf(Json(value));
  return a && b && *a == *b;
}

// Finds the container named `name` in the Pod spec: its list and index.
std::optional<std::pair<std::string, size_t>> FindContainer(const Json& spec,
                                                            const std::string& name) {
  for (const char* list : {"initContainers", "containers"}) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      if ((*it)[i].is_object() && StringAt((*it)[i], {"name"}) == name) return {{list, i}};
    }
  }
  return std::nullopt;
}

// What a vendor's plugin says its cards cannot take (ABI 1.2), refused with the plugin's numbers.
std::optional<Verdict> VendorConstraints(const std::vector<ledger::ContainerRequest>& requests,
                                         const ManufacturerTable& table, const Json& spec) {
  for (const ledger::ContainerRequest& r : requests) {
    auto m = table.find(r.request.manufacturer);
    if (m == table.end()) continue;
    const std::string where = [&] {
      auto found = FindContainer(spec, r.container);
      return found ? "spec." + found->first + "[" + std::to_string(found->second) + "]"
                   : std::string("spec");
    }();
    const std::string& base = r.request.base;
    if (m->second.one_card_per_container && r.request.mode == ledger::Mode::kExclusive &&
        r.request.count > 1) {
      return Deny(403, where + ".resources.limits[" + base + "]: Invalid value: \"" +
                           std::to_string(r.request.count) + "\": a container takes at most one " +
                           m->first + " card (its plugin, " + m->second.origin + ", says so)");
    }
    const uint32_t min = m->second.min_slice_memory_percentage;
    if (min > 0 && r.request.mode == ledger::Mode::kSliced) {
      // A slice given in MiB is measured by its units: P % of a card is P x 16,000.
      const int64_t percent_x1000 = r.request.memory_percentage > 0
                                        ? int64_t{r.request.memory_percentage} * 1000
                                        : r.request.units * 1000 / ledger::kCreditsPerPercent;
      if (percent_x1000 < int64_t{min} * 1000) {
        const bool by_percent = r.request.memory_percentage > 0;
        return Deny(403, where + ".resources.limits[" + base +
                             (by_percent ? ".sliced.memory-percentage" : ".sliced.memory-mib") +
                             "]: Invalid value: \"" +
                             (by_percent ? std::to_string(r.request.memory_percentage)
                                         : std::to_string(r.request.memory_mib)) +
                             "\": " + m->first + " cards take slices of at least " +
                             std::to_string(min) + " % of their memory (its plugin, " +
                             m->second.origin + ", says so)");
      }
    }
  }
  return std::nullopt;
}

struct PodFacts {
  std::string queue;
  std::shared_ptr<const Json> instance_type;
  std::vector<ledger::ContainerRequest> requests;
};

// The rules every Pod webhook applies; a denial when they fail, nothing when the Pod is not ours.
std::variant<PodFacts, Verdict> ReadPod(const AdmissionRequest& request,
                                        const AdmissionView& view) {
  if (request.kind != "Pod" || request.operation != "CREATE" || !request.object.is_object())
    return Verdict{};
  PodFacts facts;
  facts.queue = StringAt(request.object, {"metadata", "labels", kQueueNameLabel});
  if (facts.queue.empty())
    return Verdict{};  // not queued: no rule, no fold (docs/behaviour.md §4.1)
  if (view.instance_type_by_entrance)
    facts.instance_type = view.instance_type_by_entrance(facts.queue);
  auto parsed = ledger::ParsePodRequests(request.object, KindsOf(view.manufacturers),
                                         FoldContextOf(facts.instance_type.get()));
  if (!parsed) return Deny(403, parsed.error());
  facts.requests = std::move(parsed).value();
  if (auto refused = VendorConstraints(facts.requests, view.manufacturers, request.object["spec"]))
    return *refused;
  if (facts.requests.empty() || !facts.instance_type) return facts;
  const Json& it = *facts.instance_type;
  const std::string it_name = StringAt(it, {"metadata", "name"});
  const std::string& base = facts.requests.front().request.base;
  if (!BoolAt(it, {"spec", "acceleratable"})) {
    return Deny(403, "metadata.labels[" + std::string(kQueueNameLabel) + "]: Forbidden: queue " +
                         facts.queue + " fronts the CPU-only InstanceType " + it_name +
                         ", which has no " + base +
                         "; use the entrance of an accelerated InstanceType "
                         "(kubectl get instancetypes)");
  }
  const std::string manufacturer = ManufacturerOf(it, view.manufacturers);
  if (!manufacturer.empty() && manufacturer != facts.requests.front().request.manufacturer) {
    return Deny(403, "metadata.labels[" + std::string(kQueueNameLabel) + "]: Forbidden: queue " +
                         facts.queue + " fronts InstanceType " + it_name + " (" + manufacturer +
                         " cards), which has no " + base);
  }
  return facts;
}

Verdict Allow() { return Verdict{}; }

bool QuotaReserved(const Json& workload) {
  const Json* status = ObjectAt(workload, {"status"});
  if (status == nullptr) return false;
  if (status->contains("admission")) return true;
  for (const Json& c : status->value("conditions", Json::array())) {
    if (StringAt(c, {"type"}) == "QuotaReserved" && StringAt(c, {"status"}) == "True") return true;
  }
  return false;
}

}  // namespace

Verdict Deny(int code, std::string message) {
  Verdict v;
  v.allowed = false;
  v.code = code;
  v.message = std::move(message);
  return v;
}

Result<AdmissionRequest> DecodeReview(std::string_view body) {
  Json review = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) return Error{"the body is not JSON"};
  if (!review.is_object()) return Error{"the body is not a JSON object"};
  if (StringAt(review, {"apiVersion"}) != "admission.k8s.io/v1" ||
      StringAt(review, {"kind"}) != "AdmissionReview")
    return Error{"not an admission.k8s.io/v1 AdmissionReview"};
  const Json* r = ObjectAt(review, {"request"});
  if (r == nullptr) return Error{"the AdmissionReview has no request"};
  AdmissionRequest out;
  out.uid = StringAt(*r, {"uid"});
  if (out.uid.empty()) return Error{"the AdmissionReview request has no uid"};
  out.group = StringAt(*r, {"kind", "group"});
  out.version = StringAt(*r, {"kind", "version"});
  out.kind = StringAt(*r, {"kind", "kind"});
  out.resource = StringAt(*r, {"resource", "resource"});
  out.sub_resource = StringAt(*r, {"subResource"});
  out.operation = StringAt(*r, {"operation"});
  out.name = StringAt(*r, {"name"});
  out.ns = StringAt(*r, {"namespace"});
  if (out.kind.empty() || out.operation.empty())
    return Error{"the AdmissionReview request names no kind or operation"};
  for (const char* field : {"object", "oldObject"}) {
    auto it = r->find(field);
    if (it == r->end() || it->is_null()) continue;
    if (!it->is_object()) return Error{std::string("request.") + field + " is not an object"};
    (std::string(field) == "object" ? out.object : out.old_object) = std::move(*it);
  }
  if (auto it = r->find("dryRun"); it != r->end() && it->is_boolean())
    out.dry_run = it->get<bool>();
  return out;
}

std::string EncodeReview(const std::string& uid, const Verdict& verdict) {
  Json response = {{"uid", uid}, {"allowed", verdict.allowed}};
  if (!verdict.allowed) {
    response["status"] = {{"code", verdict.code},
                          {"message", verdict.message},
                          {"reason", verdict.code == 403   ? "Forbidden"
                                     : verdict.code == 400 ? "BadRequest"
                                                           : "InternalError"}};
  }
  if (verdict.allowed && !verdict.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = EncodeBase64(verdict.patch.dump());
  }
  if (!verdict.warnings.empty()) response["warnings"] = verdict.warnings;
  return Json{
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}}
      .dump();
}

ledger::FoldContext FoldContextOf(const Json* instance_type) {
  ledger::FoldContext fold;
  if (instance_type == nullptr) return fold;
  const Json* detail = ObjectAt(*instance_type, {"status", "detail"});
  if (detail == nullptr) return fold;
  auto mib = [](const Json& object, const char* key) -> uint64_t {
    auto m = object.find(key);
    if (m == object.end() || !m->is_number_integer() || m->get<int64_t>() < 0) return 0;
    return m->get<uint64_t>();
  };
  fold.card_memory_mib = mib(*detail, "memory");
  const Json* physical = ObjectAt(*detail, {"slicedDetail", "physical"});
  if (physical != nullptr) {
    for (const Json& p : physical->value("profiles", Json::array())) {
      if (!p.is_object()) continue;
      ledger::PartitionProfile profile;
      profile.name = StringAt(p, {"name"});
      profile.memory_mib = mib(p, "memoryMib");
      if (!profile.name.empty()) fold.offered_profiles.push_back(std::move(profile));
    }
  }
  return fold;
}

bool AddRequiredGt(Json& pod_spec, const std::string& key, int64_t value) {
  const Json requirement = {
      {"key", key}, {"operator", "Gt"}, {"values", Json::array({std::to_string(value)})}};
  Json& affinity = pod_spec["affinity"];
  if (!affinity.is_object()) affinity = Json::object();
  Json& node = affinity["nodeAffinity"];
  if (!node.is_object()) node = Json::object();
  Json& required = node["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!required.is_object()) required = Json::object();
  Json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  bool changed = false;
  for (Json& term : terms) {
    if (!term.is_object()) term = Json::object();
    Json& expressions = term["matchExpressions"];
    if (!expressions.is_array()) expressions = Json::array();
    if (std::find(expressions.begin(), expressions.end(), requirement) != expressions.end())
      continue;
    // One requirement per fit key: a stale value (a Workload updated) is replaced.
    expressions.erase(std::remove_if(expressions.begin(), expressions.end(),
                                     [&](const Json& e) { return StringAt(e, {"key"}) == key; }),
                      expressions.end());
    expressions.push_back(requirement);
    changed = true;
  }
  return changed;
}

Verdict MutatePod(const AdmissionRequest& request, const AdmissionView& view) {
  auto read = ReadPod(request, view);
  if (auto* verdict = std::get_if<Verdict>(&read)) return *verdict;
  const PodFacts& facts = std::get<PodFacts>(read);
  if (facts.requests.empty()) return Allow();
  Json spec = request.object["spec"];
  Verdict verdict;
  for (const ledger::ContainerRequest& r : facts.requests) {
    auto where = FindContainer(spec, r.container);
    if (!where) continue;
    Json& container = spec[where->first][where->second];
    Json resources = container.value("resources", Json::object());
    if (!resources.is_object()) resources = Json::object();
    bool changed = false;
    for (const auto& [key, value] : DerivedKeys(r.request)) {
      for (const char* section : {"limits", "requests"}) {
        Json& map = resources[section];
        if (!map.is_object()) map = Json::object();
        if (!SameQuantity(map.value(key, Json()), value)) {
          map[key] = value;
          changed = true;
        }
      }
    }
    if (changed) {
      container["resources"] = resources;
      verdict.patch.push_back(
          {{"op", "add"},
           {"path", "/spec/" + where->first + "/" + std::to_string(where->second) + "/resources"},
           {"value", resources}});
    }
  }
  const FitNeeds needs = NeedsOf(facts.requests);
  if (needs.shared_slots >= 2 && !facts.instance_type) {
    return Deny(403, "metadata.labels[" + std::string(kQueueNameLabel) +
                         "]: Forbidden: a shared request of " + std::to_string(needs.shared_slots) +
                         " slots needs the InstanceType fronting queue " + facts.queue +
                         ", and none does");
  }
  if (facts.instance_type && !view.nodes_pinned) {
    const std::string akey = StringAt(*facts.instance_type, {"spec", "acceleratorGroup"});
    if (!akey.empty() && AddFitAffinity(spec, needs, akey)) {
      verdict.patch.push_back(
          {{"op", "add"}, {"path", "/spec/affinity"}, {"value", spec["affinity"]}});
    }
  }
  return verdict;
}

Verdict ValidatePod(const AdmissionRequest& request, const AdmissionView& view) {
  auto read = ReadPod(request, view);
  if (auto* verdict = std::get_if<Verdict>(&read)) return *verdict;
  const PodFacts& facts = std::get<PodFacts>(read);
  const Json& spec = request.object["spec"];
  for (const ledger::ContainerRequest& r : facts.requests) {
    auto where = FindContainer(spec, r.container);
    if (!where) continue;
    const Json& container = spec[where->first][where->second];
    for (const auto& [key, value] : DerivedKeys(r.request)) {
      const Json* limits = ObjectAt(container, {"resources", "limits"});
      const Json have = limits != nullptr ? limits->value(key, Json()) : Json();
      if (!SameQuantity(have, value)) {
        return Deny(403, "spec." + where->first + "[" + std::to_string(where->second) +
                             "].resources.limits[" + key + "]: Invalid value: \"" +
                             (have.is_string() ? have.get<std::string>() : have.dump()) +
                             "\": must be " + value +
                             ", as the gpustack Pod webhook derives it (something changed it "
                             "after that webhook ran)");
      }
    }
  }
  return Allow();
}

Verdict MutateWorkload(const AdmissionRequest& request, const AdmissionView& view) {
  if (!view.settings.workload_fit_affinity || request.kind != "Workload" ||
      !request.object.is_object())
    return Allow();
  if (request.operation != "CREATE" && request.operation != "UPDATE") return Allow();
  if (request.operation == "UPDATE" && QuotaReserved(request.object)) return Allow();
  const std::string queue = StringAt(request.object, {"spec", "queueName"});
  if (queue.empty() || !view.instance_type_by_entrance) return Allow();
  auto it = view.instance_type_by_entrance(queue);
  if (!it) return Allow();
  const std::string akey = StringAt(*it, {"spec", "acceleratorGroup"});
  if (akey.empty()) return Allow();
  const Json* spec = ObjectAt(request.object, {"spec"});
  if (spec == nullptr) return Allow();
  const Json pod_sets = spec->value("podSets", Json::array());
  if (!pod_sets.is_array()) return Allow();
  const auto kinds = KindsOf(view.manufacturers);
  const auto fold = FoldContextOf(it.get());
  Verdict verdict;
  for (size_t i = 0; i < pod_sets.size(); ++i) {
    const Json* template_spec = ObjectAt(pod_sets[i], {"template", "spec"});
    if (template_spec == nullptr) continue;
    auto parsed = ledger::ParsePodRequests(Json{{"spec", *template_spec}}, kinds, fold);
    if (!parsed || parsed->empty()) continue;  // gate 1 judged the Pod; this only narrows
    Json pod_spec = *template_spec;
    if (AddFitAffinity(pod_spec, NeedsOf(*parsed), akey)) {
      verdict.patch.push_back(
          {{"op", "add"},
           {"path", "/spec/podSets/" + std::to_string(i) + "/template/spec/affinity"},
           {"value", pod_spec["affinity"]}});
    }
  }
  return verdict;
}

namespace {

const std::regex kGiQuantity("^[1-9][0-9]*Gi$");
const std::regex kWholeNumber("^[1-9][0-9]*$");

std::string Quoted(const Json& value) {
  return value.is_string() ? "\"" + value.get<std::string>() + "\"" : value.dump();
}

}  // namespace

Verdict MutateInstanceType(const AdmissionRequest& request, const AdmissionView&) {
  if (request.kind != "InstanceType" || request.operation != "CREATE" ||
      !request.object.is_object())
    return Allow();
  const Json& object = request.object;
  const Json* spec_at = ObjectAt(object, {"spec"});
  if (spec_at == nullptr || ObjectAt(object, {"metadata"}) == nullptr)
    return Allow();  // validation says why
  const Json& spec = *spec_at;
  Verdict verdict;
  std::string general = StringAt(spec, {"generalGroup"});
  if (general.empty()) {
    general = "generic";
    verdict.patch.push_back({{"op", "add"}, {"path", "/spec/generalGroup"}, {"value", general}});
  }
  Json labels = object.value("metadata", Json::object()).value("labels", Json::object());
  if (!labels.is_object()) labels = Json::object();
  const Json before = labels;
  const bool acceleratable = BoolAt(spec, {"acceleratable"});
  auto stamp = [&](const std::string& key, const std::string& value) { labels[key] = value; };
  if (spec.contains("os") && spec["os"].is_string()) stamp("kubernetes.io/os", spec["os"]);
  if (spec.contains("arch") && spec["arch"].is_string()) stamp("kubernetes.io/arch", spec["arch"]);
  stamp(kAcceleratableLabel, acceleratable ? "true" : "false");
  const std::string akey = StringAt(spec, {"acceleratorGroup"});
  if (acceleratable && !akey.empty()) stamp(kAcceleratablePrefix + akey, "true");
  if (general != "generic") stamp(kGeneralPrefix + general, "true");
  if (const std::string name = StringAt(object, {"metadata", "name"}); !name.empty())
    stamp(kEntranceLabel, EntranceName(name));
  if (labels != before)
    verdict.patch.push_back({{"op", "add"}, {"path", "/metadata/labels"}, {"value", labels}});
  return verdict;
}

Verdict ValidateInstanceType(const AdmissionRequest& request, const AdmissionView& view) {
  if (request.kind != "InstanceType" || !request.object.is_object()) return Allow();
  const Json& object = request.object;
  if (!StringAt(object, {"metadata", "deletionTimestamp"}).empty()) return Allow();
  const Json* spec = ObjectAt(object, {"spec"});
  if (spec == nullptr) return Deny(400, "spec: Required value");
  if (request.operation == "UPDATE") {
    const Json* old_spec = ObjectAt(request.old_object, {"spec"});
    if (old_spec == nullptr) return Allow();
    std::set<std::string> keys;
    for (const auto& [k, v] : spec->items()) keys.insert(k);
    for (const auto& [k, v] : old_spec->items()) keys.insert(k);
    for (const std::string& k : keys) {
      if (k == "displayName" || k == "inactive") continue;
      const Json now = spec->value(k, Json()), was = old_spec->value(k, Json());
      if (now != was) {
        return Deny(403,
                    "spec." + k + ": Invalid value: " + Quoted(now) +
                        ": field is immutable (only displayName and inactive may change; create "
                        "a new InstanceType instead)");
      }
    }
    return Allow();
  }
  if (request.operation != "CREATE") return Allow();
  auto text = [&](const char* field) -> std::optional<std::string> {
    auto it = spec->find(field);
    if (it == spec->end() || it->is_null()) return std::nullopt;
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  if (auto d = text("displayName"); d && d->size() > 64)
    return Deny(400, "spec.displayName: Too long: may not be longer than 64");
  if (auto d = text("description"); d && d->size() > 1024)
    return Deny(400, "spec.description: Too long: may not be longer than 1024");
  const bool acceleratable = BoolAt(*spec, {"acceleratable"});
  const auto group = text("acceleratorGroup");
  if (acceleratable && (!group || group->empty()))
    return Deny(400,
                "spec.acceleratorGroup: Required value: an acceleratable InstanceType names "
                "its accelerator group, e.g. nvidia-a10g");
  if (!acceleratable && group && !group->empty())
    return Deny(400,
                "spec.acceleratorGroup: Forbidden: only an acceleratable InstanceType has "
                "an accelerator group");
  for (const char* field : {"os", "arch"}) {
    if (auto v = text(field); !v || v->empty())
      return Deny(400, std::string("spec.") + field + ": Required value");
  }
  const Json* unit = ObjectAt(*spec, {"unitResources"});
  if (unit == nullptr) return Deny(400, "spec.unitResources: Required value");
  const std::string cpu =
      unit->contains("cpu")
          ? (*unit)["cpu"].is_string() ? (*unit)["cpu"].get<std::string>() : (*unit)["cpu"].dump()
          : "";
  if (cpu.empty()) return Deny(400, "spec.unitResources.cpu: Required value");
  if (!acceleratable && cpu != "1")
    return Deny(400, "spec.unitResources.cpu: Invalid value: \"" + cpu +
                         "\": a CPU-only InstanceType's unit is exactly 1 core");
  if (acceleratable && !std::regex_match(cpu, kWholeNumber))
    return Deny(400, "spec.unitResources.cpu: Invalid value: \"" + cpu +
                         "\": must be a whole number of cores, without a unit (e.g. 8)");
  if (!unit->contains("ram")) return Deny(400, "spec.unitResources.ram: Required value");
  auto ram = kube::MilliOf((*unit)["ram"]);
  if (!ram || *ram <= 0)
    return Deny(400, "spec.unitResources.ram: Invalid value: " + Quoted((*unit)["ram"]) +
                         ": must be a positive quantity (e.g. 64Gi)");
  const auto storage = text("localStorage");
  if (!storage) return Deny(400, "spec.localStorage: Required value");
  if (!std::regex_match(*storage, kGiQuantity))
    return Deny(400, "spec.localStorage: Invalid value: \"" + *storage +
                         "\": must be a whole number of Gi (case-sensitive), e.g. 100Gi");
  Verdict verdict;
  if (acceleratable && view.accelerator_group_known && !view.accelerator_group_known(*group)) {
    verdict.warnings.push_back("no managed node has " + *group +
                               " cards yet: this InstanceType's queue admits nothing until one "
                               "joins (kubectl get instancetypes lists the pools there are)");
  }
  return verdict;
}

}  // namespace gpustack::op

namespace gpustack::op {
namespace {

// The whole number at `path` (an integer or a quantity); 0 when there is none.
int64_t NumberAt(const Json& object, JsonPath path) {
  const Json& at = JsonAt(object, path);
  if (at.is_number_integer()) return at.get<int64_t>();
  return kube::WholeOf(at).value_or(0);
}

struct InstanceAsk {
  int64_t accelerator = 0;  // cards (0: none asked)
  bool accelerator_given = false;
  int64_t memory_percentage = 0, cores_percentage = 0;
  std::string profile;
};

// What share of one unit the Instance takes, in thousandths: N cards x 1000, a slice its memory
// percentage x 10, a partition its profile's memory over the card's.
int64_t UnitShareMilli(const InstanceAsk& ask, const Json& type) {
  if (!ask.profile.empty()) {
    const ledger::FoldContext fold = FoldContextOf(&type);
    for (const ledger::PartitionProfile& p : fold.offered_profiles) {
      if (p.name == ask.profile && fold.card_memory_mib > 0)
        return std::max<int64_t>(1,
                                 static_cast<int64_t>(p.memory_mib * 1000 / fold.card_memory_mib));
    }
    return 1000;
  }
  if (ask.memory_percentage > 0) return ask.memory_percentage * 10;
  return std::max<int64_t>(1, ask.accelerator) * 1000;
}

InstanceAsk AskOf(const Json& resources) {
  InstanceAsk ask;
  if (resources.is_object() && resources.contains("accelerator")) {
    ask.accelerator_given = true;
    ask.accelerator = kube::WholeOf(resources["accelerator"]).value_or(-1);
  }
  ask.memory_percentage = IntAt(resources, {"acceleratorSlicedMemoryPercentage"});
  ask.cores_percentage = IntAt(resources, {"acceleratorSlicedCoresPercentage"});
  ask.profile = StringAt(resources, {"acceleratorPartitionedProfile"});
  return ask;
}

// The spec fields a running Instance cannot change (its Pod would have to be made again).
constexpr const char* kTemplateFields[] = {"type",
                                           "image",
                                           "imagePullPolicy",
                                           "command",
                                           "privileged",
                                           "ports",
                                           "env",
                                           "resources",
                                           "volumeMount",
                                           "imagePullSecret",
                                           "volume",
                                           "additionalVolumes",
                                           "sshPublicKey",
                                           "nodeName"};

}  // namespace

Json DefaultedInstanceResources(const Json& resources_in, const Json& type) {
  Json resources = resources_in.is_object() ? resources_in : Json::object();
  const bool accelerated = JsonAt(type, {"spec", "acceleratable"}) == true;
  InstanceAsk ask = AskOf(resources);
  if (accelerated && !ask.accelerator_given) {
    resources["accelerator"] = 1;
    ask.accelerator = 1;
  }
  if (ask.memory_percentage > 0 && ask.cores_percentage == 0)
    resources["acceleratorSlicedCoresPercentage"] = 100;  // docs/decisions.md D6
  const Json unit = JsonAt(type, {"spec", "unitResources"}).is_object()
                        ? JsonAt(type, {"spec", "unitResources"})
                        : Json::object();
  const int64_t share = accelerated ? UnitShareMilli(ask, type) : 1000;
  if (!resources.contains("cpu")) {
    if (auto cpu = kube::MilliOf(unit.value("cpu", Json())))
      resources["cpu"] = kube::FormatMilli(std::max<int64_t>(1, *cpu * share / 1000));
  }
  if (!resources.contains("ram")) {
    if (auto ram = kube::MilliOf(unit.value("ram", Json())))
      resources["ram"] = kube::FormatBytes(*ram / 1000 * share / 1000);
  }
  return resources;
}

Verdict MutateInstance(const AdmissionRequest& request, const AdmissionView& view) {
  if (request.kind != "Instance" || !request.object.is_object() ||
      (request.operation != "CREATE" && request.operation != "UPDATE"))
    return Verdict{};
  const Json* spec = ObjectAt(request.object, {"spec"});
  if (spec == nullptr || !view.instance_type_by_name) return Verdict{};
  auto type = view.instance_type_by_name(StringAt(*spec, {"type"}));
  if (!type) return Verdict{};  // validation names it
  const Json before = spec->value("resources", Json::object());
  if (!before.is_object()) return Verdict{};
  const Json resources = DefaultedInstanceResources(before, *type);
  Verdict verdict;
  if (resources != before)
    verdict.patch.push_back({{"op", "add"}, {"path", "/spec/resources"}, {"value", resources}});
  return verdict;
}

namespace {

// What the Instance rules read of one request.
struct InstanceCase {
  const AdmissionView& view;
  const Json& spec;
  const Json* old_spec;  // on UPDATE
  const Json* old_object;
  // Known once the type is looked up (the resource rules only).
  std::string type_name{};
  const Json* type = nullptr;
  Json resources{};
  InstanceAsk ask{};
  bool accelerated = false;
  std::string manufacturer{};  // of the type's cards
  const Manufacturer* vendor = nullptr;
};
using InstanceRule = std::optional<Verdict> (*)(const InstanceCase&);

// A running Instance's Pod template is fixed: it stops before it changes.
std::optional<Verdict> RunningTemplateIsFixed(const InstanceCase& c) {
  if (c.old_spec == nullptr || BoolAt(*c.old_spec, {"stop"})) return std::nullopt;
  for (const char* field : kTemplateFields) {
    if (c.spec.value(field, Json()) != c.old_spec->value(field, Json())) {
      return Deny(403, std::string("spec.") + field +
                           ": Forbidden: stop the Instance first (spec.stop: true); a running "
                           "Instance's " +
                           field + " cannot change");
    }
  }
  return std::nullopt;
}

// A stopped Instance starts again only once it has stopped.
std::optional<Verdict> StartsOnlyWhenStopped(const InstanceCase& c) {
  if (c.old_spec == nullptr || !BoolAt(*c.old_spec, {"stop"}) || BoolAt(c.spec, {"stop"}))
    return std::nullopt;
  const std::string phase = StringAt(*c.old_object, {"status", "phase"});
  if (phase == "Stopped") return std::nullopt;
  return Deny(403, "spec.stop: Forbidden: the Instance is " +
                       (phase.empty() ? std::string("not Stopped yet") : phase) +
                       "; it can start again once its phase is Stopped");
}

std::optional<Verdict> PrivilegedNeedsTheSetting(const InstanceCase& c) {
  if (!BoolAt(c.spec, {"privileged"}) || c.view.settings.instance_privileged_allowed ||
      (c.old_spec != nullptr && BoolAt(*c.old_spec, {"privileged"})))
    return std::nullopt;
  return Deny(403,
              "spec.privileged: Forbidden: privileged Instances are not allowed here (an "
              "administrator can allow them with the setting instance-privileged-allowed)");
}

std::optional<Verdict> HostPathsNeedTheSetting(const InstanceCase& c) {
  const Json& volumes = JsonAt(c.spec, {"additionalVolumes"});
  if (!volumes.is_array() || c.view.settings.instance_host_path_volume_allowed) return std::nullopt;
  for (size_t i = 0; i < volumes.size(); ++i) {
    if (volumes[i].is_object() && volumes[i].contains("hostPath"))
      return Deny(403, "spec.additionalVolumes[" + std::to_string(i) +
                           "].hostPath: Forbidden: host paths are not allowed here (an "
                           "administrator can allow them with the setting "
                           "instance-host-path-volume-allowed)");
  }
  return std::nullopt;
}

std::optional<Verdict> CardsAreWholeNumbers(const InstanceCase& c) {
  if (c.ask.accelerator >= 0) return std::nullopt;
  return Deny(400, "spec.resources.accelerator: Invalid value: " +
                       c.resources["accelerator"].dump() + ": must be a whole number of cards");
}

std::optional<Verdict> CpuOnlyTypesTakeNoCard(const InstanceCase& c) {
  const bool asks_card =
      c.ask.accelerator > 0 || c.ask.memory_percentage > 0 || !c.ask.profile.empty();
  if (c.accelerated || !asks_card) return std::nullopt;
  return Deny(
      403, "spec.resources.accelerator: Forbidden: InstanceType " + c.type_name + " is CPU-only");
}

std::optional<Verdict> PartitionOrSliceNotBoth(const InstanceCase& c) {
  if (c.ask.profile.empty() || c.ask.memory_percentage == 0) return std::nullopt;
  return Deny(403,
              "spec.resources: Forbidden: a hardware partition and a logical slice percentage are "
              "mutually exclusive");
}

std::optional<Verdict> ASliceIsOneCard(const InstanceCase& c) {
  if ((c.ask.profile.empty() && c.ask.memory_percentage == 0) || c.ask.accelerator == 1)
    return std::nullopt;
  return Deny(400,
              "spec.resources.accelerator: Invalid value: " + std::to_string(c.ask.accelerator) +
                  ": a slice or a partition is always exactly 1 accelerator");
}

std::optional<Verdict> TheProfileIsOffered(const InstanceCase& c) {
  if (!c.accelerated || c.ask.profile.empty()) return std::nullopt;
  if (c.vendor != nullptr && c.vendor->partition_kind.empty())
    return Deny(403, "spec.resources.acceleratorPartitionedProfile: Forbidden: " + c.manufacturer +
                         " cards cannot be partitioned");
  std::string offered;
  for (const ledger::PartitionProfile& p : FoldContextOf(c.type).offered_profiles) {
    if (p.name == c.ask.profile) return std::nullopt;
    offered += (offered.empty() ? "" : " ") + p.name;
  }
  return Deny(400, "spec.resources.acceleratorPartitionedProfile: Unsupported value: \"" +
                       c.ask.profile + "\": InstanceType " + c.type_name + " offers [" + offered +
                       "]");
}

// The vendor's own limits (ABI 1.2), as for a Pod.
std::optional<Verdict> TheVendorsLimits(const InstanceCase& c) {
  if (!c.accelerated || c.vendor == nullptr) return std::nullopt;
  const uint32_t min = c.vendor->min_slice_memory_percentage;
  if (c.ask.memory_percentage > 0 && c.ask.memory_percentage < min)
    return Deny(403, "spec.resources.acceleratorSlicedMemoryPercentage: Invalid value: " +
                         std::to_string(c.ask.memory_percentage) + ": " + c.manufacturer +
                         " cards take slices of at least " + std::to_string(min) +
                         " % of their memory (its plugin says so)");
  if (c.vendor->one_card_per_container && c.ask.accelerator > 1)
    return Deny(403, "spec.resources.accelerator: Invalid value: " +
                         std::to_string(c.ask.accelerator) + ": an Instance takes at most one " +
                         c.manufacturer + " card (its plugin says so)");
  return std::nullopt;
}

std::optional<Verdict> SlicesAreOffered(const InstanceCase& c) {
  if (!c.accelerated || c.ask.memory_percentage == 0 ||
      NumberAt(*c.type, {"status", "detail", "slicedDetail", "logical", "count"}) != 0)
    return std::nullopt;
  const bool partitioned =
      NumberAt(*c.type, {"status", "detail", "slicedDetail", "physical", "count"}) > 0;
  return Deny(403, "spec.resources.acceleratorSlicedMemoryPercentage: Forbidden: InstanceType " +
                       c.type_name + " has no card that takes logical slices" +
                       (partitioned ? "; its cards are partitioned: ask for "
                                      "acceleratorPartitionedProfile instead"
                                    : ""));
}

std::optional<Verdict> NoMoreCardsThanThePoolHas(const InstanceCase& c) {
  if (!c.accelerated || !c.ask.profile.empty() || c.ask.memory_percentage != 0) return std::nullopt;
  const int64_t capacity = NumberAt(*c.type, {"status", "accelerator", "capacity"});
  if (c.ask.accelerator <= capacity) return std::nullopt;
  return Deny(403,
              "spec.resources.accelerator: Invalid value: " + std::to_string(c.ask.accelerator) +
                  ": InstanceType " + c.type_name + " has " + std::to_string(capacity) +
                  " whole card(s) in all (an Instance waits while they are busy, never for "
                  "more than there are)");
}

std::optional<Verdict> RamFitsTheUnit(const InstanceCase& c) {
  if (!c.resources.contains("ram")) return std::nullopt;
  const Json& unit_ram = JsonAt(*c.type, {"spec", "unitResources", "ram"});
  auto ram = kube::MilliOf(c.resources["ram"]);
  auto limit = kube::MilliOf(unit_ram);
  const int64_t count = c.accelerated ? std::max<int64_t>(1, c.ask.accelerator) : 1;
  if (!ram) return Deny(400, "spec.resources.ram: Invalid value: must be a quantity");
  if (!limit || *ram <= *limit * count) return std::nullopt;
  return Deny(403, "spec.resources.ram: Invalid value: " + c.resources["ram"].dump() +
                       ": at most " + (unit_ram.is_string() ? unit_ram.get<std::string>() : "") +
                       " x " + std::to_string(count) + " on InstanceType " + c.type_name);
}

std::optional<Verdict> StorageFitsTheType(const InstanceCase& c) {
  if (!c.resources.contains("localStorage")) return std::nullopt;
  const Json& type_storage = JsonAt(*c.type, {"spec", "localStorage"});
  auto storage = kube::MilliOf(c.resources["localStorage"]);
  auto limit = kube::MilliOf(type_storage);
  if (!storage) return Deny(400, "spec.resources.localStorage: Invalid value: must be a quantity");
  if (!limit || *storage <= *limit) return std::nullopt;
  return Deny(403,
              "spec.resources.localStorage: Invalid value: " + c.resources["localStorage"].dump() +
                  ": at most " + (type_storage.is_string() ? type_storage.get<std::string>() : "") +
                  " on InstanceType " + c.type_name);
}

std::optional<Verdict> CpuFitsACpuOnlyType(const InstanceCase& c) {
  if (c.accelerated || !c.resources.contains("cpu")) return std::nullopt;
  auto cpu = kube::MilliOf(c.resources["cpu"]);
  const int64_t capacity = NumberAt(*c.type, {"status", "cpu", "capacity"});
  if (!cpu) return Deny(400, "spec.resources.cpu: Invalid value: must be a quantity");
  if (*cpu <= capacity * 1000) return std::nullopt;
  return Deny(403, "spec.resources.cpu: Invalid value: " + c.resources["cpu"].dump() +
                       ": InstanceType " + c.type_name + " has " + std::to_string(capacity) +
                       " cores in all");
}

// Every create and update: what a running Instance may not do, and what the settings allow.
constexpr InstanceRule kLifecycleRules[] = {&RunningTemplateIsFixed, &StartsOnlyWhenStopped,
                                            &PrivilegedNeedsTheSetting, &HostPathsNeedTheSetting};
// When a grant is taken (a create, a change of type or resources, a start): the resources must
// make sense on the type's pool, refused at admission rather than left Pending.
constexpr InstanceRule kResourceRules[] = {
    &CardsAreWholeNumbers, &CpuOnlyTypesTakeNoCard,    &PartitionOrSliceNotBoth,
    &ASliceIsOneCard,      &TheProfileIsOffered,       &TheVendorsLimits,
    &SlicesAreOffered,     &NoMoreCardsThanThePoolHas, &RamFitsTheUnit,
    &StorageFitsTheType,   &CpuFitsACpuOnlyType};

bool TakesAGrant(const InstanceCase& c) {
  return c.old_spec == nullptr ||
         c.spec.value("type", Json()) != c.old_spec->value("type", Json()) ||
         c.spec.value("resources", Json()) != c.old_spec->value("resources", Json()) ||
         (BoolAt(*c.old_spec, {"stop"}) && !BoolAt(c.spec, {"stop"}));
}

}  // namespace

Verdict ValidateInstance(const AdmissionRequest& request, const AdmissionView& view) {
  if (request.kind != "Instance" || !request.object.is_object()) return Verdict{};
  if (request.operation != "CREATE" && request.operation != "UPDATE") return Verdict{};
  if (!StringAt(request.object, {"metadata", "deletionTimestamp"}).empty()) return Verdict{};
  const Json* spec = ObjectAt(request.object, {"spec"});
  if (spec == nullptr) return Deny(400, "spec: Required value");
  InstanceCase c{view, *spec,
                 request.operation == "UPDATE" ? ObjectAt(request.old_object, {"spec"}) : nullptr,
                 &request.old_object};
  for (InstanceRule rule : kLifecycleRules)
    if (auto denied = rule(c)) return *denied;
  if (!TakesAGrant(c)) return Verdict{};
  c.type_name = StringAt(*spec, {"type"});
  auto type = view.instance_type_by_name ? view.instance_type_by_name(c.type_name) : nullptr;
  if (!type)
    return Deny(400, "spec.type: Not found: \"" + c.type_name +
                         "\": no such InstanceType (kubectl get instancetypes)");
  c.type = type.get();
  c.resources = spec->value("resources", Json::object());
  c.ask = AskOf(c.resources);
  c.accelerated = JsonAt(*type, {"spec", "acceleratable"}) == true;
  c.manufacturer = ManufacturerOf(*type, view.manufacturers);
  if (auto m = view.manufacturers.find(c.manufacturer); m != view.manufacturers.end())
    c.vendor = &m->second;
  for (InstanceRule rule : kResourceRules)
    if (auto denied = rule(c)) return *denied;
  return Verdict{};
}

}  // namespace gpustack::op
