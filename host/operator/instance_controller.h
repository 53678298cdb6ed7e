// The Instance controller (docs/behaviour.md §7; the leader only): one Pod and one Service per
// Instance, the SSH host key Secret, stop and start, the stops a drained queue or a deleted
// InstanceType force, and the status. Keyed by "<namespace>/<name>" on a work queue, so one
// Instance is handled by one thread at a time; every object it makes has the Instance's name
// (a second create is refused, never a duplicate) and an owner (a killed worker leaves no orphan:
// the garbage collector takes what an Instance or its Pod no longer holds). Rendering and status
// are pure (instances.h).
#ifndef GPUSTACK_HOST_OPERATOR_INSTANCE_CONTROLLER_H_
#define GPUSTACK_HOST_OPERATOR_INSTANCE_CONTROLLER_H_

#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/kube/workqueue.h"
#include "host/operator/fleet.h"
#include "host/operator/node_record.h"
#include "host/operator/settings.h"

namespace gpustack::op {

struct InstanceCounters {
  uint64_t reconciles = 0, failures = 0;
  uint64_t pods_created = 0, pods_deleted = 0, stops_forced = 0;
  std::vector<double> reconcile_seconds;  // the most recent 4096
};

// The leader's caches the controller reads besides its own.
struct InstanceControllerInputs {
  NodeInformer* nodes = nullptr;
  kube::Informer* instance_types = nullptr;
  kube::Informer* queues = nullptr;  // ClusterQueues (name == InstanceType name)
  std::function<Settings()> settings;
  const ManufacturerTable* manufacturers = nullptr;
};

class InstanceController {
 public:
  InstanceController(kube::Client& client, InstanceControllerInputs inputs, int threads = 2);
  ~InstanceController();

  // Its own informers (Instances, and the Pods and Services it made), for the leader to start,
  // wait for and stop with the others. Made, and handlers added to the inputs, in the constructor.
  std::vector<kube::Informer*> informers() const;
  // Reconciles until `stop`.
  void Run(std::stop_token stop);
  InstanceCounters Counters() const;

 private:
  struct Step;
  void EnqueueAll();
  void EnqueueOfType(const std::string& type);
  void Handle(const std::string& key);
  Status Reconcile(const std::string& key, Step& step);
  // `type` is the Instance's InstanceType, which exists and is not being deleted.
  Status CreatePod(const Json& instance, const Json& type, const Settings& settings, Step& step);
  Status WriteStatus(const Json& instance, const Json& status);
  Status PatchInstance(const Json& instance, const Json& json_patch);
  Status StopInstance(const Json& instance, const std::string& why);
  std::string RuntimeClassOf(const Manufacturer& vendor);

  kube::Client& client_;
  InstanceControllerInputs inputs_;
  int threads_;
  std::unique_ptr<kube::Informer> instances_, pods_, services_;
  kube::WorkQueue queue_;
  mutable std::mutex mutex_;
  InstanceCounters counters_;
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_INSTANCE_CONTROLLER_H_
