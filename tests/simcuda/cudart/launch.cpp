// Module registration by nvcc-generated code, kernel launches and function queries.
//
// With CUDA 13, `kernel<<<grid, block, smem, stream>>>(args)` compiles to
// __cudaPushCallConfiguration(...) followed by the host stub, which calls __cudaPopCallConfiguration,
// __cudaGetKernel once per call site (cached in a static) and __cudaLaunchKernel with the handle
// (crt/host_runtime.h, crt/device_functions.h). Kernel names come from __cudaRegisterFunction.
#include <cstring>

#include "core/device.h"
#include "runtime.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};

bool valid_configuration(dim3 grid, dim3 block) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0) {
    return false;
  }
  if (block.x > kMaxBlockDim[0] || block.y > kMaxBlockDim[1] || block.z > kMaxBlockDim[2] ||
      uint64_t(block.x) * block.y * block.z > kMaxThreadsPerBlock) {
    return false;
  }
  return grid.x <= kMaxGridDim[0] && grid.y <= kMaxGridDim[1] && grid.z <= kMaxGridDim[2];
}

cudaError_t get_kernel(cudaKernel_t* kernel, const void* function) {
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const Kernel* k = kernels().find(function);
  if (k == nullptr) return cudaErrorInvalidDeviceFunction;
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<Kernel*>(k));
  return cudaSuccess;
}

cudaError_t launch_ex(const cudaLaunchConfig_t* config, const void* function,
                      DefaultStream flavour) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return launch(function, config->gridDim, config->blockDim, config->dynamicSmemBytes,
                config->stream, flavour);
}

}  // namespace

cudaError_t launch(const void* function_or_handle, dim3 grid, dim3 block, size_t shared_mem,
                   cudaStream_t stream, DefaultStream flavour) {
  const Kernel* k = kernels().find(function_or_handle);
  if (k == nullptr) return cudaErrorInvalidDeviceFunction;
  if (!valid_configuration(grid, block)) return cudaErrorInvalidConfiguration;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capture(sid, kernel_node(*k, grid, block, shared_mem))) return cudaSuccess;
  if (const DriverApi* d = driver()) {
    int device;
    if (cudaError_t e = current_device(&device); e) return e;
    if (cudaError_t e = bind_context(*d, device); e) return e;
    // The runtime's kernel handle is the driver's function handle for the same kernel.
    auto f = reinterpret_cast<CUfunction>(const_cast<Kernel*>(k));
    return from_driver(d->launch_kernel[flavour_index(flavour)](
        f, grid.x, grid.y, grid.z, block.x, block.y, block.z, unsigned(shared_mem), stream, nullptr,
        nullptr));
  }
  Work work{OpKind::kKernel, k->duration_ns, {}, {}};
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kKernel);
    info->name = k->name.c_str();
    info->grid[0] = grid.x, info->grid[1] = grid.y, info->grid[2] = grid.z;
    info->block[0] = block.x, info->block[1] = block.y, info->block[2] = block.z;
    info->dynamic_shared = unsigned(shared_mem);
    work.info = std::move(info);
  }
  Status s = timeline().submit(sid, std::move(work));
  if (s == Status::kOk) notify_launch(*k, k->duration_ns);
  return from_status(s);
}

}  // namespace simcuda::rt

using rt::kLegacy;
using rt::kPerThread;

// ---- registration ----

SIMCUDA_EXPORT void** CUDARTAPI __cudaRegisterFatBinary(void* fatCubin) {
  return kernels().register_module(fatCubin);
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterFatBinaryEnd(void** /*fatCubinHandle*/) {}

SIMCUDA_EXPORT void CUDARTAPI __cudaUnregisterFatBinary(void** fatCubinHandle) {
  kernels().unregister_module(fatCubinHandle);
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun,
                                                     char* deviceFun, const char* /*deviceName*/,
                                                     int /*thread_limit*/, uint3* /*tid*/,
                                                     uint3* /*bid*/, dim3* /*bDim*/,
                                                     dim3* /*gDim*/, int* /*wSize*/) {
  kernels().register_function(fatCubinHandle, hostFun, deviceFun);
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterVar(void** fatCubinHandle, char* hostVar,
                                                char* /*deviceAddress*/,
                                                const char* /*deviceName*/, int /*ext*/,
                                                size_t size, int /*constant*/, int /*global*/) {
  kernels().register_variable(fatCubinHandle, hostVar, size);
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterManagedVar(void** fatCubinHandle,
                                                       void** hostVarPtrAddress,
                                                       char* /*deviceAddress*/,
                                                       const char* /*deviceName*/, int /*ext*/,
                                                       size_t size, int /*constant*/,
                                                       int /*global*/) {
  kernels().register_managed_variable(fatCubinHandle, hostVarPtrAddress, size);
}

SIMCUDA_EXPORT char CUDARTAPI __cudaInitModule(void** fatCubinHandle) {
  return kernels().init_module(fatCubinHandle) ? 1 : 0;
}

// ---- <<<...>>> launches ----

SIMCUDA_EXPORT unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                                              size_t sharedMem,
                                                              struct CUstream_st* stream) {
  rt::push_call_configuration({gridDim, blockDim, sharedMem, stream});
  return 0;  // nonzero would make the generated code skip the launch
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim,
                                                                size_t* sharedMem, void* stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(__cudaPopCallConfiguration_v13000), [&]() -> cudaError_t {
    rt::CallConfiguration c;
    if (!rt::pop_call_configuration(&c)) return cudaErrorMissingConfiguration;
    if (gridDim != nullptr) *gridDim = c.grid;
    if (blockDim != nullptr) *blockDim = c.block;
    if (sharedMem != nullptr) *sharedMem = c.shared_mem;
    if (stream != nullptr) *static_cast<cudaStream_t*>(stream) = c.stream;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(__cudaGetKernel_v13000), [&]() -> cudaError_t {
    return rt::record(rt::get_kernel(kernel, function));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim,
                                                        dim3 blockDim, void** /*args*/,
                                                        size_t sharedMem, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(__cudaLaunchKernel_v13000), [&]() -> cudaError_t {
    return rt::record(rt::launch(kernel, gridDim, blockDim, sharedMem, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                                             dim3 blockDim, void** /*args*/,
                                                             size_t sharedMem,
                                                             cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(__cudaLaunchKernel_ptsz_v13000), [&]() -> cudaError_t {
    return rt::record(rt::launch(kernel, gridDim, blockDim, sharedMem, stream, kPerThread));
  });
}

// ---- launch API ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 gridDim,
                                                      dim3 blockDim, void** /*args*/,
                                                      size_t sharedMem, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchKernel_v7000), [&]() -> cudaError_t {
    return rt::record(rt::launch(func, gridDim, blockDim, sharedMem, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void* func, dim3 gridDim,
                                                           dim3 blockDim, void** /*args*/,
                                                           size_t sharedMem, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchKernel_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::launch(func, gridDim, blockDim, sharedMem, stream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t* config,
                                                         const void* func, void** /*args*/) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchKernelExC_v11060), [&]() -> cudaError_t {
    return rt::record(rt::launch_ex(config, func, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config,
                                                              const void* func, void** /*args*/) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchKernelExC_ptsz_v11060), [&]() -> cudaError_t {
    return rt::record(rt::launch_ex(config, func, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchCooperativeKernel(const void* func, dim3 gridDim,
                                                                 dim3 blockDim, void** /*args*/,
                                                                 size_t sharedMem,
                                                                 cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchCooperativeKernel_v9000), [&]() -> cudaError_t {
    return rt::record(rt::launch(func, gridDim, blockDim, sharedMem, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchCooperativeKernel_ptsz(const void* func,
                                                                      dim3 gridDim, dim3 blockDim,
                                                                      void** /*args*/,
                                                                      size_t sharedMem,
                                                                      cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchCooperativeKernel_ptsz_v9000), [&]() -> cudaError_t {
    return rt::record(rt::launch(func, gridDim, blockDim, sharedMem, stream, kPerThread));
  });
}

// ---- functions ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t* kernelPtr,
                                                   const void* entryFuncAddr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetKernel_v12000), [&]() -> cudaError_t {
    return rt::record(rt::get_kernel(kernelPtr, entryFuncAddr));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetFuncBySymbol(cudaFunction_t* functionPtr,
                                                         const void* symbolPtr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetFuncBySymbol_v11000), [&]() -> cudaError_t {
    if (functionPtr == nullptr) return rt::record(cudaErrorInvalidValue);
    const Kernel* k = kernels().find(symbolPtr);
    if (k == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    *functionPtr = reinterpret_cast<cudaFunction_t>(const_cast<Kernel*>(k));
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFuncGetName(const char** name, const void* func) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFuncGetName_v12030), [&]() -> cudaError_t {
    if (name == nullptr) return rt::record(cudaErrorInvalidValue);
    const Kernel* k = kernels().find(func);
    if (k == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    *name = k->name.c_str();
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFuncGetAttributes(cudaFuncAttributes* attr,
                                                           const void* func) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFuncGetAttributes_v3020), [&]() -> cudaError_t {
    if (attr == nullptr) return rt::record(cudaErrorInvalidValue);
    if (kernels().find(func) == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    std::memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = int(rt::kMaxThreadsPerBlock);
    attr->numRegs = kKernelRegisters;
    // Built for the device it runs on: CUB picks its tuning by this version, and finds no policy at
    // all (cudaErrorInvalidDeviceFunction) for one older than the architectures it was compiled for.
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    attr->ptxVersion = attr->binaryVersion = kernel_architecture(device);
    attr->maxDynamicSharedSizeBytes = 48 << 10;
    attr->preferredShmemCarveout = -1;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr,
                                                          int /*value*/) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFuncSetAttribute_v9000), [&]() -> cudaError_t {
    if (int(attr) < 0 || int(attr) >= int(cudaFuncAttributeMax)) {
      return rt::record(cudaErrorInvalidValue);
    }
    if (kernels().find(func) == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFuncSetCacheConfig(const void* func,
                                                            cudaFuncCache /*cacheConfig*/) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFuncSetCacheConfig_v3020), [&]() -> cudaError_t {
    if (kernels().find(func) == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    return cudaSuccess;
  });
}
