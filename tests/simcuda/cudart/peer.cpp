// Peer access between the simulated devices. Every device's memory is the process's own memory, so
// any two devices can reach each other: peer access only has to be enabled, as on a machine whose
// GPUs share NVLink, and copies between devices are device-to-device copies on the stream given.
#include "core/device.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;

namespace simcuda::rt {
namespace {

cudaError_t check_pair(int device, int peer) {
  if (cudaError_t e = check_device(device); e) return e;
  return check_device(peer);
}

// The memory lies inside one allocation of the device (device or managed memory).
bool on_device(const void* ptr, size_t count, int device) {
  std::optional<Allocation> a = memory().find(ptr);
  return a && a->device == device && (a->kind == MemoryKind::kDevice || a->kind == MemoryKind::kManaged) &&
         a->contains(ptr, count);
}

cudaError_t copy_peer(void* dst, int dst_device, const void* src, int src_device, size_t count, cudaStream_t stream,
                      DefaultStream flavour, bool synchronous) {
  if (cudaError_t e = check_pair(dst_device, src_device); e) return e;
  if (count == 0) return cudaSuccess;
  if (!on_device(dst, count, dst_device) || !on_device(src, count, src_device)) return cudaErrorInvalidValue;
  return copy(dst, src, Rect{count, 1, count, count}, cudaMemcpyDeviceToDevice, stream, flavour, synchronous);
}

}  // namespace
}  // namespace simcuda::rt

namespace rt = simcuda::rt;

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceCanAccessPeer_v4000), [&] {
    if (can_access == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_pair(device, peer); e) return rt::record(e);
    *can_access = device != peer ? 1 : 0;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceEnablePeerAccess_v4000), [&] {
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    if (flags != 0) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(peer); e) return rt::record(e);
    if (peer == device) return rt::record(cudaErrorInvalidDevice);
    return enable_peer_access(device, peer) == Status::kOk ? cudaSuccess
                                                          : rt::record(cudaErrorPeerAccessAlreadyEnabled);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peer) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceDisablePeerAccess_v4000), [&] {
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    if (cudaError_t e = rt::check_device(peer); e) return rt::record(e);
    return disable_peer_access(device, peer) == Status::kOk ? cudaSuccess
                                                           : rt::record(cudaErrorPeerAccessNotEnabled);
  });
}

// One link between every two devices: the best rank, with atomics and array access.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int src, int dst) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetP2PAttribute_v8000), [&] {
    if (value == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_pair(src, dst); e) return rt::record(e);
    if (src == dst) return rt::record(cudaErrorInvalidDevice);
    switch (attr) {
      case cudaDevP2PAttrPerformanceRank: *value = 0; break;
      case cudaDevP2PAttrAccessSupported:
      case cudaDevP2PAttrNativeAtomicSupported:
      case cudaDevP2PAttrCudaArrayAccessSupported: *value = 1; break;
#if CUDART_VERSION >= 13000
      case cudaDevP2PAttrOnlyPartialNativeAtomicSupported: *value = 0; break;
#endif
      default: return rt::record(cudaErrorInvalidValue);
    }
    return cudaSuccess;
  });
}

// Serialised with the work of the legacy stream, and returning once the copy is queued, as the
// documentation says of cudaMemcpyPeer.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                                                    size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyPeer_v4000), [&] {
    return rt::record(rt::copy_peer(dst, dst_device, src, src_device, count, nullptr, rt::DefaultStream::kLegacy,
                                    /*synchronous=*/true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                                         size_t count, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyPeerAsync_v4000), [&] {
    return rt::record(rt::copy_peer(dst, dst_device, src, src_device, count, stream, rt::DefaultStream::kLegacy,
                                    /*synchronous=*/false));
  });
}
