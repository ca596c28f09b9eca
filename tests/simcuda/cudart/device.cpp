// Device management, versions, error state, the profiler control calls, limits and occupancy.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;

namespace simcuda::rt {
namespace {

// The flags given to cudaSetDeviceFlags, by device.
std::atomic<unsigned> g_device_flags[kMaxDeviceCount];

constexpr int kLeastStreamPriority = 0;
constexpr int kGreatestStreamPriority = -5;

// A Hopper-class part: what programs commonly query is plausible and self-consistent.
cudaDeviceProp properties_of(int device) {
  cudaDeviceProp p;
  std::memset(&p, 0, sizeof p);
  std::snprintf(p.name, sizeof p.name, "Simulated CUDA Device %d", device);
  std::snprintf(p.uuid.bytes, sizeof p.uuid.bytes, "simcuda-dev%04d", device);
  p.totalGlobalMem = config().device_memory_bytes;
  p.sharedMemPerBlock = 48 << 10;
  p.regsPerBlock = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.totalConstMem = 64 << 10;
  p.major = 9;
  p.minor = 0;
  p.textureAlignment = 512;
  p.texturePitchAlignment = 32;
  p.multiProcessorCount = 132;
  p.canMapHostMemory = 1;
  p.surfaceAlignment = 512;
  p.concurrentKernels = 1;
  p.ECCEnabled = 1;
  p.pciBusID = 0x10 + device;
  p.asyncEngineCount = 3;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = 5120;
  p.l2CacheSize = 50 << 20;
  p.persistingL2CacheMaxSize = 30 << 20;
  p.maxThreadsPerMultiProcessor = 2048;
  p.streamPrioritiesSupported = 1;
  p.globalL1CacheSupported = 1;
  p.localL1CacheSupported = 1;
  p.sharedMemPerMultiprocessor = 228 << 10;
  p.regsPerMultiprocessor = 65536;
  p.managedMemory = 1;
  p.multiGpuBoardGroupID = device;
  p.concurrentManagedAccess = 1;
  p.computePreemptionSupported = 1;
  p.cooperativeLaunch = 1;
  p.sharedMemPerBlockOptin = 227 << 10;
  p.maxBlocksPerMultiProcessor = 32;
  p.accessPolicyMaxWindowSize = 134213632;
  p.reservedSharedMemPerBlock = 1 << 10;
  p.hostRegisterSupported = 1;
  p.memoryPoolsSupported = 1;
  p.ipcEventSupported = 1;
  p.clusterLaunch = 1;
#if CUDART_VERSION >= 13000  // fields CUDA 13's cudaDeviceProp added
  p.deviceNumaId = -1;
  p.hostNumaId = -1;
  p.gpuPciDeviceID = 0x233010de;
#endif
  return p;
}

// Attributes mirror the properties; any other attribute the enum defines reads as 0 (unsupported).
int attribute_of(cudaDeviceAttr attr, const cudaDeviceProp& p) {
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return p.maxThreadsPerBlock;
    case cudaDevAttrMaxBlockDimX: return p.maxThreadsDim[0];
    case cudaDevAttrMaxBlockDimY: return p.maxThreadsDim[1];
    case cudaDevAttrMaxBlockDimZ: return p.maxThreadsDim[2];
    case cudaDevAttrMaxGridDimX: return p.maxGridSize[0];
    case cudaDevAttrMaxGridDimY: return p.maxGridSize[1];
    case cudaDevAttrMaxGridDimZ: return p.maxGridSize[2];
    case cudaDevAttrMaxSharedMemoryPerBlock: return int(p.sharedMemPerBlock);
    case cudaDevAttrTotalConstantMemory: return int(p.totalConstMem);
    case cudaDevAttrWarpSize: return p.warpSize;
    case cudaDevAttrMaxPitch: return int(p.memPitch);
    case cudaDevAttrMaxRegistersPerBlock: return p.regsPerBlock;
    case cudaDevAttrClockRate: return 1755000;
    case cudaDevAttrTextureAlignment: return int(p.textureAlignment);
    case cudaDevAttrGpuOverlap: return 1;
    case cudaDevAttrMultiProcessorCount: return p.multiProcessorCount;
    case cudaDevAttrCanMapHostMemory: return p.canMapHostMemory;
    case cudaDevAttrSurfaceAlignment: return int(p.surfaceAlignment);
    case cudaDevAttrConcurrentKernels: return p.concurrentKernels;
    case cudaDevAttrEccEnabled: return p.ECCEnabled;
    case cudaDevAttrPciBusId: return p.pciBusID;
    case cudaDevAttrMemoryClockRate: return 2619000;
    case cudaDevAttrGlobalMemoryBusWidth: return p.memoryBusWidth;
    case cudaDevAttrL2CacheSize: return p.l2CacheSize;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return p.maxThreadsPerMultiProcessor;
    case cudaDevAttrAsyncEngineCount: return p.asyncEngineCount;
    case cudaDevAttrUnifiedAddressing: return p.unifiedAddressing;
    case cudaDevAttrTexturePitchAlignment: return int(p.texturePitchAlignment);
    case cudaDevAttrComputeCapabilityMajor: return p.major;
    case cudaDevAttrComputeCapabilityMinor: return p.minor;
    case cudaDevAttrStreamPrioritiesSupported: return p.streamPrioritiesSupported;
    case cudaDevAttrGlobalL1CacheSupported: return p.globalL1CacheSupported;
    case cudaDevAttrLocalL1CacheSupported: return p.localL1CacheSupported;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return int(p.sharedMemPerMultiprocessor);
    case cudaDevAttrMaxRegistersPerMultiprocessor: return p.regsPerMultiprocessor;
    case cudaDevAttrManagedMemory: return p.managedMemory;
    case cudaDevAttrMultiGpuBoardGroupID: return p.multiGpuBoardGroupID;
    case cudaDevAttrConcurrentManagedAccess: return p.concurrentManagedAccess;
    case cudaDevAttrComputePreemptionSupported: return p.computePreemptionSupported;
    case cudaDevAttrCooperativeLaunch: return p.cooperativeLaunch;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return int(p.sharedMemPerBlockOptin);
    case cudaDevAttrHostRegisterSupported: return p.hostRegisterSupported;
    case cudaDevAttrMaxBlocksPerMultiprocessor: return p.maxBlocksPerMultiProcessor;
    case cudaDevAttrMaxPersistingL2CacheSize: return p.persistingL2CacheMaxSize;
    case cudaDevAttrMaxAccessPolicyWindowSize: return p.accessPolicyMaxWindowSize;
    case cudaDevAttrReservedSharedMemoryPerBlock: return int(p.reservedSharedMemPerBlock);
    case cudaDevAttrMemoryPoolsSupported: return p.memoryPoolsSupported;
    case cudaDevAttrIpcEventSupport: return p.ipcEventSupported;
    case cudaDevAttrClusterLaunch: return p.clusterLaunch;
#if CUDART_VERSION >= 13000
    case cudaDevAttrNumaId: return p.deviceNumaId;
    case cudaDevAttrHostNumaId: return p.hostNumaId;
    case cudaDevAttrGpuPciDeviceId: return int(p.gpuPciDeviceID);
#else
    case cudaDevAttrNumaId: return -1;
    case cudaDevAttrHostNumaId: return -1;
#endif
    default: return 0;
  }
}

}  // namespace
}  // namespace simcuda::rt

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceCount_v3020), [&]() -> cudaError_t {
    if (count == nullptr) return rt::record(cudaErrorInvalidValue);
    *count = config().device_count;
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

// The export behind cudaGetDeviceProperties since CUDA 12, hence its cbid.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDeviceProperties_v12000), [&]() -> cudaError_t {
    if (prop == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    *prop = rt::properties_of(device);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr,
                                                            int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetAttribute_v5000), [&]() -> cudaError_t {
    if (value == nullptr || int(attr) < 1 || int(attr) >= int(cudaDevAttrMax)) {
      return rt::record(cudaErrorInvalidValue);
    }
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    *value = rt::attribute_of(attr, rt::properties_of(device));
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

// The occupancy calculator's arithmetic for a kernel of `regs` registers a thread and `static_smem`
// bytes of static shared memory: the fewest blocks that the threads, the warps' registers (allocated
// in units of 256 a warp), the shared memory (with the 1 KiB each block reserves) and the block
// limit of one multiprocessor allow.
int active_blocks(const cudaDeviceProp& p, int block_size, size_t dynamic_smem, int regs, size_t static_smem) {
  if (block_size <= 0 || block_size > p.maxThreadsPerBlock) return 0;
  const int warps = (block_size + p.warpSize - 1) / p.warpSize;
  int blocks = std::min(p.maxBlocksPerMultiProcessor, p.maxThreadsPerMultiProcessor / (warps * p.warpSize));
  const int regs_per_warp = ((regs * p.warpSize + 255) / 256) * 256;
  if (regs_per_warp > 0) blocks = std::min(blocks, p.regsPerMultiprocessor / (regs_per_warp * warps));
  const size_t smem = static_smem + dynamic_smem + p.reservedSharedMemPerBlock;
  if (static_smem + dynamic_smem > p.sharedMemPerBlockOptin) return 0;
  blocks = std::min<int>(blocks, int(p.sharedMemPerMultiprocessor / smem));
  return std::max(blocks, 0);
}

constexpr int kKernelRegisters = 32;  // what cudaFuncGetAttributes reports of every kernel here

cudaError_t occupancy(int* num_blocks, const void* func, int block_size, size_t dynamic_smem, unsigned flags) {
  if (num_blocks == nullptr || (flags & ~unsigned(cudaOccupancyDisableCachingOverride)) != 0) {
    return record(cudaErrorInvalidValue);
  }
  if (kernels().find(func) == nullptr) return record(cudaErrorInvalidDeviceFunction);
  int device;
  if (cudaError_t e = current_device(&device); e != cudaSuccess) return record(e);
  *num_blocks = active_blocks(properties_of(device), block_size, dynamic_smem, kKernelRegisters, 0);
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
        rt::active_blocks(p, blockSize, 0, rt::kKernelRegisters, 0) < numBlocks) {
      *dynamicSmemSize = 0;
      return cudaSuccess;
    }
    size_t share = p.sharedMemPerMultiprocessor / size_t(numBlocks);
    size_t available = share > size_t(p.reservedSharedMemPerBlock) ? share - p.reservedSharedMemPerBlock : 0;
    *dynamicSmemSize = std::min<size_t>(available, p.sharedMemPerBlockOptin);
    return cudaSuccess;
  });
}
