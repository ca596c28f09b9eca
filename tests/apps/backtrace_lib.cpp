// The library backtrace_app loads with dlopen when asked: a slow copy made from a function inlined into
// the library's entry point, so that the stack of the copy holds an inlined frame, a frame of a
// dlopen'ed library and the program's own frames. Built twice: libbacktrace_lib_again.so names the
// helper copy_inline_again and is otherwise the same code, so that it lays out alike.
#include <cuda_runtime_api.h>

#include <cstddef>

#ifndef COPY_INLINE
#define COPY_INLINE copy_inline
#endif

namespace {

volatile int g_after_call = 0;

inline __attribute__((always_inline)) cudaError_t COPY_INLINE(void* device, const void* host, size_t bytes) {
  const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);  // CALL: copy_inline
  g_after_call = g_after_call + 1;
  return e;
}

}  // namespace

extern "C" __attribute__((visibility("default"), noinline)) int backtrace_lib_copy(void* device, const void* host,
                                                                                    size_t bytes) {
  const int failed = COPY_INLINE(device, host, bytes) != cudaSuccess;  // CALL: backtrace_lib_copy
  g_after_call = g_after_call + 1;
  return failed;
}
