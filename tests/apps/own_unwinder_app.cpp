// A program with an unwinder of its own, in its global scope as if it were linked with it: the
// libunwind.so.8 first on the library path (Debian's libunwind 1.6, whose _Unwind_* then come ahead of
// libgcc_s's for every exception the program throws, or a stand-in without unw_backtrace). It takes a
// stack with it, throws and catches a C++ exception, then makes slow copies, whose backtraces the
// shim takes with the unwinder it carries. With "none" it loads no unwinder, and says whether any
// libunwind was mapped into it all the same.
// usage: own_unwinder_app libunwind|none <slow copies>; prints "own unwinder: walks" (its unw_backtrace
// took more than one frame; "none" without one), "caught 7", "copies N failed F" and
// "libunwind mapped: yes|no".
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

volatile int g_after_call = 0;

__attribute__((noinline)) cudaError_t copy_through_own_unwinder(void* device, const void* host, size_t bytes) {
  const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);  // CALL: copy_through_own_unwinder
  g_after_call = g_after_call + 1;
  return e;
}

__attribute__((noinline)) void throw_seven() { throw std::runtime_error("7"); }

bool libunwind_mapped() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[4096];
  bool found = false;
  while (std::fgets(line, sizeof line, maps))
    if (std::strstr(line, "/libunwind")) found = true;
  std::fclose(maps);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s libunwind|none <slow copies>\n", argv[0]);
    return 2;
  }
  if (std::strcmp(argv[1], "none") != 0) {
    void* own = dlopen("libunwind.so.8", RTLD_NOW | RTLD_GLOBAL);
    using Backtrace = int (*)(void**, int);
    auto backtrace = own ? reinterpret_cast<Backtrace>(dlsym(own, "unw_backtrace")) : nullptr;
    void* frames[64];
    if (backtrace) std::printf("own unwinder: %s\n", backtrace(frames, 64) > 1 ? "walks" : "fails");
    else std::printf("own unwinder: none\n");
  }
  try {
    throw_seven();
  } catch (const std::exception& e) {
    std::printf("caught %s\n", e.what());
  }
  constexpr size_t kBytes = 16u << 20;
  std::vector<char> host(kBytes, 1);
  void* device = nullptr;
  if (cudaMalloc(&device, kBytes) != cudaSuccess) return 1;
  const int copies = std::atoi(argv[2]);
  int failed = 0;
  for (int i = 0; i < copies; ++i) failed += copy_through_own_unwinder(device, host.data(), kBytes) != cudaSuccess;  // CALL: main
  cudaFree(device);
  std::printf("copies %d failed %d\n", copies, failed);
  std::printf("libunwind mapped: %s\n", libunwind_mapped() ? "yes" : "no");
  return 0;
}
