// Every allocation the simulated device hands out or knows about. Device memory is host memory, so
// a device pointer can be dereferenced by the simulator itself; what makes it "device" memory is that
// it is in this table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <vector>

#include "config.h"
#include "sync.h"

namespace simcuda {

enum class MemoryKind : uint8_t {
  kDevice,          // cudaMalloc, cudaMallocAsync, module variables
  kManaged,         // cudaMallocManaged, __managed__ variables
  kPinnedHost,      // cudaMallocHost, cudaHostAlloc
  kRegisteredHost,  // cudaHostRegister: the caller's memory, never freed here
  kArray,           // the storage of a CUDA array (arrays.h), reached only through its handle
};

// Host memory the device reaches directly (with unified addressing, at the same address); host
// memory not in the table is pageable.
inline bool is_pinned_host(MemoryKind k) {
  return k == MemoryKind::kPinnedHost || k == MemoryKind::kRegisteredHost;
}

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
  unsigned flags = 0;
  // Storage of a module variable: not the application's to free, and it survives a device reset.
  bool module_owned = false;
  // Handed to cudaFreeAsync: freed when the stream reaches the free, not usable again before.
  bool free_pending = false;
  // Device memory the driver's virtual memory management mapped (cuMemMap): its storage belongs to
  // the mapping, which the driver unmaps, not to the table.
  bool mapped = false;

  bool contains(const void* p, size_t n) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a >= base && a - base <= size && n <= size - (a - base);
  }
};

class SIMCUDA_API MemoryTracker {
 public:
  // Allocates `size` bytes of `kind` on `device` (a zero size gives *out == nullptr and kOk).
  Status allocate(MemoryKind kind, int device, size_t size, unsigned flags, void** out,
                  bool module_owned = false);
  // Frees an allocation by its base pointer if its kind is one of `kinds`; kInvalidValue otherwise.
  Status release(void* ptr, std::initializer_list<MemoryKind> kinds);
  // Frees the storage of a module variable when its module is unregistered.
  void release_module_storage(void* ptr);
  // Marks an allocation as being freed by a stream; a second free before it happens is kInvalidValue.
  Status mark_free_pending(void* ptr);
  void cancel_free_pending(void* ptr);
  // The stream has reached the free.
  void release_pending(void* ptr);
  Status register_host(void* ptr, size_t size, unsigned flags, int device);
  Status unregister_host(void* ptr);
  // Physical memory of the driver's virtual memory management (cuMemCreate, cuMemRelease): counted
  // as the device's memory in use; kOutOfMemory when the device has not that much left.
  Status charge_physical(int device, uint64_t bytes);
  void refund_physical(int device, uint64_t bytes);
  // A range of device memory mapped at `ptr` (cuMemMap), and its unmapping (cuMemUnmap): device
  // memory to every check from then on; kAlreadyRegistered if it overlaps a known allocation.
  Status add_mapping(void* ptr, size_t size, int device);
  Status remove_mapping(void* ptr);
  // The allocation containing ptr, if any.
  std::optional<Allocation> find(const void* ptr);
  // Bytes of device and managed memory in use on a device, each allocation rounded to the granularity.
  uint64_t used(int device);
  // Drops what a device reset destroys: the device's allocations and host registrations, except
  // module storage.
  void release_device(int device);

  void prepare_fork() { mu_.lock(); }
  void parent_after_fork() { mu_.unlock(); }
  void child_after_fork() { mu_.reinit_in_child(); }

 private:
  static void free_storage(const Allocation& a);
  template <class Pred>
  Status release_where(void* ptr, Pred accept);
  std::map<uintptr_t, Allocation>::iterator find_locked(const void* ptr);
  bool overlaps_locked(uintptr_t base, size_t size);

  Mutex mu_;
  std::map<uintptr_t, Allocation> allocations_;  // by base address
  std::vector<uint64_t> used_;                   // by device
};

SIMCUDA_API MemoryTracker& memory();

}  // namespace simcuda
