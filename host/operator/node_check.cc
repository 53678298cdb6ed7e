#include "host/operator/node_check.h"

#include <algorithm>

#include "host/common/logging.h"
#include "host/kube/workqueue.h"
#include "host/ledger/allocated.h"
#include "host/operator/admission.h"

namespace gpustack::op {
namespace {

using Clock = std::chrono::steady_clock;
using kube::ObjectPtr;

using ledger::kAllocatedAnnotation;  // the node allocator's record on a Pod
constexpr const char* kHostnameLabel = "kubernetes.io/hostname";
constexpr size_t kDecisionSamples = 4096;

// Our entry in status.admissionChecks (a pointer into `workload`), and its index.
const Json* CheckState(const Json& workload, size_t* index = nullptr) {
  const Json& checks = JsonAt(workload, {"status", "admissionChecks"});
  if (!checks.is_array()) return nullptr;
  for (size_t i = 0; i < checks.size(); ++i) {
    const Json& check = checks[i];
    if (check.is_object() && check.value("name", "") == kNodeDevicesCheck) {
      if (index != nullptr) *index = i;
      return &check;
    }
  }
  return nullptr;
}

std::string Describe(const ledger::Request& r) {
  switch (r.mode) {
    case ledger::Mode::kExclusive:
      return std::to_string(r.count) + " whole " + r.base;
    case ledger::Mode::kShared:
      return std::to_string(r.count) + " shared slot(s) of one " + r.base;
    case ledger::Mode::kSliced:
      return r.memory_percentage > 0
                 ? "a " + std::to_string(r.memory_percentage) + " % slice of " + r.base
                 : "a " + std::to_string(r.memory_mib) + " MiB slice of " + r.base;
    case ledger::Mode::kPartitioned:
      return "a " + r.profile + " partition of " + r.base;
    case ledger::Mode::kNone:
      break;
  }
  return r.base;
}

std::string Now() { return kube::FormatTime(std::chrono::system_clock::now()); }

int64_t FreeCredits(const ledger::NodeLedger& ledger) {
  int64_t free = 0;
  for (const ledger::CardState& c : ledger.cards()) {
    if (!c.card->unhealthy) free += c.remaining();
  }
  return free;
}

}  // namespace

CheckVerdict Judge(const std::string& workload_uid, const std::vector<PodSetDemand>& demands) {
  std::map<const ledger::NodeLedger*, std::unique_ptr<ledger::NodeLedger>> scratch;
  auto current = [&](const ledger::NodeLedger* base) -> const ledger::NodeLedger& {
    auto it = scratch.find(base);
    return it != scratch.end() ? *it->second : *base;
  };
  CheckVerdict verdict;
  std::string where;
  for (const PodSetDemand& d : demands) {
    if (d.containers.empty()) continue;
    std::string why;
    int explained = 0;
    bool placed = false;
    for (const ledger::NodeLedger* base : d.candidates) {
      const ledger::NodeLedger& now = current(base);
      // Most candidates are full: a fit of the first container settles them without a copy.
      if (auto first = now.Fit(d.containers.front().request); !first) {
        if (explained++ < 3) why += "; " + now.node() + ": " + first.error();
        continue;
      }
      auto trial = std::make_unique<ledger::NodeLedger>(now);
      PodSetPlacement placement{d.name, now.node(), {}};
      std::string failed;
      for (int64_t i = 0; i < d.count && failed.empty(); ++i) {
        std::map<std::string, std::vector<ledger::Charge>> pod;
        for (const ledger::ContainerRequest& c : d.containers) {
          auto reserved = trial->Reserve(
              {workload_uid + "/" + d.name + "/" + std::to_string(i), c.container}, c.request);
          if (!reserved) {
            failed = reserved.error();
            break;
          }
          pod[c.container] = reserved->charges;
        }
        placement.pods.push_back(std::move(pod));
      }
      if (!failed.empty()) {
        if (explained++ < 3) why += "; " + now.node() + ": " + failed;
        continue;
      }
      scratch[base] = std::move(trial);
      where += (where.empty() ? "" : ", ") + d.name + " on " + placement.node;
      verdict.placements.push_back(std::move(placement));
      placed = true;
      break;
    }
    if (!placed) {
      const std::string pods =
          d.count == 1 ? "its Pod" : "its " + std::to_string(d.count) + " Pods";
      verdict.placements.clear();
      verdict.message = "pod set " + d.name + " (" + Describe(d.containers.front().request) + ", " +
                        pods + " on one node) fits on no node of its flavor";
      if (d.candidates.empty())
        verdict.message += ": the flavor has no managed node with a Devices ledger";
      else
        verdict.message += " (" + std::to_string(d.candidates.size()) + " node(s))" + why;
      verdict.message += "; retrying when cards free up";
      return verdict;
    }
  }
  verdict.ready = true;
  verdict.message = where.empty() ? "asks for no accelerator" : "counted on free cards: " + where;
  return verdict;
}

Result<std::vector<PodSetDemand>> DemandsOf(const Json& workload,
                                            const std::vector<ledger::ResourceKind>& kinds,
                                            const ledger::FoldContext& fold) {
  std::vector<PodSetDemand> demands;
  const Json pod_sets = workload.value("spec", Json::object()).value("podSets", Json::array());
  if (!pod_sets.is_array()) return Error{"spec.podSets is not a list"};
  for (const Json& ps : pod_sets) {
    if (!ps.is_object()) continue;
    PodSetDemand d;
    d.name = ps.value("name", "");
    d.count = ps.value("count", int64_t{1});
    const Json spec = ps.value("template", Json::object()).value("spec", Json::object());
    auto parsed = ledger::ParsePodRequests(Json{{"spec", spec}}, kinds, fold);
    if (!parsed) return Error{"pod set " + d.name + ": " + parsed.error()};
    if (parsed->empty()) continue;
    d.containers = std::move(parsed).value();
    demands.push_back(std::move(d));
  }
  return demands;
}

NodeDevicesCheck::NodeDevicesCheck(kube::Client& client, NodeCheckOptions options,
                                   NodeInformer& nodes, kube::Informer& instance_types)
    : client_(client), options_(options), nodes_(nodes), instance_types_(instance_types) {}

NodeDevicesCheck::~NodeDevicesCheck() = default;

void NodeDevicesCheck::MarkDirty(const std::string& node) {
  auto it = node_state_.find(node);
  if (it != node_state_.end()) it->second.committed.reset();
}

void NodeDevicesCheck::OnPod(const std::shared_ptr<const BoundPod>& before,
                             const std::shared_ptr<const BoundPod>& after) {
  auto interesting = [](const std::shared_ptr<const BoundPod>& pod) {
    return pod != nullptr && !pod->node().empty() && (pod->allocated() || pod->chosen());
  };
  auto workload_of = [](const BoundPod& pod) -> std::string {
    const std::optional<std::string_view> chosen = pod.chosen();
    const std::optional<std::string_view> allocated = pod.allocated();
    if (!chosen || chosen->empty() || !allocated || allocated->empty()) return {};
    auto parsed = ledger::ChosenFromAnnotation(std::string(*chosen));
    return parsed ? parsed->workload_uid : std::string();
  };
  std::lock_guard lock(mutex_);
  auto update = [&](const std::shared_ptr<const BoundPod>& shared, int sign) {
    const BoundPod& pod = *shared;
    const std::string key(pod.key());
    const std::string node(pod.node());
    if (sign < 0) {
      pods_.erase(key);
      node_state_[node].pods.erase(key);
    } else {
      pods_[key] = shared;
      node_state_[node].pods.insert(key);
    }
    MarkDirty(node);
    if (std::string uid = workload_of(pod); !uid.empty()) {
      allocated_pods_[uid] += sign;
      if (allocated_pods_[uid] <= 0) allocated_pods_.erase(uid);
      if (auto flights = in_flight_.find(uid); flights != in_flight_.end())
        for (const InFlight& f : flights->second) MarkDirty(f.node);
    }
  };
  if (interesting(before)) update(before, -1);
  if (interesting(after)) update(after, +1);
}

void NodeDevicesCheck::SetFleet(std::shared_ptr<const Fleet> fleet) {
  std::lock_guard lock(mutex_);
  fleet_ = std::move(fleet);
}

std::vector<NodeDevicesCheck::InFlight> NodeDevicesCheck::InFlightOf(const Json& workload) const {
  if (kube::ConditionIsTrue(workload, "Finished") || kube::ConditionIsTrue(workload, "Evicted") ||
      !workload.value("status", Json::object()).contains("admission"))
    return {};
  const Json* state = CheckState(workload);
  if (state == nullptr || state->value("state", "") != "Ready") return {};
  std::vector<InFlight> out;
  for (const Json& update : state->value("podSetUpdates", Json::array())) {
    const std::string text = StringAt(update, {"annotations", ledger::kChosenAnnotation});
    if (text.empty()) continue;
    auto chosen = ledger::ChosenFromAnnotation(text);
    if (!chosen) {
      Logger("node-devices")->warn("workload {}: {}", kube::ObjectKey(workload), chosen.error());
      continue;
    }
    out.push_back({chosen->node, chosen->pod_set, std::move(chosen->pods)});
  }
  return out;
}

void NodeDevicesCheck::OnWorkload(const Json* before, const Json* after) {
  std::lock_guard lock(mutex_);
  const Json& any = after != nullptr ? *after : *before;
  const std::string uid = StringAt(any, {"metadata", "uid"});
  // Events arrive in order and the verdict was judged on the newest cached version, so any
  // event after it carries our write (or a later change): no stale event can undo it here.
  if (after == nullptr) judged_.erase(uid);
  if (after == nullptr) explained_.erase(uid);
  SetInFlight(uid, after != nullptr ? InFlightOf(*after) : std::vector<InFlight>{});
}

void NodeDevicesCheck::SetInFlight(const std::string& uid, std::vector<InFlight> flights) {
  if (auto old = in_flight_.find(uid); old != in_flight_.end()) {
    for (const InFlight& f : old->second) {
      MarkDirty(f.node);
      in_flight_by_node_[f.node].erase(uid);
    }
    in_flight_.erase(old);
  }
  for (const InFlight& f : flights) {
    MarkDirty(f.node);
    in_flight_by_node_[f.node].insert(uid);
  }
  if (!flights.empty()) in_flight_[uid] = std::move(flights);
}

const ledger::NodeLedger* NodeDevicesCheck::Committed(const std::string& node) {
  const NodeFacts* facts = fleet_ ? fleet_->Node(node) : nullptr;
  if (facts == nullptr || !facts->ledger) return nullptr;
  NodeState& state = node_state_[node];
  if (state.committed && state.spec_from == facts->ledger.get())
    return state.over_promised ? nullptr : state.committed.get();
  auto log = Logger("node-devices");
  auto ledger = std::make_shared<ledger::NodeLedger>(node, facts->ledger->spec());
  for (const std::string& key : state.pods) {
    auto pod = pods_.find(key);
    if (pod == pods_.end()) continue;
    const BoundPod& bound = *pod->second;
    const std::optional<std::string_view> allocated = bound.allocated();
    if (!allocated) continue;  // placed by gate 3, no allocation on the node yet
    auto record = ledger::ReadAllocatedRecord(*allocated, bound.uid());
    if (!record) {
      log->warn("pod {}: {}", key, record.error());
      continue;
    }
    for (const ledger::RecordedAllocation& entry : *record) {
      if (!entry.allocation) {
        log->warn("pod {} container {}: its allocation record is unusable: {}", key,
                  entry.container, entry.allocation.error());
        continue;
      }
      const ledger::Allocation& allocation = *entry.allocation;
      if (Status restored = ledger->Restore(allocation); !restored) {
        log->warn("pod {}: {}", key, restored.error());
        continue;
      }
      // What a finished Pod gives back, as the node's allocator does.
      if (bound.Finished()) ledger->ReleaseTerminated(allocation.owner);
    }
  }
  // What ResourceClaims hold (docs/dra.md): never handed to a Workload's Pods.
  for (const ledger::Allocation& claim : facts->claims) {
    if (Status restored = ledger->Restore(claim); !restored)
      log->warn("node {}: a ResourceClaim's allocation: {}", node, restored.error());
  }
  bool over_promised = false;
  for (const std::string& uid : in_flight_by_node_[node]) {
    const std::vector<InFlight>& flights = in_flight_.at(uid);
    int64_t held = 0;
    if (auto a = allocated_pods_.find(uid); a != allocated_pods_.end()) held = a->second;
    for (const InFlight& f : flights) {
      for (size_t i = 0; i < f.pods.size(); ++i) {
        // Pods the node already holds are in the ledger through their own record.
        if (held > 0) {
          --held;
          continue;
        }
        if (f.node != node) continue;
        for (const auto& [container, charges] : f.pods[i]) {
          ledger::Allocation promised{{uid + "/" + f.pod_set + "/" + std::to_string(i), container},
                                      charges};
          // Another Pod may have been given its cards: it is counted where it fits now.
          if (Status counted = ledger::RestoreOrRefit(*ledger, promised); !counted) {
            log->warn(
                "workload {} on {}: its promise fits nowhere ({}): no other workload is "
                "counted on this node until it settles",
                uid, node, counted.error());
            over_promised = true;
          }
        }
      }
    }
  }
  state.committed = std::move(ledger);
  state.spec_from = facts->ledger.get();
  state.over_promised = over_promised;
  return over_promised ? nullptr : state.committed.get();
}

CheckVerdict DecideWith(
    const Json& workload, const Fleet& fleet, const Json* instance_type,
    const std::function<const ledger::NodeLedger*(const std::string&)>& ledger_of) {
  CheckVerdict verdict;
  const Json admission =
      workload.value("status", Json::object()).value("admission", Json::object());
  std::vector<ledger::ResourceKind> kinds;
  for (const auto& [key, m] : fleet.manufacturers()) kinds.push_back(m.Kind());
  auto demands = DemandsOf(workload, kinds, FoldContextOf(instance_type));
  if (!demands) {
    verdict.message = demands.error();
    return verdict;
  }
  for (PodSetDemand& d : *demands) {
    std::string flavor;
    for (const Json& a : admission.value("podSetAssignments", Json::array())) {
      if (!a.is_object() || a.value("name", "") != d.name) continue;
      const Json flavors = a.value("flavors", Json::object());
      const std::string credits = kCreditsPrefix + d.containers.front().request.manufacturer;
      flavor = flavors.value(credits, "");
      if (flavor.empty() && !flavors.empty() && flavors.begin()->is_string())
        flavor = flavors.begin()->get<std::string>();
    }
    auto f = fleet.flavors().find(flavor);
    if (f == fleet.flavors().end()) continue;  // no candidates: the verdict says so
    std::vector<std::pair<int64_t, const ledger::NodeLedger*>> ranked;
    for (const std::string& node : f->second.nodes) {
      if (const ledger::NodeLedger* l = ledger_of(node)) ranked.emplace_back(FreeCredits(*l), l);
    }
    // Best fit: the fullest node that fits, so whole cards stay free for whole-card requests.
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [free, l] : ranked) d.candidates.push_back(l);
  }
  return Judge(StringAt(workload, {"metadata", "uid"}), *demands);
}

CheckVerdict NodeDevicesCheck::Decide(const Json& workload) {
  std::lock_guard lock(mutex_);
  if (!fleet_) {
    CheckVerdict verdict;
    verdict.message = "the worker has not read the fleet yet";
    return verdict;
  }
  const std::string queue = workload.value("status", Json::object())
                                .value("admission", Json::object())
                                .value("clusterQueue", "");
  ObjectPtr instance_type = instance_types_.Get(queue);
  return DecideWith(workload, *fleet_, instance_type.get(),
                    [this](const std::string& node) { return Committed(node); });
}

Status NodeDevicesCheck::Write(const Json& workload, const CheckVerdict& verdict) {
  size_t index = 0;
  const Json* state = CheckState(workload, &index);
  if (state == nullptr)
    return Error{"the workload no longer lists " + std::string(kNodeDevicesCheck)};
  Json entry = {{"name", kNodeDevicesCheck},
                {"state", verdict.ready ? "Ready" : "Retry"},
                {"message", verdict.message.substr(0, 32000)},
                {"lastTransitionTime", Now()}};
  if (state->contains("retryCount")) entry["retryCount"] = (*state)["retryCount"];
  if (verdict.ready) {
    Json updates = Json::array();
    const std::string uid = StringAt(workload, {"metadata", "uid"});
    for (const PodSetPlacement& p : verdict.placements) {
      std::string hostname = p.node;
      if (NodeRecordPtr node = nodes_.Get(p.node); node && !node->hostname.empty())
        hostname = node->hostname;
      ledger::Chosen chosen{uid, p.pod_set, p.node, p.pods};
      updates.push_back(
          {{"name", p.pod_set},
           {"nodeSelector", {{kHostnameLabel, hostname}}},
           {"annotations", {{ledger::kChosenAnnotation, ledger::ToAnnotation(chosen)}}}});
    }
    if (!updates.empty()) entry["podSetUpdates"] = updates;
  } else {
    entry["requeueAfterSeconds"] = options_.retry_after.count();
  }
  const Json patch = Json::array({{{"op", "test"},
                                   {"path", "/metadata/resourceVersion"},
                                   {"value", StringAt(workload, {"metadata", "resourceVersion"})}},
                                  {{"op", "replace"},
                                   {"path", "/status/admissionChecks/" + std::to_string(index)},
                                   {"value", entry}}});
  auto written = client_.Patch(
      kube::resources::Workloads(), StringAt(workload, {"metadata", "namespace"}),
      StringAt(workload, {"metadata", "name"}), kube::PatchType::kJson, patch, "status");
  if (!written) return Error{written.error()};
  return Ok{};
}

void NodeDevicesCheck::Explain(const Json& workload, const std::string& message) {
  const std::string uid = StringAt(workload, {"metadata", "uid"});
  {
    std::lock_guard lock(mutex_);
    if (explained_[uid] == message) return;
    explained_[uid] = message;
  }
  const std::string ns = StringAt(workload, {"metadata", "namespace"});
  auto event = [&](const Json& involved) {
    const Json e = kube::NewEvent(involved, "Warning", "NoCardFits", message,
                                  kNodeDevicesController, kNodeDevicesCheck);
    if (auto made = client_.Create(kube::resources::Events(), e); !made)
      Logger("node-devices")->debug("cannot record an event: {}", made.error());
  };
  event({{"apiVersion", "kueue.x-k8s.io/v1beta2"},
         {"kind", "Workload"},
         {"name", StringAt(workload, {"metadata", "name"})},
         {"namespace", ns},
         {"uid", uid}});
  // A plain Pod's user looks at the Pod (kubectl describe pod).
  for (const Json& owner : workload["metadata"].value("ownerReferences", Json::array())) {
    if (owner.is_object() && owner.value("kind", "") == "Pod")
      event({{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"name", owner.value("name", "")},
             {"namespace", ns},
             {"uid", owner.value("uid", "")}});
  }
}

bool NodeDevicesCheck::NeedsJudging(const Json& workload) const {
  const Json* state = CheckState(workload);
  if (state == nullptr || state->value("state", "") != "Pending") return false;
  if (!workload.value("status", Json::object()).contains("admission")) return false;
  if (kube::ConditionIsTrue(workload, "Evicted") || kube::ConditionIsTrue(workload, "Finished"))
    return false;
  if (workload["metadata"].contains("deletionTimestamp")) return false;
  std::lock_guard lock(mutex_);
  // The version already judged, met again before the cache shows our write (the queue may hold
  // its key twice): judging it again would count its cards twice.
  auto judged = judged_.find(StringAt(workload, {"metadata", "uid"}));
  return judged == judged_.end() ||
         judged->second != StringAt(workload, {"metadata", "resourceVersion"});
}

void NodeDevicesCheck::Run(std::stop_token stop) {
  auto log = Logger("node-devices");
  kube::WorkQueue queue;
  workloads_ = std::make_unique<kube::Informer>(client_, kube::resources::Workloads(), "");
  workloads_->AddEventHandler(
      {.on_add =
           [&](const ObjectPtr& w) {
             OnWorkload(nullptr, w.get());
             if (NeedsJudging(*w)) queue.Add(kube::ObjectKey(*w));
           },
       .on_update =
           [&](const ObjectPtr& before, const ObjectPtr& after) {
             OnWorkload(before.get(), after.get());
             if (NeedsJudging(*after)) queue.Add(kube::ObjectKey(*after));
           },
       .on_delete = [&](const ObjectPtr& w) { OnWorkload(w.get(), nullptr); }});
  workloads_->Start();
  std::stop_callback on_stop(stop, [&] { queue.ShutDown(); });
  while (!stop.stop_requested() && !workloads_->WaitForSync(std::chrono::seconds(1))) {
  }
  while (auto key = queue.Get()) {
    ObjectPtr workload = workloads_->Get(*key);
    if (workload && NeedsJudging(*workload)) {
      const auto started = Clock::now();
      CheckVerdict verdict;
      try {
        verdict = Decide(*workload);
      } catch (const std::exception& e) {
        // A Workload we cannot read is retried by Kueue, never a reason to stop judging others.
        verdict.message =
            std::string("the gpustack worker could not judge this workload: ") + e.what();
        log->error("workload {}: {}", *key, verdict.message);
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
      Status written = Write(*workload, verdict);
      if (written && !verdict.ready) Explain(*workload, verdict.message);
      std::lock_guard lock(mutex_);
      auto& samples = counters_.decision_seconds;
      if (samples.size() >= kDecisionSamples) samples.erase(samples.begin());
      samples.push_back(seconds);
      if (!written) {
        ++counters_.write_failures;
        log->warn("workload {}: cannot record the verdict ({}); retrying", *key, written.error());
        queue.AddRateLimited(*key);
      } else {
        ++(verdict.ready ? counters_.ready : counters_.retry);
        log->info("workload {}: {}: {}", *key, verdict.ready ? "Ready" : "Retry", verdict.message);
        queue.Forget(*key);
        const std::string uid = StringAt(*workload, {"metadata", "uid"});
        judged_[uid] = StringAt(*workload, {"metadata", "resourceVersion"});
        if (verdict.ready) {
          // Counted from now on, before the cache shows the write.
          std::vector<InFlight> flights;
          for (const PodSetPlacement& p : verdict.placements)
            flights.push_back({p.node, p.pod_set, p.pods});
          SetInFlight(uid, std::move(flights));
        }
      }
    }
    queue.Done(*key);
  }
  workloads_->Stop();
}

NodeCheckCounters NodeDevicesCheck::Counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace gpustack::op
