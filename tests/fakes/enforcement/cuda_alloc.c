/* The test program: linked against libcuda.so.1 (the fake, or whatever the container has), it
 * reports what cuMemGetInfo says and allocates the MiB given on its command line.
 *   cuda_alloc <MiB>   prints "total_mib=<n> free_mib=<n>" then "alloc <MiB> MiB: ok" or
 *                      "alloc <MiB> MiB: out of memory"; exits 0, 3 on out of memory, 1 otherwise
 */
#include <stdio.h>
#include <stdlib.h>

#include "fake_cuda.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda_alloc <MiB>\n");
    return 1;
  }
  const size_t mib = (size_t)strtoull(argv[1], NULL, 10);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuInit failed: %d\n", r);
    return 1;
  }
  size_t free_bytes = 0, total_bytes = 0;
  r = cuMemGetInfo_v2(&free_bytes, &total_bytes);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuMemGetInfo failed: %d\n", r);
    return 1;
  }
  printf("total_mib=%zu free_mib=%zu\n", total_bytes >> 20, free_bytes >> 20);
  CUdeviceptr pointer = 0;
  r = cuMemAlloc_v2(&pointer, mib << 20);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    printf("alloc %zu MiB: out of memory\n", mib);
    return 3;
  }
  if (r != CUDA_SUCCESS) {
    printf("alloc %zu MiB: error %d\n", mib, r);
    return 1;
  }
  printf("alloc %zu MiB: ok\n", mib);
  return cuMemFree_v2(pointer) == CUDA_SUCCESS ? 0 : 1;
}
