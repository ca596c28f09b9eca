// Calls one cheap CUDA function in a tight loop and reports its cost per call: the overhead benchmark
// runs it with and without the tracer. The function is reached by one of the routes the tracer covers:
//   plt             a call of the linked runtime, bound by the dynamic linker (the classic route)
//   dlsym           a pointer from dlsym on a dlopen(RTLD_LOCAL) handle of libcudart.so.13 (ctypes)
//   dlsym12         the same with libcudart.so.12: CUDA 12's wrappers (libcutrace-cuda12.so)
//   getprocaddress  cuDriverGetVersion from the driver's cuGetProcAddress_v2 (how the runtime, cuBLAS
//                   and cuDNN reach the driver)
// On the simulator none of these does device work (cudaGetDevice reads a thread-local,
// cudaPeekAtLastError another, cuDriverGetVersion a constant). nvtxRangePushA times a push/pop pair
// of NVTX v3 (inline, through NVTX's own table; plt route only): a no-op without a tool.
// cudaGetLastError, cudaStreamQuery (of the default stream) and cudaEventQuery (of an event recorded
// once before the loop), plt route only: the calls a GPU-activity setting must not make dearer.
// pthread_mutex_lock times a lock/unlock pair of a free mutex (plt route only): an OS runtime call
// (-t osrt) far under the threshold, of which only the lock is wrapped.
//
// usage: cheap_calls <iterations> [cudaGetDevice|cudaPeekAtLastError|cudaGetLastError|cudaStreamQuery|
//                    cudaEventQuery|nvtxRangePushA|pthread_mutex_lock] [plt|dlsym|dlsym12|getprocaddress]
// stdout: "api <function>", "route <route>", "calls <n>", "failed <n>", "total_ns <ns>",
//         "ns_per_call <ns>" (%.2f).
// exit: 0, or 64 on a usage error, 1 when the route's library or function cannot be found (a failing
// runtime still exits 0: its calls are what is timed).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr const char kUsage[] =
    "cheap_calls <iterations> [cudaGetDevice|cudaPeekAtLastError|cudaGetLastError|cudaStreamQuery|"
    "cudaEventQuery|nvtxRangePushA|pthread_mutex_lock] [plt|dlsym|dlsym12|getprocaddress]";

long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ll + t.tv_nsec;
}

void* lookup_or_die(void* handle, const char* name) {
  void* p = handle ? dlsym(handle, name) : nullptr;
  if (!p) {
    std::fprintf(stderr, "error: cannot find %s: %s\n", name, dlerror());
    std::exit(1);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  char* end = nullptr;
  long iterations = std::strtol(argv[1], &end, 10);
  if (*argv[1] == '\0' || *end != '\0' || iterations <= 0) {
    std::fprintf(stderr, "error: iterations must be a positive integer, got '%s'\nusage: %s\n",
                 argv[1], kUsage);
    return 64;
  }
  const char* api = argc > 2 ? argv[2] : "cudaGetDevice";
  const char* route = argc > 3 ? argv[3] : "plt";
  bool peek = std::strcmp(api, "cudaPeekAtLastError") == 0;
  const bool nvtx = std::strcmp(api, "nvtxRangePushA") == 0;
  const bool mutex = std::strcmp(api, "pthread_mutex_lock") == 0;
  const bool last_error = std::strcmp(api, "cudaGetLastError") == 0;
  const bool stream_query = std::strcmp(api, "cudaStreamQuery") == 0;
  const bool event_query = std::strcmp(api, "cudaEventQuery") == 0;
  const bool plt_only = nvtx || mutex || last_error || stream_query || event_query;
  if (plt_only && std::strcmp(route, "plt") != 0) {
    std::fprintf(stderr, "error: %s is timed on route plt only\n", api);
    return 64;
  }
  if (!peek && !plt_only && std::strcmp(api, "cudaGetDevice") != 0) {
    std::fprintf(stderr, "error: unknown function '%s'\nusage: %s\n", api, kUsage);
    return 64;
  }

  long failed = 0;
  long long start = 0, total = 0;
  if (std::strcmp(route, "plt") == 0) {
    start = now_ns();
    if (nvtx) {
      // Without a tool NVTX answers a push with a negative level (no tracking): not a failure.
      volatile int level = 0;
      for (long i = 0; i < iterations; ++i) {
        level = nvtxRangePushA("step");
        nvtxRangePop();
      }
      (void)level;
    } else if (mutex) {
      static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
      for (long i = 0; i < iterations; ++i) {
        failed += pthread_mutex_lock(&m) != 0;
        pthread_mutex_unlock(&m);
      }
    } else if (peek) {
      for (long i = 0; i < iterations; ++i) failed += cudaPeekAtLastError() != cudaSuccess;
    } else if (last_error) {
      for (long i = 0; i < iterations; ++i) failed += cudaGetLastError() != cudaSuccess;
    } else if (stream_query) {
      for (long i = 0; i < iterations; ++i) failed += cudaStreamQuery(nullptr) != cudaSuccess;
    } else if (event_query) {
      cudaEvent_t event = nullptr;
      cudaEventCreate(&event);
      cudaEventRecord(event, nullptr);
      cudaEventSynchronize(event);
      start = now_ns();
      for (long i = 0; i < iterations; ++i) failed += cudaEventQuery(event) != cudaSuccess;
    } else {
      int device = 0;
      for (long i = 0; i < iterations; ++i) failed += cudaGetDevice(&device) != cudaSuccess;
    }
    total = now_ns() - start;
  } else if (std::strcmp(route, "dlsym") == 0 || std::strcmp(route, "dlsym12") == 0) {
    // The two functions timed have the same prototype in CUDA 12 and 13.
    void* runtime = dlopen(std::strcmp(route, "dlsym") == 0 ? "libcudart.so.13" : "libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (peek) {
      auto fn = reinterpret_cast<cudaError_t (*)()>(lookup_or_die(runtime, api));
      start = now_ns();
      for (long i = 0; i < iterations; ++i) failed += fn() != cudaSuccess;
    } else {
      auto fn = reinterpret_cast<cudaError_t (*)(int*)>(lookup_or_die(runtime, api));
      int device = 0;
      start = now_ns();
      for (long i = 0; i < iterations; ++i) failed += fn(&device) != cudaSuccess;
    }
    total = now_ns() - start;
  } else if (std::strcmp(route, "getprocaddress") == 0) {
    api = "cuDriverGetVersion";
    // The driver API's own types are not needed: the prototypes are those of cuda.h.
    using GetProcAddress = int (*)(const char*, void**, int, uint64_t, int*);
    auto get = reinterpret_cast<GetProcAddress>(lookup_or_die(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL),
                                                               "cuGetProcAddress_v2"));
    void* p = nullptr;
    int status = 0;
    if (get("cuDriverGetVersion", &p, 13000, 0, &status) != 0 || !p) {
      std::fprintf(stderr, "error: cuGetProcAddress_v2 found no cuDriverGetVersion (status %d)\n", status);
      return 1;
    }
    auto fn = reinterpret_cast<int (*)(int*)>(p);
    int version = 0;
    start = now_ns();
    for (long i = 0; i < iterations; ++i) failed += fn(&version) != 0;
    total = now_ns() - start;
  } else {
    std::fprintf(stderr, "error: unknown route '%s'\nusage: %s\n", route, kUsage);
    return 64;
  }

  std::printf("api %s\n", api);
  std::printf("route %s\n", route);
  std::printf("calls %ld\n", iterations);
  std::printf("failed %ld\n", failed);
  std::printf("total_ns %lld\n", total);
  std::printf("ns_per_call %.2f\n", double(total) / double(iterations));
  return 0;
}
