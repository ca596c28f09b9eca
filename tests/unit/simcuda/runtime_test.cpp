// The simulated runtime through the CUDA runtime API: the guarantees simcuda.h promises and the
// error codes the real runtime returns.

// Declares the _ptsz and _ptds exports beside the plain names, as the runtime's own build does.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime.h>  // with the typed C++ overloads
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/sync.h"
#include "sim_kernels.h"
#include "simcuda.h"

namespace simcuda {
namespace {

constexpr uint64_t kMs = 1000000;

using test::register_kernel;

// Kernels every test may launch: the default duration, 30 ms, and one nobody waits for.
const void* default_kernel() {
  static const void* k = register_kernel(0, "_Z13plain_kernelPf");
  return k;
}
const void* kernel_30ms() {
  static const void* k = register_kernel(1, "_Z19wait_sleep_us_30000v");
  return k;
}
const void* kernel_forever() {
  static const void* k = register_kernel(2, "_Z23blocker_sleep_us_600000000v");
  return k;
}

cudaError_t launch(const void* kernel, cudaStream_t stream = nullptr) {
  return cudaLaunchKernel(kernel, dim3(1), dim3(32), nullptr, 0, stream);
}

TEST(Runtime, ReportsVersionsAndTheDevice) {
  int v = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, config().driver_version);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, config().device_count);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "Simulated CUDA Device 0");
  EXPECT_EQ(prop.totalGlobalMem, config().device_memory_bytes);
  int sms = 0, major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(sms, prop.multiProcessorCount);
  EXPECT_EQ(major, prop.major);
  EXPECT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrMax, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

// The driver's PCI address, through the runtime (XLA's CUDA 12 plug-in asks it, then NVML by it).
TEST(Runtime, APciBusIdNamesItsDeviceBothWays) {
  char id[13] = {};
  ASSERT_EQ(cudaDeviceGetPCIBusId(id, sizeof id, 0), cudaSuccess);
  int bus = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, 0), cudaSuccess);
  char expected[13];
  std::snprintf(expected, sizeof expected, "0000:%02x:00.0", bus);
  EXPECT_STREQ(id, expected);
  int found = -1;
  ASSERT_EQ(cudaDeviceGetByPCIBusId(&found, id), cudaSuccess);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&found, "0000:ff:00.0"), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetPCIBusId(id, sizeof id, 99), cudaErrorInvalidDevice);
  cudaGetLastError();
}

TEST(Runtime, InvalidDeviceIsRejectedAndTheLastErrorIsPerThread) {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(99), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  // Successful calls leave the last error alone; peeking does not clear it, getting does.
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  cudaError_t other_thread = cudaErrorUnknown;
  std::thread([&] { other_thread = cudaPeekAtLastError(); }).join();
  EXPECT_EQ(other_thread, cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Runtime, ErrorNamesAndDescriptionsAreTheRealOnes) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInsufficientDriver), "cudaErrorInsufficientDriver");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(10)), "unrecognized error code");
}

TEST(Runtime, FreeingUnknownMemoryIsAnInvalidValue) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAllocationGranularity, 0u);
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(0x1234)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  EXPECT_EQ(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  cudaGetLastError();
}

TEST(Runtime, MemoryAccountingFollowsAllocations) {
  size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_EQ(total, config().device_memory_bytes);
  void* small = nullptr;
  void* large = nullptr;
  void* managed = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&small, 1000), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&large, size_t(1) << 30), cudaSuccess);  // reserved, never touched
  ASSERT_EQ(cudaMallocManaged(&managed, 300), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);  // host memory: not counted
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, 1024 + (size_t(1) << 30) + 512);
  void* too_much = nullptr;
  EXPECT_EQ(cudaMalloc(&too_much, free1 + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaFree(large), cudaSuccess);
  EXPECT_EQ(cudaFree(small), cudaSuccess);
  EXPECT_EQ(cudaFree(managed), cudaSuccess);
  EXPECT_EQ(cudaFree(pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  EXPECT_EQ(free2, free0);
  cudaGetLastError();
}

TEST(Runtime, PointerAttributesAndHostRegistration) {
  void* d = nullptr;
  void* h = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&h, 64, cudaHostAllocMapped), cudaSuccess);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, static_cast<char*>(d) + 10), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, h), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  unsigned flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&flags, h), cudaSuccess);
  EXPECT_EQ(flags, unsigned(cudaHostAllocMapped));
  void* mapped = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&mapped, h, 0), cudaSuccess);
  EXPECT_EQ(mapped, h);

  std::vector<char> buffer(8192);
  ASSERT_EQ(cudaPointerGetAttributes(&a, buffer.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  ASSERT_EQ(cudaHostRegister(buffer.data(), buffer.size(), 0), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(buffer.data() + 100, 10, 0), cudaErrorHostMemoryAlreadyRegistered);
  ASSERT_EQ(cudaPointerGetAttributes(&a, buffer.data() + 4000), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(cudaHostUnregister(buffer.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buffer.data()), cudaErrorHostMemoryNotRegistered);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, CopiesAndMemsetsMoveTheBytes) {
  constexpr size_t kBytes = 1 << 16;
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  std::iota(in.begin(), in.end(), 0);
  unsigned char* a = nullptr;
  unsigned char* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(a, in.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, a, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), b, kBytes, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out, in);

  ASSERT_EQ(cudaMemset(b + 100, 0xab, 50), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), b, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(out[i], i >= 100 && i < 150 ? 0xab : in[i]) << "byte " << i;
  }

  // A 2D copy of 8 rows of 16 bytes with pitches 64 (device) and 16 (host).
  std::vector<unsigned char> rows(8 * 16, 0);
  ASSERT_EQ(cudaMemcpy2D(rows.data(), 16, a, 64, 16, 8, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t r = 0; r < 8; ++r) {
    for (size_t c = 0; c < 16; ++c) ASSERT_EQ(rows[r * 16 + c], in[r * 64 + c]);
  }
  EXPECT_EQ(cudaMemcpy2D(rows.data(), 8, a, 64, 16, 8, cudaMemcpyDeviceToHost),
            cudaErrorInvalidPitchValue);

  EXPECT_EQ(cudaMemcpy(a, in.data(), kBytes + 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(out.data(), in.data(), 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(out.data(), in.data(), 16, static_cast<cudaMemcpyKind>(9)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemset(in.data(), 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, AsyncCopiesStagePageableSourcesAndWaitForPageableTargets) {
  constexpr size_t kBytes = 1 << 20;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<char> in(kBytes, 'x'), out(kBytes, 0);
  char* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  // Behind a 30 ms kernel the copy has certainly not run when the call returns.
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, in.data(), kBytes, cudaMemcpyHostToDevice, s), cudaSuccess);
  std::fill(in.begin(), in.end(), 'y');  // allowed at once: the pageable source was staged
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d, kBytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
  // Copying to pageable memory returned only once done, so no synchronisation is needed.
  EXPECT_EQ(out, std::vector<char>(kBytes, 'x'));
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Runtime, SynchronisationWaitsForTheDeviceTime) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);

  uint64_t t0 = now_ns();
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  cudaError_t q = cudaStreamQuery(s);
  EXPECT_TRUE(q == cudaErrorNotReady || now_ns() >= t0 + 30 * kMs);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "not ready is not an error";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_GE(now_ns(), t0 + 30 * kMs);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);

  t0 = now_ns();
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_GE(now_ns(), t0 + 30 * kMs);

  t0 = now_ns();
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(now_ns(), t0 + 30 * kMs);

  // A synchronous copy of 8 MiB occupies bytes / SIMCUDA_COPY_GBPS of device time.
  constexpr size_t kBytes = 8 << 20;
  void* d = nullptr;
  std::vector<char> host(kBytes, 1);
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  t0 = now_ns();
  ASSERT_EQ(cudaMemcpy(d, host.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_GE(now_ns(), t0 + copy_duration_ns(kBytes, config().copy_gbps));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Runtime, KernelsOccupyExactlyTheirDuration) {
  ASSERT_EQ(kernel_duration_ns("_Z13plain_kernelPf", config().kernel_ns), config().kernel_ns);
  ASSERT_EQ(kernel_duration_ns("_Z19wait_sleep_us_30000v", 7), 30 * kMs);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  constexpr int kLaunches = 10;

  // Issued behind a 30 ms kernel, the events and kernels are queued back to back on the device.
  uint64_t t0 = now_ns();
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  for (int i = 0; i < kLaunches; ++i) ASSERT_EQ(launch(default_kernel(), s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  bool issued_while_busy = now_ns() < t0 + 30 * kMs;
  float ms = 0;
  cudaError_t early = cudaEventElapsedTime(&ms, start, stop);
  EXPECT_TRUE(early == cudaErrorNotReady || !issued_while_busy);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  double expected_ms = double(kLaunches * config().kernel_ns) / 1e6;
  if (issued_while_busy) {
    EXPECT_FLOAT_EQ(ms, float(expected_ms));
  } else {
    EXPECT_GE(ms, float(expected_ms) * (1 - 1e-6f));
  }
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Runtime, LaunchPathsAndLaunchErrors) {
  const void* k = default_kernel();
  cudaKernel_t handle = nullptr;
  ASSERT_EQ(__cudaGetKernel(&handle, k), cudaSuccess);
  ASSERT_NE(handle, nullptr);
  cudaKernel_t public_handle = nullptr;
  ASSERT_EQ(cudaGetKernel(&public_handle, k), cudaSuccess);
  EXPECT_EQ(public_handle, handle);
  const char* name = nullptr;
  ASSERT_EQ(cudaFuncGetName(&name, k), cudaSuccess);
  EXPECT_STREQ(name, "_Z13plain_kernelPf");
  cudaFuncAttributes attr;
  EXPECT_EQ(cudaFuncGetAttributes(&attr, k), cudaSuccess);
  // Built for the device (compute capability 9.0): CUB chooses its tuning, or finds none, by this.
  EXPECT_EQ(attr.ptxVersion, 90);
  EXPECT_EQ(attr.binaryVersion, 90);

  // The <<<...>>> sequence nvcc emits.
  EXPECT_EQ(__cudaPushCallConfiguration(dim3(4), dim3(128), 0, nullptr), 0u);
  dim3 grid, block;
  size_t smem = 1;
  cudaStream_t stream = cudaStreamPerThread;
  ASSERT_EQ(__cudaPopCallConfiguration(&grid, &block, &smem, &stream), cudaSuccess);
  EXPECT_EQ(grid.x, 4u);
  EXPECT_EQ(block.x, 128u);
  EXPECT_EQ(smem, 0u);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(__cudaLaunchKernel(handle, grid, block, nullptr, smem, stream), cudaSuccess);
  EXPECT_EQ(__cudaLaunchKernel_ptsz(handle, grid, block, nullptr, smem, stream), cudaSuccess);
  EXPECT_EQ(__cudaPopCallConfiguration(&grid, &block, &smem, &stream),
            cudaErrorMissingConfiguration);

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(2);
  config.blockDim = dim3(64);
  EXPECT_EQ(cudaLaunchKernelExC(&config, k, nullptr), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernelExC_ptsz(&config, handle, nullptr), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel_ptsz(k, dim3(1), dim3(1), nullptr, 0, nullptr), cudaSuccess);

  static char not_a_kernel;
  EXPECT_EQ(cudaLaunchKernel(&not_a_kernel, dim3(1), dim3(1), nullptr, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(__cudaGetKernel(&handle, &not_a_kernel), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaLaunchKernel(k, dim3(0), dim3(1), nullptr, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(k, dim3(1), dim3(1025), nullptr, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(k, dim3(1), dim3(1, 1, 65), nullptr, 0, nullptr),
            cudaErrorInvalidConfiguration);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(launch(k, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(launch(k, reinterpret_cast<cudaStream_t>(0x1000)), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(Runtime, StreamsAndEventsRejectDestroyedHandles) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -100), cudaSuccess);
  int priority = 0, least = 0, greatest = 0;
  unsigned flags = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  ASSERT_EQ(cudaStreamGetPriority(s, &priority), cudaSuccess);
  EXPECT_EQ(priority, greatest);
  ASSERT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned(cudaStreamNonBlocking));
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x8), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);

  cudaEvent_t e = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);  // never recorded
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, e, 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST(Runtime, PerThreadDefaultStreamsBelongToTheirThread) {
  unsigned long long mine = 0, mine_ptsz = 0, legacy = 0, legacy_by_name = 0, theirs = 0;
  ASSERT_EQ(cudaStreamGetId(cudaStreamPerThread, &mine), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId_ptsz(nullptr, &mine_ptsz), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId(nullptr, &legacy), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId_ptsz(cudaStreamLegacy, &legacy_by_name), cudaSuccess);
  std::thread([&] { cudaStreamGetId(cudaStreamPerThread, &theirs); }).join();
  EXPECT_EQ(mine, mine_ptsz);
  EXPECT_EQ(legacy, legacy_by_name);
  EXPECT_NE(mine, legacy);
  EXPECT_NE(theirs, 0u);
  EXPECT_NE(theirs, mine);

  char* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync_ptsz(d, 5, 64, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  char out[64];
  ASSERT_EQ(cudaMemcpy_ptds(out, d, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[63], 5);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

struct HostFuncLog {
  std::vector<int> order;
  char* buffer;
};

TEST(Runtime, HostFunctionsRunInStreamOrder) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  char* d = nullptr;
  ASSERT_EQ(cudaMallocHost(&d, 16), cudaSuccess);
  HostFuncLog log{{}, d};
  ASSERT_EQ(cudaMemsetAsync(d, 9, 16, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                s, [](void* p) { static_cast<HostFuncLog*>(p)->order.push_back(
                                     static_cast<HostFuncLog*>(p)->buffer[0]); },
                &log),
            cudaSuccess);
  ASSERT_EQ(cudaStreamAddCallback(
                s,
                [](cudaStream_t, cudaError_t status, void* p) {
                  static_cast<HostFuncLog*>(p)->order.push_back(100 + int(status));
                },
                &log, 0),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(log.order, (std::vector<int>{9, 100}));
  EXPECT_EQ(cudaFreeHost(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Runtime, StreamOrderedAllocation) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  size_t free0 = 0, free1 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 4096, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 1, 4096, s), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// The numbers the occupancy calculator gives for a Hopper part and a kernel of 32 registers a thread.
TEST(Runtime, LimitsAndOccupancyAnswerAsTheDocumentationSays) {
  size_t value = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&value, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(value, 1024u);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 << 20), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&value, cudaLimitMallocHeapSize), cudaSuccess);
  EXPECT_EQ(value, size_t(64) << 20);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 100), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&value, cudaLimitMaxL2FetchGranularity), cudaSuccess);
  EXPECT_EQ(value, 128u);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(1) << 40), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&value, cudaLimitPersistingL2CacheSize), cudaSuccess);
  EXPECT_EQ(value, size_t(30) << 20);  // capped at persistingL2CacheMaxSize
  // 7: inside the enumeration's range (no undefined cast), and no limit.
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimit(7), 1), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaGetLastError(), cudaErrorUnsupportedLimit);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 8 << 20), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 64), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0), cudaSuccess);

  const void* kernel = test::register_kernel(20, "_Z15occupancy_probev");
  int blocks = -1;
  // 256 threads: 8 blocks fill the 2048 threads; 32 registers a thread never bind first.
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, 0), cudaSuccess);
  EXPECT_EQ(blocks, 8);
  // 32 threads: the 32-block limit binds.
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 32, 0), cudaSuccess);
  EXPECT_EQ(blocks, 32);
  // 100 KiB of shared memory each (plus 1 KiB reserved): two fit in 228 KiB.
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, kernel, 128, 100 << 10,
                                                                   cudaOccupancyDisableCachingOverride),
            cudaSuccess);
  EXPECT_EQ(blocks, 2);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 2048, 0), cudaSuccess);
  EXPECT_EQ(blocks, 0);  // more threads than a block may have
  int min_grid = 0, block = 0;
  ASSERT_EQ(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, kernel, 0, 0), cudaSuccess);
  EXPECT_EQ(block, 1024);       // the header's search: the largest block reaching full occupancy
  EXPECT_EQ(min_grid, 2 * 132);  // two such blocks on each of the 132 multiprocessors
  size_t smem = 0;
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(&smem, kernel, 4, 256), cudaSuccess);
  EXPECT_EQ(smem, size_t(57 << 10) - 1024);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &blocks, 256, 0),
            cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
}

// Stream-ordered allocations are counted against their pool until the stream reaches their free.
TEST(Runtime, MemoryPoolsCountTheirAllocations) {
  cudaMemPool_t pool = nullptr, current = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, 0), cudaSuccess);
  EXPECT_EQ(current, pool);
  uint64_t threshold = UINT64_MAX, value = 1;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value), cudaSuccess);
  EXPECT_EQ(value, UINT64_MAX);
  int reuse = -1;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse), cudaSuccess);
  EXPECT_EQ(reuse, 1);

  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, 1000, s), cudaSuccess);  // 1024 with the granularity
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 4096, pool, s), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value), cudaSuccess);
  EXPECT_EQ(value, 1024u + 4096u);
  ASSERT_EQ(cudaFreeAsync(a, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value), cudaSuccess);
  EXPECT_EQ(value, 4096u);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value), cudaSuccess);
  EXPECT_EQ(value, 1024u + 4096u);
  uint64_t zero = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value), cudaSuccess);
  EXPECT_EQ(value, 4096u);
  EXPECT_EQ(cudaFree(b), cudaSuccess);  // a synchronous free of a pool allocation counts too
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value), cudaSuccess);
  EXPECT_EQ(value, 0u);

  // A pool of the program's own, made current, then destroyed: the default comes back.
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t own = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&own, &props), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetMemPool(0, own), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&a, 256, s), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(own, cudaMemPoolAttrUsedMemCurrent, &value), cudaSuccess);
  EXPECT_EQ(value, 256u);
  ASSERT_EQ(cudaFreeAsync(a, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemPoolDestroy(own), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, 0), cudaSuccess);
  EXPECT_EQ(current, pool);
  EXPECT_EQ(cudaMemPoolDestroy(own), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocFromPoolAsync(&a, 256, own, s), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, StreamAttributesAndPitchedAllocations) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -2), cudaSuccess);
  cudaStreamAttrValue value{};
  ASSERT_EQ(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &value), cudaSuccess);
  EXPECT_EQ(value.syncPolicy, cudaSyncPolicyAuto);
  ASSERT_EQ(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &value), cudaSuccess);
  EXPECT_EQ(value.priority, -2);
  cudaStreamAttrValue window{};
  window.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(0x1000);
  window.accessPolicyWindow.num_bytes = 1 << 20;
  window.accessPolicyWindow.hitRatio = 0.6f;
  window.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  window.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  ASSERT_EQ(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &window), cudaSuccess);
  ASSERT_EQ(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &value), cudaSuccess);
  EXPECT_EQ(value.accessPolicyWindow.num_bytes, size_t(1) << 20);
  EXPECT_EQ(value.accessPolicyWindow.hitRatio, 0.6f);
  EXPECT_EQ(value.accessPolicyWindow.hitProp, cudaAccessPropertyPersisting);
  EXPECT_EQ(cudaCtxResetPersistingL2Cache(), cudaSuccess);
  window.accessPolicyWindow.hitRatio = 1.5f;
  EXPECT_EQ(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &window), cudaErrorInvalidValue);
  window.accessPolicyWindow.hitRatio = 0.5f;
  window.accessPolicyWindow.num_bytes = size_t(1) << 40;  // beyond the device's window
  EXPECT_EQ(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &window), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &value), cudaErrorInvalidResourceHandle);

  // Rows padded to 512 bytes; 2D copies respect the pitch.
  char* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&p), &pitch, 100, 3), cudaSuccess);
  EXPECT_EQ(pitch, 512u);
  char rows[3][100];
  for (int r = 0; r < 3; ++r) std::memset(rows[r], 'a' + r, sizeof rows[r]);
  ASSERT_EQ(cudaMemcpy2D(p, pitch, rows, 100, 100, 3, cudaMemcpyHostToDevice), cudaSuccess);
  char back[3][100] = {};
  ASSERT_EQ(cudaMemcpy2D(back, 100, p, pitch, 100, 3, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(back, rows, sizeof rows), 0);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, ModuleVariablesAndSymbols) {
  static int host_shadow[4] = {1, 2, 3, 4};
  static int* managed_pointer = nullptr;
  void** module = __cudaRegisterFatBinary(host_shadow);
  __cudaRegisterVar(module, reinterpret_cast<char*>(host_shadow), nullptr, "table", 0,
                    sizeof host_shadow, 0, 0);
  __cudaRegisterManagedVar(module, reinterpret_cast<void**>(&managed_pointer), nullptr, "counter",
                           0, sizeof(int), 0, 0);
  __cudaRegisterFatBinaryEnd(module);
  ASSERT_EQ(__cudaInitModule(module), 1);
  ASSERT_NE(managed_pointer, nullptr);
  *managed_pointer = 42;  // managed memory is usable from the host

  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&size, host_shadow), cudaSuccess);
  EXPECT_EQ(size, sizeof host_shadow);
  int values[4] = {};
  ASSERT_EQ(cudaMemcpyFromSymbol(values, host_shadow, sizeof values), cudaSuccess);
  EXPECT_EQ(values[3], 4);  // initialised from the host shadow
  int seven = 7;
  ASSERT_EQ(cudaMemcpyToSymbol(host_shadow, &seven, sizeof seven, 2 * sizeof(int)), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&device, host_shadow), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(values, device, sizeof values, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(values[2], 7);
  EXPECT_EQ(cudaMemcpyToSymbol(host_shadow, &seven, sizeof seven, sizeof host_shadow),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue);  // not the application's to free

  __cudaUnregisterFatBinary(module);
  EXPECT_EQ(cudaGetSymbolAddress(&device, host_shadow), cudaErrorInvalidSymbol);
  cudaGetLastError();
}

TEST(Runtime, ManyThreadsUseTheRuntimeAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 100;
  constexpr size_t kBytes = 4096;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char> in(kBytes, static_cast<unsigned char>(t + 1)), out(kBytes);
      for (int r = 0; r < kRounds; ++r) {
        cudaStream_t s = nullptr;
        void* d = nullptr;
        cudaEvent_t e = nullptr;
        bool ok = cudaStreamCreate(&s) == cudaSuccess && cudaMalloc(&d, kBytes) == cudaSuccess &&
                  cudaEventCreate(&e) == cudaSuccess &&
                  cudaMemcpyAsync(d, in.data(), kBytes, cudaMemcpyHostToDevice, s) == cudaSuccess &&
                  launch(default_kernel(), s) == cudaSuccess &&
                  cudaEventRecord(e, s) == cudaSuccess &&
                  cudaStreamWaitEvent(cudaStreamPerThread, e, 0) == cudaSuccess &&
                  cudaMemcpyAsync(out.data(), d, kBytes, cudaMemcpyDeviceToHost,
                                  cudaStreamPerThread) == cudaSuccess &&
                  cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess && out == in &&
                  cudaEventDestroy(e) == cudaSuccess && cudaFree(d) == cudaSuccess &&
                  cudaStreamDestroy(s) == cudaSuccess;
        if (!ok) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Runtime, AForkedChildKeepsUsingTheDevice) {
  char* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 3, 256), cudaSuccess);
  ASSERT_EQ(launch(kernel_30ms()), cudaSuccess);  // the device thread is busy across the fork
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);  // a hang fails the test instead of blocking it
    char out[256] = {};
    bool ok = cudaMemsetAsync(d + 128, 4, 128, nullptr) == cudaSuccess &&
              cudaMemcpy(out, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess && out[0] == 3 &&
              out[255] == 4 && cudaDeviceSynchronize() == cudaSuccess && cudaFree(d) == cudaSuccess;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  char out[256] = {};
  ASSERT_EQ(cudaMemcpy(out, d, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[255], 3) << "the child's writes stay in the child";
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(Runtime, DeviceResetDestroysEverythingAndDropsPendingWork) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 1 << 20), cudaSuccess);
  // Launches and async memsets return at once (or this would wait ten minutes).
  ASSERT_EQ(launch(kernel_forever(), s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 1, 1 << 20, s), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  // Nothing waits for the dropped work (the test would time out otherwise).
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(free, total);
  // The per-thread stream comes back on first use.
  ASSERT_EQ(launch(default_kernel(), cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  cudaGetLastError();
}

// A captured stream runs nothing until the graph is launched; a launch runs the nodes back to back,
// taking their summed time, and with their effects in order.
TEST(RuntimeGraphs, CaptureThenLaunchRunsTheNodesInOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  unsigned char *a, *b;
  ASSERT_EQ(cudaMalloc(&a, 1000), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1000), cudaSuccess);
  ASSERT_EQ(cudaMemset(b, 0, 1000), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  ASSERT_EQ(cudaMemsetAsync(a, 9, 1000, s), cudaSuccess);
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b, a, 1000, cudaMemcpyDeviceToDevice, s), cudaSuccess);
  std::vector<unsigned char> host(1000, 1);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 3u);
  // Nothing ran while capturing.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), b, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 0);

  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  // Behind a long kernel, so that the stream is never idle between the two events.
  ASSERT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  const uint64_t bytes_ns = copy_duration_ns(1000, config().copy_gbps);
  EXPECT_NEAR(ms, (2 * bytes_ns + 30 * kMs) / 1e6, 1e-6);
  ASSERT_EQ(cudaMemcpy(host.data(), b, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 9);
  EXPECT_EQ(host[999], 9);

  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaErrorInvalidValue);
  // The executable graph outlives the graph it came from.
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaErrorInvalidValue);
  // The legacy stream cannot be captured.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

// A memset node of 4-byte elements, then a pitched copy node into pageable host memory, which an
// explicitly built node may copy to (NVIDIA's jacobiCudaGraphs does).
TEST(RuntimeGraphs, WideMemsetsAndPitchedCopiesToPageableMemory) {
  uint32_t* d = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d), &pitch, 3 * sizeof(uint32_t), 2), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaMemsetParams set{};
  set.dst = d;
  set.value = 0x01020304;
  set.elementSize = 4;
  set.width = 3;
  set.height = 2;
  set.pitch = pitch;
  cudaGraphNode_t set_node, copy_node;
  ASSERT_EQ(cudaGraphAddMemsetNode(&set_node, graph, nullptr, 0, &set), cudaSuccess);
  uint32_t host[2][3] = {};
  cudaMemcpy3DParms copy{};
  copy.srcPtr = make_cudaPitchedPtr(d, pitch, 3, 2);
  copy.dstPtr = make_cudaPitchedPtr(host, sizeof host[0], 3, 2);
  copy.extent = make_cudaExtent(sizeof host[0], 2, 1);
  copy.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaGraphAddMemcpyNode(&copy_node, graph, &set_node, 1, &copy), cudaSuccess);
  set.elementSize = 3;
  cudaGraphNode_t refused;
  EXPECT_EQ(cudaGraphAddMemsetNode(&refused, graph, nullptr, 0, &set), cudaErrorInvalidValue);
  copy.kind = cudaMemcpyDeviceToDevice;  // the host buffer is not device memory
  EXPECT_EQ(cudaGraphAddMemcpyNode(&refused, graph, nullptr, 0, &copy), cudaErrorInvalidValue);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  for (auto& row : host) {
    for (uint32_t v : row) EXPECT_EQ(v, 0x01020304u);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeGraphs, NodesDependOnlyOnNodesOfTheirOwnGraph) {
  cudaGraph_t one, two;
  ASSERT_EQ(cudaGraphCreate(&one, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&two, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphCreate(&two, 1), cudaErrorInvalidValue);
  cudaGraphNode_t first, second, join;
  ASSERT_EQ(cudaGraphAddEmptyNode(&first, one, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphAddEmptyNode(&second, two, &first, 1), cudaErrorInvalidValue);
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(default_kernel());
  p.gridDim = dim3(1);
  p.blockDim = dim3(32);
  ASSERT_EQ(cudaGraphAddKernelNode(&second, one, &first, 1, &p), cudaSuccess);
  p.func = reinterpret_cast<void*>(&p);  // no kernel
  EXPECT_EQ(cudaGraphAddKernelNode(&join, one, &first, 1, &p), cudaErrorInvalidDeviceFunction);
  const cudaGraphNode_t both[] = {first, second};
  ASSERT_EQ(cudaGraphAddEmptyNode(&join, one, both, 2), cudaSuccess);
  cudaGraphNode_t nodes[2];
  size_t count = 2;
  ASSERT_EQ(cudaGraphGetNodes(one, nodes, &count), cudaSuccess);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(nodes[0], first);
  EXPECT_EQ(nodes[1], second);
  // A memset node must lie inside one allocation.
  void* d;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  cudaMemsetParams set{};
  set.dst = d;
  set.elementSize = 1;
  set.width = 512;
  set.height = 1;
  EXPECT_EQ(cudaGraphAddMemsetNode(&join, one, nullptr, 0, &set), cudaErrorInvalidValue);
  set.width = 256;
  EXPECT_EQ(cudaGraphAddMemsetNode(&join, one, nullptr, 0, &set), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(one), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(two), cudaSuccess);
  cudaFree(d);
  cudaGetLastError();
}

const void* kernel_10ms() {
  static const void* k = register_kernel(3, "_Z18ten_sleep_us_10000v");
  return k;
}

// How long the executable graph takes to run on the stream: behind a long kernel, so that the
// stream is never idle between the two events.
double graph_ms(cudaGraphExec_t exec, cudaStream_t s) {
  cudaEvent_t start, stop;
  EXPECT_EQ(cudaEventCreate(&start), cudaSuccess);
  EXPECT_EQ(cudaEventCreate(&stop), cudaSuccess);
  EXPECT_EQ(launch(kernel_30ms(), s), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(start, s), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// Fork and join across streams with events, and host functions, as cudaGraphsUsingStreamCapture
// captures them; and a host node built by hand.
TEST(RuntimeGraphs, StreamsJoinACaptureThroughEventsAndHostFunctionsBecomeNodes) {
  cudaStream_t origin, other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaEventCreate(&fork), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&join), cudaSuccess);
  unsigned char* d;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  std::atomic<int> calls{0};
  auto count = [](void* data) { static_cast<std::atomic<int>*>(data)->fetch_add(1); };

  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 7, 64, origin), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other, fork, 0), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(other, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(launch(kernel_10ms(), other), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(other, count, &calls), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, other), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(origin, join, 0), cudaSuccess);
  cudaGraph_t graph;
  // Only the stream that began the capture ends it.
  EXPECT_EQ(cudaStreamEndCapture(other, &graph), cudaErrorStreamCaptureUnmatched);
  ASSERT_EQ(cudaStreamEndCapture(origin, &graph), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(other, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(calls.load(), 0);  // nothing ran while capturing

  cudaGraphNode_t nodes[3];
  size_t n = 3;
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes, &n), cudaSuccess);
  ASSERT_EQ(n, 3u);
  const cudaGraphNodeType expected[] = {cudaGraphNodeTypeMemset, cudaGraphNodeTypeKernel, cudaGraphNodeTypeHost};
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type;
    ASSERT_EQ(cudaGraphNodeGetType(nodes[i], &type), cudaSuccess);
    EXPECT_EQ(type, expected[i]) << i;
  }
  // And a host node by hand, after the captured ones.
  cudaHostNodeParams host{count, &calls};
  cudaGraphNode_t by_hand;
  ASSERT_EQ(cudaGraphAddHostNode(&by_hand, graph, &nodes[2], 1, &host), cudaSuccess);
  host.fn = nullptr;
  EXPECT_EQ(cudaGraphAddHostNode(&by_hand, graph, nullptr, 0, &host), cudaErrorInvalidValue);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const double ms = graph_ms(exec, origin);
  EXPECT_NEAR(ms, (copy_duration_ns(64, config().copy_gbps) + 10 * kMs) / 1e6, 1e-6);
  ASSERT_EQ(cudaGraphLaunch(exec, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(origin), cudaSuccess);
  EXPECT_EQ(calls.load(), 4);  // two host nodes, two launches

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(origin);
  cudaStreamDestroy(other);
  cudaFree(d);
  cudaGetLastError();
}

// A captured copy from pageable memory reads it at each launch, not when it was captured.
TEST(RuntimeGraphs, CapturedCopiesReadPageableMemoryWhenTheyRun) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> in(256, 1), out(256, 0);
  unsigned char* d;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, in.data(), 256, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(out.data(), 16, d, 16, 8, 16, cudaMemcpyDeviceToHost, s), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  std::fill(in.begin(), in.end(), 5);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (size_t row = 0; row < 16; ++row) {
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(out[row * 16 + i], i < 8 ? 5 : 0) << row << "," << i;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaStreamDestroy(s);
  cudaFree(d);
}

// jacobiCudaGraphs' and simpleCudaGraphs' updates of an instantiated graph.
TEST(RuntimeGraphs, ExecutableGraphsTakeNewKernelParametersAndUpdates) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(kernel_30ms());
  p.gridDim = dim3(1);
  p.blockDim = dim3(32);
  cudaGraphNode_t kernel;
  ASSERT_EQ(cudaGraphAddKernelNode(&kernel, graph, nullptr, 0, &p), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_NEAR(graph_ms(exec, s), 30.0, 1e-6);
  p.func = const_cast<void*>(kernel_10ms());
  ASSERT_EQ(cudaGraphExecKernelNodeSetParams(exec, kernel, &p), cudaSuccess);
  EXPECT_NEAR(graph_ms(exec, s), 10.0, 1e-6);
  p.func = reinterpret_cast<void*>(&p);
  EXPECT_EQ(cudaGraphExecKernelNodeSetParams(exec, kernel, &p), cudaErrorInvalidDeviceFunction);

  // A clone keeps the original's parameters (30 ms); an update from it brings them back.
  cudaGraph_t clone;
  ASSERT_EQ(cudaGraphClone(&clone, graph), cudaSuccess);
  cudaGraphNode_t copy;
  ASSERT_EQ(cudaGraphNodeFindInClone(&copy, kernel, clone), cudaSuccess);
  EXPECT_NE(copy, kernel);
  EXPECT_EQ(cudaGraphNodeFindInClone(&copy, kernel, graph), cudaErrorInvalidValue);
  cudaGraphExecUpdateResultInfo info{};
  ASSERT_EQ(cudaGraphExecUpdate(exec, clone, &info), cudaSuccess);
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  EXPECT_NEAR(graph_ms(exec, s), 30.0, 1e-6);
  // Another node makes another topology.
  cudaGraphNode_t empty;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, clone, &copy, 1), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, clone, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  EXPECT_NEAR(graph_ms(exec, s), 30.0, 1e-6);

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(clone), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

uint64_t graph_memory(cudaGraphMemAttributeType attr) {
  uint64_t value = ~0ull;
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, attr, &value), cudaSuccess);
  return value;
}

// Allocation and free nodes, built or captured: an address for every launch, bytes used from the
// allocation's run to the free's, reserved until trimmed (graphMemoryNodes, graphMemoryFootprint).
TEST(RuntimeGraphs, GraphMemoryIsUsedBetweenItsNodesAndReservedUntilTrimmed) {
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  uint64_t zero = 0;
  ASSERT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero), cudaSuccess);
  ASSERT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 0u);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaMemAllocNodeParams alloc{};
  alloc.bytesize = 1 << 20;
  alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  alloc.poolProps.location = {cudaMemLocationTypeDevice, 0};
  cudaGraphNode_t allocated, set;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&allocated, graph, nullptr, 0, &alloc), cudaSuccess);
  ASSERT_NE(alloc.dptr, nullptr);
  void* address = alloc.dptr;
  cudaMemsetParams fill{};
  fill.dst = address;
  fill.value = 3;
  fill.elementSize = 1;
  fill.width = 1 << 20;
  fill.height = 1;
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, graph, &allocated, 1, &fill), cudaSuccess);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&set, graph, nullptr, 0, &fill), cudaErrorInvalidValue);  // not the graph's
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 0u);  // nothing ran yet
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 1u << 20);
  unsigned char byte = 0;
  ASSERT_EQ(cudaMemcpy(&byte, static_cast<char*>(address) + 12345, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(byte, 3);
  // Freed outside the graph: no longer used, still reserved, and the same address at the next launch.
  ASSERT_EQ(cudaFreeAsync(address, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrReservedMemCurrent), 1u << 20);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 1u << 20);
  ASSERT_EQ(cudaFree(address), cudaSuccess);
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemHigh), 1u << 20);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  // Captured: cudaMallocAsync and cudaFreeAsync become the two nodes, used only in between.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* captured = nullptr;
  ASSERT_EQ(cudaMallocAsync(&captured, 4096, s), cudaSuccess);
  ASSERT_NE(captured, nullptr);
  ASSERT_EQ(cudaMemsetAsync(captured, 1, 4096, s), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(captured, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphNode_t nodes[3];
  size_t n = 3;
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes, &n), cudaSuccess);
  ASSERT_EQ(n, 3u);
  cudaGraphNodeType first, last;
  ASSERT_EQ(cudaGraphNodeGetType(nodes[0], &first), cudaSuccess);
  ASSERT_EQ(cudaGraphNodeGetType(nodes[2], &last), cudaSuccess);
  EXPECT_EQ(first, cudaGraphNodeTypeMemAlloc);
  EXPECT_EQ(last, cudaGraphNodeTypeMemFree);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(graph_memory(cudaGraphMemAttrReservedMemCurrent), 4096u);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  uint64_t one = 1;
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &one), cudaErrorInvalidValue);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

}  // namespace
}  // namespace simcuda
