// The driver's peer access, over the same state as the runtime's (core/device.h): every simulated
// device's memory is the process's, so any two devices can reach each other once access is enabled.
// These exports are not in cuGetProcAddress's own table, so it hands out the exports themselves.
#include "core/device.h"
#include "driver.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

CUresult check_pair(CUdevice a, CUdevice b) {
  if (CUresult e = check_initialized(); e) return e;
  int count = 0;
  if (CUresult e = cuDeviceGetCount(&count); e) return e;
  return a >= 0 && a < count && b >= 0 && b < count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// The peer context's device, seen from the calling thread's context's device.
CUresult peer_of(CUcontext peer_context, int* device, int* peer) {
  if (CUresult e = current_device(device); e) return e;
  *peer = context_device(peer_context);
  if (*peer < 0) return CUDA_ERROR_INVALID_CONTEXT;
  return *peer == *device ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceCanAccessPeer), [&]() -> CUresult {
    if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_pair(dev, peer); e) return e;
    *can_access = dev != peer ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

// One link between every two devices: the best rank, with atomics and array access.
SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attribute, CUdevice src,
                                                        CUdevice dst) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetP2PAttribute), [&]() -> CUresult {
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_pair(src, dst); e) return e;
    if (src == dst) return CUDA_ERROR_INVALID_DEVICE;
    switch (attribute) {
      case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; break;
      case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
      case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
      case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = 1; break;
      case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED: *value = 0; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer_context, unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxEnablePeerAccess), [&]() -> CUresult {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int device, peer;
    if (CUresult e = peer_of(peer_context, &device, &peer); e) return e;
    return enable_peer_access(device, peer) == Status::kOk ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer_context) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxDisablePeerAccess), [&]() -> CUresult {
    int device, peer;
    if (CUresult e = peer_of(peer_context, &device, &peer); e) return e;
    return disable_peer_access(device, peer) == Status::kOk ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  });
}
