// Gate 3 (docs/behaviour.md §5.2): the `gpustack-node-devices` AdmissionCheck controller. Kueue
// reserves quota on a pool's credits, blind to how the pool's cards are fragmented; this check then
// asks the per-card ledgers (the same library the node allocator settles with) whether every Pod of
// the Workload really fits, counting what other admitted Workloads were promised but their Pods
// do not hold yet. It answers Ready with the node and the cards it counted (a node pin and the
// chosen-cards annotation, through Kueue's podSetUpdates, so gate 5 settles on the same cards) or
// Retry with a message naming the PodSet that found no room; never Rejected, never preempting.
#ifndef GPUSTACK_HOST_OPERATOR_NODE_CHECK_H_
#define GPUSTACK_HOST_OPERATOR_NODE_CHECK_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/ledger/chosen.h"
#include "host/ledger/ledger.h"
#include "host/operator/bound_pod.h"
#include "host/operator/fleet.h"
#include "host/operator/node_record.h"

namespace gpustack::op {

// What one PodSet asks for, and the nodes it may use (its flavor's), best first.
struct PodSetDemand {
  std::string name;
  int64_t count = 1;
  std::vector<ledger::ContainerRequest> containers;  // one Pod's requesting containers
  std::vector<const ledger::NodeLedger*> candidates;
};

struct PodSetPlacement {
  std::string pod_set;
  std::string node;
  std::vector<std::map<std::string, std::vector<ledger::Charge>>> pods;  // per Pod, per container
};

struct CheckVerdict {
  bool ready = false;
  std::string message;
  std::vector<PodSetPlacement> placements;  // when ready: one per PodSet that asks for cards
};

// Pure: places every Pod of every PodSet (all Pods of a PodSet on one node), the per-card budget
// shared by the whole Workload. The candidates' ledgers are not changed.
CheckVerdict Judge(const std::string& workload_uid, const std::vector<PodSetDemand>& demands);

// The PodSets of a Workload (spec.podSets) with the accelerator requests of each, read by the
// same rules as the Pod webhook; PodSets that ask for no card are left out.
Result<std::vector<PodSetDemand>> DemandsOf(const Json& workload,
                                            const std::vector<ledger::ResourceKind>& kinds,
                                            const ledger::FoldContext& fold);

// Pure: the verdict on a Workload holding a quota reservation, with `fleet` for the flavors'
// nodes and `ledger_of` for each node's ledger as gate 3 counts it (null: not a candidate). The
// candidates of a PodSet are its flavor's nodes, fullest first (best fit).
CheckVerdict DecideWith(
    const Json& workload, const Fleet& fleet, const Json* instance_type,
    const std::function<const ledger::NodeLedger*(const std::string&)>& ledger_of);

struct NodeCheckOptions {
  std::chrono::seconds retry_after{5};  // requeueAfterSeconds on a Retry
};

struct NodeCheckCounters {
  uint64_t ready = 0, retry = 0, write_failures = 0;
  std::vector<double> decision_seconds;  // the most recent decisions (bounded)
};

// The controller: one Workload at a time, from the leader's informers.
class NodeDevicesCheck {
 public:
  NodeDevicesCheck(kube::Client& client, NodeCheckOptions options, NodeInformer& nodes,
                   kube::Informer& instance_types);
  ~NodeDevicesCheck();

  // Feeds of the leader's informers: every bound Pod's events (the cache's own records, kept
  // shared, not copied), and each pass's fleet.
  void OnPod(const std::shared_ptr<const BoundPod>& before,
             const std::shared_ptr<const BoundPod>& after);
  void SetFleet(std::shared_ptr<const Fleet> fleet);

  // Watches Workloads and judges them until `stop`.
  void Run(std::stop_token stop);
  NodeCheckCounters Counters() const;

  // One Workload's verdict against the current state (also what Run does for each).
  CheckVerdict Decide(const Json& workload);

 private:
  struct InFlight {
    std::string node;
    std::string pod_set;
    std::vector<std::map<std::string, std::vector<ledger::Charge>>> pods;
  };
  struct NodeState {
    std::set<std::string> pods;                     // "<ns>/<name>" bound here
    std::shared_ptr<ledger::NodeLedger> committed;  // spec + Pods' allocations + in-flight
    const ledger::NodeLedger* spec_from = nullptr;  // the fleet ledger it was built on
    bool over_promised = false;  // a promise fits nowhere: no candidate until it settles
  };

  void OnWorkload(const Json* before, const Json* after);
  bool NeedsJudging(const Json& workload) const;
  std::vector<InFlight> InFlightOf(const Json& workload) const;
  const ledger::NodeLedger* Committed(const std::string& node);  // under mutex_
  void MarkDirty(const std::string& node);                       // under mutex_
  // Replaces what Workload `uid` was promised, keeping the per-node index (under mutex_).
  void SetInFlight(const std::string& uid, std::vector<InFlight> flights);
  Status Write(const Json& workload, const CheckVerdict& verdict);
  // A Retry's message outlives the check state (Kueue resets it to Pending when it evicts): a
  // Warning Event on the Workload and its Pod says why, once per distinct message.
  void Explain(const Json& workload, const std::string& message);

  kube::Client& client_;
  NodeCheckOptions options_;
  NodeInformer& nodes_;
  kube::Informer& instance_types_;
  std::unique_ptr<kube::Informer> workloads_;

  mutable std::mutex mutex_;
  std::shared_ptr<const Fleet> fleet_;
  std::map<std::string, NodeState> node_state_;
  std::map<std::string, std::shared_ptr<const BoundPod>> pods_;     // bound Pods that hold cards
  std::map<std::string, std::vector<InFlight>> in_flight_;          // by Workload uid
  std::map<std::string, std::set<std::string>> in_flight_by_node_;  // node: Workload uids
  std::map<std::string, int64_t> allocated_pods_;  // by Workload uid: Pods the node holds
  std::map<std::string, std::string> judged_;  // uid: the resourceVersion a verdict was written on
  std::map<std::string, std::string> explained_;  // uid: the last Retry message sent as an Event
  NodeCheckCounters counters_;
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_NODE_CHECK_H_
