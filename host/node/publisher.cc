#include "host/node/publisher.h"

#include <algorithm>
#include <ctime>
#include <set>

#include "host/common/logging.h"
#include "host/dra/slices.h"
#include "host/ledger/allocated.h"
#include "host/runtime/devices_spec.h"

namespace gpustack::node {
namespace {

using Json = nlohmann::json;

std::string Now() { return kube::FormatTime(std::chrono::system_clock::now()); }

}  // namespace

Json DevicesStatusJson(const runtime::NodeReport& report, const ledger::DevicesStatus& status,
                       const std::string& now, const std::vector<enforcement::State>& enforcement) {
  Json out = ledger::ToJson(status);
  Json plugins = Json::array();
  std::string not_ready;
  for (const runtime::PluginStatus& p : report.plugins) {
    const bool disabled = !p.enabled && p.state == runtime::PluginState::kDisabled;
    // Off because the node has none of its cards: not worth a line. Forced off (by the chart, the
    // node config, a node label): listed with who said so, and not a problem.
    if (disabled && !p.decision.starts_with("forced off")) continue;
    Json entry = {{"name", p.name.empty() ? p.origin : p.name},
                  {"state", std::string(runtime::StateName(p.state))}};
    if (disabled) {
      entry["message"] = p.decision;
      plugins.push_back(std::move(entry));
      continue;
    }
    std::string why = p.error             ? p.error->message
                      : p.discovery_error ? p.discovery_error->message
                                          : "";
    for (const std::string& fault : p.faults) why += (why.empty() ? "" : "; ") + fault;
    if (!why.empty()) entry["message"] = why;
    if (p.stale) entry["stale"] = true;
    plugins.push_back(std::move(entry));
    if (p.state != runtime::PluginState::kRunning || p.discovery_error || !p.faults.empty()) {
      not_ready += (not_ready.empty() ? "" : "; ") + (p.name.empty() ? p.origin : p.name) + " " +
                   std::string(runtime::StateName(p.state)) + (why.empty() ? "" : ": " + why);
    }
  }
  out["plugins"] = plugins;
  out["conditions"] = Json::array(
      {{{"type", "PluginsReady"},
        {"status", not_ready.empty() ? "True" : "False"},
        {"reason", not_ready.empty() ? "AllRunning" : "PluginProblem"},
        {"message", not_ready.empty() ? "every enabled plugin runs and discovers" : not_ready},
        {"lastTransitionTime", now}}});
  if (!enforcement.empty()) {
    // False when any manufacturer's slices are only counted; Unknown when one declares nothing
    // the daemon could check; True when every one's enforcer is in place.
    std::string bound, counted, unknown;
    for (const enforcement::State& s : enforcement) {
      std::string& into = s.binding == enforcement::Binding::kBound         ? bound
                          : s.binding == enforcement::Binding::kCountedOnly ? counted
                                                                            : unknown;
      into += (into.empty() ? "" : "; ") + s.manufacturer + ": " + s.message;
    }
    const bool all_bound = counted.empty() && unknown.empty();
    std::string message = counted;
    for (const std::string* part : {&unknown, &bound}) {
      if (!part->empty()) message += (message.empty() ? "" : "; ") + *part;
    }
    out["conditions"].push_back({{"type", "SlicesEnforced"},
                                 {"status", !counted.empty() ? "False"
                                            : all_bound      ? "True"
                                                             : "Unknown"},
                                 {"reason", !counted.empty() ? "CountedNotEnforced"
                                            : all_bound      ? "Enforced"
                                                             : "NoEnforcerDeclared"},
                                 {"message", message},
                                 {"lastTransitionTime", now}});
  }
  return out;
}

Publisher::Publisher(kube::Client& client, std::string node_name)
    : client_(client), node_name_(std::move(node_name)) {}

Status Publisher::Publish(const runtime::NodeReport& report, const ledger::DevicesStatus& status,
                          const std::vector<enforcement::State>& enforcement,
                          const std::vector<ledger::Allocation>& claims) {
  if (!report.spec) return Error{"no Devices spec to publish: " + report.spec.error()};
  const ledger::DevicesSpec& spec = *report.spec;
  if (Status read = ReadNodeUid(); !read) return read;
  // Node labels (docs/behaviour.md §3.4): ours only, removed when no longer published.
  Json labels = Json::object();
  for (const auto& [key, value] : runtime::DeviceLabels(spec)) labels[key] = value;
  if (labels != last_labels_) {
    Json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", node_name_}, {"labels", labels}}}};
    auto applied = client_.Apply(kube::resources::Nodes(), node, {kFieldManager, true});
    if (!applied) return Error{"cannot label node " + node_name_ + ": " + applied.error()};
    last_labels_ = labels;
  }
  if (spec.groups.empty()) {
    if (published_ || last_spec_.is_null()) {
      Status deleted = client_.Delete(kube::resources::Devices(), "", node_name_);
      if (!deleted && !kube::IsNotFound(deleted.failure())) return deleted;
      published_ = false;
      last_spec_ = Json::object();
    }
    return Ok{};
  }
  const Json spec_json = ledger::ToJson(spec);
  const std::string claims_text = claims.empty() ? "" : ledger::ClaimsAnnotation(claims);
  if (!published_ || spec_json != last_spec_ || claims_text != last_claims_) {
    Json device_labels = Json::object();
    for (const auto& [key, value] : labels.items()) {
      if (key.rfind("acceleratable.feature.gpustack.ai/", 0) == 0 && value == "true")
        device_labels[key] = "true";
    }
    Json object = {
        {"apiVersion", "worker.gpustack.ai/v1alpha1"},
        {"kind", "Devices"},
        {"metadata",
         {{"name", node_name_},
          {"labels", device_labels},
          {"annotations",
           claims_text.empty() ? Json::object() : Json{{ledger::kClaimsAnnotation, claims_text}}},
          {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                            {"kind", "Node"},
                                            {"name", node_name_},
                                            {"uid", node_uid_}}})}}},
        {"spec", spec_json}};
    auto applied = client_.Apply(kube::resources::Devices(), object, {kFieldManager, true});
    if (!applied) return Error{"cannot apply Devices " + node_name_ + ": " + applied.error()};
    last_spec_ = spec_json;
    last_claims_ = claims_text;
    published_ = true;
    last_status_ = Json();  // a recreated object has no status
  }
  Json status_json = DevicesStatusJson(report, status, "", enforcement);
  if (status_json != last_status_) {
    Json stamped = DevicesStatusJson(report, status, Now(), enforcement);
    Json object = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                   {"kind", "Devices"},
                   {"metadata", {{"name", node_name_}}},
                   {"status", stamped}};
    auto applied =
        client_.Apply(kube::resources::Devices(), object, {kFieldManager, true}, "status");
    if (!applied) {
      return Error{"cannot apply Devices " + node_name_ + " status: " + applied.error()};
    }
    last_status_ = status_json;
  }
  return Ok{};
}

Status Publisher::ReadNodeUid() {
  if (!node_uid_.empty()) return Ok{};
  auto node = client_.Get(kube::resources::Nodes(), "", node_name_);
  if (!node) return Error{"cannot read node " + node_name_ + ": " + node.error()};
  node_uid_ = (*node)["metadata"].value("uid", "");
  return Ok{};
}

Status Publisher::PublishResourceSlices(std::vector<Json> slices) {
  if (Status read = ReadNodeUid(); !read) return read;
  std::set<std::string> names;
  for (const Json& slice : slices) names.insert(slice["metadata"]["name"]);
  if (!slices_swept_) {
    kube::ListOptions ours;
    ours.field_selector = "spec.nodeName=" + node_name_ + ",spec.driver=" + dra::kDriverName;
    auto listed = client_.List(kube::resources::ResourceSlices(), "", ours);
    if (!listed)
      return Error{"cannot list the ResourceSlices of node " + node_name_ + ": " + listed.error()};
    for (const Json& slice : listed->items) {
      const std::string name = slice["metadata"].value("name", "");
      if (!names.contains(name)) last_slices_[name] = Json();  // deleted below
    }
    // Above what a previous life published: a generation only grows.
    slice_generation_ = std::max<int64_t>(slice_generation_, std::time(nullptr));
    slices_swept_ = true;
  }
  for (auto it = last_slices_.begin(); it != last_slices_.end();) {
    if (names.contains(it->first)) {
      ++it;
      continue;
    }
    Status deleted = client_.Delete(kube::resources::ResourceSlices(), "", it->first);
    if (!deleted && !kube::IsNotFound(deleted.failure())) {
      return Error{"cannot delete ResourceSlice " + it->first + ": " + deleted.error()};
    }
    it = last_slices_.erase(it);
  }
  // A pool is read whole at its highest generation: when any of its slices changes, every slice
  // of the pool is applied again at one new generation.
  std::map<std::string, std::vector<Json*>> pools;
  for (Json& slice : slices) pools[slice["spec"]["pool"]["name"]].push_back(&slice);
  for (auto& [pool, members] : pools) {
    const bool changed = std::any_of(members.begin(), members.end(), [&](const Json* slice) {
      auto last = last_slices_.find((*slice)["metadata"]["name"]);
      return last == last_slices_.end() || last->second != *slice;
    });
    if (!changed) continue;
    const int64_t generation = ++slice_generation_;
    for (Json* slice : members) {
      const std::string name = (*slice)["metadata"]["name"];
      Json applied_form = *slice;
      (*slice)["spec"]["pool"]["generation"] = generation;
      (*slice)["metadata"]["ownerReferences"] = Json::array(
          {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name_}, {"uid", node_uid_}}});
      auto applied =
          client_.Apply(kube::resources::ResourceSlices(), *slice, {kFieldManager, true});
      if (!applied) {
        last_slices_[name] = Json();  // unknown: applied again (or deleted) next time
        return Error{"cannot apply ResourceSlice " + name + ": " + applied.error()};
      }
      last_slices_[name] = applied_form;  // applied: deleted when no longer published
      if (applied_form["spec"].contains("sharedCounters") &&
          !(*applied)["spec"].contains("sharedCounters")) {
        partitions_served_ = false;
        return Error{
            "the apiserver drops ResourceSlices' sharedCounters (its "
            "DRAPartitionableDevices feature gate is off): partitions are left out of "
            "the slices, whole cards stay"};
      }
    }
  }
  return Ok{};
}

}  // namespace gpustack::node
