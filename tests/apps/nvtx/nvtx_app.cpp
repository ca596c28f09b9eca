// NVTX from a program and two shared objects, on several threads, for the NVTX tests.
//
// usage: nvtx_app <threads> <iterations>
// Each worker thread names itself ("worker <i>" through nvtxNameOsThreadA) and runs <iterations>
// times: push "outer" (default domain), lib_a_work() (push/pop "a.work" around one cudaGetDevice),
// lib_b_step(i) (domain "lib_b": push/pop of the registered "b.step" with a mark "b.mark" inside),
// pop. The main thread starts the process range "whole run" before the workers start and the first
// worker ends it, on its own thread; main also pushes a wide-character range "wide ✓" and marks
// "main.mark" once.
// stdout: "pushes <n>": the push/pop ranges opened in all (threads * iterations * 3 + 1).
// exit: 0, or 64 on a usage error.
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern "C" void lib_a_work();
extern "C" void lib_b_step(int iteration);

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nvtx_app <threads> <iterations>\n");
    return 64;
  }
  const int threads = std::atoi(argv[1]);
  const int iterations = std::atoi(argv[2]);
  if (threads < 1 || iterations < 0) return 64;

  const nvtxRangeId_t whole = nvtxRangeStartA("whole run");
  nvtxMarkA("main.mark");
  nvtxRangePushW(L"wide \u2713");
  std::atomic<bool> ended{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string name = "worker " + std::to_string(t);
      nvtxNameOsThreadA(uint32_t(syscall(SYS_gettid)), name.c_str());
      for (int i = 0; i < iterations; ++i) {
        nvtxRangePushA("outer");
        lib_a_work();
        lib_b_step(i);
        nvtxRangePop();
      }
      bool expected = false;
      if (t == 0 && ended.compare_exchange_strong(expected, true)) nvtxRangeEnd(whole);
    });
  }
  for (auto& w : workers) w.join();
  nvtxRangePop();
  std::printf("pushes %d\n", threads * iterations * 3 + 1);
  return 0;
}
