// The driver's function attributes and occupancy calculator, over the arithmetic the runtime's share
// (core/device.h), so both APIs answer alike for the same kernel. These exports are not in
// cuGetProcAddress's own table, so it hands out the exports themselves.
#include <algorithm>

#include "core/device.h"
#include "driver.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

// What every kernel here reports (cudaFuncGetAttributes gives the same).
constexpr int kMaxDynamicSharedBytes = 48 << 10;

CUresult function_device(CUfunction f, int* device) {
  if (CUresult e = check_initialized(); e) return e;
  if (f == nullptr || kernels().find(f) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return current_device(device);
}

CUresult active_blocks_of(int* blocks, CUfunction f, int block_size, size_t dynamic_smem, unsigned flags) {
  if (blocks == nullptr || (flags & ~unsigned(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  int device;
  if (CUresult e = function_device(f, &device); e) return e;
  *blocks = active_blocks(device, block_size, dynamic_smem, kKernelRegisters, 0);
  return CUDA_SUCCESS;
}

// As cuda_runtime.h's cudaOccupancyMaxPotentialBlockSizeVariableSMem computes it: of the block sizes
// a warp apart up to the limit, the one that keeps the most threads resident, the largest on a tie;
// the grid that fills every multiprocessor with it.
CUresult potential_block_size(int* min_grid, int* block_size, CUfunction f, CUoccupancyB2DSize smem_of_block,
                              size_t dynamic_smem, int limit, unsigned flags) {
  if (min_grid == nullptr || block_size == nullptr ||
      (flags & ~unsigned(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  int device;
  if (CUresult e = function_device(f, &device); e) return e;
  const int warp = device_attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, device);
  const int most = device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
  limit = limit <= 0 ? most : std::min(limit, most);
  int best_size = 0, best_blocks = 0;
  for (int size = (limit + warp - 1) / warp * warp; size > 0; size -= warp) {
    const int threads = std::min(size, limit);
    const size_t smem = smem_of_block != nullptr ? smem_of_block(threads) : dynamic_smem;
    const int blocks = active_blocks(device, threads, smem, kKernelRegisters, 0);
    if (blocks * threads > best_blocks * best_size) {
      best_size = threads;
      best_blocks = blocks;
    }
    if (best_blocks * best_size == device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device)) break;
  }
  *block_size = best_size;
  *min_grid = best_blocks * device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  return CUDA_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction f) {
  return traced(SIMCUDA_DRIVER_CBID(cuFuncGetAttribute), [&]() -> CUresult {
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int device;
    if (CUresult e = function_device(f, &device); e) return e;
    switch (attribute) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
        break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = kKernelRegisters; break;
      case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = kernel_architecture(device); break;
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = kMaxDynamicSharedBytes; break;
      case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = -1; break;
      default:
        if (int(attribute) < 0 || attribute >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
        *value = 0;  // no static shared, constant or local memory, and the other features unset
    }
    return CUDA_SUCCESS;
  });
}

// As cudaFuncSetAttribute: the settable attributes are taken and change nothing the simulation
// models (kernels run for their modelled time whatever their shared memory); more dynamic shared
// memory than a block may opt in to is refused, as the real driver refuses it.
SIMCUDA_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute attribute, int value) {
  return traced(SIMCUDA_DRIVER_CBID(cuFuncSetAttribute), [&]() -> CUresult {
    int device;
    if (CUresult e = function_device(f, &device); e) return e;
    switch (attribute) {
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        return value < 0 || value > device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device)
                   ? CUDA_ERROR_INVALID_VALUE
                   : CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return value < -1 || value > 100 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return value < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;  // read-only or unknown
    }
  });
}

// A cache preference changes nothing the simulation models; an unknown one is an invalid value.
SIMCUDA_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction f, CUfunc_cache config) {
  return traced(SIMCUDA_DRIVER_CBID(cuFuncSetCacheConfig), [&]() -> CUresult {
    int device;
    if (CUresult e = function_device(f, &device); e) return e;
    return unsigned(config) > CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f,
                                                                            int block_size, size_t dynamic_smem) {
  return traced(SIMCUDA_DRIVER_CBID(cuOccupancyMaxActiveBlocksPerMultiprocessor),
                [&] { return active_blocks_of(blocks, f, block_size, dynamic_smem, 0); });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f,
                                                                                     int block_size,
                                                                                     size_t dynamic_smem,
                                                                                     unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
                [&] { return active_blocks_of(blocks, f, block_size, dynamic_smem, flags); });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block_size, CUfunction f,
                                                                 CUoccupancyB2DSize smem_of_block,
                                                                 size_t dynamic_smem, int limit) {
  return traced(SIMCUDA_DRIVER_CBID(cuOccupancyMaxPotentialBlockSize), [&] {
    return potential_block_size(min_grid, block_size, f, smem_of_block, dynamic_smem, limit, 0);
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int* min_grid, int* block_size,
                                                                          CUfunction f,
                                                                          CUoccupancyB2DSize smem_of_block,
                                                                          size_t dynamic_smem, int limit,
                                                                          unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuOccupancyMaxPotentialBlockSizeWithFlags), [&] {
    return potential_block_size(min_grid, block_size, f, smem_of_block, dynamic_smem, limit, flags);
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamic_smem, CUfunction f,
                                                                        int blocks, int block_size) {
  return traced(SIMCUDA_DRIVER_CBID(cuOccupancyAvailableDynamicSMemPerBlock), [&]() -> CUresult {
    if (dynamic_smem == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int device;
    if (CUresult e = function_device(f, &device); e) return e;
    if (blocks <= 0 || active_blocks(device, block_size, 0, kKernelRegisters, 0) < blocks) {
      *dynamic_smem = 0;
      return CUDA_SUCCESS;
    }
    const size_t share = size_t(device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device)) /
                         size_t(blocks);
    const size_t reserved = size_t(device_attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, device));
    *dynamic_smem = std::min(share > reserved ? share - reserved : 0,
                             size_t(device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device)));
    return CUDA_SUCCESS;
  });
}
