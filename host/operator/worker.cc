#include "host/operator/worker.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "host/common/logging.h"
#include "host/kube/config.h"
#include "host/kube/informer.h"
#include "host/kube/leader_election.h"
#include "host/kube/workqueue.h"
#include "host/loader/dlopen_source.h"
#include "host/runtime/node_config.h"

namespace gpustack::op {
namespace {

using kube::ObjectPtr;
using kube::ResourceType;

const ResourceType kFlavors = kube::resources::ResourceFlavors();
const ResourceType kClusterQueues = kube::resources::ClusterQueues();
const ResourceType kLocalQueues = kube::resources::LocalQueues();
const ResourceType kAdmissionChecks = kube::resources::AdmissionChecks();
const ResourceType kSecrets = kube::resources::Secrets();

std::string Name(const Json& object) { return object["metadata"].value("name", ""); }
bool Deleting(const Json& object) { return object["metadata"].contains("deletionTimestamp"); }

// The fields `manager` owns by apply on `subresource` ("" for the object itself).
Json OwnedFields(const Json& object, const std::string& manager, const std::string& subresource) {
  for (const Json& entry : object["metadata"].value("managedFields", Json::array())) {
    if (entry.value("manager", "") == manager && entry.value("operation", "") == "Apply" &&
        entry.value("subresource", "") == subresource) {
      return entry.value("fieldsV1", Json::object());
    }
  }
  return Json::object();
}

// The map keys under `path` in a fieldsV1 set ("f:metadata", "f:labels" -> label keys).
std::set<std::string> OwnedKeys(const Json& fields, std::initializer_list<const char*> path) {
  const Json* at = &fields;
  for (const char* step : path) {
    if (!at->is_object() || !at->contains(step)) return {};
    at = &(*at)[step];
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : at->items())
    if (key.rfind("f:", 0) == 0) keys.insert(key.substr(2));
  return keys;
}

bool HasFinalizer(const Json& object, const std::string& finalizer) {
  for (const Json& f : object["metadata"].value("finalizers", Json::array()))
    if (f == finalizer) return true;
  return false;
}

bool ConditionTrue(const Json& object, const std::string& type) {
  for (const Json& c : object.value("status", Json::object()).value("conditions", Json::array()))
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  return false;
}

std::string Now() {
  return kube::FormatMicroTime(std::chrono::system_clock::now()).substr(0, 19) + "Z";
}

struct Counters {
  std::mutex mutex;
  uint64_t passes = 0;
  uint64_t failed_passes = 0;
  std::map<std::string, uint64_t> writes;  // by kind
  uint64_t write_failures = 0;
  double last_pass_seconds = 0;
  bool leading = false;
  bool synced = false;
  Json snapshot = Json::object();
  std::vector<std::string> problems;
  // The leader's gpustack-node-devices check, while it leads.
  NodeDevicesCheck* node_check = nullptr;
  NodeCheckCounters last_check;
};

// One write of a pass: what it does, for the log and the counters.
struct Write {
  std::string kind;
  std::string what;
  std::function<Status()> run;
  // Writes run phase by phase, so Kueue never sees a queue naming a flavor that does not exist
  // yet, nor a flavor deleted while a queue still names it: 0 what others refer to (flavors, the
  // check), 1 what refers to them (queues, InstanceTypes, entrances), 2 deletions, 3 node labels
  // and counting keys (one write per node: on a large fleet the pools must not wait for them).
  int phase = 0;
};

// Runs one phase of `writes` on up to `threads` threads; the errors, each naming its write.
std::vector<std::string> RunPhase(std::vector<Write*>& writes, int threads, Counters& counters) {
  std::vector<std::string> errors;
  std::mutex mutex;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < writes.size(); i = next++) {
      Status done = writes[i]->run();
      std::lock_guard lock(mutex);
      if (done) {
        std::lock_guard c(counters.mutex);
        ++counters.writes[writes[i]->kind];
      } else {
        errors.push_back(writes[i]->what + ": " + done.error());
        std::lock_guard c(counters.mutex);
        ++counters.write_failures;
      }
    }
  };
  const int n = std::clamp<int>(static_cast<int>(writes.size()), 1, std::max(threads, 1));
  std::vector<std::jthread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  return errors;
}

// The phases in order; a phase with a failure stops the pass (the next pass retries).
std::vector<std::string> RunWrites(std::vector<Write>& writes, int threads, Counters& counters) {
  for (int phase = 0; phase <= 3; ++phase) {
    std::vector<Write*> now;
    for (Write& w : writes)
      if (w.phase == phase) now.push_back(&w);
    if (now.empty()) continue;
    if (auto errors = RunPhase(now, threads, counters); !errors.empty()) return errors;
  }
  return {};
}

// Everything in the settings that node facts, labels and counting keys depend on.
std::string SettingsKey(const Settings& s) {
  return std::string(s.node_management_manual ? "m" : "-") + (s.mixed_on_node ? "x" : "-");
}

const Json& Field(const Json& object, std::initializer_list<const char*> path) {
  static const Json kNull;
  const Json* at = &object;
  for (const char* step : path) {
    if (!at->is_object()) return kNull;
    auto it = at->find(step);
    if (it == at->end()) return kNull;
    at = &*it;
  }
  return *at;
}

// Whether an update changed what a pass reads of an object of `plural` (compared in place: at
// 1,000 nodes the heartbeats and Kueue's counters arrive many times a second).
bool SameForPass(const std::string& plural, const Json& a, const Json& b) {
  auto same = [&](std::initializer_list<const char*> path) {
    return Field(a, path) == Field(b, path);
  };
  const bool meta = same({"metadata", "labels"}) && same({"metadata", "annotations"}) &&
                    same({"metadata", "finalizers"}) && same({"metadata", "deletionTimestamp"});
  if (!meta) return false;
  if (plural == "nodes") return same({"status", "capacity"});
  if (plural == "namespaces") return same({"status", "phase"});
  if (plural == "pods") return same({"spec"}) && same({"status", "phase"});
  if (plural == "clusterqueues") {
    // Of the status, only whether the queue still holds work (the drains wait for it).
    auto busy = [](const Json& q) {
      const Json& status = Field(q, {"status"});
      if (!status.is_object()) return int64_t{0};
      return status.value("reservingWorkloads", int64_t{0}) +
             status.value("admittedWorkloads", int64_t{0});
    };
    return same({"spec"}) && busy(a) == busy(b);
  }
  if (plural == "resourceflavors" || plural == "localqueues") return same({"spec"});
  // Devices, InstanceTypes, the AdmissionCheck, the settings Secret.
  return same({"spec"}) && same({"status"}) && same({"data"});
}

// One leadership term: informers, a work queue and the reconcile loop, all dropped when the term
// ends, so a later term starts from fresh caches.
class Term {
 public:
  Term(kube::Client& client, const WorkerOptions& options, Counters& counters)
      : client_(client), options_(options), counters_(counters), log_(Logger("worker")) {}

  void Run(std::stop_token stop) {
    // Kueue's kinds must be served before its objects can be written: wait, loudly.
    for (int attempt = 0; !stop.stop_requested(); ++attempt) {
      auto served = client_.IsServed(kClusterQueues);
      if (served && *served) break;
      if (attempt % 6 == 0)
        log_->warn("waiting for Kueue: {} is not served yet ({})", "clusterqueues.kueue.x-k8s.io",
                   served ? "not installed" : served.error());
      for (int i = 0; i < 50 && !stop.stop_requested(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (stop.stop_requested()) return;

    kube::InformerOptions by_label;
    auto make = [&](ResourceType type, std::string ns, kube::InformerOptions o = {}) {
      auto informer = std::make_unique<kube::Informer>(client_, type, std::move(ns), o);
      // An update that changes nothing the worker reads (a node's heartbeat, Kueue's counters)
      // does not start a pass.
      informer->AddEventHandler(
          {.on_add = [this](const ObjectPtr&) { queue_.Add("sync"); },
           .on_update =
               [this, plural = type.plural](const ObjectPtr& before, const ObjectPtr& after) {
                 if (SameForPass(plural, *before, *after)) return;
                 log_->trace("changed: {} {}", plural, kube::ObjectKey(*after));
                 queue_.Add("sync");
               },
           .on_delete = [this](const ObjectPtr&) { queue_.Add("sync"); }});
      return informer;
    };
    nodes_ = make(kube::resources::Nodes(), "");
    devices_ = make(kube::resources::Devices(), "");
    instance_types_ = make(kube::resources::InstanceTypes(), "");
    namespaces_ = make(kube::resources::Namespaces(), "");
    // Every bound Pod: those that run for the CPU view, those holding cards for the check.
    kube::InformerOptions bound;
    bound.field_selector = "spec.nodeName!=";
    pods_ = std::make_unique<kube::Informer>(client_, kube::resources::Pods(), "", bound);
    if (options_.node_check)
      node_check_ = std::make_unique<NodeDevicesCheck>(client_, options_.node_check_options,
                                                       *nodes_, *instance_types_);
    pods_->AddEventHandler(
        {.on_add = [this](const ObjectPtr& pod) { OnPod(nullptr, pod.get()); },
         .on_update = [this](const ObjectPtr& before,
                             const ObjectPtr& after) { OnPod(before.get(), after.get()); },
         .on_delete = [this](const ObjectPtr& pod) { OnPod(pod.get(), nullptr); }});
    by_label.label_selector = std::string(kTypeLabel) + "=nodes";
    flavors_ = make(kFlavors, "", by_label);
    by_label.label_selector = std::string(kTypeLabel) + "=instancetypes";
    queues_ = make(kClusterQueues, "", by_label);
    by_label.label_selector = std::string(kTypeLabel) + "=entrances";
    entrances_ = make(kLocalQueues, "", by_label);
    kube::InformerOptions by_name;
    by_name.field_selector = std::string("metadata.name=") + kNodeDevicesCheck;
    checks_ = make(kAdmissionChecks, "", by_name);
    by_name.field_selector = std::string("metadata.name=") + kSettingsSecret;
    settings_ = make(kSecrets, options_.system_namespace, by_name);
    kube::Informer* all[] = {
        nodes_.get(),  devices_.get(),   instance_types_.get(), namespaces_.get(), flavors_.get(),
        queues_.get(), entrances_.get(), checks_.get(),         settings_.get(),   pods_.get()};
    for (kube::Informer* i : all) i->Start();
    for (kube::Informer* i : all) {
      while (!stop.stop_requested() && !i->WaitForSync(std::chrono::seconds(1))) {
      }
    }
    {
      std::lock_guard lock(counters_.mutex);
      counters_.synced = true;
    }
    log_->info("caches synced: {} nodes, {} Devices, {} InstanceTypes", nodes_->Size(),
               devices_->Size(), instance_types_->Size());
    queue_.Add("sync");
    std::jthread checking;
    if (node_check_) {
      checking = std::jthread([this](std::stop_token own) { node_check_->Run(own); });
      std::lock_guard lock(counters_.mutex);
      counters_.node_check = node_check_.get();
    }
    std::stop_callback on_stop(stop, [this] { queue_.ShutDown(); });
    while (auto key = queue_.Get()) {
      const auto started = std::chrono::steady_clock::now();
      std::string error;
      const bool ok = Pass(&error);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      {
        std::lock_guard lock(counters_.mutex);
        ++counters_.passes;
        if (!ok) ++counters_.failed_passes;
        counters_.last_pass_seconds = seconds;
      }
      if (ok) {
        queue_.Forget(*key);
      } else {
        log_->warn("pass failed, retrying: {}", error);
        queue_.AddRateLimited(*key);
      }
      queue_.Done(*key);
    }
    if (checking.joinable()) {
      checking.request_stop();
      checking.join();
      std::lock_guard lock(counters_.mutex);
      counters_.last_check = node_check_->Counters();
      counters_.node_check = nullptr;
    }
    for (kube::Informer* i : all) i->Stop();
    std::lock_guard lock(counters_.mutex);
    counters_.synced = false;
  }

 private:
  // The CPU that bound, running Pods request, per node, kept from the Pod events: a pass reads
  // one entry per node instead of every Pod, and starts only when a node's sum changed.
  void OnPod(const Json* before, const Json* after) {
    if (node_check_) node_check_->OnPod(before, after);
    bool changed = false;
    {
      std::lock_guard lock(cpu_mutex_);
      auto add = [&](const Json& pod, int sign) {
        const std::string phase = pod.value("status", Json::object()).value("phase", "");
        if (phase == "Succeeded" || phase == "Failed") return;
        const int64_t millicores = PodCpuMillicores(pod);
        if (millicores == 0) return;
        const std::string node = pod["spec"].value("nodeName", "");
        const int64_t total = node_cpu_[node] += sign * millicores;
        if (total == 0) node_cpu_.erase(node);
        changed = true;
      };
      if (before != nullptr) add(*before, -1);
      if (after != nullptr) add(*after, +1);
      if (changed && before != nullptr && after != nullptr &&
          PodCpuMillicores(*before) == PodCpuMillicores(*after) &&
          before->value("status", Json::object()).value("phase", "") ==
              after->value("status", Json::object()).value("phase", ""))
        changed = false;  // the same request counted out and in again
    }
    if (changed) queue_.Add("sync");
  }

  Settings ReadSettings(std::vector<std::string>* problems) {
    ObjectPtr secret = settings_->Get(options_.system_namespace + "/" + kSettingsSecret);
    return SettingsFromSecret(secret.get(), problems);
  }

  // Every node's facts, read again only where the Node, its Devices object or the settings
  // changed since the last pass.
  std::vector<NodePtr> ReadNodes(const Settings& settings, const std::string& settings_key,
                                 std::vector<std::string>* problems) {
    std::vector<NodePtr> out;
    std::set<std::string> seen;
    for (const ObjectPtr& node : nodes_->List()) {
      const std::string name = Name(*node);
      seen.insert(name);
      ObjectPtr devices = devices_->Get(name);
      const std::string node_rv = (*node)["metadata"].value("resourceVersion", "");
      const std::string devices_rv =
          devices ? (*devices)["metadata"].value("resourceVersion", "") : "";
      Cached& cached = facts_[name];
      if (!cached.facts || cached.node_rv != node_rv || cached.devices_rv != devices_rv ||
          cached.settings_key != settings_key) {
        NodeFacts facts = NodeFactsOf(*node, devices.get());
        DecideManagement(facts, settings);
        cached = Cached{node_rv,
                        devices_rv,
                        settings_key,
                        std::make_shared<const NodeFacts>(std::move(facts)),
                        {}};
      }
      if (!cached.facts->devices_problem.empty())
        problems->push_back(cached.facts->devices_problem);
      out.push_back(cached.facts);
    }
    std::erase_if(facts_, [&](const auto& entry) { return !seen.count(entry.first); });
    return out;
  }

  Write Apply(std::string kind, const char* manager, const ResourceType& type, Json object,
              std::string subresource = {}, const std::string& why = {}) {
    std::string what = "apply " + kind + " " + Name(object) +
                       (subresource.empty() ? "" : "/" + subresource) +
                       (why.empty() ? "" : " (" + why + ")");
    int phase = 0;
    if (kind == "clusterqueue" || kind == "localqueue" || kind.rfind("instancetype", 0) == 0)
      phase = 1;
    if (kind.rfind("node", 0) == 0) phase = 3;
    return {
        std::move(kind), what,
        [this, manager, type, object = std::move(object), subresource = std::move(subresource)] {
          auto done = client_.Apply(type, object, {manager, /*force=*/true}, subresource);
          return done ? Status(Ok{}) : Status(done.failure());
        },
        phase};
  }

  Write Delete(std::string kind, const ResourceType& type, const Json& object) {
    const std::string ns = object["metadata"].value("namespace", "");
    const std::string name = Name(object);
    kube::DeleteOptions options;
    options.uid = object["metadata"].value("uid", "");
    return {std::move(kind), "delete " + type.plural + " " + (ns.empty() ? "" : ns + "/") + name,
            [this, type, ns, name, options] {
              Status done = client_.Delete(type, ns, name, options);
              if (!done && kube::IsNotFound(done.failure())) return Status(Ok{});
              return done;
            },
            2};
  }

  bool Pass(std::string* error) {
    std::vector<std::string> problems;
    const Settings settings = ReadSettings(&problems);
    const std::string settings_key = SettingsKey(settings);
    auto shared_fleet = std::make_shared<Fleet>(ReadNodes(settings, settings_key, &problems),
                                                settings, options_.manufacturers);
    Fleet& fleet = *shared_fleet;
    {
      std::lock_guard lock(cpu_mutex_);
      fleet.SetCpuRequests(node_cpu_);
    }
    if (node_check_) node_check_->SetFleet(shared_fleet);
    std::vector<Write> writes;

    // Nodes: labels (§3.3, §3.7, §3.8) and counting keys (§3.6), each where it changed.
    for (const NodePtr& node : fleet.nodes()) {
      const NodeFacts& n = *node;
      Cached& cached = facts_.at(n.name);
      if (cached.clean) continue;
      ObjectPtr actual = nodes_->Get(n.name);
      if (!actual) continue;
      const size_t writes_before = writes.size();
      Json labels = fleet.RenderNodeLabels(n);
      const std::set<std::string> owned =
          OwnedKeys(OwnedFields(*actual, kNodesManager, ""), {"f:metadata", "f:labels"});
      std::string why = Difference(*actual, labels);
      for (const std::string& key : owned)
        if (!labels["metadata"]["labels"].contains(key)) why = "label " + key + " to remove";
      if (!why.empty())
        writes.push_back(Apply("node", kNodesManager, kube::resources::Nodes(), labels, {}, why));
      Json capacity = fleet.RenderNodeCapacity(n);
      const std::set<std::string> owned_capacity =
          OwnedKeys(OwnedFields(*actual, kNodesManager, "status"), {"f:status", "f:capacity"});
      why = Difference(*actual, capacity);
      for (const std::string& key : owned_capacity)
        if (!capacity["status"]["capacity"].contains(key)) why = "capacity " + key + " to remove";
      if (!why.empty()) {
        writes.push_back(Apply("node-capacity", kNodesManager, kube::resources::Nodes(), capacity,
                               "status", why));
      }
      // Only a node seen at the versions its facts were read from counts as clean.
      if (writes.size() == writes_before &&
          (*actual)["metadata"].value("resourceVersion", "") == cached.node_rv)
        cached.clean = true;
    }

    // The AdmissionCheck, kept Active.
    ObjectPtr check = checks_->Get(kNodeDevicesCheck);
    const Json check_object = RenderAdmissionCheck();
    if (!check || !Covers(*check, check_object))
      writes.push_back(Apply("admissioncheck", kChecksManager, kAdmissionChecks, check_object));
    const bool check_active = check && ConditionTrue(*check, "Active");
    if (check && !check_active) {
      Json status = {{"apiVersion", check_object["apiVersion"]},
                     {"kind", "AdmissionCheck"},
                     {"metadata", {{"name", kNodeDevicesCheck}}},
                     {"status",
                      {{"conditions", Json::array({{{"type", "Active"},
                                                    {"status", "True"},
                                                    {"reason", "Active"},
                                                    {"message", "the gpustack worker judges it"},
                                                    {"lastTransitionTime", Now()}}})}}}};
      writes.push_back(Apply("admissioncheck", kChecksManager, kAdmissionChecks, status, "status"));
    }

    // ResourceFlavors: one per live flavor; the others go.
    std::set<std::string> live_flavors;
    for (const auto& [name, flavor] : fleet.flavors()) {
      live_flavors.insert(name);
      Json desired = fleet.RenderFlavor(flavor);
      ObjectPtr actual = flavors_->Get(name);
      if (!actual || !Covers(*actual, desired)) {
        writes.push_back(Apply("resourceflavor", kFlavorsManager, kFlavors, desired, {},
                               actual ? Difference(*actual, desired) : "absent"));
      }
    }
    for (const ObjectPtr& f : flavors_->List())
      if (!live_flavors.count(Name(*f)) && !Deleting(*f))
        writes.push_back(Delete("resourceflavor", kFlavors, *f));

    // InstanceTypes: derived ones created once (and again after a delete), every one's queue and
    // status kept, deleted ones drained first.
    std::vector<ObjectPtr> types = instance_types_->List();
    std::set<std::string> names;
    for (const ObjectPtr& t : types) names.insert(Name(*t));
    for (const PoolIdentity& id : fleet.DerivedPools()) {
      const std::string name = PoolName(id);
      if (names.count(name)) continue;
      auto object = std::make_shared<const Json>(fleet.RenderDerivedInstanceType(id));
      writes.push_back({"instancetype", "create InstanceType " + name, [this, object] {
                          auto done = client_.Create(kube::resources::InstanceTypes(), *object);
                          if (!done && !kube::IsAlreadyExists(done.failure()))
                            return Status(done.failure());
                          return Status(Ok{});
                        }});
      // Its queue, status and entrances follow in this same pass (phase 1 runs after the
      // creates of phase 0): a new pool does not wait for the next pass.
      types.push_back(object);
    }
    std::set<std::string> live_queues;
    std::vector<std::string> entrance_queues;
    for (const ObjectPtr& t : types) {
      const std::string name = Name(*t);
      ObjectPtr queue = queues_->Get(name);
      if (Deleting(*t)) {
        if (!HasFinalizer(*t, kFinalizer)) continue;
        live_queues.insert(name);  // until it has drained
        Json desired = fleet.RenderClusterQueue(*t, queue.get(), /*deleting=*/true, check_active);
        if (queue && !Covers(*queue, desired)) {
          writes.push_back(Apply("clusterqueue", kQueuesManager, kClusterQueues, desired));
        } else if (queue) {
          const Json& s = queue->value("status", Json::object());
          if (!Deleting(*queue) &&
              s.value("reservingWorkloads", 0) + s.value("admittedWorkloads", 0) == 0)
            writes.push_back(Delete("clusterqueue", kClusterQueues, *queue));
        } else {
          writes.push_back(RemoveFinalizer(*t));
        }
        continue;
      }
      live_queues.insert(name);
      entrance_queues.push_back(name);
      // A queue someone else stopped (kubectl patch, Kueue's own tools) makes its InstanceType
      // inactive, stickily (reference §5.1), rather than being started again by the next apply.
      if (queue && StoppedByOthers(*queue) && !(*t)["spec"].value("inactive", false)) {
        writes.push_back(Inactivate(name));
        continue;
      }
      if (!HasFinalizer(*t, kFinalizer) ||
          (*t)["metadata"].value("labels", Json::object()).value(kEntranceLabel, "") !=
              EntranceName(name)) {
        Json meta = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                     {"kind", "InstanceType"},
                     {"metadata",
                      {{"name", name},
                       {"labels", {{kEntranceLabel, EntranceName(name)}}},
                       {"finalizers", Json::array({kFinalizer})}}}};
        writes.push_back(
            Apply("instancetype", kInstanceTypesManager, kube::resources::InstanceTypes(), meta));
      }
      Json desired = fleet.RenderClusterQueue(*t, queue.get(), /*deleting=*/false, check_active);
      if (!queue || !Covers(*queue, desired)) {
        writes.push_back(Apply("clusterqueue", kQueuesManager, kClusterQueues, desired, {},
                               queue ? Difference(*queue, desired) : "absent"));
      } else if (StoppedByOthers(*queue)) {
        // Inactive now: the stop becomes ours, so that making the type active starts the queue.
        writes.push_back(Apply("clusterqueue", kQueuesManager, kClusterQueues, desired, {},
                               "take over the stopPolicy someone else set"));
      }
      const std::string stop = desired["spec"]["stopPolicy"];
      std::string reason;
      if (stop != "None") {
        reason = (*t)["spec"].value("inactive", false)
                     ? "spec.inactive: the queue is held"
                     : "no node of this pool is managed: the queue is " +
                           std::string(stop == "Hold" ? "held" : "drained and held");
      }
      Json status = fleet.RenderInstanceTypeStatus(*t, stop != "None", reason);
      if (std::string why = Difference(*t, status); !why.empty()) {
        writes.push_back(Apply("instancetype-status", kInstanceTypesManager,
                               kube::resources::InstanceTypes(), status, "status", why));
      }
    }
    for (const ObjectPtr& q : queues_->List())
      if (!live_queues.count(Name(*q)) && !Deleting(*q))
        writes.push_back(Delete("clusterqueue", kClusterQueues, *q));

    // LocalQueue entrances: one per queue in every namespace that is not the system's.
    std::set<std::string> live_entrances;
    for (const ObjectPtr& n : namespaces_->List()) {
      const std::string ns = Name(*n);
      if (ns.rfind("kube-", 0) == 0 || ns == options_.system_namespace ||
          n->value("status", Json::object()).value("phase", "") == "Terminating")
        continue;
      for (const std::string& queue : entrance_queues) {
        Json desired = RenderLocalQueue(ns, queue);
        const std::string key = ns + "/" + Name(desired);
        live_entrances.insert(key);
        ObjectPtr actual = entrances_->Get(key);
        if (!actual || !Covers(*actual, desired))
          writes.push_back(Apply("localqueue", kEntrancesManager, kLocalQueues, desired));
      }
    }
    for (const ObjectPtr& lq : entrances_->List())
      if (!live_entrances.count(kube::ObjectKey(*lq)) && !Deleting(*lq))
        writes.push_back(Delete("localqueue", kLocalQueues, *lq));

    for (const Write& w : writes) log_->debug("{}", w.what);
    std::vector<std::string> errors = RunWrites(writes, options_.write_threads, counters_);
    for (const std::string& e : errors) log_->warn("{}", e);
    {
      std::lock_guard lock(counters_.mutex);
      if (problems != counters_.problems)
        for (const std::string& p : problems) log_->warn("{}", p);
      counters_.problems = problems;
      size_t managed = 0;
      for (const NodePtr& n : fleet.nodes()) managed += n->managed ? 1 : 0;
      counters_.snapshot = {{"nodes", fleet.nodes().size()},
                            {"managedNodes", managed},
                            {"flavors", fleet.flavors().size()},
                            {"instanceTypes", live_queues.size()},
                            {"entrances", live_entrances.size()},
                            {"manufacturers", fleet.manufacturers().size()},
                            {"problems", problems}};
    }
    if (!errors.empty()) {
      *error = std::to_string(errors.size()) + " of " + std::to_string(writes.size()) +
               " write(s) failed, first: " + errors.front();
      return false;
    }
    return true;
  }

  // Whether the queue's stopPolicy stops it and was written by someone other than this worker
  // (its field manager no longer owns the field).
  static bool StoppedByOthers(const Json& queue) {
    const Json& spec = queue["spec"];
    if (spec.value("stopPolicy", "None") == "None") return false;
    if (queue["metadata"].value("annotations", Json::object()).contains(kEmptyPlanHold))
      return false;
    return !OwnedKeys(OwnedFields(queue, kQueuesManager, ""), {"f:spec"}).count("stopPolicy");
  }

  Write Inactivate(const std::string& name) {
    return {"instancetype", "inactivate InstanceType " + name + " (its queue was stopped)",
            [this, name] {
              auto done = client_.Patch(kube::resources::InstanceTypes(), "", name,
                                        kube::PatchType::kMerge, {{"spec", {{"inactive", true}}}});
              return done ? Status(Ok{}) : Status(done.failure());
            },
            1};
  }

  Write RemoveFinalizer(const Json& instance_type) {
    const Json current = instance_type["metadata"].value("finalizers", Json::array());
    Json kept = Json::array();
    for (const Json& f : current)
      if (f != kFinalizer) kept.push_back(f);
    // The test makes a concurrent change to the list a conflict, never a lost finalizer.
    const Json patch =
        Json::array({{{"op", "test"}, {"path", "/metadata/finalizers"}, {"value", current}},
                     {{"op", "replace"}, {"path", "/metadata/finalizers"}, {"value", kept}}});
    const std::string name = Name(instance_type);
    return {"instancetype", "release InstanceType " + name,
            [this, name, patch] {
              auto done = client_.Patch(kube::resources::InstanceTypes(), "", name,
                                        kube::PatchType::kJson, patch);
              if (!done && !kube::IsNotFound(done.failure())) return Status(done.failure());
              return Status(Ok{});
            },
            2};
  }

  struct Cached {
    std::string node_rv, devices_rv, settings_key;
    NodePtr facts;
    // This node, at these versions and settings, needed no write: skipped until one changes, so
    // a pass on a large fleet costs what changed, not every node.
    bool clean = false;
  };

  kube::Client& client_;
  const WorkerOptions& options_;
  Counters& counters_;
  std::shared_ptr<spdlog::logger> log_;
  kube::WorkQueue queue_{kube::WorkQueueOptions{.base_delay = std::chrono::milliseconds(200),
                                                .max_delay = std::chrono::milliseconds(30'000)}};
  std::unique_ptr<kube::Informer> nodes_, devices_, instance_types_, namespaces_, flavors_, queues_,
      entrances_, checks_, settings_, pods_;
  std::unique_ptr<NodeDevicesCheck> node_check_;
  std::map<std::string, Cached> facts_;
  std::mutex cpu_mutex_;
  std::map<std::string, int64_t> node_cpu_;  // millicores
};

// Every replica, before the election: the system namespace and the settings Secret exist, and the
// Secret holds every known setting (the environment seeds the missing ones, never overwrites).
Status Prepare(kube::Client& client, const WorkerOptions& options) {
  auto seeds = SeedValues(options.getenv ? options.getenv
                                         : [](const std::string&) { return std::string(); });
  if (!seeds) return seeds.failure();
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata", {{"name", options.system_namespace}}}};
  if (auto made = client.Create(kube::resources::Namespaces(), ns);
      !made && !kube::IsAlreadyExists(made.failure()) && made.failure().http_status != 403)
    return Status(
        made.failure().WithContext("cannot create namespace " + options.system_namespace + ": "));
  auto secret = client.Get(kSecrets, options.system_namespace, kSettingsSecret);
  if (!secret && kube::IsNotFound(secret.failure())) {
    Json object = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata",
                    {{"name", kSettingsSecret},
                     {"namespace", options.system_namespace},
                     {"labels", {{kPartOfLabel, kPartOf}}}}},
                   {"type", "Opaque"},
                   {"stringData", *seeds}};
    auto made = client.Create(kSecrets, object);
    if (made || kube::IsAlreadyExists(made.failure())) return Ok{};
    return Status(made.failure().WithContext("cannot create the settings Secret: "));
  }
  if (!secret) return Status(secret.failure().WithContext("cannot read the settings Secret: "));
  Json missing = Json::object();
  const Json data = secret->value("data", Json::object());
  for (const auto& [name, value] : *seeds)
    if (!data.contains(name)) missing[name] = value;
  if (missing.empty()) return Ok{};
  auto patched = client.Patch(kSecrets, options.system_namespace, kSettingsSecret,
                              kube::PatchType::kMerge, {{"stringData", missing}});
  if (!patched) return Status(patched.failure().WithContext("cannot add settings: "));
  return Ok{};
}

std::string RenderMetrics(Counters& c) {
  std::lock_guard lock(c.mutex);
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string& name, const std::string& value) {
    out += name + " " + value + "\n";
  };
  family("gpustack_worker_leader", "gauge", "Whether this replica leads (1) or waits (0).");
  sample("gpustack_worker_leader", c.leading ? "1" : "0");
  family("gpustack_worker_passes_total", "counter", "Reconcile passes.");
  sample("gpustack_worker_passes_total", std::to_string(c.passes));
  family("gpustack_worker_failed_passes_total", "counter", "Reconcile passes with a failed write.");
  sample("gpustack_worker_failed_passes_total", std::to_string(c.failed_passes));
  family("gpustack_worker_writes_total", "counter",
         "Writes sent to the apiserver, by object kind.");
  for (const auto& [kind, n] : c.writes)
    sample("gpustack_worker_writes_total{kind=\"" + kind + "\"}", std::to_string(n));
  family("gpustack_worker_write_failures_total", "counter",
         "Writes the apiserver refused or lost.");
  sample("gpustack_worker_write_failures_total", std::to_string(c.write_failures));
  family("gpustack_worker_last_pass_seconds", "gauge", "Duration of the latest reconcile pass.");
  sample("gpustack_worker_last_pass_seconds", std::to_string(c.last_pass_seconds));
  const NodeCheckCounters check = c.node_check ? c.node_check->Counters() : c.last_check;
  family("gpustack_node_devices_verdicts_total", "counter",
         "gpustack-node-devices verdicts written, by state.");
  sample("gpustack_node_devices_verdicts_total{state=\"Ready\"}", std::to_string(check.ready));
  sample("gpustack_node_devices_verdicts_total{state=\"Retry\"}", std::to_string(check.retry));
  family("gpustack_node_devices_write_failures_total", "counter",
         "Verdicts the apiserver refused (retried).");
  sample("gpustack_node_devices_write_failures_total", std::to_string(check.write_failures));
  std::vector<double> sorted = check.decision_seconds;
  std::sort(sorted.begin(), sorted.end());
  family("gpustack_node_devices_decision_seconds", "summary",
         "Time to judge one Workload (the most recent 4096).");
  for (double q : {0.5, 0.9, 0.99}) {
    const double v =
        sorted.empty()
            ? 0
            : sorted[std::min(sorted.size() - 1,
                              static_cast<size_t>(q * static_cast<double>(sorted.size())))];
    sample("gpustack_node_devices_decision_seconds{quantile=\"" + std::to_string(q).substr(0, 4) +
               "\"}",
           std::to_string(v));
  }
  sample("gpustack_node_devices_decision_seconds_count", std::to_string(sorted.size()));
  return out;
}

}  // namespace

Result<ManufacturerTable> LoadManufacturers(
    const std::vector<std::filesystem::path>& dirs,
    const std::vector<std::filesystem::path>& required,
    const std::function<std::string(const std::string&)>& getenv,
    std::vector<std::string>* problems) {
  ManufacturerTable table;
  loader::DlopenPluginSource source(dirs, required);
  std::vector<runtime::SourceProblem> source_problems;
  for (const runtime::PluginCandidate& candidate : source.Find(&source_problems)) {
    if (!candidate.usable) {
      problems->push_back(candidate.origin + ": " + candidate.usable.error());
      continue;
    }
    auto plugin = source.Load(candidate);
    if (!plugin) {
      problems->push_back(candidate.origin + ": " + plugin.error());
      continue;
    }
    runtime::PluginIdentity id = (*plugin)->identity();
    // The same deploy-time overrides the node daemons apply (the chart gives both the same env).
    if (auto overridden = runtime::ApplyIdentityOverrides(id, getenv); !overridden) {
      return Error{overridden.error(), Code::kInvalidArgument};
    }
    table[id.manufacturer] = {id.manufacturer,           id.base_resource_name,
                              id.partition_kind,         candidate.origin,
                              id.one_card_per_container, id.min_slice_memory_percentage};
  }
  for (const runtime::SourceProblem& p : source_problems)
    if (p.fatal) return Error{p.message, Code::kInvalidArgument};
  return table;
}

int RunWorker(kube::Client& client, const WorkerOptions& options, const std::atomic<bool>& stop) {
  auto log = Logger("worker");
  Counters counters;
  std::unique_ptr<AdmissionWebhooks> webhooks;
  node::Exporter health(options.health, {[&] {
                                           std::string out = RenderMetrics(counters);
                                           if (webhooks) out += webhooks->RenderMetrics();
                                           return out;
                                         },
                                         [&] {
                                           std::lock_guard lock(counters.mutex);
                                           return counters.snapshot.dump();
                                         },
                                         [&] {
                                           std::lock_guard lock(counters.mutex);
                                           // A standby is ready (it waits for the Lease and
                                           // serves webhooks), a leader once its caches are
                                           // synced.
                                           if (webhooks && !webhooks->ready()) return false;
                                           return counters.leading ? counters.synced
                                                                   : options.leader_election;
                                         }});
  if (options.serve_https) {
    if (Status started = health.Start(); !started) {
      log->error("{}", started.error());
      return 2;
    }
    log->info("serving /metrics, /livez and /readyz on https://{}:{}", options.health.address,
              health.port());
  }
  for (const auto& [key, m] : options.manufacturers)
    log->info("manufacturer {}: {} (partition kind '{}') from {}", key, m.base, m.partition_kind,
              m.origin);
  // Prepare retries: the apiserver may not be up yet when the Pod starts.
  for (int attempt = 0; !stop; ++attempt) {
    Status prepared = Prepare(client, options);
    if (prepared) break;
    if (prepared.failure().code == Code::kInvalidArgument) {
      log->error("{}", prepared.error());
      return 2;
    }
    log->warn("preparing: {} (retrying)", prepared.error());
    std::this_thread::sleep_for(std::chrono::seconds(std::min(attempt + 1, 5)));
  }

  if (options.webhooks.enabled) {
    webhooks = std::make_unique<AdmissionWebhooks>(client, options.webhooks,
                                                   options.system_namespace, options.manufacturers);
    if (Status started = webhooks->Start(); !started) {
      log->error("admission webhooks: {}", started.error());
      return started.failure().code == Code::kInvalidArgument ? 2 : 1;
    }
  }

  std::stop_source stopping;
  std::jthread watcher([&](std::stop_token own) {
    while (!own.stop_requested() && !stop)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopping.request_stop();
  });
  auto lead = [&](std::stop_token term_stop) {
    {
      std::lock_guard lock(counters.mutex);
      counters.leading = true;
    }
    log->info("leading: reconciling");
    Term term(client, options, counters);
    term.Run(term_stop);
    std::lock_guard lock(counters.mutex);
    counters.leading = false;
  };
  if (!options.leader_election) {
    lead(stopping.get_token());
  } else {
    kube::LeaderElectionConfig config = options.election;
    config.lease_namespace = options.system_namespace;
    kube::LeaderElector elector(client, config);
    while (!stopping.stop_requested()) {
      Status ran = elector.Run(stopping.get_token(), {.on_started_leading = lead,
                                                      .on_stopped_leading =
                                                          [&] {
                                                            if (!stopping.stop_requested())
                                                              log->warn("stopped leading");
                                                          },
                                                      .on_new_leader =
                                                          [&](const std::string& who) {
                                                            if (who != options.election.identity)
                                                              log->info("leader is {}", who);
                                                          }});
      if (!ran) {
        log->error("leader election: {}", ran.error());
        return 2;
      }
    }
  }
  watcher.request_stop();
  if (webhooks) webhooks->Stop();
  health.Stop();
  log->info("stopped");
  return 0;
}

}  // namespace gpustack::op
