// How the runtime reaches the driver: as the real CUDA 13 runtime does, through dlopen("libcuda.so.1")
// and cuGetProcAddress, so that a tracer sees the same nesting of runtime and driver calls.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "core/handles.h"
#include "runtime.h"

namespace simcuda::rt {
namespace {

// The device whose primary context the driver has current on this thread. The simulated driver
// uses device 0's when none is set, so nothing needs to be set until the thread leaves device 0.
thread_local int t_driver_device = 0;

template <class Fn>
bool lookup(PFN_cuGetProcAddress_v12000 get, const char* symbol, cuuint64_t flags, Fn* out) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (get(symbol, &p, CUDART_VERSION, flags, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || p == nullptr) {
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

// Each function in both flavours: [0] legacy stream, [1] per-thread default stream.
template <class Fn>
bool lookup_both(PFN_cuGetProcAddress_v12000 get, const char* symbol, Fn out[2]) {
  return lookup(get, symbol, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &out[0]) &&
         lookup(get, symbol, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &out[1]);
}

const DriverApi* load_driver() {
  const char* knob = std::getenv("SIMCUDA_RUNTIME_DRIVER");
  if (knob != nullptr && std::strcmp(knob, "0") == 0) return nullptr;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  auto entry = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  if (entry == nullptr) return nullptr;
  // The real runtime asks the driver for cuGetProcAddress itself and uses that for the rest.
  PFN_cuGetProcAddress_v12000 get = nullptr;
  if (!lookup(entry, "cuGetProcAddress", 0, &get)) return nullptr;
  PFN_cuInit_v2000 init = nullptr;
  if (!lookup(get, "cuInit", 0, &init) || init(0) != CUDA_SUCCESS) return nullptr;
  auto* d = new DriverApi{};
  d->get_proc_address = get;
  bool ok = lookup(get, "cuMemAlloc", 0, &d->mem_alloc) && lookup(get, "cuMemAllocPitch", 0, &d->mem_alloc_pitch) &&
            lookup(get, "cuMemFree", 0, &d->mem_free) &&
            lookup(get, "cuCtxSynchronize", 0, &d->ctx_synchronize) &&
            lookup(get, "cuDevicePrimaryCtxRetain", 0, &d->primary_ctx_retain) &&
            lookup(get, "cuCtxSetCurrent", 0, &d->ctx_set_current) &&
            lookup_both(get, "cuMemcpy", d->memcpy) &&
            lookup_both(get, "cuMemcpyAsync", d->memcpy_async) &&
            lookup_both(get, "cuMemcpyHtoD", d->memcpy_htod) &&
            lookup_both(get, "cuMemcpyDtoH", d->memcpy_dtoh) &&
            lookup_both(get, "cuMemcpyDtoD", d->memcpy_dtod) &&
            lookup_both(get, "cuMemcpyHtoDAsync", d->memcpy_htod_async) &&
            lookup_both(get, "cuMemcpyDtoHAsync", d->memcpy_dtoh_async) &&
            lookup_both(get, "cuMemcpyDtoDAsync", d->memcpy_dtod_async) &&
            lookup_both(get, "cuMemsetD8", d->memset_d8) &&
            lookup_both(get, "cuStreamSynchronize", d->stream_synchronize) &&
            lookup_both(get, "cuLaunchKernel", d->launch_kernel) &&
            lookup(get, "cuProfilerStart", 0, &d->profiler_start) &&
            lookup(get, "cuProfilerStop", 0, &d->profiler_stop);
  if (!ok) {
    delete d;
    return nullptr;
  }
  return d;
}

}  // namespace

const DriverApi* driver() {
  static const DriverApi* api = load_driver();
  return api;
}

cudaError_t bind_context(const DriverApi& d, int device) {
  if (device == t_driver_device) {
    // The thread's first use of device 0: its primary context becomes current in the driver, as
    // the real runtime makes it, by a way no tracer sees (the real one uses the driver's private
    // export tables), so that recorded driver calls stay those a program or library makes.
    if (runtime_context_device() < 0) note_runtime_context(device);
    return cudaSuccess;
  }
  CUcontext ctx;
  if (CUresult r = d.primary_ctx_retain(&ctx, device); r) return from_driver(r);
  if (CUresult r = d.ctx_set_current(ctx); r) return from_driver(r);
  t_driver_device = device;
  return cudaSuccess;
}

cudaError_t from_driver(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    default: return cudaErrorUnknown;
  }
}

// cudaGetDriverEntryPoint and cudaGetDriverEntryPointByVersion: the driver's answer to cuGetProcAddress.
// cudaEnableDefault (0) means the entry point's flavour: the _ptsz exports ask for the per-thread one.
cudaError_t driver_entry_point(const char* symbol, void** function, unsigned int cuda_version,
                               unsigned long long flags, cudaDriverEntryPointQueryResult* status,
                               DefaultStream flavour) {
  if (symbol == nullptr || function == nullptr ||
      (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)) != 0) {
    return record(cudaErrorInvalidValue);
  }
  const DriverApi* d = driver();
  if (d == nullptr) return record(cudaErrorNotSupported);  // no libcuda.so.1 (SIMCUDA_RUNTIME_DRIVER=0)
  cuuint64_t cu_flags = flags;
  if (flags == cudaEnableDefault && flavour == DefaultStream::kPerThread) {
    cu_flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  }
  CUdriverProcAddressQueryResult cu_status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = d->get_proc_address(symbol, function, int(cuda_version), cu_flags, &cu_status);
  if (status != nullptr) {
    *status = cu_status == CU_GET_PROC_ADDRESS_SUCCESS             ? cudaDriverEntryPointSuccess
              : cu_status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
                                                                         : cudaDriverEntryPointSymbolNotFound;
  }
  // As the real runtime: a symbol the driver lacks is no error of the call, only of its status.
  if (r == CUDA_ERROR_NOT_FOUND) return cudaSuccess;
  return r == CUDA_SUCCESS ? cudaSuccess : record(from_driver(r));
}

}  // namespace simcuda::rt

namespace rt = simcuda::rt;

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char* symbol, void** funcPtr,
                                                             unsigned long long flags,
                                                             cudaDriverEntryPointQueryResult* driverStatus) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDriverEntryPoint_v11030), [&]() -> cudaError_t {
    return rt::driver_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, rt::DefaultStream::kLegacy);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                                                  unsigned long long flags,
                                                                  cudaDriverEntryPointQueryResult* driverStatus) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDriverEntryPoint_ptsz_v11030), [&]() -> cudaError_t {
    return rt::driver_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, rt::DefaultStream::kPerThread);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                                                      unsigned int cudaVersion, unsigned long long flags,
                                                                      cudaDriverEntryPointQueryResult* driverStatus) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDriverEntryPointByVersion_v12050), [&]() -> cudaError_t {
    return rt::driver_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, rt::DefaultStream::kLegacy);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetDriverEntryPointByVersion_ptsz_v12050), [&]() -> cudaError_t {
    return rt::driver_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, rt::DefaultStream::kPerThread);
  });
}
