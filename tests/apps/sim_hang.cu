// A program that hangs in a CUDA call: the main thread launches one kernel and synchronizes on it,
// while a second thread made one call and then waits outside CUDA. With SIMCUDA_KERNEL_NS set to
// minutes the synchronize does not return within a test; what `cutrace status --calls` is for.
//
// usage: sim_hang
// stdout: "launched" once the kernel is queued (flushed), then, should the synchronize return,
// "synchronized"; exit 0 then, 1 when a call failed.
#include <cstdio>
#include <future>
#include <thread>

#include "app_util.h"

__global__ void stuck_kernel(int* out) { *out = 1; }

int main() {
  CallCounter calls;  // for the error reports' convention; the program prints no table
  auto check = [&](const char* api, cudaError_t e) { return counted(calls, api, e); };
  std::promise<void> done;
  std::thread waiter([finished = done.get_future()] {
    int device = -1;
    cudaGetDevice(&device);
    finished.wait();
  });
  int* out = nullptr;
  bool ok = check("cudaMalloc", cudaMalloc(&out, sizeof(int)));
  if (ok) {
    stuck_kernel<<<1, 1>>>(out);
    ok = check("cudaGetLastError", cudaGetLastError());
  }
  std::printf("launched\n");
  std::fflush(stdout);
  if (ok) ok = check("cudaDeviceSynchronize", cudaDeviceSynchronize());
  if (ok) std::printf("synchronized\n");
  done.set_value();
  waiter.join();
  return ok ? 0 : 1;
}
