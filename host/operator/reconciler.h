// The worker's reconcilers (docs/architecture.md §6.1). Each owns one field manager and the
// objects it writes; in a pass it reads the fleet model (pure, computed once) and the informers'
// caches, and returns the writes that make the cluster match, each with the phase it must run in.
// The worker's loop runs every reconciler, then the writes phase by phase; a reconciler never
// writes by itself, so a steady cluster costs no writes and a pass's order is stated, not implied.
#ifndef GPUSTACK_HOST_OPERATOR_RECONCILER_H_
#define GPUSTACK_HOST_OPERATOR_RECONCILER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "host/common/json_path.h"
#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/operator/fleet.h"
#include "host/operator/node_record.h"

namespace gpustack::op {

// The field managers, one per reconciler.
inline constexpr const char* kNodesManager = "gpustack-worker-nodes";
inline constexpr const char* kFlavorsManager = "gpustack-worker-flavors";
inline constexpr const char* kInstanceTypesManager = "gpustack-worker-instancetypes";
inline constexpr const char* kQueuesManager = "gpustack-worker-queues";
inline constexpr const char* kEntrancesManager = "gpustack-worker-entrances";
inline constexpr const char* kChecksManager = "gpustack-worker-checks";

// When a write runs. Kueue must never see a queue naming a flavor that does not exist yet, nor a
// flavor deleted while a queue still names it; node labels, one write per node, must not hold up
// the pools on a large fleet.
enum class Phase {
  kReferenced = 0,  // what others refer to: flavors, the check, InstanceTypes being created
  kReferring = 1,   // what refers to them: queues, InstanceTypes' metadata and status, entrances
  kDeletions = 2,
  kNodes = 3,  // node labels and counting keys
};

struct Write {
  std::string kind;  // what it is counted under ("clusterqueue")
  std::string what;  // for the log and errors
  Phase phase = Phase::kReferenced;
  std::function<Status()> run;
};

// The informers' caches a pass reads.
struct Caches {
  NodeInformer* nodes = nullptr;
  kube::Informer* instance_types = nullptr;
  kube::Informer* namespaces = nullptr;
  kube::Informer* flavors = nullptr;
  kube::Informer* queues = nullptr;
  kube::Informer* entrances = nullptr;
  kube::Informer* checks = nullptr;
};

// What every reconciler of one pass reads.
struct PassView {
  const Fleet& fleet;
  const Caches& caches;
  std::string system_namespace;
  // The gpustack-node-devices AdmissionCheck is Active: ClusterQueues may name it.
  bool check_active = false;
  // Every InstanceType of the pass: the cached ones, and the derived ones created in it (their
  // queues, status and entrances follow in the same pass, not the next).
  std::vector<kube::ObjectPtr> instance_types;
  std::set<std::string> created;  // names among them that do not exist yet
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual std::vector<Write> Reconcile(const PassView& pass) = 0;
  // What it keeps, for the worker's snapshot ("flavors": 3).
  virtual void Describe(Json& snapshot) const { (void)snapshot; }
};

// The reconcilers, in the order a pass runs them.
std::vector<std::unique_ptr<Reconciler>> MakeReconcilers(kube::Client& client);

// Server-side apply of `object` by `manager` (forced: the worker owns these fields).
Write ApplyWrite(kube::Client& client, Phase phase, std::string kind, const char* manager,
                 const kube::ResourceType& type, Json object, std::string subresource = {},
                 const std::string& why = {});
// A delete of exactly `object` (its uid); already gone counts as done.
Write DeleteWrite(kube::Client& client, std::string kind, const kube::ResourceType& type,
                  const Json& object);

// Runs `writes` phase by phase, each phase's writes on up to `threads` threads; a phase with a
// failure stops the rest (the next pass retries). `counted(write, ok)` is called for each write
// that ran. Returns the errors, each naming its write.
std::vector<std::string> RunWrites(std::vector<Write>& writes, int threads,
                                   const std::function<void(const Write&, bool)>& counted);

// The fields `manager` owns by apply on `subresource` ("" for the object itself).
Json OwnedFields(const Json& object, const std::string& manager, const std::string& subresource);
// What the worker's caches keep of an object (an informer's transform): the managedFields
// entries of the worker's own managers (OwnedFields reads them) and nothing of anyone else's.
// Of a Node, not its image list either. At 1,000 nodes these are most of the bytes
// (docs/footprint.md).
void TrimForWorkerCache(Json& object);
// Whether an update of an object of `plural` left what a pass reads as it was (compared in
// place: at 1,000 nodes the controller-manager's node updates and Kueue's counters arrive many
// times a second). Such an update starts no pass.
bool SameForPass(const std::string& plural, const Json& before, const Json& after);
// What a pass reads of a Node, as one value: SameForPass compares it, NodeRecord hashes it.
Json NodePassView(const Json& node);
// Of a Node, also only what a pass reads: its identity, labels and CPU-name annotation, the
// capacity, os and architecture, the addresses for an Instance's host IPs.
void TrimNodeForWorkerCache(Json& node);
// Of a bound Pod, what the CPU view, gate 3's ledger and the requeuer's verdict read: identity,
// gpustack's annotations, the node, each container's CPU and the phase; of a Failed one also
// Kueue's labels, its controller and which states its containers were ever in. The requeuer
// reads the whole Pod again before it copies one (docs/footprint.md).
void TrimPodForWorkerCache(Json& pod);
// The map keys under `path` in a fieldsV1 set ("f:metadata", "f:labels" -> label keys).
std::set<std::string> OwnedKeys(const Json& fields, JsonPath path);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_RECONCILER_H_
