// What a test process cannot do to itself: exit, or run with other knobs. The tests run this helper
// and look at how it ended.
//
// usage: simcuda_helper queued        leaves ten minutes of work queued and returns from main; must
//                                     exit at once, without waiting or crashing
//        simcuda_helper late-sync     synchronises in an exit handler that runs after the simulator
//                                     stopped its device thread; must complete the work and print
//                                     "late-sync ok"
//        simcuda_helper two-devices   with SIMCUDA_DEVICE_COUNT=2: devices have their own memory
//                                     and timelines; prints "two-devices ok" or what went wrong
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_kernels.h"

namespace {

constexpr const char kUsage[] = "simcuda_helper queued|late-sync|two-devices";

unsigned char* g_buffer = nullptr;

#define CHECK_RESULT(expr, expected)                                                         \
  do {                                                                                      \
    cudaError_t e_ = (expr);                                                                \
    if (e_ != (expected)) {                                                                 \
      std::printf("%s returned %d, expected %d\n", #expr, int(e_), int(expected));         \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int two_devices() {
  const void* forever = simcuda::test::register_kernel(1, "_Z21forever_sleep_us_600000000v");
  int count = 0;
  CHECK_RESULT(cudaGetDeviceCount(&count), cudaSuccess);
  if (count != 2) {
    std::printf("cudaGetDeviceCount gave %d devices, expected 2\n", count);
    return 1;
  }
  size_t free0_before = 0, free1_before = 0, free = 0, total = 0;
  CHECK_RESULT(cudaMemGetInfo(&free0_before, &total), cudaSuccess);
  CHECK_RESULT(cudaSetDevice(1), cudaSuccess);
  CHECK_RESULT(cudaMemGetInfo(&free1_before, &total), cudaSuccess);
  void* on1 = nullptr;
  CHECK_RESULT(cudaMalloc(&on1, 1 << 20), cudaSuccess);
  cudaPointerAttributes attributes;
  CHECK_RESULT(cudaPointerGetAttributes(&attributes, on1), cudaSuccess);
  if (attributes.device != 1) {
    std::printf("an allocation made on device 1 reports device %d\n", attributes.device);
    return 1;
  }
  CHECK_RESULT(cudaMemGetInfo(&free, &total), cudaSuccess);
  if (free != free1_before - (1 << 20)) {
    std::printf("device 1 free memory did not go down by the allocation\n");
    return 1;
  }
  cudaStream_t stream1 = nullptr;
  CHECK_RESULT(cudaStreamCreate(&stream1), cudaSuccess);
  CHECK_RESULT(cudaLaunchKernel(forever, dim3(1), dim3(1), nullptr, 0, nullptr), cudaSuccess);

  // Device 0 is idle and unaffected, whatever device 1 is doing.
  CHECK_RESULT(cudaSetDevice(0), cudaSuccess);
  CHECK_RESULT(cudaMemGetInfo(&free, &total), cudaSuccess);
  if (free != free0_before) {
    std::printf("device 0 free memory changed by an allocation on device 1\n");
    return 1;
  }
  CHECK_RESULT(cudaDeviceSynchronize(), cudaSuccess);
  cudaEvent_t event0 = nullptr;
  CHECK_RESULT(cudaEventCreate(&event0), cudaSuccess);
  CHECK_RESULT(cudaEventRecord(event0, stream1), cudaErrorInvalidResourceHandle);
  CHECK_RESULT(cudaEventDestroy(event0), cudaSuccess);

  CHECK_RESULT(cudaSetDevice(1), cudaSuccess);
  CHECK_RESULT(cudaStreamQuery(nullptr), cudaErrorNotReady);
  CHECK_RESULT(cudaDeviceReset(), cudaSuccess);
  CHECK_RESULT(cudaStreamQuery(nullptr), cudaSuccess);
  CHECK_RESULT(cudaSetDevice(2), cudaErrorInvalidDevice);
  std::printf("two-devices ok\n");
  return 0;
}

void synchronise_late() {
  bool ok = cudaDeviceSynchronize() == cudaSuccess && g_buffer[0] == 7 && g_buffer[4095] == 7;
  std::printf(ok ? "late-sync ok\n" : "late-sync failed\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  if (std::strcmp(argv[1], "two-devices") == 0) return two_devices();
  if (std::strcmp(argv[1], "late-sync") == 0) {
    // Registered before the first CUDA call, so it runs after the simulator's own exit handler.
    std::atexit(synchronise_late);
    const void* k = simcuda::test::register_kernel(0, "_Z17late_sleep_us_50000v");
    if (cudaMallocHost(&g_buffer, 4096) != cudaSuccess ||
        cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, nullptr) != cudaSuccess ||
        cudaMemsetAsync(g_buffer, 7, 4096, nullptr) != cudaSuccess) {
      return 1;
    }
    return 0;
  }
  if (std::strcmp(argv[1], "queued") == 0) {
    const void* k = simcuda::test::register_kernel(0, "_Z21forever_sleep_us_600000000v");
    void* d = nullptr;
    if (cudaMalloc(&d, 1 << 20) != cudaSuccess ||
        cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, nullptr) != cudaSuccess ||
        cudaMemsetAsync(d, 1, 1 << 20, nullptr) != cudaSuccess) {
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "usage: %s\n", kUsage);
  return 64;
}
