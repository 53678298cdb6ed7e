// The Instance workload (docs/behaviour.md §7): what the controller makes of an Instance (its Pod,
// its Service, the Secret holding its SSH host key) and the status it reports from what it sees.
// Pure: the controller (instance_controller.h) reads the cluster and writes these objects.
#ifndef GPUSTACK_HOST_OPERATOR_INSTANCES_H_
#define GPUSTACK_HOST_OPERATOR_INSTANCES_H_

#include <string>
#include <utility>

#include "host/common/json_path.h"
#include "host/common/result.h"
#include "host/operator/fleet.h"
#include "host/operator/settings.h"
#include "host/usage/pod_usage.h"

namespace gpustack::op {

// Held on an Instance while its Pod exists, so the Instance outlives it (phase Deleting) and a
// recreated Instance of the same name never meets the old Pod.
inline constexpr const char* kInstanceFinalizer = "worker.gpustack.ai/instance";
// On the Pod, the Service and the host key Secret: the Instance's name. The controller watches
// only objects carrying it (app.kubernetes.io/part-of, the label §7 names, is common to many
// charts).
inline constexpr const char* kInstanceLabel = usage::kInstanceLabel;
inline constexpr const char* kMainContainer = "main";
inline constexpr const char* kSshContainer = "sshd";
inline constexpr const char* kAuthorizedKeysDir = "/var/run/sshd-authorized-keys";
inline constexpr const char* kHostKeyDir = "/var/run/sshd-host-key";
inline constexpr const char* kHostKeyFile = "ssh_host_ecdsa_key";
inline constexpr const char* kDefaultVolumeMount = "/workspace";

// What rendering an Instance's Pod reads besides the Instance.
struct InstanceContext {
  const Json* type = nullptr;            // its InstanceType
  const Manufacturer* vendor = nullptr;  // of the type's cards; null for a CPU-only type
  Settings settings;
  // The vendor's RuntimeClass, when one of that name exists; else empty.
  std::string runtime_class;
  // The kubernetes.io/hostname label of spec.nodeName's Node (the Node must exist).
  std::string pinned_hostname;
};

// The Pod: named as the Instance, owned by it, labelled for its InstanceType's queue. An error
// names what cannot be rendered (a bad quantity), never a half Pod.
Result<Json> InstancePod(const Json& instance, const InstanceContext& context);

// The NodePort Service publishing every container port of `pod` (owned by the Pod, so it goes with
// it), or null when the Pod has no port.
Json InstanceService(const Json& instance, const Json& pod);

// The Secret holding the Instance's SSH host key (owned by the Instance: a restarted Instance keeps
// its key, a deleted one takes it along).
std::string HostKeySecretName(const std::string& instance);
Json HostKeySecret(const Json& instance, const std::string& private_key_pem);

// The registry and namespace rewrites of built-in images (settings container-registry and
// container-namespace): "gpustack/x:v1" -> "<registry>/<namespace>/x:v1".
std::string RewrittenImage(const std::string& image, const Settings& settings);

// requests.{cpu,memory,ephemeral-storage} for `limits`: equal, or with
// instance-general-resources-overcommit the unit floor (accelerated 100m CPU, general 800m;
// 128Mi memory; an eighth of the storage), never above the limit (docs/decisions.md D53).
Json ScaledRequests(const Json& limits, bool accelerated, bool overcommit);

// The phase of a Pod that exists and is not going away (docs/behaviour.md §7's Pod summary), with
// the message that explains it.
std::pair<std::string, std::string> PodSummary(const Json& pod);

// What the status reads besides the Instance.
struct InstanceObserved {
  const Json* pod = nullptr;      // its Pod (this incarnation's), if any
  const Json* service = nullptr;  // its Service, if any
  const Json* node = nullptr;     // the Node the Pod is bound to, if any
  // Set by the controller when it decides the phase itself (Starting, Stopping, Stopped,
  // Deleting); else the Pod summary.
  std::string phase = {}, message = {};
};

// The Instance's whole status.
Json InstanceStatus(const InstanceObserved& observed, const Settings& settings);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_INSTANCES_H_
