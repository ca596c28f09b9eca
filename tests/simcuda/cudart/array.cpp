// CUDA arrays (core/arrays.h): allocation, what they report, and the copies to, from and between them,
// which are copies of the array's dense storage through the runtime's one copy path (memory.cpp), so
// they keep its stream order, timing and host synchronisation, and a profiler sees array copies.
#include "core/arrays.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

static_assert(cudaArrayLayered == kArrayLayered && cudaArraySurfaceLoadStore == kArraySurfaceLoadStore &&
              cudaArrayCubemap == kArrayCubemap && cudaArrayTextureGather == kArrayTextureGather);

// As the real runtime takes them: one, two or four channels of the same width, 8, 16 or 32 bits (16
// or 32 for floats). The other kinds (normalized, block-compressed, NV12) are formats the simulated
// arrays do not model.
cudaError_t check_channels(const cudaChannelFormatDesc& d) {
  if (d.f != cudaChannelFormatKindSigned && d.f != cudaChannelFormatKindUnsigned &&
      d.f != cudaChannelFormatKindFloat) {
    return d.f == cudaChannelFormatKindNone ? cudaErrorInvalidChannelDescriptor : cudaErrorNotSupported;
  }
  const bool width_ok = d.f == cudaChannelFormatKindFloat ? d.x == 16 || d.x == 32 : d.x == 8 || d.x == 16 || d.x == 32;
  const bool one = d.y == 0 && d.z == 0 && d.w == 0;
  const bool two = d.y == d.x && d.z == 0 && d.w == 0;
  const bool four = d.y == d.x && d.z == d.x && d.w == d.x;
  return width_ok && (one || two || four) ? cudaSuccess : cudaErrorInvalidChannelDescriptor;
}

// Sparse and deferred-mapping arrays are not modelled; the rest as core/arrays.h checks it.
cudaError_t check_extent(cudaExtent e, unsigned flags) {
  if ((flags & (cudaArraySparse | cudaArrayDeferredMapping)) != 0) return cudaErrorNotSupported;
  return check_array_extent(e.width, e.height, e.depth, flags) == Status::kOk ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t malloc_array(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent, unsigned flags) {
  if (array == nullptr || desc == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = check_channels(*desc); e) return e;
  if (cudaError_t e = check_extent(extent, flags); e) return e;
  CudaArray shape;
  if (cudaError_t e = current_device(&shape.device); e) return e;
  shape.bits[0] = desc->x, shape.bits[1] = desc->y, shape.bits[2] = desc->z, shape.bits[3] = desc->w;
  shape.format_kind = int(desc->f);
  shape.width = extent.width;
  shape.height = extent.height;
  shape.depth = extent.depth;
  shape.flags = flags;
  void* handle = nullptr;
  if (Status s = arrays().create(shape, &handle); s != Status::kOk) return from_status(s);
  *array = static_cast<cudaArray_t>(handle);
  return cudaSuccess;
}

// Freeing waits for the array's device first, as cudaFree does, so that no queued copy still
// touches its storage.
cudaError_t free_array(cudaArray_t array) {
  if (array == nullptr) return cudaSuccess;
  std::optional<CudaArray> a = arrays().find(array);
  if (!a) return cudaErrorInvalidValue;
  timeline().synchronize_device(a->device);
  return from_status(arrays().destroy(array));
}

cudaChannelFormatDesc channels_of(const CudaArray& a) {
  return cudaChannelFormatDesc{a.bits[0], a.bits[1], a.bits[2], a.bits[3], cudaChannelFormatKind(a.format_kind)};
}

// The first byte of a box of an array: from column x (in bytes), row y, slice z, `width` bytes by
// `height` rows by `depth` slices, all of which must lie inside the array.
cudaError_t array_box(cudaArray_const_t handle, size_t x, size_t y, size_t z, size_t width, size_t height,
                      size_t depth, char** start, CudaArray* out = nullptr) {
  std::optional<CudaArray> a = arrays().find(handle);
  if (!a) return cudaErrorInvalidValue;
  if (x > a->row_bytes() || width > a->row_bytes() - x || y > a->rows() || height > a->rows() - y ||
      z > a->slices() || depth > a->slices() - z) {
    return cudaErrorInvalidValue;
  }
  *start = static_cast<char*>(a->data) + (z * a->rows() + y) * a->row_bytes() + x;
  if (out != nullptr) *out = *a;
  return cudaSuccess;
}

// The deprecated copies of `count` bytes that run on from (x, y) through the rows after it, within
// the array's first slice.
cudaError_t array_run(cudaArray_const_t handle, size_t x, size_t y, size_t count, char** start) {
  CudaArray a;
  if (cudaError_t e = array_box(handle, x, y, 0, 0, 0, 0, start, &a); e) return e;
  const size_t offset = y * a.row_bytes() + x;
  return count <= a.row_bytes() * a.rows() - offset ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t copy_to_array(cudaArray_t dst, size_t x, size_t y, const void* src, size_t spitch, size_t width,
                          size_t height, cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour,
                          bool synchronous) {
  char* to;
  CudaArray a;
  if (cudaError_t e = array_box(dst, x, y, 0, width, height, 1, &to, &a); e) return e;
  return copy(to, src, Rect{width, height, a.row_bytes(), spitch}, kind, stream, flavour, synchronous);
}

cudaError_t copy_from_array(void* dst, size_t dpitch, cudaArray_const_t src, size_t x, size_t y, size_t width,
                            size_t height, cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour,
                            bool synchronous) {
  char* from;
  CudaArray a;
  if (cudaError_t e = array_box(src, x, y, 0, width, height, 1, &from, &a); e) return e;
  return copy(dst, from, Rect{width, height, dpitch, a.row_bytes()}, kind, stream, flavour, synchronous);
}

cudaError_t copy_array_to_array(cudaArray_t dst, size_t dst_x, size_t dst_y, cudaArray_const_t src, size_t src_x,
                                size_t src_y, size_t width, size_t height, cudaMemcpyKind kind,
                                DefaultStream flavour) {
  char* to;
  char* from;
  CudaArray d, s;
  if (cudaError_t e = array_box(dst, dst_x, dst_y, 0, width, height, 1, &to, &d); e) return e;
  if (cudaError_t e = array_box(src, src_x, src_y, 0, width, height, 1, &from, &s); e) return e;
  return copy(to, from, Rect{width, height, d.row_bytes(), s.row_bytes()}, kind, nullptr, flavour, true);
}

cudaError_t copy_to_array_run(cudaArray_t dst, size_t x, size_t y, const void* src, size_t count,
                              cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  char* to;
  if (cudaError_t e = array_run(dst, x, y, count, &to); e) return e;
  return copy(to, src, Rect{count, 1, count, count}, kind, stream, flavour, synchronous);
}

cudaError_t copy_from_array_run(void* dst, cudaArray_const_t src, size_t x, size_t y, size_t count,
                                cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  char* from;
  if (cudaError_t e = array_run(src, x, y, count, &from); e) return e;
  return copy(dst, from, Rect{count, 1, count, count}, kind, stream, flavour, synchronous);
}

cudaError_t copy_array_run(cudaArray_t dst, size_t dst_x, size_t dst_y, cudaArray_const_t src, size_t src_x,
                           size_t src_y, size_t count, cudaMemcpyKind kind, DefaultStream flavour) {
  char* to;
  char* from;
  if (cudaError_t e = array_run(dst, dst_x, dst_y, count, &to); e) return e;
  if (cudaError_t e = array_run(src, src_x, src_y, count, &from); e) return e;
  return copy(to, from, Rect{count, 1, count, count}, kind, nullptr, flavour, true);
}

// One side of a 3D copy as a pitched pointer: an array's storage, or the caller's pointer as given.
// Slices of a pointer are ysize rows apart, so a copy of several slices must fit its rows in them.
cudaError_t linear_side(cudaArray_const_t array, cudaPos* pos, cudaPitchedPtr* ptr, const cudaExtent& bytes,
                        size_t element_size) {
  if (array != nullptr) {
    std::optional<CudaArray> a = arrays().find(array);
    if (!a) return cudaErrorInvalidValue;
    *ptr = cudaPitchedPtr{a->data, a->row_bytes(), a->width, a->rows()};
    pos->x *= element_size;
    if (pos->y > a->rows() || bytes.height > a->rows() - pos->y || pos->z > a->slices() ||
        bytes.depth > a->slices() - pos->z) {
      return cudaErrorInvalidValue;
    }
  } else if (bytes.depth > 1 && (pos->y > ptr->ysize || bytes.height > ptr->ysize - pos->y)) {
    return cudaErrorInvalidValue;
  }
  return pos->x <= ptr->pitch && bytes.width <= ptr->pitch - pos->x ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t copy_3d(const cudaMemcpy3DParms* p, cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  if (p == nullptr) return cudaErrorInvalidValue;
  cudaMemcpy3DParms l;
  if (cudaError_t e = linear_copy_params(*p, &l); e) return e;
  auto start = [](const cudaPitchedPtr& ptr, const cudaPos& pos) {
    return static_cast<char*>(ptr.ptr) + (pos.z * ptr.ysize + pos.y) * ptr.pitch + pos.x;
  };
  const Rect r{l.extent.width, l.extent.height, l.dstPtr.pitch, l.srcPtr.pitch, l.extent.depth,
               l.dstPtr.pitch * l.dstPtr.ysize, l.srcPtr.pitch * l.srcPtr.ysize};
  return copy(start(l.dstPtr, l.dstPos), start(l.srcPtr, l.srcPos), r, l.kind, stream, flavour, synchronous);
}

}  // namespace

// Positions and the width are in an array's elements when an array takes part (the element of a
// pointer is a byte), as cudaMemcpy3D documents; both arrays of an array-to-array copy must have
// elements of one size.
cudaError_t linear_copy_params(const cudaMemcpy3DParms& p, cudaMemcpy3DParms* out) {
  if ((p.srcArray == nullptr) == (p.srcPtr.ptr == nullptr) || (p.dstArray == nullptr) == (p.dstPtr.ptr == nullptr)) {
    return cudaErrorInvalidValue;
  }
  size_t element_size = 1;
  for (cudaArray_const_t side : {p.srcArray, p.dstArray}) {
    if (side == nullptr) continue;
    std::optional<CudaArray> a = arrays().find(side);
    if (!a || (element_size != 1 && a->element_size() != element_size)) return cudaErrorInvalidValue;
    element_size = a->element_size();
  }
  *out = p;
  out->srcArray = nullptr;
  out->dstArray = nullptr;
  out->extent.width = p.extent.width * element_size;
  if (cudaError_t e = linear_side(p.srcArray, &out->srcPos, &out->srcPtr, out->extent, element_size); e) return e;
  return linear_side(p.dstArray, &out->dstPos, &out->dstPtr, out->extent, element_size);
}

}  // namespace simcuda::rt

using rt::kLegacy;
using rt::kPerThread;

// ---- allocation ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc,
                                                     size_t width, size_t height, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocArray_v3020), [&]() -> cudaError_t {
    // The 2D flags only: a layered or cubemap array comes from cudaMalloc3DArray.
    if ((flags & (cudaArrayLayered | cudaArrayCubemap)) != 0) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::malloc_array(array, desc, cudaExtent{width, height, 0}, flags));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc,
                                                       cudaExtent extent, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMalloc3DArray_v3020), [&]() -> cudaError_t {
    return rt::record(rt::malloc_array(array, desc, extent, flags));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeArray(cudaArray_t array) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFreeArray_v3020), [&]() -> cudaError_t {
    return rt::record(rt::free_array(array));
  });
}

// What cudaCreateChannelDesc<T>() and the programs that spell a format out call. It returns no status,
// so a profiler is not told of it (simcuda.h: only the exports returning a cudaError_t are).
SIMCUDA_EXPORT cudaChannelFormatDesc CUDARTAPI cudaCreateChannelDesc(int x, int y, int z, int w,
                                                                     cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

// Any of the outputs may be null, as documented.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent,
                                                      unsigned int* flags, cudaArray_t array) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaArrayGetInfo_v4010), [&]() -> cudaError_t {
    std::optional<CudaArray> a = arrays().find(array);
    if (!a) return rt::record(cudaErrorInvalidValue);
    if (desc != nullptr) *desc = rt::channels_of(*a);
    if (extent != nullptr) *extent = cudaExtent{a->width, a->height, a->depth};
    if (flags != nullptr) *flags = a->flags;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetChannelDesc(cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetChannelDesc_v3020), [&]() -> cudaError_t {
    std::optional<CudaArray> a = arrays().find(array);
    if (desc == nullptr || !a) return rt::record(cudaErrorInvalidValue);
    *desc = rt::channels_of(*a);
    return cudaSuccess;
  });
}

// ---- 2D copies: offsets and widths in bytes, heights in rows ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                         const void* src, size_t spitch, size_t width,
                                                         size_t height, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DToArray_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                              const void* src, size_t spitch, size_t width,
                                                              size_t height, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DToArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                              const void* src, size_t spitch, size_t width,
                                                              size_t height, cudaMemcpyKind kind,
                                                              cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DToArrayAsync_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset,
                                                                   size_t hOffset, const void* src, size_t spitch,
                                                                   size_t width, size_t height,
                                                                   cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DToArrayAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src,
                                                           size_t wOffset, size_t hOffset, size_t width,
                                                           size_t height, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DFromArray_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src,
                                                                size_t wOffset, size_t hOffset, size_t width,
                                                                size_t height, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DFromArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src,
                                                                size_t wOffset, size_t hOffset, size_t width,
                                                                size_t height, cudaMemcpyKind kind,
                                                                cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DFromArrayAsync_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch,
                                                                     cudaArray_const_t src, size_t wOffset,
                                                                     size_t hOffset, size_t width, size_t height,
                                                                     cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DFromArrayAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst,
                                                              size_t hOffsetDst, cudaArray_const_t src,
                                                              size_t wOffsetSrc, size_t hOffsetSrc, size_t width,
                                                              size_t height, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DArrayToArray_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width,
                                              height, kind, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst,
                                                                   size_t hOffsetDst, cudaArray_const_t src,
                                                                   size_t wOffsetSrc, size_t hOffsetSrc,
                                                                   size_t width, size_t height,
                                                                   cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DArrayToArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width,
                                              height, kind, kPerThread));
  });
}

// ---- the deprecated copies of a run of bytes through an array's rows ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                       const void* src, size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToArray_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_to_array_run(dst, wOffset, hOffset, src, count, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                            const void* src, size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_to_array_run(dst, wOffset, hOffset, src, count, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                            const void* src, size_t count, cudaMemcpyKind kind,
                                                            cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToArrayAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_to_array_run(dst, wOffset, hOffset, src, count, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                                 const void* src, size_t count,
                                                                 cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToArrayAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_to_array_run(dst, wOffset, hOffset, src, count, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset,
                                                         size_t hOffset, size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromArray_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_from_array_run(dst, src, wOffset, hOffset, count, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t wOffset,
                                                              size_t hOffset, size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_from_array_run(dst, src, wOffset, hOffset, count, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t wOffset,
                                                              size_t hOffset, size_t count, cudaMemcpyKind kind,
                                                              cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromArrayAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_from_array_run(dst, src, wOffset, hOffset, count, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src,
                                                                   size_t wOffset, size_t hOffset, size_t count,
                                                                   cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromArrayAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_from_array_run(dst, src, wOffset, hOffset, count, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                                            cudaArray_const_t src, size_t wOffsetSrc,
                                                            size_t hOffsetSrc, size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyArrayToArray_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_array_run(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst,
                                                                 size_t hOffsetDst, cudaArray_const_t src,
                                                                 size_t wOffsetSrc, size_t hOffsetSrc,
                                                                 size_t count, cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyArrayToArray_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_array_run(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, kPerThread));
  });
}

// ---- 3D copies, between pitched pointers and arrays in any combination ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy3D(const cudaMemcpy3DParms* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy3D_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_3d(p, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy3D_ptds(const cudaMemcpy3DParms* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy3D_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_3d(p, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy3DAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_3d(p, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy3DAsync_ptsz(const cudaMemcpy3DParms* p, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy3DAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_3d(p, stream, kPerThread, false));
  });
}
