// The central worker (`gpustack-operator worker`, docs/behaviour.md §1.1): leader-elected; the
// leader watches Nodes, Devices, InstanceTypes, the Kueue objects it owns, Namespaces and the
// settings Secret. Every change feeds one coalescing work queue; a pass computes the fleet model
// (Fleet, pure) once and runs the reconcilers (reconciler.h), each of which returns, under its own
// field manager, only what differs from the informers' caches, so a steady cluster costs no writes.
// Every replica serves the admission webhooks and its health endpoint.
#ifndef GPUSTACK_HOST_OPERATOR_WORKER_H_
#define GPUSTACK_HOST_OPERATOR_WORKER_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "host/https/server.h"
#include "host/kube/client.h"
#include "host/kube/leader_election.h"
#include "host/operator/fleet.h"
#include "host/operator/node_check.h"
#include "host/operator/requeue.h"
#include "host/operator/webhooks.h"

namespace gpustack::op {

struct WorkerOptions {
  std::string system_namespace = "gpustack-system";
  bool leader_election = true;
  // The Lease (its namespace is the system namespace): identity is this replica (the Pod name).
  kube::LeaderElectionConfig election{.lease_name = "worker.gpustack.ai"};
  ManufacturerTable manufacturers;
  int write_threads = 8;  // writes of one pass run in parallel
  // /metrics, /livez and /readyz.
  https::EndpointOptions health{.server = {.name = "health", .port = 31443, .body_limit = 4096},
                                .cert_dir = {},
                                .common_name = "gpustack-operator-worker"};
  bool serve_https = true;
  // The admission webhooks (every replica) and the gpustack-node-devices check (the leader).
  WebhookOptions webhooks;
  bool node_check = true;
  NodeCheckOptions node_check_options;
  bool requeue_refused_pods = true;  // with node_check: docs/decisions.md D20
  // The Instance controller (docs/behaviour.md §7).
  bool instance_controller = true;
  RequeuePolicy requeue;
  // Reads GPUSTACK_<SETTING> for the first-start seed.
  std::function<std::string(const std::string&)> getenv;
};

// The manufacturer table from the plugins in `dirs` (identify only: no hardware is touched), with
// the deploy-time GPUSTACK_<MFR>_* overrides on top, as the node daemons apply them
// (docs/behaviour.md §10.2).
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
