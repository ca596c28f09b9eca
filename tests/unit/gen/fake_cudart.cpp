// The library behind the shim in forwarding_test.cpp and the in-process tests: a handful of runtime
// functions that remember how they were called. Everything else is deliberately absent, so that the
// shim's "real function missing" answers can be checked too.
#include <cuda_runtime_api.h>

#include <cerrno>
#include <cstdint>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

struct FakeMemcpyCall {
  void* dst;
  const void* src;
  size_t count;
  cudaMemcpyKind kind;
  int calls;
};

extern "C" {
__attribute__((visibility("default"))) FakeMemcpyCall fake_memcpy_call = {};
__attribute__((visibility("default"))) int fake_untyped_calls = 0;
}

// Sets errno on purpose: the wrapper must hand the program exactly what the real function left.
FAKE_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  fake_memcpy_call = {dst, src, count, kind, fake_memcpy_call.calls + 1};
  errno = 4242;
  return cudaErrorInvalidValue;
}

FAKE_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t) {
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
  *devPtr = reinterpret_cast<void*>(uintptr_t(0x7000000000) + size);
  return cudaSuccess;
}

// Fails without writing its out-parameter: the wrapper must not record whatever *ptr held.
FAKE_EXPORT cudaError_t cudaMallocHost(void**, size_t) { return cudaErrorMemoryAllocation; }

FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  *pStream = reinterpret_cast<cudaStream_t>(uintptr_t(0x5000));
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }

// Calls another export the way a library built with -fPIC does, through its PLT, so that the call
// reaches whatever the process bound the name to: the shim's wrapper, which must see a nested call.
FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return cudaStreamQuery(stream); }

FAKE_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t*, const void*, void**) { return cudaSuccess; }

FAKE_EXPORT void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*,
                                        int*) {}

// No header declares __cudaGetProcAddress, so the shim forwards it with a register-preserving
// trampoline. This signature is the fake's own: enough integer and floating-point arguments to use
// every argument register and the stack, so that a trampoline disturbing any of them changes the result.
FAKE_EXPORT double __cudaGetProcAddress(long a, long b, long c, long d, long e, long f, long g, long h,
                                        double x0, double x1, double x2, double x3, double x4, double x5,
                                        double x6, double x7, double x8) {
  ++fake_untyped_calls;
  return double(a) + 2.0 * b + 3.0 * c + 4.0 * d + 5.0 * e + 6.0 * f + 7.0 * g + 8.0 * h + 9.0 * x0 +
         10.0 * x1 + 11.0 * x2 + 12.0 * x3 + 13.0 * x4 + 14.0 * x5 + 15.0 * x6 + 16.0 * x7 + 17.0 * x8;
}

// Succeed as the real ones do with a device: capture_test.cpp opens and closes capture ranges through
// the wrappers and their hooks.
FAKE_EXPORT cudaError_t cudaProfilerStart() { return cudaSuccess; }
FAKE_EXPORT cudaError_t cudaProfilerStop() { return cudaSuccess; }
