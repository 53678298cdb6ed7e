// The helper kinds of worker.gpustack.ai/v1 (docs/behaviour.md §2): thin wrappers that let an
// Instance's author manage what an Instance refers to without Secret, PVC and StorageClass
// rights of their own.
//   InstanceSSHPublicKey          a Secret with key authorized_keys (spec.publicKey)
//   InstanceImagePullSecret       a kubernetes.io/dockerconfigjson Secret (spec.registry,
//                                 spec.username, spec.email; spec.password write-only)
//   InstancePersistentVolume      a PersistentVolumeClaim (spec.type, spec.capacity,
//                                 spec.accessMode; status.phase, status.capacity)
//   InstancePersistentVolumeType  a StorageClass (cluster-scoped)
// Each backing object carries the label gpustack.ai/helper=<kind>: only those are served, read,
// changed or deleted through the wrapper. The wrapped object has the wrapper's name.
#ifndef GPUSTACK_HOST_API_HELPER_KINDS_H_
#define GPUSTACK_HOST_API_HELPER_KINDS_H_

#include <functional>
#include <memory>
#include <vector>

#include "host/api/backend.h"

namespace gpustack::api {

inline constexpr const char* kHelperLabel = "gpustack.ai/helper";

struct HelperMapping {
  Kind kind;
  kube::ResourceType backing;
  std::string label_value;  // of kHelperLabel
  // The served object (resourceVersion and uid those of the backing object).
  std::function<Json(const Json& backing)> to_served;
  // The backing object for a served one; `existing` is the current backing object (null on
  // create). The error is a refusal of the served object (422, naming the field).
  std::function<Result<Json>(const Json& served, const Json* existing)> to_backing;
};

// The four mappings. Pure.
const std::vector<HelperMapping>& HelperMappings();

std::vector<std::unique_ptr<Backend>> HelperBackends(kube::Client& client, size_t events_kept);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_HELPER_KINDS_H_
