#include "memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "activity.h"
#include "simcuda.h"

namespace simcuda {
namespace {

// Large allocations are reserved, not committed, so a test can allocate most of a simulated 16 GiB
// device on a small machine; small ones come from malloc, which is cheaper than a mapping each.
constexpr size_t kMapThreshold = size_t(1) << 20;

size_t rounded(size_t size) {
  return (size + kAllocationGranularity - 1) / kAllocationGranularity * kAllocationGranularity;
}

bool counts_against_device(MemoryKind k) {
  return k == MemoryKind::kDevice || k == MemoryKind::kManaged || k == MemoryKind::kArray;
}

// Allocations the application made (not module storage, not its own registered memory, not an
// array's storage, whose address the application never sees), reported to a profiler as they
// happen; frees by a stream are reported by the stream's free operation.
void report(bool allocation, const Allocation& a) {
  if (!activity::active() || a.module_owned || a.kind == MemoryKind::kRegisteredHost || a.kind == MemoryKind::kArray)
    return;
  activity::Memory kind = a.kind == MemoryKind::kDevice    ? activity::Memory::kDevice
                          : a.kind == MemoryKind::kManaged ? activity::Memory::kManaged
                                                           : activity::Memory::kPinned;
  activity::report_memory(allocation, kind, a.device, a.base, a.size);
}

}  // namespace

void MemoryTracker::free_storage(const Allocation& a) {
  if (a.kind == MemoryKind::kRegisteredHost || a.mapped) return;
  if (rounded(a.size) >= kMapThreshold) {
    munmap(reinterpret_cast<void*>(a.base), rounded(a.size));
  } else {
    std::free(reinterpret_cast<void*>(a.base));
  }
}

Status MemoryTracker::allocate(MemoryKind kind, int device, size_t size, unsigned flags, void** out,
                               bool module_owned) {
  if (out == nullptr) return Status::kInvalidValue;
  *out = nullptr;
  if (size == 0) return Status::kOk;
  if (device < 0 || device >= config().device_count) return Status::kInvalidDevice;
  if (size > (size_t(1) << 48)) return Status::kOutOfMemory;
  size_t bytes = rounded(size);
  {
    Lock lock(mu_);
    if (used_.size() < size_t(config().device_count)) used_.resize(config().device_count, 0);
    if (counts_against_device(kind) && used_[device] + bytes > config().device_memory_bytes) {
      return Status::kOutOfMemory;
    }
    if (counts_against_device(kind)) used_[device] += bytes;
  }
  void* p = nullptr;
  if (bytes >= kMapThreshold) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (p == MAP_FAILED) p = nullptr;
  } else {
    p = std::aligned_alloc(kAllocationGranularity, bytes);
  }
  Lock lock(mu_);
  if (p == nullptr) {
    if (counts_against_device(kind)) used_[device] -= bytes;
    return Status::kOutOfMemory;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.kind = kind;
  a.device = device;
  a.flags = flags;
  a.module_owned = module_owned;
  allocations_[a.base] = a;
  *out = p;
  report(true, a);
  return Status::kOk;
}

template <class Pred>
Status MemoryTracker::release_where(void* ptr, Pred accept) {
  Allocation a;
  {
    Lock lock(mu_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end() || it->second.mapped || !accept(it->second)) return Status::kInvalidValue;
    a = it->second;
    allocations_.erase(it);
    if (counts_against_device(a.kind)) used_[a.device] -= rounded(a.size);
  }
  free_storage(a);
  return Status::kOk;
}

Status MemoryTracker::release(void* ptr, std::initializer_list<MemoryKind> kinds) {
  std::optional<Allocation> released;
  Status s = release_where(ptr, [kinds, &released](const Allocation& a) {
    bool ok = !a.module_owned && !a.free_pending &&
              std::find(kinds.begin(), kinds.end(), a.kind) != kinds.end();
    if (ok) released = a;
    return ok;
  });
  if (released) report(false, *released);
  return s;
}

void MemoryTracker::release_module_storage(void* ptr) {
  release_where(ptr, [](const Allocation& a) { return a.module_owned; });
}

void MemoryTracker::release_pending(void* ptr) {
  release_where(ptr, [](const Allocation& a) { return a.free_pending; });
}

Status MemoryTracker::mark_free_pending(void* ptr) {
  Lock lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end() || it->second.module_owned || it->second.free_pending || it->second.mapped ||
      it->second.kind != MemoryKind::kDevice) {
    return Status::kInvalidValue;
  }
  it->second.free_pending = true;
  return Status::kOk;
}

void MemoryTracker::cancel_free_pending(void* ptr) {
  Lock lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it != allocations_.end()) it->second.free_pending = false;
}

bool MemoryTracker::overlaps_locked(uintptr_t base, size_t size) {
  auto next = allocations_.lower_bound(base);
  if (next != allocations_.end() && next->first < base + size) return true;
  return next != allocations_.begin() && std::prev(next)->first + std::prev(next)->second.size > base;
}

Status MemoryTracker::register_host(void* ptr, size_t size, unsigned flags, int device) {
  if (ptr == nullptr || size == 0) return Status::kInvalidValue;
  uintptr_t base = reinterpret_cast<uintptr_t>(ptr);
  if (base + size < base) return Status::kInvalidValue;
  Lock lock(mu_);
  // Any overlap with a known allocation is refused, as the real runtime refuses double registration.
  if (overlaps_locked(base, size)) return Status::kAlreadyRegistered;
  Allocation a;
  a.base = base;
  a.size = size;
  a.kind = MemoryKind::kRegisteredHost;
  a.device = device;
  a.flags = flags;
  allocations_[base] = a;
  return Status::kOk;
}

Status MemoryTracker::charge_physical(int device, uint64_t bytes) {
  if (device < 0 || device >= config().device_count) return Status::kInvalidDevice;
  Lock lock(mu_);
  if (used_.size() < size_t(config().device_count)) used_.resize(config().device_count, 0);
  if (used_[device] + bytes > config().device_memory_bytes) return Status::kOutOfMemory;
  used_[device] += bytes;
  return Status::kOk;
}

void MemoryTracker::refund_physical(int device, uint64_t bytes) {
  Lock lock(mu_);
  if (device >= 0 && size_t(device) < used_.size()) used_[device] -= bytes;
}

Status MemoryTracker::add_mapping(void* ptr, size_t size, int device) {
  if (ptr == nullptr || size == 0) return Status::kInvalidValue;
  const uintptr_t base = reinterpret_cast<uintptr_t>(ptr);
  Lock lock(mu_);
  if (overlaps_locked(base, size)) return Status::kAlreadyRegistered;
  Allocation a;
  a.base = base;
  a.size = size;
  a.kind = MemoryKind::kDevice;
  a.device = device;
  a.mapped = true;
  allocations_[base] = a;
  return Status::kOk;
}

Status MemoryTracker::remove_mapping(void* ptr) {
  Lock lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end() || !it->second.mapped) return Status::kInvalidValue;
  allocations_.erase(it);
  return Status::kOk;
}

Status MemoryTracker::unregister_host(void* ptr) {
  Lock lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end() || it->second.kind != MemoryKind::kRegisteredHost) {
    return Status::kNotRegistered;
  }
  allocations_.erase(it);
  return Status::kOk;
}

std::map<uintptr_t, Allocation>::iterator MemoryTracker::find_locked(const void* ptr) {
  uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(a);
  if (it == allocations_.begin()) return allocations_.end();
  --it;
  if (a - it->first >= it->second.size) return allocations_.end();
  return it;
}

std::optional<Allocation> MemoryTracker::find(const void* ptr) {
  Lock lock(mu_);
  auto it = find_locked(ptr);
  if (it == allocations_.end()) return std::nullopt;
  return it->second;
}

uint64_t MemoryTracker::used(int device) {
  Lock lock(mu_);
  return device >= 0 && size_t(device) < used_.size() ? used_[device] : 0;
}

void MemoryTracker::release_device(int device) {
  std::vector<Allocation> freed;
  {
    Lock lock(mu_);
    for (auto it = allocations_.begin(); it != allocations_.end();) {
      const Allocation& a = it->second;
      // A mapping outlives a reset: the driver's reservation and physical memory still hold it.
      if (a.device == device && !a.module_owned && !a.mapped) {
        if (counts_against_device(a.kind)) used_[a.device] -= rounded(a.size);
        freed.push_back(a);
        it = allocations_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Allocation& a : freed) free_storage(a);
}

MemoryTracker& memory() {
  // Never destroyed: a static destructor or a thread still running at exit may free memory.
  static MemoryTracker* m = new MemoryTracker;
  return *m;
}

activity::Memory activity::memory_of(const void* p) {
  std::optional<Allocation> a = memory().find(p);
  if (!a) return Memory::kPageable;
  switch (a->kind) {
    case MemoryKind::kDevice: return Memory::kDevice;
    case MemoryKind::kManaged: return Memory::kManaged;
    case MemoryKind::kPinnedHost:
    case MemoryKind::kRegisteredHost: return Memory::kPinned;
    case MemoryKind::kArray: return Memory::kArray;
  }
  return Memory::kUnknown;
}

}  // namespace simcuda
