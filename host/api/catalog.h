// InstanceTypeFlavor (docs/behaviour.md §2.3): the list-only catalogue of the pools the nodes
// offer, derived from the ResourceFlavors the worker writes (their labels and note.gpustack.ai
// annotations), named as a pool without its os and arch. No CRD, no controller, nothing stored.
#ifndef GPUSTACK_HOST_API_CATALOG_H_
#define GPUSTACK_HOST_API_CATALOG_H_

#include <memory>
#include <string>
#include <vector>

#include "host/api/backend.h"

namespace gpustack::api {

Kind FlavorKind();

// The catalogue entries of `flavors`; `aware`: instance-type-aware-cpu-manufacturer. Pure.
std::vector<Json> DeriveFlavorCatalog(const std::vector<ObjectPtr>& flavors, bool aware);

// Reads Kueue's ResourceFlavors and the settings Secret (for the aware setting).
std::unique_ptr<Backend> FlavorCatalog(kube::Client& client, const std::string& system_namespace,
                                       size_t events_kept);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_CATALOG_H_
