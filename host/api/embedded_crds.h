// The CRD files of crds/, compiled in by CMake (embedded_crds.cc is generated).
#ifndef GPUSTACK_HOST_API_EMBEDDED_CRDS_H_
#define GPUSTACK_HOST_API_EMBEDDED_CRDS_H_

#include <string_view>
#include <vector>

namespace gpustack::api {

std::vector<std::string_view> EmbeddedCrds();

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_EMBEDDED_CRDS_H_
