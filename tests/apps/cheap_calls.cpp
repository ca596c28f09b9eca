// Calls one cheap runtime function in a tight loop and reports its cost per call: the overhead
// benchmark runs it with and without the tracer. On the simulator both choices do no device work
// (cudaGetDevice reads a thread-local, cudaPeekAtLastError another).
//
// usage: cheap_calls <iterations> [cudaGetDevice|cudaPeekAtLastError]
// stdout: "api <function>", "calls <n>", "failed <n>", "total_ns <ns>", "ns_per_call <ns>" (%.2f).
// exit: 0, or 64 on a usage error (a failing runtime still exits 0: its calls are what is timed).
#include <cuda_runtime_api.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr const char kUsage[] = "cheap_calls <iterations> [cudaGetDevice|cudaPeekAtLastError]";

long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ll + t.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
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
  bool peek = std::strcmp(api, "cudaPeekAtLastError") == 0;
  if (!peek && std::strcmp(api, "cudaGetDevice") != 0) {
    std::fprintf(stderr, "error: unknown function '%s'\nusage: %s\n", api, kUsage);
    return 64;
  }

  long failed = 0;
  long long start = now_ns();
  if (peek) {
    for (long i = 0; i < iterations; ++i) failed += cudaPeekAtLastError() != cudaSuccess;
  } else {
    int device = 0;
    for (long i = 0; i < iterations; ++i) failed += cudaGetDevice(&device) != cudaSuccess;
  }
  long long total = now_ns() - start;

  std::printf("api %s\n", api);
  std::printf("calls %ld\n", iterations);
  std::printf("failed %ld\n", failed);
  std::printf("total_ns %lld\n", total);
  std::printf("ns_per_call %.2f\n", double(total) / double(iterations));
  return 0;
}
