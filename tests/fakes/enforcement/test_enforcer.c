/* The test enforcer: a preload library with HAMi-core's environment contract, for the tests only
 * (the operator ships no interceptor; docs/behaviour.md §6.3). Loaded before libcuda.so.1 (by
 * /etc/ld.so.preload in a container, LD_PRELOAD in a unit test), it caps device 0's memory at
 * CUDA_DEVICE_MEMORY_LIMIT_0 ("<n>m", "<n>g" or bytes):
 *   - cuMemAlloc_v2 past the budget fails with CUDA_ERROR_OUT_OF_MEMORY, never reaching the driver;
 *   - cuMemGetInfo_v2 reports the budget as the total and what is left of it as free.
 * Without the variable it passes every call through. When CUDA_DEVICE_MEMORY_SHARED_CACHE names a
 * file (HAMi-core's cache, which the node daemon puts in the container's own working directory)
 * it appends "<pid> <used bytes>" to it after each allocation, as HAMi-core keeps its ledger
 * between the container's processes there. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake_cuda.h"

static size_t used_bytes;

/* The budget in bytes; 0: none. */
static size_t budget_bytes(void) {
  const char* text = getenv("CUDA_DEVICE_MEMORY_LIMIT_0");
  if (text == NULL || *text == '\0') return 0;
  char* end = NULL;
  unsigned long long value = strtoull(text, &end, 10);
  if (end != NULL && (*end == 'm' || *end == 'M')) value <<= 20;
  if (end != NULL && (*end == 'g' || *end == 'G')) value <<= 30;
  return (size_t)value;
}

static void* next_symbol(const char* name) { return dlsym(RTLD_NEXT, name); }

static void write_usage(void) {
  const char* path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  if (path == NULL || *path == '\0') return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%d %zu\n", (int)getpid(), used_bytes);
  fclose(f);
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  CUresult (*real)(CUdeviceptr*, size_t) =
      (CUresult(*)(CUdeviceptr*, size_t))next_symbol("cuMemAlloc_v2");
  if (real == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  const size_t budget = budget_bytes();
  if (budget != 0 && bytes > budget - used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = real(pointer, bytes);
  if (r == CUDA_SUCCESS) {
    used_bytes += bytes;
    write_usage();
  }
  return r;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  CUresult (*real)(size_t*, size_t*) =
      (CUresult(*)(size_t*, size_t*))next_symbol("cuMemGetInfo_v2");
  if (real == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = real(free_bytes, total_bytes);
  const size_t budget = budget_bytes();
  if (r != CUDA_SUCCESS || budget == 0 || budget >= *total_bytes) return r;
  const size_t left = budget - used_bytes;
  *total_bytes = budget;
  if (*free_bytes > left) *free_bytes = left;
  return r;
}
