// Slow and fast calls from a known call chain, for the backtraces of slow calls (--cudabacktrace):
// main -> level_two -> copy_slowly -> cudaMemcpy of 16 MiB, which the simulated device makes take about
// 1.6 ms (10 GB/s), and main -> query_quickly -> cudaGetDevice, which takes nanoseconds. The functions
// are kept out of line and each does something after its call, so that every one is a frame of its own.
// Each further argument, the path of libbacktrace_lib.so or a build of it like libbacktrace_lib_again.so,
// is loaded with dlopen, makes one more slow copy (main -> backtrace_lib_copy -> an inlined copy_inline
// -> cudaMemcpy) and is closed again before the next is loaded, which the loader then tends to map at
// the same addresses.
// With BACKTRACE_APP_ADDRESSES set, it says on stderr where each library's entry point was.
// The lines of the calls carry "CALL: <function>" comments, by which the tests find them.
// usage: backtrace_app <slow copies> <fast queries> [LIBRARY...]; prints "copies N queries M failed F".
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

volatile int g_after_call = 0;

__attribute__((noinline)) cudaError_t copy_slowly(void* device, const void* host, size_t bytes) {
  const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);  // CALL: copy_slowly
  g_after_call = g_after_call + 1;
  return e;
}

__attribute__((noinline)) int level_two(void* device, const void* host, size_t bytes, int copies) {
  int failed = 0;
  for (int i = 0; i < copies; ++i) failed += copy_slowly(device, host, bytes) != cudaSuccess;  // CALL: level_two
  g_after_call = g_after_call + 1;
  return failed;
}

__attribute__((noinline)) int query_quickly(int queries) {
  int device = 0, failed = 0;
  for (int i = 0; i < queries; ++i) failed += cudaGetDevice(&device) != cudaSuccess;
  g_after_call = g_after_call + 1;
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <slow copies> <fast queries> [LIBRARY...]\n", argv[0]);
    return 2;
  }
  const int copies = std::atoi(argv[1]), queries = std::atoi(argv[2]);
  constexpr size_t kBytes = 16u << 20;
  std::vector<char> host(kBytes, 1);
  void* device = nullptr;
  if (cudaMalloc(&device, kBytes) != cudaSuccess) return 1;
  int failed = level_two(device, host.data(), kBytes, copies) + query_quickly(queries);  // CALL: main
  for (int i = 3; i < argc; ++i) {
    void* library = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    auto copy = library ? reinterpret_cast<int (*)(void*, const void*, size_t)>(dlsym(library, "backtrace_lib_copy"))
                        : nullptr;
    if (!copy) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    if (std::getenv("BACKTRACE_APP_ADDRESSES")) std::fprintf(stderr, "%s at %p\n", argv[i], reinterpret_cast<void*>(copy));
    failed += copy(device, host.data(), kBytes);  // CALL: main (library)
    if (dlclose(library) != 0) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
  }
  cudaFree(device);
  std::printf("copies %d queries %d failed %d\n", copies, queries, failed);
  return failed ? 1 : 0;
}
