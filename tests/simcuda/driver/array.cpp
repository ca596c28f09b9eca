// The driver's CUDA arrays: the same arrays as the runtime's (core/arrays.h), described by a format
// and a channel count where the runtime has a channel descriptor. These exports are not in
// cuGetProcAddress's own table, so it hands out the exports themselves.
#include "core/arrays.h"
#include "driver.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

static_assert(CUDA_ARRAY3D_LAYERED == kArrayLayered && CUDA_ARRAY3D_SURFACE_LDST == kArraySurfaceLoadStore &&
              CUDA_ARRAY3D_CUBEMAP == kArrayCubemap && CUDA_ARRAY3D_TEXTURE_GATHER == kArrayTextureGather);

// The values of the runtime's cudaChannelFormatKind that the formats below map to.
constexpr int kSigned = 0, kUnsigned = 1, kFloat = 2;

// The integer and float formats, as the runtime's arrays have them; the others (normalized,
// block-compressed, NV12) are not modelled.
struct Format {
  CUarray_format format;
  int kind;
  int bits;
};
constexpr Format kFormats[] = {
    {CU_AD_FORMAT_UNSIGNED_INT8, kUnsigned, 8}, {CU_AD_FORMAT_UNSIGNED_INT16, kUnsigned, 16},
    {CU_AD_FORMAT_UNSIGNED_INT32, kUnsigned, 32}, {CU_AD_FORMAT_SIGNED_INT8, kSigned, 8},
    {CU_AD_FORMAT_SIGNED_INT16, kSigned, 16}, {CU_AD_FORMAT_SIGNED_INT32, kSigned, 32},
    {CU_AD_FORMAT_HALF, kFloat, 16}, {CU_AD_FORMAT_FLOAT, kFloat, 32},
};

CUresult create(CUarray* out, size_t width, size_t height, size_t depth, CUarray_format format, unsigned channels,
                unsigned flags) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device;
  if (CUresult e = current_device(&device); e) return e;
  const Format* f = nullptr;
  for (const Format& known : kFormats) {
    if (known.format == format) f = &known;
  }
  if (f == nullptr || (channels != 1 && channels != 2 && channels != 4)) return CUDA_ERROR_INVALID_VALUE;
  if (Status s = check_array_extent(width, height, depth, flags); s != Status::kOk) return from_status(s);
  CudaArray shape;
  shape.device = device;
  for (unsigned c = 0; c < channels; ++c) shape.bits[c] = f->bits;
  shape.format_kind = f->kind;
  shape.width = width;
  shape.height = height;
  shape.depth = depth;
  shape.flags = flags;
  void* handle = nullptr;
  if (Status s = arrays().create(shape, &handle); s != Status::kOk) return from_status(s);
  *out = static_cast<CUarray>(handle);
  return CUDA_SUCCESS;
}

CUresult describe(CUarray array, CUDA_ARRAY3D_DESCRIPTOR* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = check_initialized(); e) return e;
  std::optional<CudaArray> a = arrays().find(array);
  if (!a) return CUDA_ERROR_INVALID_HANDLE;
  out->Width = a->width;
  out->Height = a->height;
  out->Depth = a->depth;
  out->Flags = a->flags;
  out->NumChannels = 0;
  for (int bits : a->bits) out->NumChannels += bits != 0 ? 1 : 0;
  out->Format = CUarray_format(0);
  for (const Format& known : kFormats) {
    if (known.kind == a->format_kind && known.bits == a->bits[0]) out->Format = known.format;
  }
  return CUDA_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  return traced(SIMCUDA_DRIVER_CBID(cuArrayCreate_v2), [&]() -> CUresult {
    if (pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY_DESCRIPTOR& d = *pAllocateArray;
    return create(pHandle, d.Width, d.Height, 0, d.Format, d.NumChannels, 0);
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  return traced(SIMCUDA_DRIVER_CBID(cuArray3DCreate_v2), [&]() -> CUresult {
    if (pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR& d = *pAllocateArray;
    return create(pHandle, d.Width, d.Height, d.Depth, d.Format, d.NumChannels, d.Flags);
  });
}

// Waits for the array's device first, as cuMemFree does.
SIMCUDA_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  return traced(SIMCUDA_DRIVER_CBID(cuArrayDestroy), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    std::optional<CudaArray> a = arrays().find(hArray);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    timeline().synchronize_device(a->device);
    return arrays().destroy(hArray) == Status::kOk ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
  return traced(SIMCUDA_DRIVER_CBID(cuArrayGetDescriptor_v2), [&]() -> CUresult {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = describe(hArray, &d); e) return e;
    *pArrayDescriptor = CUDA_ARRAY_DESCRIPTOR{d.Width, d.Height, d.Format, d.NumChannels};
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
  return traced(SIMCUDA_DRIVER_CBID(cuArray3DGetDescriptor_v2),
                [&]() -> CUresult { return describe(hArray, pArrayDescriptor); });
}
