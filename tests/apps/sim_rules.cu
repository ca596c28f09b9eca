// What `cutrace analyze`'s rules look for, done wrong (`trigger`) or done right (`avoid`), each kind of
// call from a function of its own so that a finding's call site names it.
//
// usage: sim_rules trigger|avoid [gap_ms=600]
//   trigger: 2 cudaMemcpyAsync device-to-host into pageable memory (download_pageable), 3 cudaMemcpy
//            (copy_blocking), 1 cudaMemset (clear_blocking), cudaStreamSynchronize and
//            cudaDeviceSynchronize (wait_for_device), then the GPU idle for gap_ms while the host
//            sleeps, a 200 ms kernel, and wait_for_device again.
//   avoid:   the same copies and memset asynchronous from and to pinned memory, queued behind a 50 ms
//            kernel and followed by twenty 5 ms kernels, all in one stream, and the host polls an
//            event (cudaEventQuery) instead of synchronising: the device is never idle in between.
// Every copy and memset moves kBytes; with SIMCUDA_COPY_GBPS=1 each takes exactly 1 ms on the device.
// The whole run is one NVTX range "step" (default domain).
// stdout: "mode M", "bytes N", then the calls table.
// exit:   0 on success, 1 when a CUDA call fails, 64 on a usage error.
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "app_util.h"

namespace {

constexpr size_t kBytes = 1000000;

CallCounter calls;

bool ok(const char* api, cudaError_t e) {
  calls.add(api);
  if (e == cudaSuccess) return true;
  report_error(calls, api, e);
  return false;
}

}  // namespace

__global__ void sleep_us_200000() {}
__global__ void sleep_us_50000() {}
__global__ void sleep_us_5000() {}

// noinline: each must stay a frame of its own in the stacks the tests read.
__attribute__((noinline)) bool download_pageable(char* pageable, const char* device, cudaStream_t stream) {
  for (int i = 0; i < 2; ++i)
    if (!ok("cudaMemcpyAsync", cudaMemcpyAsync(pageable, device, kBytes, cudaMemcpyDeviceToHost, stream)))
      return false;
  return true;
}

__attribute__((noinline)) bool copy_blocking(char* host, char* device) {
  return ok("cudaMemcpy", cudaMemcpy(device, host, kBytes, cudaMemcpyHostToDevice)) &&
         ok("cudaMemcpy", cudaMemcpy(host, device, kBytes, cudaMemcpyDeviceToHost)) &&
         ok("cudaMemcpy", cudaMemcpy(device, host, kBytes, cudaMemcpyHostToDevice));
}

__attribute__((noinline)) bool clear_blocking(char* device) {
  return ok("cudaMemset", cudaMemset(device, 0, kBytes));
}

__attribute__((noinline)) bool wait_for_device(cudaStream_t stream) {
  return ok("cudaStreamSynchronize", cudaStreamSynchronize(stream)) &&
         ok("cudaDeviceSynchronize", cudaDeviceSynchronize());
}

namespace {

bool trigger(char* device, long gap_ms) {
  std::vector<char> pageable(kBytes, 1);
  cudaStream_t stream;
  if (!ok("cudaStreamCreate", cudaStreamCreate(&stream))) return false;
  if (!download_pageable(pageable.data(), device, stream) || !copy_blocking(pageable.data(), device) ||
      !clear_blocking(device) || !wait_for_device(stream))
    return false;
  usleep(useconds_t(gap_ms * 1000));
  sleep_us_200000<<<1, 1, 0, stream>>>();
  calls.add_launch(0);
  if (!ok("cudaGetLastError", cudaGetLastError()) || !wait_for_device(stream)) return false;
  return ok("cudaStreamDestroy", cudaStreamDestroy(stream));
}

bool avoid(char* device) {
  char* pinned = nullptr;
  cudaStream_t stream;
  cudaEvent_t done;
  if (!ok("cudaMallocHost", cudaMallocHost(&pinned, kBytes)) || !ok("cudaStreamCreate", cudaStreamCreate(&stream)) ||
      !ok("cudaEventCreate", cudaEventCreate(&done)))
    return false;
  std::memset(pinned, 1, kBytes);
  // The long kernel first: everything after it is queued before the device gets to it, so no gap
  // opens between operations however slowly this thread issues them.
  sleep_us_50000<<<1, 1, 0, stream>>>();
  calls.add_launch(1);
  for (int i = 0; i < 2; ++i)
    if (!ok("cudaMemcpyAsync", cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream))) return false;
  for (int i = 0; i < 3; ++i)
    if (!ok("cudaMemcpyAsync", cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, stream))) return false;
  if (!ok("cudaMemsetAsync", cudaMemsetAsync(device, 0, kBytes, stream))) return false;
  for (int i = 0; i < 20; ++i) {
    sleep_us_5000<<<1, 1, 0, stream>>>();
    calls.add_launch(2);
  }
  if (!ok("cudaGetLastError", cudaGetLastError()) || !ok("cudaEventRecord", cudaEventRecord(done, stream)))
    return false;
  for (;;) {
    cudaError_t e = cudaEventQuery(done);
    calls.add("cudaEventQuery");
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) return ok("cudaEventQuery", e);
    usleep(1000);
  }
  return ok("cudaEventDestroy", cudaEventDestroy(done)) && ok("cudaStreamDestroy", cudaStreamDestroy(stream)) &&
         ok("cudaFreeHost", cudaFreeHost(pinned));
}

}  // namespace

int main(int argc, char** argv) {
  const bool is_trigger = argc >= 2 && std::strcmp(argv[1], "trigger") == 0;
  if (argc < 2 || argc > 3 || (!is_trigger && std::strcmp(argv[1], "avoid") != 0)) {
    std::fprintf(stderr, "usage: sim_rules trigger|avoid [gap_ms=600]\n");
    return 64;
  }
  const long gap_ms = argc == 3 ? std::atol(argv[2]) : 600;
  char* device = nullptr;
  if (!ok("cudaMalloc", cudaMalloc(&device, kBytes))) return 1;
  nvtxRangePushA("step");
  const bool done = is_trigger ? trigger(device, gap_ms) : avoid(device);
  nvtxRangePop();
  if (!done || !ok("cudaFree", cudaFree(device))) return 1;
  std::printf("mode %s\nbytes %zu\n", argv[1], kBytes);
  calls.print();
  return 0;
}
