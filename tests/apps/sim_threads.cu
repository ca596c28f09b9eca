// Many threads calling the runtime: either all at once, or a long sequence of short-lived threads
// (created and joined in batches of 8), the pattern that stresses per-thread tracer state.
//
// usage: sim_threads <threads> <iterations-per-thread> <concurrent|short>
// Each thread calls cudaSetDevice(0) once, then per iteration cudaGetDevice, cudaMalloc (256 bytes),
// cudaMemsetAsync on its per-thread default stream and cudaFree, and finally
// cudaStreamSynchronize(cudaStreamPerThread).
// stdout: "threads N", "mode M", "failed_threads N", then the calls table (totals over all threads).
// exit: 0 on success, 1 when any call failed.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "app_util.h"

namespace {

constexpr const char kUsage[] = "sim_threads <threads> <iterations-per-thread> <concurrent|short>";
constexpr size_t kBatch = 8;

struct ThreadResult {
  CallCounter calls;
  bool ok = true;
};

void work(long iterations, ThreadResult* r) {
  CallCounter& calls = r->calls;
  r->ok = counted(calls, "cudaSetDevice", cudaSetDevice(0));
  for (long i = 0; r->ok && i < iterations; ++i) {
    int device = -1;
    void* p = nullptr;
    r->ok = counted(calls, "cudaGetDevice", cudaGetDevice(&device)) &&
            counted(calls, "cudaMalloc", cudaMalloc(&p, 256)) &&
            counted(calls, "cudaMemsetAsync", cudaMemsetAsync(p, 0, 256, cudaStreamPerThread)) &&
            counted(calls, "cudaFree", cudaFree(p));
  }
  if (r->ok) {
    r->ok = counted(calls, "cudaStreamSynchronize", cudaStreamSynchronize(cudaStreamPerThread));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long threads = parse_count(argv[1], "threads", kUsage);
  long iterations = parse_count(argv[2], "iterations-per-thread", kUsage);
  bool concurrent = std::strcmp(argv[3], "concurrent") == 0;
  if (!concurrent && std::strcmp(argv[3], "short") != 0) {
    std::fprintf(stderr, "error: mode must be 'concurrent' or 'short', got '%s'\nusage: %s\n",
                 argv[3], kUsage);
    return 64;
  }

  std::vector<ThreadResult> results(threads);
  size_t batch = concurrent ? results.size() : kBatch;
  for (size_t first = 0; first < results.size(); first += batch) {
    std::vector<std::thread> running;
    for (size_t i = first; i < results.size() && i < first + batch; ++i) {
      running.emplace_back(work, iterations, &results[i]);
    }
    for (std::thread& t : running) t.join();
  }

  CallCounter total;
  long failed = 0;
  for (const ThreadResult& r : results) {
    total.merge(r.calls);
    failed += r.ok ? 0 : 1;
  }
  std::printf("threads %ld\n", threads);
  std::printf("mode %s\n", argv[3]);
  std::printf("failed_threads %ld\n", failed);
  total.print();
  return failed == 0 ? 0 : 1;
}
