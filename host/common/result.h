// The host's Result<T>, Error and Code: the SDK client's (sdk/client), so a failure read from a
// plugin passes through the host without conversion.
#ifndef GPUSTACK_HOST_COMMON_RESULT_H_
#define GPUSTACK_HOST_COMMON_RESULT_H_

#include <gpustack/client/result.hpp>

#endif  // GPUSTACK_HOST_COMMON_RESULT_H_
