#include "host/operator/requeue.h"

#include <algorithm>
#include <thread>

#include "host/common/logging.h"
#include "host/kube/resource.h"
#include "host/ledger/allocated.h"
#include "host/ledger/chosen.h"
#include "host/operator/admission.h"
#include "host/operator/fleet.h"

namespace gpustack::op {
namespace {

constexpr const char* kHostnameLabel = "kubernetes.io/hostname";
constexpr const char* kKueuePrefix = "kueue.x-k8s.io/";
// What a user writes on a queued Pod (the rest under kueue.x-k8s.io/ Kueue writes itself, and a
// copy would tie the replacement to the refused Pod's Workload).
constexpr std::string_view kQueueNameKey = "kueue.x-k8s.io/queue-name";
constexpr std::string_view kPriorityClassKey = "kueue.x-k8s.io/priority-class";
// Pods Kueue treats as members of something larger: a group (Kueue replaces members itself) or
// a Workload the user made.
constexpr const char* kGroupLabels[] = {"kueue.x-k8s.io/pod-group-name",
                                        "kueue.x-k8s.io/prebuilt-workload-name"};
constexpr const char* kRequeueComponent = "worker.gpustack.ai/requeue";

// The reasons the kubelet gives a Pod it turns away at admission (its predicates and the device
// manager's, which is where gate 5 answers).
bool IsAdmissionRefusal(const std::string& reason) {
  return reason == "UnexpectedAdmissionError" || reason == "NodeAffinity" ||
         reason == "NodeSelector" || reason == "NodeName" || reason.rfind("OutOf", 0) == 0;
}

bool AnyContainerStarted(const Json& status) {
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const Json& c : status.value(list, Json::array())) {
      const Json state = c.value("state", Json::object());
      if (state.contains("running") || state.contains("terminated") ||
          !c.value("lastState", Json::object()).empty())
        return true;
    }
  }
  return false;
}

// `object` without the keys Kueue writes, keeping `kept`.
Json WithoutKueueKeys(Json object, std::initializer_list<std::string_view> kept = {}) {
  for (auto it = object.begin(); it != object.end();) {
    const bool theirs = it.key().rfind(kKueuePrefix, 0) == 0 &&
                        std::find(kept.begin(), kept.end(), it.key()) == kept.end();
    it = theirs ? object.erase(it) : std::next(it);
  }
  return object;
}

int AttemptOf(const Json& pod) {
  const std::string text = StringAt(pod, {"metadata", "annotations", kRequeueAttemptAnnotation});
  int attempt = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || attempt > 1000) return 0;
    attempt = attempt * 10 + (c - '0');
  }
  return attempt;
}

}  // namespace

std::optional<Refusal> RefusalOf(const Json& pod) {
  if (!pod.is_object()) return std::nullopt;
  const Json& status = JsonAt(pod, {"status"});
  if (!status.is_object() || status.value("phase", "") != "Failed") return std::nullopt;
  Refusal r;
  r.reason = status.value("reason", "");
  r.node = StringAt(pod, {"spec", "nodeName"});
  if (r.node.empty() || !IsAdmissionRefusal(r.reason) || AnyContainerStarted(status))
    return std::nullopt;
  if (StringAt(pod, {"metadata", "labels", kQueueNameLabel}).empty()) return std::nullopt;
  if (StringAt(pod, {"metadata", "annotations", ledger::kChosenAnnotation}).empty())
    return std::nullopt;  // gate 3 never placed it: not a disagreement between the gates
  for (const char* group : kGroupLabels) {
    if (!StringAt(pod, {"metadata", "labels", group}).empty()) return std::nullopt;
  }
  if (!JsonAt(pod, {"metadata", "deletionTimestamp"}).is_null()) return std::nullopt;
  for (const Json& owner : JsonAt(pod, {"metadata", "ownerReferences"}).is_array()
                               ? JsonAt(pod, {"metadata", "ownerReferences"})
                               : Json::array()) {
    if (owner.is_object() && owner.value("controller", false)) return std::nullopt;
  }
  r.message = status.value("message", "");
  r.attempt = AttemptOf(pod);
  r.chain = StringAt(pod, {"metadata", "annotations", kRequeueOfAnnotation});
  if (r.chain.empty()) r.chain = StringAt(pod, {"metadata", "name"});
  // The kubelet stamps startTime when it first handles the Pod, which is when it refused it.
  auto at = kube::ParseTime(status.value("startTime", ""));
  if (!at) at = kube::ParseTime(StringAt(pod, {"metadata", "creationTimestamp"}));
  r.at = at.value_or(std::chrono::system_clock::now());
  return r;
}

std::optional<std::chrono::system_clock::time_point> ReplacementDue(const Refusal& refusal,
                                                                    const RequeuePolicy& policy) {
  if (refusal.attempt >= policy.max_attempts) return std::nullopt;
  std::chrono::seconds delay = policy.first_delay;
  for (int i = 0; i < refusal.attempt && delay < policy.longest_delay; ++i) delay *= 2;
  return refusal.at + std::min(delay, policy.longest_delay);
}

std::string ReplacementName(const std::string& chain, int attempt) {
  const std::string suffix = "-requeued-" + std::to_string(attempt);
  constexpr size_t kMaxName = 253;
  return chain.substr(0, kMaxName - suffix.size()) + suffix;
}

Json ReplacementOf(const Json& pod, const Refusal& refusal, const AdmissionInjections& injected) {
  const Json& meta = pod["metadata"];
  const Json labels =
      WithoutKueueKeys(meta.value("labels", Json::object()), {kQueueNameKey, kPriorityClassKey});
  Json annotations = WithoutKueueKeys(meta.value("annotations", Json::object()));
  annotations.erase(ledger::kChosenAnnotation);
  annotations.erase(ledger::kAllocatedAnnotation);
  annotations[kRequeueOfAnnotation] = refusal.chain;
  annotations[kRequeueOfUidAnnotation] = meta.value("uid", "");
  annotations[kRequeueAttemptAnnotation] = std::to_string(refusal.attempt + 1);
  annotations[kRequeueReasonAnnotation] =
      (refusal.node + ": " + refusal.reason + ": " + refusal.message).substr(0, 1024);
  Json metadata = {{"name", ReplacementName(refusal.chain, refusal.attempt + 1)},
                   {"namespace", meta.value("namespace", "")},
                   {"labels", labels},
                   {"annotations", annotations}};
  if (meta.contains("ownerReferences")) metadata["ownerReferences"] = meta["ownerReferences"];

  Json spec = pod["spec"];
  spec.erase("nodeName");
  spec.erase("schedulingGates");  // Kueue gates the new Pod again
  if (const Json* queued = injected.queued_spec; queued != nullptr && queued->is_object()) {
    for (const char* key : {"nodeSelector", "tolerations"}) {
      if (queued->contains(key)) {
        spec[key] = (*queued)[key];
      } else {
        spec.erase(key);
      }
    }
  } else {
    // No Workload to read the user's own constraints from: take away what admission adds.
    if (spec.contains("nodeSelector") && spec["nodeSelector"].is_object()) {
      Json& selector = spec["nodeSelector"];
      selector.erase(kHostnameLabel);
      for (const auto& [key, value] : injected.flavor_labels) {
        if (selector.contains(key) && selector[key] == value) selector.erase(key);
      }
      if (selector.empty()) spec.erase("nodeSelector");
    }
    if (spec.contains("tolerations") && spec["tolerations"].is_array()) {
      const auto& added = injected.flavor_tolerations;
      Json kept = Json::array();
      for (const Json& t : spec["tolerations"]) {
        if (std::find(added.begin(), added.end(), t) == added.end()) kept.push_back(t);
      }
      spec["tolerations"] = kept;
    }
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec}};
}

const Json* QueuedSpecOf(const std::vector<Json>& workloads, const std::string& pod_uid) {
  if (pod_uid.empty()) return nullptr;
  for (const Json& w : workloads) {
    const Json& owners = JsonAt(w, {"metadata", "ownerReferences"});
    if (!owners.is_array()) continue;
    const bool ours = std::any_of(owners.begin(), owners.end(), [&](const Json& o) {
      return o.is_object() && o.value("uid", "") == pod_uid;
    });
    const Json& pod_sets = JsonAt(w, {"spec", "podSets"});
    if (!ours || !pod_sets.is_array() || pod_sets.size() != 1) continue;
    const Json& spec = JsonAt(pod_sets[0], {"template", "spec"});
    if (spec.is_object()) return &spec;
  }
  return nullptr;
}

PodRequeuer::PodRequeuer(kube::Client& client, RequeuePolicy policy)
    : client_(client), policy_(policy) {}

void PodRequeuer::OnPod(const std::string& key, const Json* failed) {
  std::optional<Refusal> refusal = failed != nullptr ? RefusalOf(*failed) : std::nullopt;
  std::lock_guard lock(mutex_);
  if (!refusal) {
    pending_.erase(key);
    return;
  }
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (std::chrono::system_clock::now() - refusal->at > policy_.max_age) return;  // history
    it = pending_.emplace(key, Pending{}).first;
    it->second.due = ReplacementDue(*refusal, policy_);
  }
  // Updates to a Pod already waiting keep its due time: a retry's back-off, or never.
  it->second.pod = *failed;
  it->second.refusal = *refusal;
}

void PodRequeuer::RetryLater(const std::string& key) {
  std::lock_guard lock(mutex_);
  ++counters_.failures;
  auto it = pending_.find(key);
  if (it == pending_.end() || !it->second.due) return;
  std::chrono::seconds delay = policy_.first_delay;
  for (int i = 0; i < it->second.failures && delay < policy_.longest_delay; ++i) delay *= 2;
  ++it->second.failures;
  it->second.due = std::chrono::system_clock::now() + std::min(delay, policy_.longest_delay);
}

void PodRequeuer::GiveUp(const std::string& key, const Json& pod, const std::string& why) {
  Logger("requeue")->warn("{}: not requeued: {}", key, why);
  Record(pod, "Warning", "NotRequeued", why);
  std::lock_guard lock(mutex_);
  ++counters_.given_up;
  if (auto it = pending_.find(key); it != pending_.end()) it->second.due = std::nullopt;
}

void PodRequeuer::SetFlavorInjections(Labels labels, std::vector<Json> tolerations) {
  std::lock_guard lock(mutex_);
  flavor_injections_.flavor_labels = std::move(labels);
  flavor_injections_.flavor_tolerations = std::move(tolerations);
}

void PodRequeuer::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::pair<std::string, Pending>> work;
    {
      std::lock_guard lock(mutex_);
      const auto now = std::chrono::system_clock::now();
      for (auto& [key, p] : pending_) {
        if (!p.explained || (p.due && *p.due <= now)) work.emplace_back(key, p);
        p.explained = true;
      }
    }
    for (auto& [key, p] : work) {
      if (stop.stop_requested()) return;
      Handle(key, std::move(p));
    }
    for (int i = 0; i < 10 && !stop.stop_requested(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void PodRequeuer::Handle(const std::string& key, Pending p) {
  auto log = Logger("requeue");
  const Refusal& r = p.refusal;
  const std::string refused =
      "refused by node " + r.node + " (" + r.reason + ": " + r.message + ")";
  if (!p.due) {
    if (!p.explained) {
      log->warn("{}: {}; not requeued: {} replacements already", key, refused, r.attempt);
      Record(p.pod, "Warning", "NotRequeued",
             refused + "; not requeued: the " + std::to_string(r.attempt) +
                 " replacements allowed are spent");
      std::lock_guard lock(mutex_);
      ++counters_.given_up;
    }
    return;
  }
  const auto wait = *p.due - std::chrono::system_clock::now();
  if (wait > std::chrono::seconds(0)) {
    if (!p.explained) {
      const auto seconds = std::chrono::ceil<std::chrono::seconds>(wait).count();
      log->warn("{}: {}; requeued in {} s", key, refused, seconds);
      Record(p.pod, "Warning", "Requeueing",
             refused + "; a replacement is queued in " + std::to_string(seconds) + " s");
    }
    return;
  }
  const std::string ns = StringAt(p.pod, {"metadata", "namespace"});
  const std::string uid = StringAt(p.pod, {"metadata", "uid"});
  // The cache keeps a projection of each Pod (docs/footprint.md): the copy is made from the
  // whole Pod, read now. One of the same name but another uid is not the refused Pod.
  auto whole = client_.Get(kube::resources::Pods(), ns, StringAt(p.pod, {"metadata", "name"}));
  if (!whole && !kube::IsNotFound(whole.failure())) {
    log->warn("{}: cannot read it to copy it: {}", key, whole.error());
    RetryLater(key);
    return;
  }
  if (!whole || StringAt(*whole, {"metadata", "uid"}) != uid) {
    std::lock_guard lock(mutex_);
    pending_.erase(key);  // deleted meanwhile: nothing left to replace
    return;
  }
  // The Workload holds the Pod as the user queued it; it lives until the refused Pod is deleted.
  std::vector<Json> workloads;
  if (auto listed = client_.List(kube::resources::Workloads(), ns)) {
    workloads = std::move(listed->items);
  } else {
    log->warn(
        "{}: cannot read its Workload ({}); the replacement drops the flavors' node "
        "labels, tolerations and any hostname pin",
        key, listed.error());
  }
  Json replacement;
  {
    std::lock_guard lock(mutex_);
    AdmissionInjections injected = flavor_injections_;
    injected.queued_spec = QueuedSpecOf(workloads, uid);
    replacement = ReplacementOf(*whole, r, injected);
  }
  const std::string name = StringAt(replacement, {"metadata", "name"});
  // Create, then delete: a worker killed in between finds the failed Pod again, and the
  // replacement it would create already there.
  auto made = client_.Create(kube::resources::Pods(), replacement);
  if (!made && kube::IsAlreadyExists(made.failure())) {
    // Ours from an earlier try (a worker killed between create and delete), or someone else's.
    auto existing = client_.Get(kube::resources::Pods(), ns, name);
    if (!existing) {
      log->warn("{}: cannot read the existing {}: {}", key, name, existing.error());
      RetryLater(key);
      return;
    }
    if (StringAt(*existing, {"metadata", "annotations", kRequeueOfUidAnnotation}) != uid) {
      GiveUp(key, p.pod,
             refused + "; not requeued: a Pod named " + name +
                 " already exists and does not replace this one");
      return;
    }
  } else if (!made) {
    const Error& error = made.failure();
    // 4xx other than a conflict or throttling will not change by trying again (quota, a
    // namespace being deleted, a policy that refuses the Pod).
    const bool permanent = error.http_status >= 400 && error.http_status < 500 &&
                           error.http_status != 409 && error.http_status != 429;
    log->warn("{}: cannot create the replacement {}: {}", key, name, made.error());
    if (permanent) {
      GiveUp(key, p.pod,
             refused + "; not requeued: the replacement " + name + " was refused: " + made.error());
      return;
    }
    Record(p.pod, "Warning", "RequeueFailed",
           "cannot create the replacement " + name + ": " + made.error());
    RetryLater(key);
    return;
  }
  if (made) {
    Record(*made, "Normal", "Requeued",
           "replaces " + StringAt(p.pod, {"metadata", "name"}) + ", " + refused);
    log->info("{}: {}; replaced by {} (attempt {})", key, refused, name, r.attempt + 1);
  }
  kube::DeleteOptions options;
  options.uid = uid;
  Status deleted =
      client_.Delete(kube::resources::Pods(), ns, StringAt(p.pod, {"metadata", "name"}), options);
  if (!deleted && !kube::IsNotFound(deleted.failure())) {
    log->warn("{}: cannot delete it after its replacement: {}", key, deleted.error());
    RetryLater(key);
    return;
  }
  std::lock_guard lock(mutex_);
  if (made) ++counters_.replaced;
  pending_.erase(key);
}

void PodRequeuer::Record(const Json& pod, const std::string& type, const std::string& reason,
                         const std::string& message) {
  const Json involved = {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"name", StringAt(pod, {"metadata", "name"})},
                         {"namespace", StringAt(pod, {"metadata", "namespace"})},
                         {"uid", StringAt(pod, {"metadata", "uid"})}};
  const Json event =
      kube::NewEvent(involved, type, reason, message, kRequeueComponent, kRequeueComponent);
  if (auto made = client_.Create(kube::resources::Events(), event); !made)
    Logger("requeue")->debug("cannot record an event: {}", made.error());
}

RequeueCounters PodRequeuer::Counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace gpustack::op
