// The central worker (`gpustack-operator worker`, reference §1.1): leader-elected; the leader
// watches Nodes, Devices, InstanceTypes, the Kueue objects it owns, Namespaces and the settings
// Secret, and turns them into node labels and counting keys, ResourceFlavors, InstanceTypes and
// their live status, ClusterQueues, LocalQueue entrances and the gpustack-node-devices
// AdmissionCheck. Every change feeds one coalescing work queue; a pass computes the whole desired
// state with Fleet (pure) and applies, by server-side apply under one field manager per kind,
// only what differs from the informers' caches, so a steady cluster costs no writes.
#ifndef GPUSTACK_HOST_OPERATOR_WORKER_H_
#define GPUSTACK_HOST_OPERATOR_WORKER_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "host/kube/client.h"
#include "host/kube/leader_election.h"
#include "host/node/exporter.h"
#include "host/operator/fleet.h"
#include "host/operator/node_check.h"
#include "host/operator/webhooks.h"

namespace gpustack::op {

// The field managers, one per reconciler.
inline constexpr const char* kNodesManager = "gpustack-worker-nodes";
inline constexpr const char* kFlavorsManager = "gpustack-worker-flavors";
inline constexpr const char* kInstanceTypesManager = "gpustack-worker-instancetypes";
inline constexpr const char* kQueuesManager = "gpustack-worker-queues";
inline constexpr const char* kEntrancesManager = "gpustack-worker-entrances";
inline constexpr const char* kChecksManager = "gpustack-worker-checks";

struct WorkerOptions {
  std::string system_namespace = "gpustack-system";
  bool leader_election = true;
  // The Lease (its namespace is the system namespace): identity is this replica (the Pod name).
  kube::LeaderElectionConfig election{.lease_name = "worker.gpustack.ai"};
  ManufacturerTable manufacturers;
  int write_threads = 8;  // writes of one pass run in parallel
  node::ExporterOptions health;
  bool serve_https = true;
  // The admission webhooks (every replica) and the gpustack-node-devices check (the leader).
  WebhookOptions webhooks;
  bool node_check = true;
  NodeCheckOptions node_check_options;
  // Reads GPUSTACK_<SETTING> for the first-start seed.
  std::function<std::string(const std::string&)> getenv;
};

// The manufacturer table from the plugins in `dirs` (identify only: no hardware is touched), with
// GPUSTACK_<MFR>_ACCELERATABLE_RESOURCE_NAME and GPUSTACK_<MFR>_PARTITION_KIND on top (§10.2).
// A plugin that does not load is reported in `problems` and left out; a directory among
// `required` (named by a flag or the environment) that cannot be searched is an error.
Result<ManufacturerTable> LoadManufacturers(
    const std::vector<std::filesystem::path>& dirs,
    const std::vector<std::filesystem::path>& required,
    const std::function<std::string(const std::string&)>& getenv,
    std::vector<std::string>* problems);

// Runs until `stop` turns true; returns the process exit status (0 after a clean stop, 2 for bad
// input such as a settings value in the environment that is not a boolean).
int RunWorker(kube::Client& client, const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_WORKER_H_
