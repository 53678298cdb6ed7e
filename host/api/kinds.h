// The kinds the worker.gpustack.ai/v1 API serves, and the one conversion between v1 and the
// v1alpha1 storage they live in. The v1 shape of Instance, Devices and InstanceType is the
// v1alpha1 shape (docs/decisions.md D49), so converting is renaming the version wherever an
// object names its own: apiVersion, a list's items, managedFields. Lossless both ways: the
// round-trip is fuzzed. Schemas and printer columns come from the CRDs compiled into the binary,
// so v1 can never describe a field the storage does not hold.
#ifndef GPUSTACK_HOST_API_KINDS_H_
#define GPUSTACK_HOST_API_KINDS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/kube/resource.h"

namespace gpustack::api {

inline constexpr const char* kGroup = "worker.gpustack.ai";
inline constexpr const char* kSettingsGroup = "gpustack.ai";  // Setting only
inline constexpr const char* kServedVersion = "v1";
inline constexpr const char* kStorageVersion = "v1alpha1";
inline constexpr const char* kCategory = "gpustack";

struct Kind {
  std::string group = kGroup;  // the version is always v1
  std::string resource, singular, kind, list_kind;
  bool namespaced = false;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
  // "status" (get, patch, update: forwarded) and "metrics" (get; a 503 until it is served).
  std::vector<std::string> subresources;
  kube::ResourceType storage;  // the v1alpha1 CRD
  nlohmann::json schema;       // the CRD's openAPIV3Schema
  nlohmann::json columns;      // the CRD's additionalPrinterColumns
  std::string ApiVersion() const { return group + "/" + kServedVersion; }
  bool Allows(const std::string& verb) const;
};

// Instance, Devices and InstanceType, from the CRDs compiled in; an error when one of them does
// not parse (a broken build, never a user's input).
Result<std::vector<Kind>> ServedKinds();
// The kind from CRD text (YAML); exposed for the tests and the fuzz target.
Result<Kind> KindFromCrd(const std::string& yaml);

// v1alpha1 -> v1 (what a client reads) and v1 -> v1alpha1 (what is stored). An object or a list
// of another group or version passes through unchanged.
nlohmann::json ToServed(nlohmann::json object);
nlohmann::json ToStorage(nlohmann::json object);

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_KINDS_H_
