// The library backtrace_app loads with dlopen when asked: a slow copy made from a function inlined into
// the library's entry point, so that the stack of the copy holds an inlined frame, a frame of a
// dlopen'ed library and the program's own frames.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace {

volatile int g_after_call = 0;

inline __attribute__((always_inline)) cudaError_t copy_inline(void* device, const void* host, size_t bytes) {
  const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);  // CALL: copy_inline
  g_after_call = g_after_call + 1;
  return e;
}

}  // namespace

extern "C" __attribute__((visibility("default"), noinline)) int backtrace_lib_copy(void* device, const void* host,
                                                                                    size_t bytes) {
  const int failed = copy_inline(device, host, bytes) != cudaSuccess;  // CALL: backtrace_lib_copy
  g_after_call = g_after_call + 1;
  return failed;
}
