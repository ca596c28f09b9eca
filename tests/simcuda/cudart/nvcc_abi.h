// The entry points nvcc-generated host code calls. The CUDA headers declare them only where nvcc
// compiles (crt/host_runtime.h, included by the generated stub, and crt/device_functions.h under
// __CUDACC__), so they are repeated here with exactly those prototypes; tests/apps compiles this
// header together with the real ones under nvcc, where any difference is a compile error.
#pragma once

#include <cuda_runtime_api.h>

#ifdef __CUDACC__
#define SIMCUDA_HOST_DEVICE __host__ __device__
#else
#define SIMCUDA_HOST_DEVICE
#endif

extern "C" {

// crt/host_runtime.h
void** CUDARTAPI __cudaRegisterFatBinary(void* fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void** fatCubinHandle);
void CUDARTAPI __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress,
                                 const char* deviceName, int ext, size_t size, int constant,
                                 int global);
void CUDARTAPI __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress,
                                        char* deviceAddress, const char* deviceName, int ext,
                                        size_t size, int constant, int global);
char CUDARTAPI __cudaInitModule(void** fatCubinHandle);
void CUDARTAPI __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                      const char* deviceName, int thread_limit, uint3* tid,
                                      uint3* bid, dim3* bDim, dim3* gDim, int* wSize);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                 void* stream);

// crt/device_functions.h
SIMCUDA_HOST_DEVICE unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                                                   size_t sharedMem,
                                                                   struct CUstream_st* stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void** args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                              void** args, size_t sharedMem, cudaStream_t stream);
}
