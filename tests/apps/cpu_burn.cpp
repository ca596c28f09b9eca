// Known CPU work for -s cpu: after one CUDA call (which makes the process known to the trace), the main
// thread spends 2 units of its CPU time in burn_a and 1 in burn_b, and a second thread 1 unit in
// burn_in_thread; a unit is the number of milliseconds given. The loops are plain arithmetic that read
// the thread's CPU clock only now and then, so nearly every sample lands in them.
// usage: cpu_burn <unit_ms>; prints "burned N ms".
#include <cuda_runtime_api.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

volatile uint64_t g_sink = 0;

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Spins until this thread has used `ms` more milliseconds of CPU time. Each function gets its own
// increment, so that the compiler cannot fold the three into one.
#define BURN_BODY(ms, increment)                                                         \
  const uint64_t until = thread_cpu_ns() + uint64_t(ms) * 1000000ull;                  \
  uint64_t x = g_sink + 1;                                                              \
  do {                                                                                  \
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ull + (increment);      \
  } while (thread_cpu_ns() < until);                                                    \
  g_sink = x

__attribute__((noinline)) void burn_a(int ms) { BURN_BODY(ms, 1442695040888963407ull); }
__attribute__((noinline)) void burn_b(int ms) { BURN_BODY(ms, 1013904223ull); }
__attribute__((noinline)) void burn_in_thread(int ms) { BURN_BODY(ms, 12345ull); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <unit_ms>\n", argv[0]);
    return 2;
  }
  const int unit = std::atoi(argv[1]);
  int device = 0;
  cudaGetDevice(&device);
  std::thread worker([unit] { burn_in_thread(unit); });
  burn_a(2 * unit);
  burn_b(unit);
  worker.join();
  std::printf("burned %d ms\n", 4 * unit);
  return 0;
}
