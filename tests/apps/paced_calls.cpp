// Calls cudaGetDevice at a steady rate from several processes and threads, for the soak test
// (benchmarks/soak.sh): a long run at a rate the recorder must sustain without a drop.
//
// usage: paced_calls <processes> <threads-per-process> <calls-per-second-in-all> <seconds>
// The first process forks the others (fork without exec, as Python multiprocessing does). Each thread
// makes its share of the calls in batches, one batch per millisecond, catching up when it falls behind.
// stdout: "calls <n>", the calls made by all processes together.
// exit: 0, or 64 on a usage error.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

uint64_t run_threads(long threads, double rate_per_thread, double seconds) {
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> pool;
  for (long t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      const uint64_t start = now_ns();
      const uint64_t end = start + uint64_t(seconds * 1e9);
      uint64_t made = 0;
      int device = 0;
      for (uint64_t now = start; now < end; now = now_ns()) {
        const uint64_t due = uint64_t(double(now - start) * 1e-9 * rate_per_thread);
        for (; made < due; ++made) cudaGetDevice(&device);
        timespec nap{0, 1'000'000};
        nanosleep(&nap, nullptr);
      }
      total += made;
    });
  }
  for (auto& t : pool) t.join();
  return total.load();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: paced_calls <processes> <threads-per-process> <calls-per-second> <seconds>\n");
    return 64;
  }
  const long processes = std::atol(argv[1]), threads = std::atol(argv[2]);
  const double rate = std::atof(argv[3]), seconds = std::atof(argv[4]);
  if (processes < 1 || threads < 1 || rate <= 0 || seconds <= 0) {
    std::fprintf(stderr, "paced_calls: every argument must be positive\n");
    return 64;
  }
  const double per_thread = rate / double(processes * threads);
  int counts[2];
  if (pipe(counts) != 0) return 1;
  std::vector<pid_t> children;
  for (long p = 1; p < processes; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      const uint64_t made = run_threads(threads, per_thread, seconds);
      if (write(counts[1], &made, sizeof made) != ssize_t(sizeof made)) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  uint64_t total = run_threads(threads, per_thread, seconds);
  for (pid_t pid : children) {
    uint64_t made = 0;
    if (read(counts[0], &made, sizeof made) == ssize_t(sizeof made)) total += made;
    waitpid(pid, nullptr, 0);
  }
  std::printf("calls %llu\n", static_cast<unsigned long long>(total));
  return 0;
}
