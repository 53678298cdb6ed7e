// `gpustack-operator cleanup`: removes what the worker creates at run time, for an uninstall that
// asked for it (the chart's cleanupOnUninstall post-delete hook, docs/behaviour.md §9). Run it only
// once the worker is gone, or the worker recreates what it removes.
#ifndef GPUSTACK_HOST_OPERATOR_CLEANUP_H_
#define GPUSTACK_HOST_OPERATOR_CLEANUP_H_

#include <functional>
#include <string>
#include <vector>

#include "host/kube/client.h"

namespace gpustack::op {

struct CleanupOptions {
  std::string system_namespace = "gpustack-system";
  // Also delete the operator's CRDs (and with them every Devices, InstanceType and Instance).
  bool crds = true;
  std::function<void(const std::string&)> progress;  // one line per step
};

struct CleanupReport {
  int deleted = 0;
  std::vector<std::string> problems;  // what could not be removed; empty on success
};

// In order: the webhook configurations (nothing may be refused by a webhook with no server), the
// gpustack-node-devices AdmissionCheck and the Kueue objects the worker's field managers wrote
// (entrances, queues, flavors), the InstanceTypes' finalizers, the Devices objects, the CRDs,
// then the settings and webhook Secrets and the Lease. Whatever is already gone (or whose API is
// not served, Kueue uninstalled first) counts as done.
CleanupReport Cleanup(kube::Client& client, const CleanupOptions& options);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_CLEANUP_H_
