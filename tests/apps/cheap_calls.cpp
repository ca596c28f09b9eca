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
//                    cudaEventQuery|nvtxRangePushA|pthread_mutex_lock] [plt|dlsym|dlsym12|getprocaddress] [burst]
// burst (default 0: all calls in one loop): the calls are made in loops of this many, each followed by
// a pause of 10 ms, after kWarmUpBursts untimed loops; only the loops are timed. Bursts that fit in a
// tracer's ring, after it has been written through once, time the calls as a program meets them when
// its tracer keeps up. A tight loop of millions outruns any recorder on a machine with few CPUs and
// ends in dropped records, and its first lap pays for the ring's memory being made ready.
// stdout: "api <function>", "route <route>", "calls <n>", "failed <n>", "total_ns <ns>",
//         "ns_per_call <ns>" (%.2f).
// exit: 0, or 64 on a usage error, 1 when the route's library or function cannot be found (a failing
// runtime still exits 0: its calls are what is timed).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace {

constexpr const char kUsage[] =
    "cheap_calls <iterations> [cudaGetDevice|cudaPeekAtLastError|cudaGetLastError|cudaStreamQuery|"
    "cudaEventQuery|nvtxRangePushA|pthread_mutex_lock] [plt|dlsym|dlsym12|getprocaddress] [burst]";

long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ll + t.tv_nsec;
}

// Enough to write through a ring of 16 MiB (cutrace's default) with bursts that fill a third of it.
constexpr int kWarmUpBursts = 4;

void pause_for_recorder() {
  const timespec pause{0, 10'000'000};
  nanosleep(&pause, nullptr);
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
  if (argc < 2 || argc > 5) {
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
  long burst = 0;
  if (argc > 4) {
    burst = std::strtol(argv[4], &end, 10);
    if (*argv[4] == '\0' || *end != '\0' || burst < 0) {
      std::fprintf(stderr, "error: the burst must be a non-negative integer, got '%s'\nusage: %s\n", argv[4], kUsage);
      return 64;
    }
  }
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

  // Each route and function gives a loop of n calls that returns how many failed.
  std::function<long(long)> calls;
  if (std::strcmp(route, "plt") == 0) {
    if (nvtx) {
      // Without a tool NVTX answers a push with a negative level (no tracking): not a failure.
      calls = [](long n) {
        volatile int level = 0;
        for (long i = 0; i < n; ++i) {
          level = nvtxRangePushA("step");
          nvtxRangePop();
        }
        (void)level;
        return 0l;
      };
    } else if (mutex) {
      calls = [](long n) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        long failed = 0;
        for (long i = 0; i < n; ++i) {
          failed += pthread_mutex_lock(&m) != 0;
          pthread_mutex_unlock(&m);
        }
        return failed;
      };
    } else if (peek) {
      calls = [](long n) {
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += cudaPeekAtLastError() != cudaSuccess;
        return failed;
      };
    } else if (last_error) {
      calls = [](long n) {
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += cudaGetLastError() != cudaSuccess;
        return failed;
      };
    } else if (stream_query) {
      calls = [](long n) {
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += cudaStreamQuery(nullptr) != cudaSuccess;
        return failed;
      };
    } else if (event_query) {
      cudaEvent_t event = nullptr;
      cudaEventCreate(&event);
      cudaEventRecord(event, nullptr);
      cudaEventSynchronize(event);
      calls = [event](long n) {
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += cudaEventQuery(event) != cudaSuccess;
        return failed;
      };
    } else {
      calls = [](long n) {
        int device = 0;
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += cudaGetDevice(&device) != cudaSuccess;
        return failed;
      };
    }
  } else if (std::strcmp(route, "dlsym") == 0 || std::strcmp(route, "dlsym12") == 0) {
    // The two functions timed have the same prototype in CUDA 12 and 13.
    void* runtime = dlopen(std::strcmp(route, "dlsym") == 0 ? "libcudart.so.13" : "libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (peek) {
      auto fn = reinterpret_cast<cudaError_t (*)()>(lookup_or_die(runtime, api));
      calls = [fn](long n) {
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += fn() != cudaSuccess;
        return failed;
      };
    } else {
      auto fn = reinterpret_cast<cudaError_t (*)(int*)>(lookup_or_die(runtime, api));
      calls = [fn](long n) {
        int device = 0;
        long failed = 0;
        for (long i = 0; i < n; ++i) failed += fn(&device) != cudaSuccess;
        return failed;
      };
    }
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
    calls = [fn](long n) {
      int version = 0;
      long failed = 0;
      for (long i = 0; i < n; ++i) failed += fn(&version) != 0;
      return failed;
    };
  } else {
    std::fprintf(stderr, "error: unknown route '%s'\nusage: %s\n", route, kUsage);
    return 64;
  }

  long failed = 0;
  long long total = 0;
  if (burst == 0) {
    const long long start = now_ns();
    failed = calls(iterations);
    total = now_ns() - start;
  } else {
    // Untimed bursts first, so that a tracer's ring (and the floor's) has been written through once,
    // then pauses long enough for a recorder to drain a burst: no timed call meets a full ring or
    // memory touched for the first time.
    for (int warm_up = 0; warm_up < kWarmUpBursts; ++warm_up) {
      failed += calls(burst);
      pause_for_recorder();
    }
    for (long done = 0; done < iterations;) {
      const long n = std::min(burst, iterations - done);
      const long long start = now_ns();
      failed += calls(n);
      total += now_ns() - start;
      done += n;
      pause_for_recorder();
    }
  }

  std::printf("api %s\n", api);
  std::printf("route %s\n", route);
  std::printf("calls %ld\n", iterations);
  std::printf("failed %ld\n", failed);
  std::printf("total_ns %lld\n", total);
  std::printf("ns_per_call %.2f\n", double(total) / double(iterations));
  return 0;
}
