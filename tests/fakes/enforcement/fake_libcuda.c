/* A fake libcuda.so.1: one card of $FAKE_CUDA_TOTAL_MIB MiB (16384 by default) whose memory
 * cuMemAlloc_v2 hands out until it is gone, as the driver does. No GPU: allocations are
 * bookkeeping only, and pointers are offsets. The enforcer test double caps it from above. */
#include <stdlib.h>

#include "fake_cuda.h"

#define MIB (1024ull * 1024ull)

static int initialized;
static size_t total_bytes;
static size_t used_bytes;
static CUdeviceptr next_pointer = 0x100000;

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const char* mib = getenv("FAKE_CUDA_TOTAL_MIB");
  total_bytes = (size_t)(mib != NULL ? strtoull(mib, NULL, 10) : 16384ull) * MIB;
  initialized = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (free_bytes == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
  *free_bytes = total_bytes - used_bytes;
  *total = total_bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (pointer == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > total_bytes - used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  used_bytes += bytes;
  *pointer = next_pointer;
  next_pointer += bytes;
  return CUDA_SUCCESS;
}

/* Frees nothing it can name (pointers are not tracked): the tests allocate once per process. */
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
