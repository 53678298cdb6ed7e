// Re-queueing a Pod the node refused after gate 3 said Ready (docs/decisions.md D20). The gates
// are built so that this does not happen; when it still does (a card lost between gate 3 and the
// kubelet, a node restarted), the kubelet's verdict is terminal: the Pod is Failed with
// `UnexpectedAdmissionError` or a predicate's reason, and a plain Pod is never retried by anyone.
// The worker replaces it: a copy without the node it was bound to nor what admission injected,
// which Kueue queues as a new Workload and gate 3 places again, after a growing delay and a
// bounded number of times; then the failed Pod is deleted. Pods a controller owns (ReplicaSet,
// Job, StatefulSet) are left to their controller, which replaces failed Pods itself.
#ifndef GPUSTACK_HOST_OPERATOR_REQUEUE_H_
#define GPUSTACK_HOST_OPERATOR_REQUEUE_H_

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "host/common/json_path.h"
#include "host/kube/client.h"

namespace gpustack::op {

using Json = nlohmann::json;

// On a replacement: the name of the Pod the chain started from, and which attempt it is.
inline constexpr const char* kRequeueOfAnnotation = "gpustack.ai/requeue-of";
// The uid of the refused Pod it replaces: a Pod of the replacement's name without it is someone
// else's, and the refused Pod is then left alone.
inline constexpr const char* kRequeueOfUidAnnotation = "gpustack.ai/requeue-of-uid";
inline constexpr const char* kRequeueAttemptAnnotation = "gpustack.ai/requeue-attempt";
// Why its predecessor was refused ("<node>: <reason>: <message>").
inline constexpr const char* kRequeueReasonAnnotation = "gpustack.ai/requeue-reason";

struct RequeuePolicy {
  int max_attempts = 5;                    // replacements of one chain; then it stays Failed
  std::chrono::seconds first_delay{5};     // after the refusal; doubles each attempt
  std::chrono::seconds longest_delay{60};  // the doubling stops here
  // A refusal older than this when first seen (a worker upgraded onto old Failed Pods) is history,
  // not work to redo.
  std::chrono::seconds max_age{3600};
};

// What the node said when it turned a bound Pod away.
struct Refusal {
  std::string node;
  std::string reason;  // "UnexpectedAdmissionError", "NodeAffinity", "OutOfnvidia.com/gpu"
  std::string message;
  int attempt = 0;                           // replacements before this Pod (0: the user's own Pod)
  std::string chain;                         // the user's Pod's name
  std::chrono::system_clock::time_point at;  // when the node refused it (best known)
};

// Pure: the refusal when `pod` is a queued plain Pod (a queue-name label, no controller owner)
// that gate 3 placed (its chosen-cards annotation) and the node then refused at admission:
// Failed, bound, no container ever started, a kubelet admission reason. nullopt for every other
// Pod, a CPU-only queue's included.
std::optional<Refusal> RefusalOf(const Json& pod);

// Pure: when the replacement for `refusal` is due, or nullopt when the chain is out of attempts.
std::optional<std::chrono::system_clock::time_point> ReplacementDue(const Refusal& refusal,
                                                                    const RequeuePolicy& policy);

// Pure: `<chain>-requeued-<attempt>`, the chain's name shortened so the whole stays a valid Pod
// name (253 characters).
std::string ReplacementName(const std::string& chain, int attempt);

// What admission added to a Pod's node constraints, to take away again: the worker's
// ResourceFlavors' node labels and tolerations (gate 3 adds the hostname pin).
using Labels = std::set<std::pair<std::string, std::string>>;
struct AdmissionInjections {
  // The Pod's spec as it was queued (its Workload's pod set template), when known: its
  // nodeSelector and tolerations are then the user's exactly, a hostname pin of their own too.
  const Json* queued_spec = nullptr;
  Labels flavor_labels;
  std::vector<Json> flavor_tolerations;
};

// Pure: the replacement Pod: the same spec and metadata less what binding and admission added
// (spec.nodeName, gate 3's hostname pin and chosen-cards annotation, the flavors' node labels and
// tolerations, Kueue's managed label and finalizers), named `<chain>-requeued-<attempt>`.
Json ReplacementOf(const Json& pod, const Refusal& refusal, const AdmissionInjections& injected);

// The pod set template of the Workload Kueue made for the Pod `pod_uid`, among `workloads`.
const Json* QueuedSpecOf(const std::vector<Json>& workloads, const std::string& pod_uid);

struct RequeueCounters {
  uint64_t replaced = 0, given_up = 0, failures = 0;
};

// The controller: fed the leader's bound-Pod events, it replaces each refused Pod when due.
class PodRequeuer {
 public:
  PodRequeuer(kube::Client& client, RequeuePolicy policy);

  // Pod `key` changed: `failed` is its newest state when that is Failed, null when it is not
  // Failed (any more) or was deleted.
  void OnPod(const std::string& key, const Json* failed);
  // What the worker's ResourceFlavors inject into an admitted Pod (each pass).
  void SetFlavorInjections(Labels labels, std::vector<Json> tolerations);
  // Replaces due Pods until `stop`.
  void Run(std::stop_token stop);
  RequeueCounters Counters() const;

 private:
  struct Pending {
    Json pod;
    Refusal refusal;
    std::optional<std::chrono::system_clock::time_point> due;  // nullopt: never (given up)
    bool explained = false;  // the Event saying when (or that it will not) was recorded
    int failures = 0;        // failed tries to create or delete; they back off
  };
  // A failed try: the next one after a doubling delay.
  void RetryLater(const std::string& key);
  void Handle(const std::string& key, Pending pending);
  // Stops working on `key`: counted as given up, with a NotRequeued Event saying why.
  void GiveUp(const std::string& key, const Json& pod, const std::string& why);
  void Record(const Json& pod, const std::string& type, const std::string& reason,
              const std::string& message);

  kube::Client& client_;
  RequeuePolicy policy_;
  mutable std::mutex mutex_;
  std::map<std::string, Pending> pending_;  // by "<ns>/<name>"
  AdmissionInjections flavor_injections_;   // queued_spec stays null here
  RequeueCounters counters_;
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_REQUEUE_H_
