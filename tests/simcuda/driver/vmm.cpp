// The driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...), as
// PyTorch's expandable segments and cudaCompressibleMemory use it. Device memory being the process's
// memory, a reservation is an inaccessible range of its address space, a physical allocation a memory
// file of its size, and a mapping that file mapped over the reserved range: bytes written through one
// mapping are read through any other of the same allocation, as on the GPU. A mapped range is device
// memory to every copy, set and check. Compression is a flag an allocation keeps; exportable handles
// are not modelled. These
// exports are not in cuGetProcAddress's own table, so it hands out the exports themselves.
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <unordered_set>

#include "driver.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

// CUDA's granularity on Hopper parts, minimum and recommended alike.
constexpr size_t kGranularity = size_t(2) << 20;

struct Physical {
  int fd = -1;
  size_t size = 0;
  CUmemAllocationProp prop{};
  int mappings = 0;
  // cuMemCreate's and each cuMemRetainAllocationHandle's, less cuMemRelease's: at 0 the handle is
  // gone, and the memory with it once no mapping holds it.
  int references = 1;
};

struct Mapping {
  size_t size = 0;
  Physical* physical = nullptr;
};

struct VirtualMemory {
  std::mutex mu;
  std::map<uintptr_t, size_t> reservations;  // by base
  std::map<uintptr_t, Mapping> mappings;     // by base
  std::unordered_set<Physical*> physicals;
};

VirtualMemory& vm() {
  static VirtualMemory* v = new VirtualMemory;  // never destroyed: mappings may outlive static destruction
  return *v;
}

bool granular(size_t n) { return n != 0 && n % kGranularity == 0; }

// Whether [base, base + size) lies inside one reservation.
bool reserved_locked(uintptr_t base, size_t size) {
  auto it = vm().reservations.upper_bound(base);
  if (it == vm().reservations.begin()) return false;
  --it;
  return base >= it->first && base - it->first + size <= it->second;
}

bool overlaps_mapping_locked(uintptr_t base, size_t size) {
  auto next = vm().mappings.lower_bound(base);
  if (next != vm().mappings.end() && next->first < base + size) return true;
  return next != vm().mappings.begin() && std::prev(next)->first + std::prev(next)->second.size > base;
}

void drop_locked(Physical* p) {
  close(p->fd);
  memory().refund_physical(p->prop.location.id, p->size);
  vm().physicals.erase(p);
  delete p;
}

CUresult check_prop(const CUmemAllocationProp* prop) {
  if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int count = 0;
  if (CUresult e = cuDeviceGetCount(&count); e) return e;
  return prop->location.id >= 0 && prop->location.id < count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                              CUmemAllocationGranularity_flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemGetAllocationGranularity), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_prop(prop); e) return e;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr,
                                                    unsigned long long flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemAddressReserve), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (ptr == nullptr || !granular(size) || flags != 0 || (alignment & (alignment - 1)) != 0)
      return CUDA_ERROR_INVALID_VALUE;
    alignment = std::max(alignment, kGranularity);
    // The address asked for is a hint, which the simulation does not take; aligned by trimming.
    void* p = mmap(nullptr, size + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t base = (raw + alignment - 1) & ~(alignment - 1);
    if (base > raw) munmap(p, base - raw);
    if (base + size < raw + size + alignment) munmap(reinterpret_cast<void*>(base + size), raw + alignment - base);
    std::lock_guard<std::mutex> lock(vm().mu);
    vm().reservations[base] = size;
    *ptr = CUdeviceptr(base);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemAddressFree), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    std::lock_guard<std::mutex> lock(vm().mu);
    auto it = vm().reservations.find(uintptr_t(ptr));
    // The whole reservation, with nothing mapped in it any more.
    if (it == vm().reservations.end() || it->second != size || overlaps_mapping_locked(uintptr_t(ptr), size))
      return CUDA_ERROR_INVALID_VALUE;
    munmap(reinterpret_cast<void*>(ptr), size);
    vm().reservations.erase(it);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                            const CUmemAllocationProp* prop, unsigned long long flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemCreate), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (handle == nullptr || !granular(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_prop(prop); e) return e;
    // Shareable handles would be exported to other processes, which the simulation does not do.
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
    if (Status s = memory().charge_physical(prop->location.id, size); s != Status::kOk) return from_status(s);
    const int fd = memfd_create("simcuda-physical", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, off_t(size)) != 0) {
      if (fd >= 0) close(fd);
      memory().refund_physical(prop->location.id, size);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    // Compressible memory keeps its flag (compression changes no byte a program reads).
    auto* p = new Physical{fd, size, *prop};
    std::lock_guard<std::mutex> lock(vm().mu);
    vm().physicals.insert(p);
    *handle = CUmemGenericAllocationHandle(reinterpret_cast<uintptr_t>(p));
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemRelease), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    auto* p = reinterpret_cast<Physical*>(uintptr_t(handle));
    std::lock_guard<std::mutex> lock(vm().mu);
    if (vm().physicals.count(p) == 0 || p->references == 0) return CUDA_ERROR_INVALID_VALUE;
    if (--p->references == 0 && p->mappings == 0) drop_locked(p);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemMap), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    auto* p = reinterpret_cast<Physical*>(uintptr_t(handle));
    const uintptr_t base = uintptr_t(ptr);
    std::lock_guard<std::mutex> lock(vm().mu);
    if (vm().physicals.count(p) == 0 || p->references == 0 || flags != 0 || !granular(size) ||
        offset % kGranularity != 0 || offset > p->size || size > p->size - offset || base % kGranularity != 0 ||
        !reserved_locked(base, size) || overlaps_mapping_locked(base, size))
      return CUDA_ERROR_INVALID_VALUE;
    if (mmap(reinterpret_cast<void*>(base), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd,
             off_t(offset)) == MAP_FAILED)
      return CUDA_ERROR_OUT_OF_MEMORY;
    if (memory().add_mapping(reinterpret_cast<void*>(base), size, p->prop.location.id) != Status::kOk) {
      mmap(reinterpret_cast<void*>(base), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
           -1, 0);
      return CUDA_ERROR_INVALID_VALUE;
    }
    vm().mappings[base] = Mapping{size, p};
    ++p->mappings;
    return CUDA_SUCCESS;
  });
}

// Whole mappings, one or several that tile the range end to end (a mapping cannot be split); the
// range becomes reserved address space again.
SIMCUDA_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemUnmap), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    std::lock_guard<std::mutex> lock(vm().mu);
    const uintptr_t end = uintptr_t(ptr) + size;
    uintptr_t at = uintptr_t(ptr);
    while (at < end) {
      auto it = vm().mappings.find(at);
      if (it == vm().mappings.end() || it->second.size > end - at) return CUDA_ERROR_INVALID_VALUE;
      at += it->second.size;
    }
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    // The device finishes what it was doing with the memory first, as the real unmap synchronises.
    int count = 0;
    cuDeviceGetCount(&count);
    for (int d = 0; d < count; ++d) timeline().synchronize_device(d);
    for (at = uintptr_t(ptr); at < end;) {
      auto it = vm().mappings.find(at);
      const size_t length = it->second.size;
      memory().remove_mapping(reinterpret_cast<void*>(at));
      mmap(reinterpret_cast<void*>(at), length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
           -1, 0);
      Physical* p = it->second.physical;
      vm().mappings.erase(it);
      if (--p->mappings == 0 && p->references == 0) drop_locked(p);
      at += length;
    }
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                               size_t count) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemSetAccess), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    int devices = 0;
    cuDeviceGetCount(&devices);
    for (size_t i = 0; i < count; ++i) {
      if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
          desc[i].location.id >= devices || desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return CUDA_ERROR_INVALID_VALUE;
    }
    // Every byte of the range mapped, by one or more mappings end to end.
    std::lock_guard<std::mutex> lock(vm().mu);
    for (uintptr_t at = uintptr_t(ptr), end = uintptr_t(ptr) + size; at < end;) {
      auto it = vm().mappings.find(at);
      if (it == vm().mappings.end()) return CUDA_ERROR_INVALID_VALUE;
      at += it->second.size;
    }
    return size != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                               CUdeviceptr ptr) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemGetAccess), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::optional<Allocation> a = memory().find(reinterpret_cast<void*>(ptr));
    if (!a || !a->mapped) return CUDA_ERROR_INVALID_VALUE;
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                       CUmemGenericAllocationHandle handle) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemGetAllocationPropertiesFromHandle), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    auto* p = reinterpret_cast<Physical*>(uintptr_t(handle));
    std::lock_guard<std::mutex> lock(vm().mu);
    if (prop == nullptr || vm().physicals.count(p) == 0 || p->references == 0) return CUDA_ERROR_INVALID_VALUE;
    *prop = p->prop;
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemRetainAllocationHandle), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const uintptr_t at = reinterpret_cast<uintptr_t>(addr);
    std::lock_guard<std::mutex> lock(vm().mu);
    auto it = vm().mappings.upper_bound(at);
    if (it == vm().mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (at - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
    // Each retained handle is released once more.
    Physical* p = it->second.physical;
    ++p->references;
    *handle = CUmemGenericAllocationHandle(reinterpret_cast<uintptr_t>(p));
    return CUDA_SUCCESS;
  });
}
