// Texture and surface objects. Kernels never execute, so nothing ever fetches through one: an object
// is a validated handle that keeps its descriptors, so that what a program reads back and the errors
// it gets are the real runtime's.
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/arrays.h"
#include "core/device.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;

namespace simcuda::rt {
namespace {

// An enumeration's value as a number: the descriptors come from the program, and UBSan checks every
// load of an enum's value.
template <class E>
int raw(const E& e) {
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

struct BoundObject {
  bool surface = false;
  cudaResourceDesc resource{};
  cudaTextureDesc texture{};
  cudaResourceViewDesc view{};
};

// Textures and surfaces number from 1 in one sequence, so that no handle is ever 0 or both.
struct Objects {
  std::mutex mu;
  std::unordered_map<unsigned long long, BoundObject> all;
  unsigned long long next = 0;
};

Objects& objects() {
  static Objects* o = new Objects;
  return *o;
}

size_t element_size(const cudaChannelFormatDesc& d) { return size_t(d.x + d.y + d.z + d.w) / 8; }

// The channels of linear memory seen as a texture, as for an array.
bool channels_ok(const cudaChannelFormatDesc& d) {
  const int kind = raw(d.f);
  if (kind != cudaChannelFormatKindSigned && kind != cudaChannelFormatKindUnsigned && kind != cudaChannelFormatKindFloat)
    return false;
  const bool width_ok = d.x == 8 || d.x == 16 || d.x == 32;
  return width_ok && ((d.y == 0 && d.z == 0 && d.w == 0) || (d.y == d.x && d.z == 0 && d.w == 0) ||
                      (d.y == d.x && d.z == d.x && d.w == d.x));
}

// Linear memory for a texture: inside one allocation the device reaches, at an offset from its start
// that is a multiple of the device's texture alignment (an allocation's start is as aligned as any
// on the real device).
bool linear_memory_ok(const void* ptr, size_t bytes, int device) {
  std::optional<Allocation> a = memory().find(ptr);
  if (!a || a->kind == MemoryKind::kArray || !a->contains(ptr, bytes)) return false;
  const size_t alignment = size_t(device_attribute(int(cudaDevAttrTextureAlignment), device));
  return (reinterpret_cast<uintptr_t>(ptr) - a->base) % alignment == 0;
}

cudaError_t check_resource(const cudaResourceDesc& r, bool surface) {
#if CUDART_VERSION >= 13000
  if (r.flags != 0) return cudaErrorInvalidValue;
#endif
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  switch (raw(r.resType)) {
    case cudaResourceTypeArray: {
      std::optional<CudaArray> a = arrays().find(r.res.array.array);
      if (!a) return cudaErrorInvalidValue;
      return !surface || (a->flags & kArraySurfaceLoadStore) != 0 ? cudaSuccess : cudaErrorInvalidValue;
    }
    case cudaResourceTypeLinear: {
      const auto& l = r.res.linear;
      if (surface || !channels_ok(l.desc) || l.sizeInBytes == 0) return cudaErrorInvalidValue;
      return linear_memory_ok(l.devPtr, l.sizeInBytes, device) ? cudaSuccess : cudaErrorInvalidValue;
    }
    case cudaResourceTypePitch2D: {
      const auto& p = r.res.pitch2D;
      if (surface || !channels_ok(p.desc) || p.width == 0 || p.height == 0) return cudaErrorInvalidValue;
      const size_t row = p.width * element_size(p.desc);
      const size_t pitch_alignment = size_t(device_attribute(int(cudaDevAttrTexturePitchAlignment), device));
      if (row > p.pitchInBytes || p.pitchInBytes % pitch_alignment != 0) return cudaErrorInvalidValue;
      return linear_memory_ok(p.devPtr, p.pitchInBytes * (p.height - 1) + row, device) ? cudaSuccess
                                                                                        : cudaErrorInvalidValue;
    }
    // No mipmapped array exists on the simulated device (cudaMallocMipmappedArray is not supported).
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t check_texture(const cudaTextureDesc& t) {
  for (const auto& mode : t.addressMode) {
    if (raw(mode) < cudaAddressModeWrap || raw(mode) > cudaAddressModeBorder) return cudaErrorInvalidValue;
  }
  const bool filter_ok = raw(t.filterMode) == cudaFilterModePoint || raw(t.filterMode) == cudaFilterModeLinear;
  const bool read_ok = raw(t.readMode) == cudaReadModeElementType || raw(t.readMode) == cudaReadModeNormalizedFloat;
  return filter_ok && read_ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t create(unsigned long long* out, const BoundObject& object) {
  Objects& o = objects();
  std::lock_guard<std::mutex> lock(o.mu);
  *out = ++o.next;
  o.all[*out] = object;
  return cudaSuccess;
}

cudaError_t create_texture(cudaTextureObject_t* out, const cudaResourceDesc* resource, const cudaTextureDesc* texture,
                           const cudaResourceViewDesc* view) {
  if (out == nullptr || resource == nullptr || texture == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = check_resource(*resource, false); e) return e;
  if (cudaError_t e = check_texture(*texture); e) return e;
  // A view reinterprets an array; linear memory has none.
  if (view != nullptr && raw(resource->resType) != cudaResourceTypeArray) return cudaErrorInvalidValue;
  BoundObject object;
  object.resource = *resource;
  object.texture = *texture;
  if (view != nullptr) object.view = *view;
  return create(out, object);
}

// fn(object) under the registry's lock, for an object of the kind asked for.
template <class Fn>
cudaError_t with_object(unsigned long long handle, bool surface, Fn fn) {
  Objects& o = objects();
  std::lock_guard<std::mutex> lock(o.mu);
  auto it = o.all.find(handle);
  if (it == o.all.end() || it->second.surface != surface) return cudaErrorInvalidValue;
  fn(it->second);
  return cudaSuccess;
}

cudaError_t destroy(unsigned long long handle, bool surface) {
  Objects& o = objects();
  std::lock_guard<std::mutex> lock(o.mu);
  auto it = o.all.find(handle);
  if (it == o.all.end() || it->second.surface != surface) return cudaErrorInvalidValue;
  o.all.erase(it);
  return cudaSuccess;
}

}  // namespace
}  // namespace simcuda::rt

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaCreateTextureObject(cudaTextureObject_t* pTexObject,
                                                             const cudaResourceDesc* pResDesc,
                                                             const cudaTextureDesc* pTexDesc,
                                                             const cudaResourceViewDesc* pResViewDesc) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaCreateTextureObject_v5000), [&]() -> cudaError_t {
    return rt::record(rt::create_texture(pTexObject, pResDesc, pTexDesc, pResViewDesc));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDestroyTextureObject_v5000), [&]() -> cudaError_t {
    return rt::record(rt::destroy(texObject, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetTextureObjectResourceDesc(cudaResourceDesc* pResDesc,
                                                                      cudaTextureObject_t texObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetTextureObjectResourceDesc_v5000), [&]() -> cudaError_t {
    if (pResDesc == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::with_object(texObject, false, [&](const rt::BoundObject& o) { *pResDesc = o.resource; }));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetTextureObjectTextureDesc(cudaTextureDesc* pTexDesc,
                                                                     cudaTextureObject_t texObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetTextureObjectTextureDesc_v5000), [&]() -> cudaError_t {
    if (pTexDesc == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::with_object(texObject, false, [&](const rt::BoundObject& o) { *pTexDesc = o.texture; }));
  });
}

// A texture made without a view reports a zeroed one.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetTextureObjectResourceViewDesc(cudaResourceViewDesc* pResViewDesc,
                                                                          cudaTextureObject_t texObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetTextureObjectResourceViewDesc_v5000), [&]() -> cudaError_t {
    if (pResViewDesc == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::with_object(texObject, false, [&](const rt::BoundObject& o) { *pResViewDesc = o.view; }));
  });
}

// Surfaces are over arrays made with cudaArraySurfaceLoadStore only, as documented.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaCreateSurfaceObject(cudaSurfaceObject_t* pSurfObject,
                                                             const cudaResourceDesc* pResDesc) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaCreateSurfaceObject_v5000), [&]() -> cudaError_t {
    if (pSurfObject == nullptr || pResDesc == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_resource(*pResDesc, true); e) return rt::record(e);
    rt::BoundObject object;
    object.surface = true;
    object.resource = *pResDesc;
    return rt::record(rt::create(pSurfObject, object));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDestroySurfaceObject_v5000), [&]() -> cudaError_t {
    return rt::record(rt::destroy(surfObject, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetSurfaceObjectResourceDesc(cudaResourceDesc* pResDesc,
                                                                      cudaSurfaceObject_t surfObject) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetSurfaceObjectResourceDesc_v5000), [&]() -> cudaError_t {
    if (pResDesc == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::with_object(surfObject, true, [&](const rt::BoundObject& o) { *pResDesc = o.resource; }));
  });
}
