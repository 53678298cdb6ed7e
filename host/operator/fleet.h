// The worker's model of the fleet (docs/behaviour.md §3.3, §3.5–3.8, §5.1, §5.3): which nodes are
// managed, the ResourceFlavors they make, the pools (InstanceType = ClusterQueue) those flavors
// group into, and each pool's live capacity views computed by the ledger library from the nodes'
// published Devices ledgers. Pure: Kubernetes objects in, Kubernetes objects out; the worker
// (worker.h) reads them from its informers and applies what differs.
#ifndef GPUSTACK_HOST_OPERATOR_FLEET_H_
#define GPUSTACK_HOST_OPERATOR_FLEET_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/ledger/ledger.h"
#include "host/ledger/request.h"
#include "host/ledger/views.h"
#include "host/operator/devices_record.h"
#include "host/operator/settings.h"

namespace gpustack::op {

using Json = nlohmann::json;

inline constexpr const char* kManagedLabel = "gpustack.ai/managed";
inline constexpr const char* kAcceleratableLabel = "feature.gpustack.ai/acceleratable";
inline constexpr const char* kCpuOnlyLabel = "feature.gpustack.ai/cpu-only";
inline constexpr const char* kGeneralPrefix = "general.feature.gpustack.ai/";
inline constexpr const char* kAcceleratablePrefix = "acceleratable.feature.gpustack.ai/";
inline constexpr const char* kCpuVendorLabel = "feature.node.kubernetes.io/cpu-model.vendor_id";
inline constexpr const char* kCpuFamilyLabel = "feature.node.kubernetes.io/cpu-model.family";
inline constexpr const char* kCpuModelLabel = "feature.node.kubernetes.io/cpu-model.id";
inline constexpr const char* kCpuNameAnnotation = "feature.gpustack.ai/cpu-name";
inline constexpr const char* kTypeLabel = "resource.gpustack.ai/type";
inline constexpr const char* kEntranceLabel = "schedule.gpustack.ai/queue-entrance";
inline constexpr const char* kDerivedLabel = "schedule.gpustack.ai/derived-from-node";
inline constexpr const char* kQueueAnnotation = "schedule.gpustack.ai/queue";
inline constexpr const char* kEmptyPlanHold = "topology.gpustack.ai/empty-plan-hold";
inline constexpr const char* kPartOfLabel = "app.kubernetes.io/part-of";
inline constexpr const char* kPartOf = "gpustack-operator";
inline constexpr const char* kFinalizer = "gpustack.ai/controlled";
inline constexpr const char* kNodeDevicesCheck = "gpustack-node-devices";
inline constexpr const char* kNodeDevicesController = "worker.gpustack.ai/node-devices";
inline constexpr const char* kCreditsPrefix = "credits.gpustack.ai/";
// Kueue refuses a resource group with more flavors than this.
inline constexpr size_t kMaxFlavorsPerQueue = 16;

// "gpustack-fnv64-" + FNV-1a 64 of the ClusterQueue name, 16 lower-case hex digits
// (docs/decisions.md D10).
std::string EntranceName(std::string_view cluster_queue);

// One manufacturer as the worker knows it: from its plugin's identity, env overrides on top.
struct Manufacturer {
  std::string key;  // "nvidia"
  std::string base;
  std::string partition_kind;
  std::string origin;  // the plugin manifest, or "environment"
  // The vendor's admission constraints, as its plugin declares them (ABI 1.2).
  bool one_card_per_container = false;
  uint32_t min_slice_memory_percentage = 0;  // 0: any
  // The RuntimeClass its workloads run with, when one of this name exists ("nvidia").
  std::string runtime_class = {};
  ledger::ResourceKind Kind() const { return {key, base, partition_kind}; }
};
using ManufacturerTable = std::map<std::string, Manufacturer>;

// The unit an accelerated pool is stamped with at creation (docs/behaviour.md §3.5 presets).
struct UnitPreset {
  std::string cpu;
  std::string ram;
};
UnitPreset PresetFor(std::string_view manufacturer, std::string_view group_id);

// What the worker reads of one Node and its Devices object.
struct NodeFacts {
  std::string name;
  std::string uid;
  std::string os, arch;
  std::string gkey;        // docs/behaviour.md §3.3
  std::string cpu_vendor;  // "amd", "intel", "generic"
  std::string cpu_name;    // as NFD's annotation reports it
  int64_t cores = 0;       // Node.status.capacity.cpu, whole cores
  // Of its labels, those the fleet reads (gpustack.ai/managed): a pass keeps every node's facts,
  // and a Node carries dozens of labels (docs/footprint.md).
  std::map<std::string, std::string> labels;
  // Of Node.status.capacity, the whole-number entries the fleet reads: the CPU and each plugin's
  // sliced and partitioned pools (not the counting keys, a dozen a card model).
  std::map<std::string, int64_t> capacity;
  std::shared_ptr<const ledger::NodeLedger> ledger;  // null: no (usable) Devices object
  std::vector<ledger::Allocation> claims;            // what ResourceClaims hold (docs/dra.md)
  std::string devices_problem;  // why a Devices object that exists could not be used
  bool managed = false;         // decided by Fleet from the label and the settings
  bool stamp_managed = false;   // the worker should write gpustack.ai/managed=true

  bool accelerated() const { return ledger && !ledger->spec().groups.empty(); }
};
// `devices`: the node's Devices record (devices_record.h), or its object; null when it has none.
NodeFacts NodeFactsOf(const Json& node, const DevicesRecord* devices = nullptr);
NodeFacts NodeFactsOf(const Json& node, const Json* devices);
// Decides `managed` and `stamp_managed` from the node's gpustack.ai/managed label and the settings.
void DecideManagement(NodeFacts& node, const Settings& settings);
using NodePtr = std::shared_ptr<const NodeFacts>;

// What an InstanceType selects: its pool identity (spec fields).
struct PoolIdentity {
  bool acceleratable = false;
  std::string accelerator_group;          // aKey, accelerated only
  std::string general_group = "generic";  // gKey, or generic
  std::string os, arch;
  auto operator<=>(const PoolIdentity&) const = default;
};
// gpustack--<gKey|generic>[--<aKey>]-<os>-<arch>; an accelerated generic pool drops the gKey.
std::string PoolName(const PoolIdentity& identity);
Result<PoolIdentity> IdentityOf(const Json& instance_type);

struct Flavor {
  std::string name;
  std::string gkey;
  std::string akey;  // empty: a CPU flavor
  std::string manufacturer, group_id;
  std::string os, arch;
  int64_t count = 0;               // per node: cards of the model, or cores
  std::vector<std::string> nodes;  // contributing managed nodes, by name
  const NodeFacts* first = nullptr;
  int64_t capacity() const { return count * static_cast<int64_t>(nodes.size()); }
};

class Fleet {
 public:
  // Nodes whose management is decided (DecideManagement) under `settings`: shared, not copied,
  // so a pass over a large fleet rebuilds only what changed.
  Fleet(std::vector<NodePtr> nodes, Settings settings, ManufacturerTable manufacturers);
  // The same, deciding the nodes' management first.
  Fleet(std::vector<NodeFacts> nodes, Settings settings, ManufacturerTable manufacturers);

  const std::vector<NodePtr>& nodes() const { return nodes_; }
  const std::map<std::string, Flavor>& flavors() const { return flavors_; }
  const Settings& settings() const { return settings_; }
  const ManufacturerTable& manufacturers() const { return manufacturers_; }
  const NodeFacts* Node(const std::string& name) const;
  // CPU the Pods bound to each node request, in millicores (the CPU view's "requested").
  void SetCpuRequests(std::map<std::string, int64_t> millicores) {
    cpu_requests_ = std::move(millicores);
  }

  // The flavors an InstanceType of `identity` draws from, smallest per-node count first.
  std::vector<const Flavor*> FlavorsOf(const PoolIdentity& identity) const;
  // The pools the fleet derives (one per accelerator model and one CPU pool per os/arch; per CPU
  // key too when the aware setting is on).
  std::vector<PoolIdentity> DerivedPools() const;

  // Objects, as server-side apply configurations.
  Json RenderFlavor(const Flavor& flavor) const;
  // A derived InstanceType, created once (never re-aligned afterwards).
  Json RenderDerivedInstanceType(const PoolIdentity& identity) const;
  // The InstanceType's status: detail, views, columns, entrance and phase. `stopped` says the
  // queue is held or drained.
  Json RenderInstanceTypeStatus(const Json& instance_type, bool stopped,
                                const std::string& stop_reason) const;
  // The ClusterQueue of an InstanceType. `current` is the queue as it is (null when absent), for
  // the drain rules; `deleting` when the InstanceType is going away; `check_active` whether the
  // node-devices AdmissionCheck is Active.
  Json RenderClusterQueue(const Json& instance_type, const Json* current, bool deleting,
                          bool check_active) const;
  // The labels and counting keys the worker publishes on a node (docs/behaviour.md §3.3, §3.6,
  // §3.7).
  Json RenderNodeLabels(const NodeFacts& node) const;
  // The counting keys as a status apply (an empty capacity when the node has none).
  Json RenderNodeCapacity(const NodeFacts& node) const;

 private:
  std::vector<const NodeFacts*> PoolNodes(const PoolIdentity& identity) const;
  // The CPU view of a CPU pool: whole cores left on each node after the Pods' requests.
  ledger::ResourceView CpuView(const std::vector<const NodeFacts*>& nodes) const;

  std::vector<NodePtr> nodes_;
  Settings settings_;
  ManufacturerTable manufacturers_;
  std::map<std::string, Flavor> flavors_;
  std::map<std::string, int64_t> cpu_requests_;
};

// A Pod's CPU request in millicores, as the scheduler counts it: the larger of the app containers'
// sum and the largest init container (native sidecars add to both); 0 when it asks for none.
int64_t PodCpuMillicores(const Json& pod);

// The Workloads a ClusterQueue still holds (reserving and admitted): a drain waits for none.
int64_t WorkloadsHeld(const Json& cluster_queue);

Json RenderLocalQueue(const std::string& ns, const std::string& cluster_queue);
Json RenderAdmissionCheck();

// The labels the worker owns on nodes start with these (so ones it no longer wants are noticed).
bool WorkerOwnsNodeLabel(std::string_view key);

// Whether every field of `desired` is in `actual` with the same value (maps by key, lists whole):
// a server-side apply of `desired` would change nothing.
bool Covers(const Json& actual, const Json& desired);
// The first field where `actual` does not cover `desired` ("$.spec.stopPolicy: \"Hold\", want
// \"None\""), or "" when it covers it: what a write is for, in the debug log.
std::string Difference(const Json& actual, const Json& desired, const std::string& path = "$");

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_FLEET_H_
