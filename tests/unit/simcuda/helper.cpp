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
//        simcuda_helper driver-route  runs runtime calls and prints "driver-loaded 1" if the runtime
//                                     loaded libcuda.so.1 (else 0); with the driver, a kernel the
//                                     runtime launches on a stream the driver is capturing must
//                                     land in the graph (proof that the launch went through
//                                     cuLaunchKernel). Prints "driver-route ok" or what went wrong
//        simcuda_helper driver-init   the driver refuses work before anything initialised it and
//                                     takes it once the runtime's cudaGetDeviceCount has, with no
//                                     cuInit of the program's; prints "driver-init ok" or what failed
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_kernels.h"

namespace {

constexpr const char kUsage[] = "simcuda_helper queued|late-sync|two-devices|driver-route|driver-init";

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

  // Peer access: each may reach the other once enabled; a copy between them moves the bytes.
  int can = 0;
  CHECK_RESULT(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  CHECK_RESULT(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
  if (can != 0) {
    std::printf("a device reports peer access to itself\n");
    return 1;
  }
  CHECK_RESULT(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
  if (can != 1) {
    std::printf("device 1 cannot reach device 0\n");
    return 1;
  }
  CHECK_RESULT(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  CHECK_RESULT(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  CHECK_RESULT(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
  CHECK_RESULT(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  CHECK_RESULT(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  // The driver's peer access is the runtime's: enabled through a context, it is enabled for the device.
  {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW);
    auto can_access = reinterpret_cast<PFN_cuDeviceCanAccessPeer_v4000>(dlsym(driver, "cuDeviceCanAccessPeer"));
    auto enable = reinterpret_cast<PFN_cuCtxEnablePeerAccess_v4000>(dlsym(driver, "cuCtxEnablePeerAccess"));
    auto retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(dlsym(driver, "cuDevicePrimaryCtxRetain"));
    int driver_can = 0;
    CUcontext peer_context = nullptr;
    if (can_access == nullptr || enable == nullptr || retain == nullptr ||
        can_access(&driver_can, 0, 1) != CUDA_SUCCESS || driver_can != 1 ||
        retain(&peer_context, 1) != CUDA_SUCCESS || enable(peer_context, 0) != CUDA_SUCCESS) {
      std::printf("the driver's peer access from device 0 to 1 failed\n");
      return 1;
    }
    CHECK_RESULT(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    CHECK_RESULT(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  }
  int supported = 0;
  CHECK_RESULT(cudaDeviceGetP2PAttribute(&supported, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
  if (supported != 1) {
    std::printf("no P2P access between devices 0 and 1\n");
    return 1;
  }
  void* on0 = nullptr;
  CHECK_RESULT(cudaMalloc(&on0, 256), cudaSuccess);
  unsigned char pattern[256], back[256] = {};
  for (int i = 0; i < 256; ++i) pattern[i] = static_cast<unsigned char>(i);
  CHECK_RESULT(cudaMemcpy(on0, pattern, sizeof pattern, cudaMemcpyHostToDevice), cudaSuccess);
  CHECK_RESULT(cudaMemcpyPeerAsync(on1, 1, on0, 0, sizeof pattern, nullptr), cudaSuccess);
  CHECK_RESULT(cudaMemcpyPeer(on1, 0, on0, 0, sizeof pattern), cudaErrorInvalidValue);  // on1 is device 1's
  CHECK_RESULT(cudaDeviceSynchronize(), cudaSuccess);
  CHECK_RESULT(cudaMemcpy(back, on1, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  if (std::memcmp(pattern, back, sizeof back) != 0) {
    std::printf("a peer copy did not move the bytes\n");
    return 1;
  }
  CHECK_RESULT(cudaFree(on0), cudaSuccess);
  // A pool of device 0 opened to device 1.
  cudaMemPool_t pool;
  CHECK_RESULT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  cudaMemAccessDesc access{};
  access.location = {cudaMemLocationTypeDevice, 1};
  access.flags = cudaMemAccessFlagsProtReadWrite;
  CHECK_RESULT(cudaMemPoolSetAccess(pool, &access, 1), cudaSuccess);
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  cudaMemLocation where{cudaMemLocationTypeDevice, 1};
  CHECK_RESULT(cudaMemPoolGetAccess(&flags, pool, &where), cudaSuccess);
  if (flags != cudaMemAccessFlagsProtReadWrite) {
    std::printf("device 1's access to device 0's pool reads %d\n", int(flags));
    return 1;
  }

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

int driver_route() {
  const void* k = simcuda::test::register_kernel(0, "_Z16route_sleep_us_5000v");
  void* d = nullptr;
  unsigned char host[4096] = {1, 2, 3};
  unsigned char back[4096] = {};
  CHECK_RESULT(cudaMalloc(&d, sizeof host), cudaSuccess);
  CHECK_RESULT(cudaMemset(d, 0, sizeof host), cudaSuccess);
  CHECK_RESULT(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  CHECK_RESULT(cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, nullptr), cudaSuccess);
  CHECK_RESULT(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK_RESULT(cudaDeviceSynchronize(), cudaSuccess);
  if (std::memcmp(host, back, sizeof host) != 0) {
    std::printf("the bytes did not round trip\n");
    return 1;
  }
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  std::printf("driver-loaded %d\n", driver != nullptr ? 1 : 0);
  if (driver != nullptr) {
    auto begin = reinterpret_cast<PFN_cuStreamBeginCapture_v10010>(
        dlsym(driver, "cuStreamBeginCapture_v2"));
    auto end =
        reinterpret_cast<PFN_cuStreamEndCapture_v10000>(dlsym(driver, "cuStreamEndCapture"));
    cudaStream_t s = nullptr;
    CUgraph graph = nullptr;
    CHECK_RESULT(cudaStreamCreate(&s), cudaSuccess);
    if (begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) return 1;
    CHECK_RESULT(cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, s), cudaSuccess);
    // Captured, not queued.
    CHECK_RESULT(cudaStreamQuery(s), cudaSuccess);
    if (end(s, &graph) != CUDA_SUCCESS || graph == nullptr) return 1;
    auto destroy = reinterpret_cast<PFN_cuGraphDestroy_v10000>(dlsym(driver, "cuGraphDestroy"));
    if (destroy(graph) != CUDA_SUCCESS) return 1;
    CHECK_RESULT(cudaStreamDestroy(s), cudaSuccess);
  }
  CHECK_RESULT(cudaFree(d), cudaSuccess);
  std::printf("driver-route ok\n");
  return 0;
}

int driver_init() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  using GetState = PFN_cuDevicePrimaryCtxGetState_v7000;
  auto state = driver ? reinterpret_cast<GetState>(dlsym(driver, "cuDevicePrimaryCtxGetState")) : nullptr;
  if (state == nullptr) {
    std::printf("no cuDevicePrimaryCtxGetState in libcuda.so.1\n");
    return 1;
  }
  unsigned flags = 0;
  int active = -1;
  if (CUresult r = state(0, &flags, &active); r != CUDA_ERROR_NOT_INITIALIZED) {
    std::printf("before any initialisation: %d, expected CUDA_ERROR_NOT_INITIALIZED\n", int(r));
    return 1;
  }
  int count = 0;
  CHECK_RESULT(cudaGetDeviceCount(&count), cudaSuccess);
  if (CUresult r = state(0, &flags, &active); r != CUDA_SUCCESS) {
    std::printf("after cudaGetDeviceCount: %d, expected CUDA_SUCCESS\n", int(r));
    return 1;
  }
  std::printf("driver-init ok\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  if (std::strcmp(argv[1], "two-devices") == 0) return two_devices();
  if (std::strcmp(argv[1], "driver-route") == 0) return driver_route();
  if (std::strcmp(argv[1], "driver-init") == 0) return driver_init();
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
