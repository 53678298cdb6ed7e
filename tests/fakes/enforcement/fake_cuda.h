/* The few CUDA driver API types and codes the test doubles use (the values of NVIDIA's cuda.h). */
#ifndef GPUSTACK_TESTS_FAKES_ENFORCEMENT_FAKE_CUDA_H_
#define GPUSTACK_TESTS_FAKES_ENFORCEMENT_FAKE_CUDA_H_

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
};

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int* count);
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);
CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr pointer);

#endif /* GPUSTACK_TESTS_FAKES_ENFORCEMENT_FAKE_CUDA_H_ */
