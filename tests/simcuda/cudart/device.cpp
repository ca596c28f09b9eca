// Device management, versions, error state, the profiler control calls, limits and occupancy.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/arrays.h"
#include "core/device.h"
#include "core/handles.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;

namespace simcuda::rt {
namespace {

// The flags given to cudaSetDeviceFlags, by device.
std::atomic<unsigned> g_device_flags[kMaxDeviceCount];

constexpr int kLeastStreamPriority = 0;
constexpr int kGreatestStreamPriority = -5;

// The device's properties, from the attributes the driver reports too (core/device.h), whose
// enumeration the runtime's repeats value for value.
static_assert(int(cudaDevAttrMaxThreadsPerBlock) == int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) &&
              int(cudaDevAttrClockRate) == int(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) &&
              int(cudaDevAttrMaxBlocksPerMultiprocessor) == int(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR) &&
              int(cudaDevAttrClusterLaunch) == int(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) &&
              int(cudaDevAttrHostNumaId) == int(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));

int attr(cudaDeviceAttr a, int device) { return device_attribute(int(a), device); }

cudaDeviceProp properties_of(int device) {
  cudaDeviceProp p;
  std::memset(&p, 0, sizeof p);
  device_name(device, p.name, sizeof p.name);
  device_uuid(device, p.uuid.bytes);
  p.totalGlobalMem = config().device_memory_bytes;
  p.sharedMemPerBlock = size_t(attr(cudaDevAttrMaxSharedMemoryPerBlock, device));
  p.regsPerBlock = attr(cudaDevAttrMaxRegistersPerBlock, device);
  p.warpSize = attr(cudaDevAttrWarpSize, device);
  p.memPitch = size_t(attr(cudaDevAttrMaxPitch, device));
  p.maxThreadsPerBlock = attr(cudaDevAttrMaxThreadsPerBlock, device);
  p.maxThreadsDim[0] = attr(cudaDevAttrMaxBlockDimX, device);
  p.maxThreadsDim[1] = attr(cudaDevAttrMaxBlockDimY, device);
  p.maxThreadsDim[2] = attr(cudaDevAttrMaxBlockDimZ, device);
  p.maxGridSize[0] = attr(cudaDevAttrMaxGridDimX, device);
  p.maxGridSize[1] = attr(cudaDevAttrMaxGridDimY, device);
  p.maxGridSize[2] = attr(cudaDevAttrMaxGridDimZ, device);
  p.totalConstMem = size_t(attr(cudaDevAttrTotalConstantMemory, device));
  p.major = attr(cudaDevAttrComputeCapabilityMajor, device);
  p.minor = attr(cudaDevAttrComputeCapabilityMinor, device);
  p.textureAlignment = size_t(attr(cudaDevAttrTextureAlignment, device));
  p.texturePitchAlignment = size_t(attr(cudaDevAttrTexturePitchAlignment, device));
  p.multiProcessorCount = attr(cudaDevAttrMultiProcessorCount, device);
  p.canMapHostMemory = attr(cudaDevAttrCanMapHostMemory, device);
  p.surfaceAlignment = size_t(attr(cudaDevAttrSurfaceAlignment, device));
  p.concurrentKernels = attr(cudaDevAttrConcurrentKernels, device);
  p.ECCEnabled = attr(cudaDevAttrEccEnabled, device);
  p.pciBusID = attr(cudaDevAttrPciBusId, device);
  p.asyncEngineCount = attr(cudaDevAttrAsyncEngineCount, device);
  p.unifiedAddressing = attr(cudaDevAttrUnifiedAddressing, device);
  p.memoryBusWidth = attr(cudaDevAttrGlobalMemoryBusWidth, device);
  p.l2CacheSize = attr(cudaDevAttrL2CacheSize, device);
  p.persistingL2CacheMaxSize = attr(cudaDevAttrMaxPersistingL2CacheSize, device);
  p.maxThreadsPerMultiProcessor = attr(cudaDevAttrMaxThreadsPerMultiProcessor, device);
  p.streamPrioritiesSupported = attr(cudaDevAttrStreamPrioritiesSupported, device);
  p.globalL1CacheSupported = attr(cudaDevAttrGlobalL1CacheSupported, device);
  p.localL1CacheSupported = attr(cudaDevAttrLocalL1CacheSupported, device);
  p.sharedMemPerMultiprocessor = size_t(attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  p.regsPerMultiprocessor = attr(cudaDevAttrMaxRegistersPerMultiprocessor, device);
  p.managedMemory = attr(cudaDevAttrManagedMemory, device);
  p.multiGpuBoardGroupID = attr(cudaDevAttrMultiGpuBoardGroupID, device);
  p.concurrentManagedAccess = attr(cudaDevAttrConcurrentManagedAccess, device);
  p.computePreemptionSupported = attr(cudaDevAttrComputePreemptionSupported, device);
  p.cooperativeLaunch = attr(cudaDevAttrCooperativeLaunch, device);
  p.sharedMemPerBlockOptin = size_t(attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  p.maxBlocksPerMultiProcessor = attr(cudaDevAttrMaxBlocksPerMultiprocessor, device);
  p.accessPolicyMaxWindowSize = attr(cudaDevAttrMaxAccessPolicyWindowSize, device);
  p.reservedSharedMemPerBlock = size_t(attr(cudaDevAttrReservedSharedMemoryPerBlock, device));
  p.hostRegisterSupported = attr(cudaDevAttrHostRegisterSupported, device);
  p.memoryPoolsSupported = attr(cudaDevAttrMemoryPoolsSupported, device);
  p.ipcEventSupported = attr(cudaDevAttrIpcEventSupport, device);
  p.clusterLaunch = attr(cudaDevAttrClusterLaunch, device);
#if CUDART_VERSION >= 13000  // fields CUDA 13's cudaDeviceProp added
  p.deviceNumaId = attr(cudaDevAttrNumaId, device);
  p.hostNumaId = attr(cudaDevAttrHostNumaId, device);
  p.gpuPciDeviceID = unsigned(attr(cudaDevAttrGpuPciDeviceId, device));
#endif
  return p;
}

}  // namespace
}  // namespace simcuda::rt

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceCount_v3020), [&]() -> cudaError_t {
    if (count == nullptr) return rt::record(cudaErrorInvalidValue);
    *count = config().device_count;
    if (*count != 0) note_runtime_initialized();
    return rt::record(*count == 0 ? cudaErrorNoDevice : cudaSuccess);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDevice_v3020), [&]() -> cudaError_t {
    if (device == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::current_device(device));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaSetDevice_v3020), [&]() -> cudaError_t {
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    rt::set_thread_device(device);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaInitDevice(int device, unsigned int deviceFlags,
                                                    unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaInitDevice_v12000), [&]() -> cudaError_t {
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    if ((flags & ~unsigned(cudaInitDeviceFlagsAreValid)) != 0) {
      return rt::record(cudaErrorInvalidValue);
    }
    if ((flags & cudaInitDeviceFlagsAreValid) != 0) {
      if ((deviceFlags & ~unsigned(cudaDeviceMask)) != 0) return rt::record(cudaErrorInvalidValue);
      rt::g_device_flags[device].store(deviceFlags, std::memory_order_relaxed);
    }
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaSetDeviceFlags_v3020), [&]() -> cudaError_t {
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    unsigned schedule = flags & cudaDeviceScheduleMask;
    if ((flags & ~unsigned(cudaDeviceMask)) != 0 ||
        (schedule != cudaDeviceScheduleAuto && schedule != cudaDeviceScheduleSpin &&
         schedule != cudaDeviceScheduleYield && schedule != cudaDeviceScheduleBlockingSync)) {
      return rt::record(cudaErrorInvalidValue);
    }
    rt::g_device_flags[device].store(flags, std::memory_order_relaxed);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int* flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceFlags_v7000), [&]() -> cudaError_t {
    if (flags == nullptr) return rt::record(cudaErrorInvalidValue);
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    // The real runtime always reports host mapping as enabled.
    *flags = rt::g_device_flags[device].load(std::memory_order_relaxed) | cudaDeviceMapHost;
    return cudaSuccess;
  });
}

namespace {
cudaError_t device_properties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return rt::record(cudaErrorInvalidValue);
  if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
  *prop = rt::properties_of(device);
  return cudaSuccess;
}
}  // namespace

// The export behind cudaGetDeviceProperties since CUDA 12, hence its cbid.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceProperties_v12000),
                    [&] { return device_properties(prop, device); });
}

#if CUDART_VERSION < 13000
// CUDA 12's headers turn cudaGetDeviceProperties into this export (the plain name is the runtime's
// entry for programs built against CUDA 11); CUDA 13 gave the plain name back. One cbid for both.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceProperties_v12000),
                    [&] { return device_properties(prop, device); });
}
#endif

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr,
                                                            int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetAttribute_v5000), [&]() -> cudaError_t {
    if (value == nullptr || int(attr) < 1 || int(attr) >= int(cudaDevAttrMax)) {
      return rt::record(cudaErrorInvalidValue);
    }
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    *value = device_attribute(int(attr), device);
    return cudaSuccess;
  });
}

// The driver's PCI addresses (core/device.h): XLA's CUDA 12 plug-in asks the runtime, then NVML by them.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetPCIBusId_v4010), [&]() -> cudaError_t {
    if (pciBusId == nullptr || len <= 0) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    device_pci_bus_id(device, pciBusId, size_t(len));
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetByPCIBusId_v4010), [&]() -> cudaError_t {
    if (device == nullptr || pciBusId == nullptr) return rt::record(cudaErrorInvalidValue);
    const int found = device_of_pci_bus_id(pciBusId);
    if (found < 0) return rt::record(cudaErrorInvalidDevice);
    *device = found;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int* leastPriority,
                                                                      int* greatestPriority) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetStreamPriorityRange_v5050), [&]() -> cudaError_t {
    if (leastPriority != nullptr) *leastPriority = rt::kLeastStreamPriority;
    if (greatestPriority != nullptr) *greatestPriority = rt::kGreatestStreamPriority;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* runtimeVersion) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaRuntimeGetVersion_v3020), [&]() -> cudaError_t {
    if (runtimeVersion == nullptr) return rt::record(cudaErrorInvalidValue);
    // The version of the headers this runtime is built with: 13000, or 12090 for libcudart.so.12.
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDriverGetVersion(int* driverVersion) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDriverGetVersion_v3020), [&]() -> cudaError_t {
    if (driverVersion == nullptr) return rt::record(cudaErrorInvalidValue);
    *driverVersion = config().driver_version;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceSynchronize_v3020), [&]() -> cudaError_t {
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    if (const rt::DriverApi* d = rt::driver()) {
      if (cudaError_t e = rt::bind_context(*d, device); e) return rt::record(e);
#if CUDART_VERSION >= 13000
      return rt::record(rt::from_driver(d->ctx_synchronize(nullptr)));
#else
      return rt::record(rt::from_driver(d->ctx_synchronize()));
#endif
    }
    return activity::timed_sync(activity::SyncType::kContext, device, 0, 0, [&] {
      timeline().synchronize_device(device);
      return cudaSuccess;
    });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceReset() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceReset_v3020), [&]() -> cudaError_t {
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    timeline().reset_device(device);
    arrays().release_device(device);
    memory().release_device(device);
    rt::g_device_flags[device].store(0, std::memory_order_relaxed);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetLastError() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetLastError_v3020), [&]() -> cudaError_t { return rt::take_last_error(true); });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaPeekAtLastError_v3020), [&]() -> cudaError_t { return rt::take_last_error(false); });
}

// As the real runtime does, through the driver: a tracer sees cuProfilerStart inside.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaProfilerStart() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaProfilerStart_v4000), [&]() -> cudaError_t {
    if (const rt::DriverApi* d = rt::driver()) return rt::record(rt::from_driver(d->profiler_start()));
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaProfilerStop() {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaProfilerStop_v4000), [&]() -> cudaError_t {
    if (const rt::DriverApi* d = rt::driver()) return rt::record(rt::from_driver(d->profiler_stop()));
    return cudaSuccess;
  });
}

// ---- limits and occupancy ----

namespace simcuda::rt {
namespace {

// cudaDeviceSetLimit's values, by device and limit, starting at the defaults CUDA 13 reports on a
// Hopper part.
constexpr size_t kLimitDefaults[] = {
    1024,         // cudaLimitStackSize
    1 << 20,      // cudaLimitPrintfFifoSize
    8 << 20,      // cudaLimitMallocHeapSize
    2,            // cudaLimitDevRuntimeSyncDepth
    2048,         // cudaLimitDevRuntimePendingLaunchCount
    64,           // cudaLimitMaxL2FetchGranularity
    0,            // cudaLimitPersistingL2CacheSize
};
constexpr size_t kLimitCount = sizeof kLimitDefaults / sizeof kLimitDefaults[0];
static_assert(kLimitCount == size_t(cudaLimitPersistingL2CacheSize) + 1);

std::atomic<size_t>* limits_of(int device) {
  static std::atomic<size_t>* all = [] {
    auto* l = new std::atomic<size_t>[kMaxDeviceCount * kLimitCount];
    for (int d = 0; d < kMaxDeviceCount; ++d) {
      for (size_t i = 0; i < kLimitCount; ++i) l[d * kLimitCount + i].store(kLimitDefaults[i]);
    }
    return l;
  }();
  return all + size_t(device) * kLimitCount;
}

cudaError_t occupancy(int* num_blocks, const void* func, int block_size, size_t dynamic_smem, unsigned flags) {
  if (num_blocks == nullptr || (flags & ~unsigned(cudaOccupancyDisableCachingOverride)) != 0) {
    return record(cudaErrorInvalidValue);
  }
  if (kernels().find(func) == nullptr) return record(cudaErrorInvalidDeviceFunction);
  int device;
  if (cudaError_t e = current_device(&device); e != cudaSuccess) return record(e);
  *num_blocks = active_blocks(device, block_size, dynamic_smem, kKernelRegisters, 0);
  return cudaSuccess;
}

}  // namespace
}  // namespace simcuda::rt

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceSetLimit_v3020), [&]() -> cudaError_t {
    if (size_t(limit) >= rt::kLimitCount) return rt::record(cudaErrorUnsupportedLimit);
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    const cudaDeviceProp p = rt::properties_of(device);
    // As documented: the L2 fetch granularity is a hint the driver rounds to 0, 32, 64 or 128 bytes,
    // and the persisting L2 size is capped at what the device can set aside.
    if (limit == cudaLimitMaxL2FetchGranularity) {
      if (value > 128) return rt::record(cudaErrorInvalidValue);
      value = value <= 16 ? 0 : value <= 32 ? 32 : value <= 64 ? 64 : 128;
    } else if (limit == cudaLimitPersistingL2CacheSize) {
      value = std::min<size_t>(value, size_t(p.persistingL2CacheMaxSize));
    } else if (limit == cudaLimitStackSize && value > (1u << 20)) {
      return rt::record(cudaErrorInvalidValue);
    }
    rt::limits_of(device)[limit].store(value, std::memory_order_relaxed);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetLimit_v3020), [&]() -> cudaError_t {
    if (value == nullptr) return rt::record(cudaErrorInvalidValue);
    if (size_t(limit) >= rt::kLimitCount) return rt::record(cudaErrorUnsupportedLimit);
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    *value = rt::limits_of(device)[limit].load(std::memory_order_relaxed);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                                                  int blockSize,
                                                                                  size_t dynamicSMemSize) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050), [&]() {
    return rt::occupancy(numBlocks, func, blockSize, dynamicSMemSize, 0);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000), [&]() {
    return rt::occupancy(numBlocks, func, blockSize, dynamicSMemSize, flags);
  });
}

// The dynamic shared memory a block of blockSize threads can have while numBlocks of them share a
// multiprocessor.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize,
                                                                              const void* func, int numBlocks,
                                                                              int blockSize) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaOccupancyAvailableDynamicSMemPerBlock_v10200), [&]() -> cudaError_t {
    if (dynamicSmemSize == nullptr) return rt::record(cudaErrorInvalidValue);
    if (kernels().find(func) == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    const cudaDeviceProp p = rt::properties_of(device);
    if (numBlocks <= 0 || blockSize <= 0 || blockSize > p.maxThreadsPerBlock ||
        active_blocks(device, blockSize, 0, kKernelRegisters, 0) < numBlocks) {
      *dynamicSmemSize = 0;
      return cudaSuccess;
    }
    size_t share = p.sharedMemPerMultiprocessor / size_t(numBlocks);
    size_t available = share > size_t(p.reservedSharedMemPerBlock) ? share - p.reservedSharedMemPerBlock : 0;
    *dynamicSmemSize = std::min<size_t>(available, p.sharedMemPerBlockOptin);
    return cudaSuccess;
  });
}

// The simulation has no L2 cache whose persisting lines could be reset: nothing to do, as for a real
// device whose persisting lines are already normal.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaCtxResetPersistingL2Cache(void) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaCtxResetPersistingL2Cache_v11000), [&]() -> cudaError_t {
    int device;
    if (cudaError_t e = rt::current_device(&device); e != cudaSuccess) return rt::record(e);
    return cudaSuccess;
  });
}
