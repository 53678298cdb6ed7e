// The pages of the binary's own code and read-only data, handed back once start-up is over. The
// kernel maps code in 64 KB blocks around each fault, so everything start-up ran (flag parsing,
// the kubeconfig, OpenSSL's set-up, loading plugins, the ledger's rebuild) stays resident for
// the life of a daemon that never runs it again: about 4 MB of the node daemon's 17.7
// (docs/footprint.md). What runs again faults back in, once.
#ifndef GPUSTACK_HOST_COMMON_OWN_CODE_H_
#define GPUSTACK_HOST_COMMON_OWN_CODE_H_

#include <cstddef>

#include "host/common/result.h"

namespace gpustack {

// madvise(MADV_PAGEOUT) on the executable's read-only segments (never on writable ones: their
// private pages would go to swap). Pages another process maps too are left alone by the kernel.
// Returns the bytes advised; fails with kUnimplemented on kernels before 5.4, which have no
// MADV_PAGEOUT.
Result<size_t> PageOutOwnCode();

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_OWN_CODE_H_
