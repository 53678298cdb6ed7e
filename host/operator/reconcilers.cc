// The worker's six reconcilers (reconciler.h): node labels and counting keys, the
// gpustack-node-devices AdmissionCheck, ResourceFlavors, InstanceTypes, their ClusterQueues and
// the LocalQueue entrances. Each compares what the fleet model renders with the cache and returns
// only what differs.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "host/common/json_path.h"
#include "host/operator/node_check.h"
#include "host/operator/reconciler.h"

namespace gpustack::op {
namespace {

using kube::ObjectPtr;
using kube::ResourceType;

const ResourceType kFlavors = kube::resources::ResourceFlavors();
const ResourceType kClusterQueues = kube::resources::ClusterQueues();
const ResourceType kLocalQueues = kube::resources::LocalQueues();
const ResourceType kAdmissionChecks = kube::resources::AdmissionChecks();
const ResourceType kInstanceTypes = kube::resources::InstanceTypes();
const ResourceType kNodes = kube::resources::Nodes();

std::string Name(const Json& object) { return StringAt(object, {"metadata", "name"}); }
bool Deleting(const Json& object) {
  return !JsonAt(object, {"metadata", "deletionTimestamp"}).is_null();
}

bool HasFinalizer(const Json& object, const std::string& finalizer) {
  const Json& finalizers = JsonAt(object, {"metadata", "finalizers"});
  return finalizers.is_array() &&
         std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

std::string Now() { return kube::FormatTime(std::chrono::system_clock::now()); }

// Labels (docs/behaviour.md §3.3, §3.7, §3.8) and counting keys (§3.6) of every managed node,
// written where they changed. A node whose facts needed no write is skipped until its facts change,
// so a pass on a large fleet costs what changed, not every node.
class NodeReconciler final : public Reconciler {
 public:
  explicit NodeReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    std::map<std::string, NodePtr> seen;
    for (const NodePtr& node : pass.fleet.nodes()) {
      seen[node->name] = node;
      // The same facts object: the same Node, Devices and settings as when it was clean.
      if (auto clean = clean_.find(node->name); clean != clean_.end() && clean->second == node)
        continue;
      NodeRecordPtr record = pass.caches.nodes->Get(node->name);
      if (!record) continue;
      const Json actual = record->Parse();
      const size_t before = writes.size();
      Labels(pass.fleet, *node, actual, writes);
      Capacity(pass.fleet, *node, actual, writes);
      if (writes.size() == before) clean_[node->name] = node;
    }
    std::erase_if(clean_, [&](const auto& entry) { return !seen.count(entry.first); });
    return writes;
  }

 private:
  void Labels(const Fleet& fleet, const NodeFacts& node, const Json& actual,
              std::vector<Write>& writes) {
    Json labels = fleet.RenderNodeLabels(node);
    std::string why = Difference(actual, labels);
    for (const std::string& key :
         OwnedKeys(OwnedFields(actual, kNodesManager, ""), {"f:metadata", "f:labels"}))
      if (!labels["metadata"]["labels"].contains(key)) why = "label " + key + " to remove";
    if (!why.empty())
      writes.push_back(ApplyWrite(client_, Phase::kNodes, "node", kNodesManager, kNodes,
                                  std::move(labels), {}, why));
  }

  void Capacity(const Fleet& fleet, const NodeFacts& node, const Json& actual,
                std::vector<Write>& writes) {
    Json capacity = fleet.RenderNodeCapacity(node);
    std::string why = Difference(actual, capacity);
    for (const std::string& key :
         OwnedKeys(OwnedFields(actual, kNodesManager, "status"), {"f:status", "f:capacity"}))
      if (!capacity["status"]["capacity"].contains(key)) why = "capacity " + key + " to remove";
    if (!why.empty())
      writes.push_back(ApplyWrite(client_, Phase::kNodes, "node-capacity", kNodesManager, kNodes,
                                  std::move(capacity), "status", why));
  }

  kube::Client& client_;
  std::map<std::string, NodePtr> clean_;
};

// The gpustack-node-devices AdmissionCheck, kept and kept Active.
class CheckReconciler final : public Reconciler {
 public:
  explicit CheckReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    ObjectPtr check = pass.caches.checks->Get(kNodeDevicesCheck);
    const Json desired = RenderAdmissionCheck();
    if (!check || !Covers(*check, desired))
      writes.push_back(ApplyWrite(client_, Phase::kReferenced, "admissioncheck", kChecksManager,
                                  kAdmissionChecks, desired));
    if (check && !pass.check_active) {
      Json status = {{"apiVersion", desired["apiVersion"]},
                     {"kind", "AdmissionCheck"},
                     {"metadata", {{"name", kNodeDevicesCheck}}},
                     {"status",
                      {{"conditions", Json::array({{{"type", "Active"},
                                                    {"status", "True"},
                                                    {"reason", "Active"},
                                                    {"message", "the gpustack worker judges it"},
                                                    {"lastTransitionTime", Now()}}})}}}};
      writes.push_back(ApplyWrite(client_, Phase::kReferenced, "admissioncheck", kChecksManager,
                                  kAdmissionChecks, std::move(status), "status"));
    }
    return writes;
  }

 private:
  kube::Client& client_;
};

// One ResourceFlavor per live flavor; the others go.
class FlavorReconciler final : public Reconciler {
 public:
  explicit FlavorReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    for (const auto& [name, flavor] : pass.fleet.flavors()) {
      Json desired = pass.fleet.RenderFlavor(flavor);
      ObjectPtr actual = pass.caches.flavors->Get(name);
      if (!actual || !Covers(*actual, desired)) {
        const std::string why = actual ? Difference(*actual, desired) : "absent";
        writes.push_back(ApplyWrite(client_, Phase::kReferenced, "resourceflavor", kFlavorsManager,
                                    kFlavors, std::move(desired), {}, why));
      }
    }
    for (const ObjectPtr& f : pass.caches.flavors->List())
      if (!pass.fleet.flavors().count(Name(*f)) && !Deleting(*f))
        writes.push_back(DeleteWrite(client_, "resourceflavor", kFlavors, *f));
    live_ = pass.fleet.flavors().size();
    return writes;
  }

  void Describe(Json& snapshot) const override { snapshot["flavors"] = live_; }

 private:
  kube::Client& client_;
  size_t live_ = 0;
};

// Whether the queue's stopPolicy stops it and was written by someone other than this worker
// (the queues' field manager no longer owns the field): the stop is sticky (docs/behaviour.md
// §5.1).
bool StoppedByOthers(const Json& queue) {
  if (JsonAt(queue, {"spec", "stopPolicy"}).is_null() ||
      JsonAt(queue, {"spec", "stopPolicy"}) == "None")
    return false;
  if (!JsonAt(queue, {"metadata", "annotations", kEmptyPlanHold}).is_null()) return false;
  return !OwnedKeys(OwnedFields(queue, kQueuesManager, ""), {"f:spec"}).count("stopPolicy");
}

bool Inactive(const Json& instance_type) {
  return JsonAt(instance_type, {"spec", "inactive"}) == true;
}

// The queue `instance_type` should have now.
Json DesiredQueue(const PassView& pass, const Json& instance_type, const Json* queue) {
  return pass.fleet.RenderClusterQueue(instance_type, queue, Deleting(instance_type),
                                       pass.check_active);
}

// InstanceTypes: the derived ones created (once, and again after a delete), every live one's
// finalizer, entrance label and status kept, a deleted one released once its queue is gone, and
// one whose queue someone else stopped made inactive.
class InstanceTypeReconciler final : public Reconciler {
 public:
  explicit InstanceTypeReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    live_ = 0;
    for (const ObjectPtr& t : pass.instance_types) {
      const std::string name = Name(*t);
      if (pass.created.count(name)) writes.push_back(Create(t));
      ObjectPtr queue = pass.caches.queues->Get(name);
      if (Deleting(*t)) {
        if (HasFinalizer(*t, kFinalizer) && !queue) writes.push_back(RemoveFinalizer(*t));
        continue;
      }
      ++live_;
      if (queue && StoppedByOthers(*queue) && !Inactive(*t)) {
        writes.push_back(Inactivate(name));
        continue;
      }
      if (!HasFinalizer(*t, kFinalizer) ||
          StringAt(*t, {"metadata", "labels", kEntranceLabel}) != EntranceName(name)) {
        Json meta = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                     {"kind", "InstanceType"},
                     {"metadata",
                      {{"name", name},
                       {"labels", {{kEntranceLabel, EntranceName(name)}}},
                       {"finalizers", Json::array({kFinalizer})}}}};
        writes.push_back(ApplyWrite(client_, Phase::kReferring, "instancetype",
                                    kInstanceTypesManager, kInstanceTypes, std::move(meta)));
      }
      const std::string stop = DesiredQueue(pass, *t, queue.get())["spec"]["stopPolicy"];
      std::string reason;
      if (stop != "None") {
        reason = Inactive(*t) ? "spec.inactive: the queue is held"
                              : "no node of this pool is managed: the queue is " +
                                    std::string(stop == "Hold" ? "held" : "drained and held");
      }
      Json status = pass.fleet.RenderInstanceTypeStatus(*t, stop != "None", reason);
      if (std::string why = Difference(*t, status); !why.empty()) {
        writes.push_back(ApplyWrite(client_, Phase::kReferring, "instancetype-status",
                                    kInstanceTypesManager, kInstanceTypes, std::move(status),
                                    "status", why));
      }
    }
    return writes;
  }

  void Describe(Json& snapshot) const override { snapshot["instanceTypes"] = live_; }

 private:
  Write Create(const ObjectPtr& object) {
    return {"instancetype", "create InstanceType " + Name(*object), Phase::kReferenced,
            [this, object] {
              auto done = client_.Create(kInstanceTypes, *object);
              if (!done && !kube::IsAlreadyExists(done.failure())) return Status(done.failure());
              return Status(Ok{});
            }};
  }

  Write Inactivate(const std::string& name) {
    return {"instancetype", "inactivate InstanceType " + name + " (its queue was stopped)",
            Phase::kReferring, [this, name] {
              auto done = client_.Patch(kInstanceTypes, "", name, kube::PatchType::kMerge,
                                        {{"spec", {{"inactive", true}}}});
              return done ? Status(Ok{}) : Status(done.failure());
            }};
  }

  Write RemoveFinalizer(const Json& instance_type) {
    const Json current = JsonAt(instance_type, {"metadata", "finalizers"});
    Json kept = Json::array();
    for (const Json& f : current)
      if (f != kFinalizer) kept.push_back(f);
    // The test makes a concurrent change to the list a conflict, never a lost finalizer.
    const Json patch =
        Json::array({{{"op", "test"}, {"path", "/metadata/finalizers"}, {"value", current}},
                     {{"op", "replace"}, {"path", "/metadata/finalizers"}, {"value", kept}}});
    const std::string name = Name(instance_type);
    return {"instancetype", "release InstanceType " + name, Phase::kDeletions, [this, name, patch] {
              auto done = client_.Patch(kInstanceTypes, "", name, kube::PatchType::kJson, patch);
              if (!done && !kube::IsNotFound(done.failure())) return Status(done.failure());
              return Status(Ok{});
            }};
  }

  kube::Client& client_;
  size_t live_ = 0;
};

// One ClusterQueue per InstanceType: kept as the fleet renders it, drained and deleted once its
// InstanceType is deleted, and a stop someone else wrote taken over once the type is inactive.
class QueueReconciler final : public Reconciler {
 public:
  explicit QueueReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    std::set<std::string> live;
    for (const ObjectPtr& t : pass.instance_types) {
      const std::string name = Name(*t);
      ObjectPtr queue = pass.caches.queues->Get(name);
      if (Deleting(*t)) {
        if (!HasFinalizer(*t, kFinalizer)) continue;
        live.insert(name);  // until it has drained
        if (queue) Drain(pass, *t, *queue, writes);
        continue;
      }
      live.insert(name);
      // The InstanceType reconciler makes the type inactive first; the next pass takes over.
      if (queue && StoppedByOthers(*queue) && !Inactive(*t)) continue;
      Json desired = DesiredQueue(pass, *t, queue.get());
      if (!queue || !Covers(*queue, desired)) {
        const std::string why = queue ? Difference(*queue, desired) : "absent";
        writes.push_back(ApplyWrite(client_, Phase::kReferring, "clusterqueue", kQueuesManager,
                                    kClusterQueues, std::move(desired), {}, why));
      } else if (StoppedByOthers(*queue)) {
        // Inactive now: the stop becomes ours, so that making the type active starts the queue.
        writes.push_back(ApplyWrite(client_, Phase::kReferring, "clusterqueue", kQueuesManager,
                                    kClusterQueues, std::move(desired), {},
                                    "take over the stopPolicy someone else set"));
      }
    }
    for (const ObjectPtr& q : pass.caches.queues->List())
      if (!live.count(Name(*q)) && !Deleting(*q))
        writes.push_back(DeleteWrite(client_, "clusterqueue", kClusterQueues, *q));
    return writes;
  }

 private:
  // A deleted InstanceType's queue: drained (held) first, deleted once it holds no work.
  void Drain(const PassView& pass, const Json& instance_type, const Json& queue,
             std::vector<Write>& writes) {
    Json desired = DesiredQueue(pass, instance_type, &queue);
    if (!Covers(queue, desired)) {
      writes.push_back(ApplyWrite(client_, Phase::kReferring, "clusterqueue", kQueuesManager,
                                  kClusterQueues, std::move(desired)));
      return;
    }
    if (!Deleting(queue) && WorkloadsHeld(queue) == 0)
      writes.push_back(DeleteWrite(client_, "clusterqueue", kClusterQueues, queue));
  }

  kube::Client& client_;
};

// LocalQueue entrances: one per live queue in every namespace but kube-* and the system's.
class EntranceReconciler final : public Reconciler {
 public:
  explicit EntranceReconciler(kube::Client& client) : client_(client) {}

  std::vector<Write> Reconcile(const PassView& pass) override {
    std::vector<Write> writes;
    std::vector<std::string> queues;
    for (const ObjectPtr& t : pass.instance_types)
      if (!Deleting(*t)) queues.push_back(Name(*t));
    std::set<std::string> live;
    for (const ObjectPtr& n : pass.caches.namespaces->List()) {
      const std::string ns = Name(*n);
      if (ns.rfind("kube-", 0) == 0 || ns == pass.system_namespace ||
          StringAt(*n, {"status", "phase"}) == "Terminating")
        continue;
      for (const std::string& queue : queues) {
        Json desired = RenderLocalQueue(ns, queue);
        const std::string key = ns + "/" + Name(desired);
        live.insert(key);
        ObjectPtr actual = pass.caches.entrances->Get(key);
        if (!actual || !Covers(*actual, desired))
          writes.push_back(ApplyWrite(client_, Phase::kReferring, "localqueue", kEntrancesManager,
                                      kLocalQueues, std::move(desired)));
      }
    }
    for (const ObjectPtr& lq : pass.caches.entrances->List())
      if (!live.count(kube::ObjectKey(*lq)) && !Deleting(*lq))
        writes.push_back(DeleteWrite(client_, "localqueue", kLocalQueues, *lq));
    live_ = live.size();
    return writes;
  }

  void Describe(Json& snapshot) const override { snapshot["entrances"] = live_; }

 private:
  kube::Client& client_;
  size_t live_ = 0;
};

// One phase of `writes` on up to `threads` threads.
std::vector<std::string> RunPhase(std::vector<Write*>& writes, int threads,
                                  const std::function<void(const Write&, bool)>& counted) {
  std::vector<std::string> errors;
  std::mutex mutex;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < writes.size(); i = next++) {
      Status done = writes[i]->run();
      std::lock_guard lock(mutex);
      counted(*writes[i], bool(done));
      if (!done) errors.push_back(writes[i]->what + ": " + done.error());
    }
  };
  const int n = std::clamp<int>(static_cast<int>(writes.size()), 1, std::max(threads, 1));
  std::vector<std::jthread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  return errors;
}

}  // namespace

std::vector<std::unique_ptr<Reconciler>> MakeReconcilers(kube::Client& client) {
  std::vector<std::unique_ptr<Reconciler>> all;
  all.push_back(std::make_unique<NodeReconciler>(client));
  all.push_back(std::make_unique<CheckReconciler>(client));
  all.push_back(std::make_unique<FlavorReconciler>(client));
  all.push_back(std::make_unique<InstanceTypeReconciler>(client));
  all.push_back(std::make_unique<QueueReconciler>(client));
  all.push_back(std::make_unique<EntranceReconciler>(client));
  return all;
}

Write ApplyWrite(kube::Client& client, Phase phase, std::string kind, const char* manager,
                 const kube::ResourceType& type, Json object, std::string subresource,
                 const std::string& why) {
  std::string what = "apply " + kind + " " + Name(object) +
                     (subresource.empty() ? "" : "/" + subresource) +
                     (why.empty() ? "" : " (" + why + ")");
  return {
      std::move(kind), std::move(what), phase,
      [&client, manager, type, object = std::move(object), subresource = std::move(subresource)] {
        auto done = client.Apply(type, object, {manager, /*force=*/true}, subresource);
        return done ? Status(Ok{}) : Status(done.failure());
      }};
}

Write DeleteWrite(kube::Client& client, std::string kind, const kube::ResourceType& type,
                  const Json& object) {
  const std::string ns = StringAt(object, {"metadata", "namespace"});
  const std::string name = Name(object);
  kube::DeleteOptions options;
  options.uid = StringAt(object, {"metadata", "uid"});
  return {std::move(kind), "delete " + type.plural + " " + (ns.empty() ? "" : ns + "/") + name,
          Phase::kDeletions, [&client, type, ns, name, options] {
            Status done = client.Delete(type, ns, name, options);
            if (!done && kube::IsNotFound(done.failure())) return Status(Ok{});
            return done;
          }};
}

std::vector<std::string> RunWrites(std::vector<Write>& writes, int threads,
                                   const std::function<void(const Write&, bool)>& counted) {
  for (Phase phase : {Phase::kReferenced, Phase::kReferring, Phase::kDeletions, Phase::kNodes}) {
    std::vector<Write*> now;
    for (Write& w : writes)
      if (w.phase == phase) now.push_back(&w);
    if (now.empty()) continue;
    if (auto errors = RunPhase(now, threads, counted); !errors.empty()) return errors;
  }
  return {};
}

Json OwnedFields(const Json& object, const std::string& manager, const std::string& subresource) {
  const Json& entries = JsonAt(object, {"metadata", "managedFields"});
  if (!entries.is_array()) return Json::object();
  for (const Json& entry : entries) {
    if (entry.value("manager", "") == manager && entry.value("operation", "") == "Apply" &&
        entry.value("subresource", "") == subresource) {
      const Json fields = entry.value("fieldsV1", Json::object());
      if (!fields.is_string()) return fields;
      // The worker's caches keep it as its text (TrimForWorkerCache).
      Json parsed = Json::parse(fields.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      return parsed.is_object() ? parsed : Json::object();
    }
  }
  return Json::object();
}

Json NodePassView(const Json& node) {
  // Of a Node's annotations a pass reads one; the controller-manager rewrites others (its TTL
  // controller's node.alpha.kubernetes.io/ttl on every node as the cluster grows).
  return Json::array({JsonAt(node, {"metadata", "labels"}),
                      JsonAt(node, {"metadata", "annotations", kCpuNameAnnotation}),
                      JsonAt(node, {"metadata", "finalizers"}),
                      JsonAt(node, {"metadata", "deletionTimestamp"}),
                      JsonAt(node, {"status", "capacity"}),
                      JsonAt(node, {"status", "nodeInfo", "operatingSystem"}),
                      JsonAt(node, {"status", "nodeInfo", "architecture"})});
}

bool SameForPass(const std::string& plural, const Json& a, const Json& b) {
  if (plural == "nodes") return NodePassView(a) == NodePassView(b);
  auto same = [&](JsonPath path) { return JsonAt(a, path) == JsonAt(b, path); };
  const bool meta = same({"metadata", "labels"}) && same({"metadata", "annotations"}) &&
                    same({"metadata", "finalizers"}) && same({"metadata", "deletionTimestamp"});
  if (!meta) return false;
  if (plural == "namespaces") return same({"status", "phase"});
  if (plural == "pods") return same({"spec"}) && same({"status", "phase"});
  if (plural == "clusterqueues") {
    // Of the status, only whether the queue still holds work (the drains wait for it).
    return same({"spec"}) && WorkloadsHeld(a) == WorkloadsHeld(b);
  }
  if (plural == "resourceflavors" || plural == "localqueues") return same({"spec"});
  // Devices, InstanceTypes, the AdmissionCheck, the settings Secret.
  return same({"spec"}) && same({"status"}) && same({"data"});
}

namespace {

// Erases every key of `object` (when it is an object) but `kept`.
void KeepOnly(Json& object, std::initializer_list<std::string_view> kept) {
  if (!object.is_object()) return;
  for (auto it = object.begin(); it != object.end();) {
    const bool keep = std::find(kept.begin(), kept.end(), it.key()) != kept.end();
    it = keep ? std::next(it) : object.erase(it);
  }
}

template <typename Trim>
void ForEachIn(Json& object, std::string_view key, Trim trim) {
  auto list = object.find(key);
  if (list == object.end() || !list->is_array()) return;
  for (Json& item : *list) trim(item);
}

}  // namespace

void TrimForWorkerCache(Json& object) {
  if (!object.is_object()) return;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return;
  if (auto managed = metadata->find("managedFields");
      managed != metadata->end() && managed->is_array()) {
    Json ours = Json::array();
    for (Json& entry : *managed) {
      if (!StringAt(entry, {"manager"}).starts_with("gpustack-worker")) continue;
      // What OwnedFields reads, the field set as its text: parsed, a Node's two entries were
      // about half of what its cached Node cost (docs/footprint.md). A pass parses it again
      // only where it compares the object (a node whose facts changed).
      KeepOnly(entry, {"manager", "operation", "subresource", "fieldsV1"});
      if (auto fields = entry.find("fieldsV1"); fields != entry.end() && fields->is_object()) {
        std::string text = fields->dump();
        text.shrink_to_fit();  // dump() grows it by doubling
        *fields = std::move(text);
      }
      ours.push_back(std::move(entry));
    }
    if (ours.empty()) {
      metadata->erase(managed);
    } else {
      *managed = std::move(ours);
    }
  }
}

void TrimNodeForWorkerCache(Json& node) {
  TrimForWorkerCache(node);
  if (!node.is_object()) return;
  // The spec (taints, CIDRs), the allocatable copy of the capacity, conditions, images, volumes,
  // daemon endpoints: read by no pass, and at 1,000 nodes megabytes (docs/footprint.md).
  KeepOnly(node, {"apiVersion", "kind", "metadata", "status"});
  if (auto meta = node.find("metadata"); meta != node.end()) {
    KeepOnly(*meta, {"name", "uid", "resourceVersion", "labels", "annotations", "managedFields",
                     "finalizers", "deletionTimestamp"});
    // Of the annotations, the one fleet.cc reads (and SameForPass compares).
    if (auto annotations = meta->find("annotations"); annotations != meta->end())
      KeepOnly(*annotations, {kCpuNameAnnotation});
  }
  if (auto status = node.find("status"); status != node.end()) {
    KeepOnly(*status, {"capacity", "nodeInfo", "addresses"});
    if (auto info = status->find("nodeInfo"); info != status->end())
      KeepOnly(*info, {"operatingSystem", "architecture"});
  }
}

void TrimPodForWorkerCache(Json& pod) {
  TrimForWorkerCache(pod);
  KeepOnly(pod, {"apiVersion", "kind", "metadata", "spec", "status"});
  // Only a Failed Pod is judged for a requeue; of every other (most of a fleet's Pods) the
  // identity, the node, the CPU, the phase and the allocation annotations are all that is read.
  const bool failed = StringAt(pod, {"status", "phase"}) == "Failed";
  auto keep_prefixed = [](Json& map, std::initializer_list<std::string_view> prefixes) {
    if (!map.is_object()) return;
    for (auto it = map.begin(); it != map.end();) {
      const bool keep = std::any_of(prefixes.begin(), prefixes.end(),
                                    [&](std::string_view p) { return it.key().starts_with(p); });
      it = keep ? std::next(it) : map.erase(it);
    }
  };
  if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object()) {
    if (failed) {
      KeepOnly(*meta, {"name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                       "deletionTimestamp", "labels", "annotations", "ownerReferences"});
    } else {
      KeepOnly(*meta, {"name", "namespace", "uid", "resourceVersion", "annotations"});
    }
    if (auto labels = meta->find("labels"); labels != meta->end())
      keep_prefixed(*labels, {"kueue.x-k8s.io/"});
    if (auto annotations = meta->find("annotations"); annotations != meta->end()) {
      keep_prefixed(*annotations, {"device.gpustack.ai/", "gpustack.ai/"});
      if (!failed && annotations->empty()) meta->erase(annotations);
    }
    if (auto owners = meta->find("ownerReferences"); owners != meta->end() && owners->is_array()) {
      Json controllers = Json::array();
      for (Json& owner : *owners)
        if (owner.is_object() && owner.value("controller", false) == true)
          controllers.push_back({{"kind", owner.value("kind", "")}, {"controller", true}});
      *owners = std::move(controllers);
    }
  }
  if (auto spec = pod.find("spec"); spec != pod.end()) {
    KeepOnly(*spec, {"nodeName", "containers", "initContainers"});
    for (const char* list : {"containers", "initContainers"})
      ForEachIn(*spec, list, [](Json& container) {
        KeepOnly(container, {"name", "resources", "restartPolicy"});
        if (auto resources = container.find("resources"); resources != container.end()) {
          KeepOnly(*resources, {"requests", "limits"});
          for (auto& [kind, quantities] : resources->items()) KeepOnly(quantities, {"cpu"});
        }
      });
  }
  if (auto status = pod.find("status"); status != pod.end()) {
    if (!failed) {
      KeepOnly(*status, {"phase"});
      return;
    }
    KeepOnly(*status, {"phase", "reason", "message", "startTime", "containerStatuses",
                       "initContainerStatuses"});
    // Of each container, which states it was ever in: only a state's kind is read.
    for (const char* list : {"containerStatuses", "initContainerStatuses"})
      ForEachIn(*status, list, [](Json& container) {
        KeepOnly(container, {"name", "state", "lastState"});
        for (const char* state : {"state", "lastState"}) {
          auto at = container.find(state);
          if (at == container.end() || !at->is_object()) continue;
          for (auto& [kind, details] : at->items()) details = Json::object();
        }
      });
  }
}

std::set<std::string> OwnedKeys(const Json& fields, JsonPath path) {
  const Json* at = ObjectAt(fields, path);
  std::set<std::string> keys;
  if (at == nullptr) return keys;
  for (const auto& [key, value] : at->items())
    if (key.rfind("f:", 0) == 0) keys.insert(key.substr(2));
  return keys;
}

}  // namespace gpustack::op
