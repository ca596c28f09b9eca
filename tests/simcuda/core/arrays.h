// CUDA arrays, shared by the runtime and the driver as the real stack shares them (a cudaArray_t is a
// CUarray). An array is dense host memory: its elements one after another, rows of `width` elements,
// slices (3D depth, layers, cubemap faces) of `rows()` rows, with no padding, since nothing but the
// simulator's own copies ever reads it (kernels never execute, so no texture fetch needs a layout).
// Its storage is an allocation of MemoryKind::kArray, so it counts against the device's memory and
// a copy touching it is reported as an array copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "config.h"
#include "sync.h"

namespace simcuda {

// The flags of cudaMalloc3DArray, whose values cuArray3DCreate's CUDA_ARRAY3D_* flags repeat.
inline constexpr unsigned kArrayLayered = 0x01;
inline constexpr unsigned kArraySurfaceLoadStore = 0x02;
inline constexpr unsigned kArrayCubemap = 0x04;
inline constexpr unsigned kArrayTextureGather = 0x08;

struct CudaArray {
  void* data = nullptr;
  int device = 0;
  // The channels' bits (x, y, z, w) and the runtime's cudaChannelFormatKind; the driver's format
  // and channel count are derived from them.
  int bits[4] = {0, 0, 0, 0};
  int format_kind = 0;
  // The extent as allocated: 0 for a dimension the array does not have (a 1D array's height); with
  // kArrayLayered, depth is the number of layers; a cubemap's depth is 6 (times its layers).
  size_t width = 0;
  size_t height = 0;
  size_t depth = 0;
  unsigned flags = 0;

  size_t element_size() const { return size_t(bits[0] + bits[1] + bits[2] + bits[3]) / 8; }
  size_t row_bytes() const { return width * element_size(); }
  size_t rows() const { return height == 0 ? 1 : height; }
  size_t slices() const { return depth == 0 ? 1 : depth; }
  size_t bytes() const { return row_bytes() * rows() * slices(); }
};

// The extents cudaMalloc3DArray and cuArray3DCreate document: 1D {w, 0, 0}, 2D {w, h, 0}, 3D {w, h,
// d}; layered 1D {w, 0, layers} and 2D {w, h, layers}; a cubemap {w, w, 6}, six faces per layer when
// layered. Texture gather is for 2D arrays only. kInvalidValue otherwise, or for an unknown flag.
SIMCUDA_API Status check_array_extent(size_t width, size_t height, size_t depth, unsigned flags);

class SIMCUDA_API ArrayRegistry {
 public:
  // Allocates the storage of `shape` (its data ignored) on its device; *out is the new handle.
  Status create(const CudaArray& shape, void** out);
  // Frees the array; kInvalidValue for an unknown handle. The caller waits for the device first.
  Status destroy(const void* handle);
  std::optional<CudaArray> find(const void* handle);
  // A device reset destroys the device's arrays.
  void release_device(int device);

  void prepare_fork() { mu_.lock(); }
  void parent_after_fork() { mu_.unlock(); }
  void child_after_fork() { mu_.reinit_in_child(); }

 private:
  Mutex mu_;
  std::unordered_map<uint64_t, CudaArray> arrays_;  // by id
  uint64_t next_id_ = 0;
};

SIMCUDA_API ArrayRegistry& arrays();

}  // namespace simcuda
