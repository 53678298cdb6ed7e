// Standard base64 (RFC 4648 with padding), as Kubernetes writes Secret data, kubeconfig *-data
// fields, caBundle and an admission response's patch.
#ifndef GPUSTACK_HOST_COMMON_BASE64_H_
#define GPUSTACK_HOST_COMMON_BASE64_H_

#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack {

// Line breaks and spaces are ignored; `what` names the field in the error.
Result<std::string> DecodeBase64(std::string_view text, std::string_view what);
// No line breaks.
std::string EncodeBase64(std::string_view bytes);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_BASE64_H_
