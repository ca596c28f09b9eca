// Allocation, copies, memsets and module symbols.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <optional>
#include <vector>

#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

// A copy's two sides once its direction is known.
struct CopyPlan {
  bool src_pageable = false;
  bool dst_pageable = false;
  bool device_to_device = false;
  bool touches_array = false;
};

bool valid_kind(cudaMemcpyKind kind) {
  return kind == cudaMemcpyHostToHost || kind == cudaMemcpyHostToDevice ||
         kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
         kind == cudaMemcpyDefault;
}

// Checks one side of a copy that touches `extent` bytes from ptr. A device side must lie inside one
// allocation; a host side is pageable unless it is pinned, registered or managed memory.
cudaError_t check_side(const void* ptr, size_t extent, bool device_side, bool* pageable, bool* array) {
  std::optional<Allocation> a = memory().find(ptr);
  if (device_side) {
    if (!a || !a->contains(ptr, extent)) return cudaErrorInvalidValue;
    *pageable = false;
  } else {
    *pageable = !a.has_value();
  }
  *array = *array || (a && a->kind == MemoryKind::kArray);
  return cudaSuccess;
}

// Works out the direction of a copy (cudaMemcpyDefault from the pointers, as unified addressing
// does) and validates both sides.
cudaError_t plan_copy(void* dst, const void* src, size_t dst_extent, size_t src_extent,
                      cudaMemcpyKind kind, CopyPlan* plan) {
  if (!valid_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  bool dst_device, src_device;
  if (kind == cudaMemcpyDefault) {
    std::optional<Allocation> d = memory().find(dst);
    std::optional<Allocation> s = memory().find(src);
    dst_device = d && !is_pinned_host(d->kind);
    src_device = s && !is_pinned_host(s->kind);
  } else {
    dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  }
  if (cudaError_t e = check_side(dst, dst_extent, dst_device, &plan->dst_pageable, &plan->touches_array); e) return e;
  if (cudaError_t e = check_side(src, src_extent, src_device, &plan->src_pageable, &plan->touches_array); e) return e;
  plan->device_to_device = dst_device && src_device;
  return cudaSuccess;
}

void copy_rect(void* dst, const void* src, const Rect& r) {
  if (r.dst_pitch == r.width && r.src_pitch == r.width &&
      (r.depth == 1 || (r.dst_slice_pitch == r.width * r.height && r.src_slice_pitch == r.width * r.height))) {
    // Overlapping device-to-device copies are undefined in CUDA; here they at least stay memory safe.
    std::memmove(dst, src, r.bytes());
    return;
  }
  for (size_t slice = 0; slice < r.depth; ++slice) {
    char* to = static_cast<char*>(dst) + slice * r.dst_slice_pitch;
    const char* from = static_cast<const char*>(src) + slice * r.src_slice_pitch;
    for (size_t row = 0; row < r.height; ++row) std::memcpy(to + row * r.dst_pitch, from + row * r.src_pitch, r.width);
  }
}

CUdeviceptr dptr(const void* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

// A one-dimensional copy already validated here, made by the driver function for its direction;
// the driver applies the same waiting and staging rules.
cudaError_t driver_copy(const DriverApi& d, void* dst, const void* src, size_t n,
                        cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour,
                        bool synchronous) {
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  if (cudaError_t e = bind_context(d, device); e) return e;
  const int f = flavour_index(flavour);
  CUresult r;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      r = synchronous ? d.memcpy_htod[f](dptr(dst), src, n)
                      : d.memcpy_htod_async[f](dptr(dst), src, n, stream);
      break;
    case cudaMemcpyDeviceToHost:
      r = synchronous ? d.memcpy_dtoh[f](dst, dptr(src), n)
                      : d.memcpy_dtoh_async[f](dst, dptr(src), n, stream);
      break;
    case cudaMemcpyDeviceToDevice:
      r = synchronous ? d.memcpy_dtod[f](dptr(dst), dptr(src), n)
                      : d.memcpy_dtod_async[f](dptr(dst), dptr(src), n, stream);
      break;
    default:  // host to host, or as unified addressing says
      r = synchronous ? d.memcpy[f](dptr(dst), dptr(src), n)
                      : d.memcpy_async[f](dptr(dst), dptr(src), n, stream);
      break;
  }
  return from_driver(r);
}

}  // namespace

// Every copy entry point ends here. `synchronous` is the cudaMemcpy family, which waits for the
// copy except device to device; async copies wait only when the destination is pageable memory,
// and stage a pageable source so that the caller may reuse it as soon as the call returns.
cudaError_t copy(void* dst, const void* src, const Rect& r, cudaMemcpyKind kind,
                 cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  if (r.width > r.dst_pitch || r.width > r.src_pitch) return cudaErrorInvalidPitchValue;
  if (r.width == 0 || r.height == 0 || r.depth == 0) {
    return valid_kind(kind) ? cudaSuccess : cudaErrorInvalidMemcpyDirection;
  }
  CopyPlan plan;
  if (cudaError_t e = plan_copy(dst, src, r.dst_extent(), r.src_extent(), kind, &plan); e) return e;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capturing(sid)) {
    // A captured copy runs at each launch, from the memory as it is then, pageable memory included
    // (as a graph's copy nodes may); waiting on a capturing stream cannot be captured, nor slices
    // whose rows are not one sequence on both sides.
    const bool rows_in_sequence = r.depth == 1 || (r.dst_slice_pitch == r.dst_pitch * r.height &&
                                                   r.src_slice_pitch == r.src_pitch * r.height);
    if (synchronous || !rows_in_sequence) return cudaErrorStreamCaptureUnsupported;
    return graphs().capture(sid, copy_rows_node(dst, r.dst_pitch, src, r.src_pitch, r.width, r.height * r.depth))
               ? cudaSuccess
               : cudaErrorStreamCaptureInvalidated;
  }
  // The driver's one-dimensional copies are between linear memories; the runtime copies to and from
  // arrays itself, as it makes 2D copies.
  if (r.height == 1 && r.depth == 1 && !plan.touches_array) {
    if (const DriverApi* d = driver()) {
      return driver_copy(*d, dst, src, r.width, kind, stream, flavour, synchronous);
    }
  }
  bool wait = synchronous ? !plan.device_to_device : plan.dst_pageable;
  Work work;
  work.kind = OpKind::kMemcpy;
  work.duration_ns = copy_duration_ns(r.bytes(), config().copy_gbps);
  if (plan.src_pageable && !wait) {
    Rect packed = r;
    packed.src_pitch = r.width;
    packed.src_slice_pitch = r.width * r.height;
    auto staged = std::make_shared<std::vector<char>>(r.bytes());
    copy_rect(staged->data(), src, Rect{r.width, r.height, r.width, r.src_pitch, r.depth, packed.src_slice_pitch,
                                        r.src_slice_pitch});
    work.effect = [dst, staged, packed] { copy_rect(dst, staged->data(), packed); };
  } else {
    work.effect = [dst, src, r] { copy_rect(dst, src, r); };
  }
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kMemcpy);
    info->src = activity::memory_of(src);
    info->dst = activity::memory_of(dst);
    info->bytes = r.bytes();
    work.info = std::move(info);
  }
  OpTimes times;
  if (Status s = timeline().submit(sid, std::move(work), &times); s != Status::kOk) {
    return from_status(s);
  }
  if (wait) timeline().wait(times.key);
  return cudaSuccess;
}

namespace {

cudaError_t copy_1d(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                    cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  return copy(dst, src, Rect{count, 1, count, count}, kind, stream, flavour, synchronous);
}

// cudaMemset waits only when it sets pinned host memory, the cudaMemsetAsync family never.
cudaError_t set(void* ptr, int value, size_t pitch, size_t width, size_t height,
                cudaStream_t stream, DefaultStream flavour, bool synchronous) {
  if (width > pitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  size_t extent = pitch * (height - 1) + width;
  std::optional<Allocation> a = memory().find(ptr);
  if (!a || !a->contains(ptr, extent)) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capturing(sid)) {
    if (synchronous) return cudaErrorStreamCaptureUnsupported;
    return graphs().capture(sid, memset_node(ptr, unsigned(value) & 0xffu, 1, pitch, width, height)) ? cudaSuccess
                                                                                 : cudaErrorStreamCaptureInvalidated;
  }
  if (synchronous && height == 1 && stream == nullptr) {
    if (const DriverApi* d = driver()) {
      int device;
      if (cudaError_t e = current_device(&device); e) return e;
      if (cudaError_t e = bind_context(*d, device); e) return e;
      return from_driver(d->memset_d8[flavour_index(flavour)](dptr(ptr), (unsigned char)value, width));
    }
  }
  Work work;
  work.kind = OpKind::kMemset;
  work.duration_ns = copy_duration_ns(uint64_t(width) * height, config().copy_gbps);
  work.effect = [ptr, value, pitch, width, height] {
    for (size_t row = 0; row < height; ++row) {
      std::memset(static_cast<char*>(ptr) + row * pitch, value, width);
    }
  };
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kMemset);
    info->dst = activity::memory_of(ptr);
    info->bytes = uint64_t(width) * height;
    info->value = uint32_t(value);
    work.info = std::move(info);
  }
  OpTimes times;
  if (Status s = timeline().submit(sid, std::move(work), &times); s != Status::kOk) {
    return from_status(s);
  }
  if (synchronous && is_pinned_host(a->kind)) timeline().wait(times.key);
  return cudaSuccess;
}

cudaError_t allocate(MemoryKind kind, void** ptr, size_t size, unsigned flags) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  return from_status(memory().allocate(kind, device, size, flags, ptr));
}

// A zero size is the runtime's own answer (nullptr), which cuMemAlloc would refuse.
cudaError_t malloc_device(void** ptr, size_t size) {
  const DriverApi* d = ptr == nullptr || size == 0 ? nullptr : driver();
  if (d == nullptr) return allocate(MemoryKind::kDevice, ptr, size, 0);
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  if (cudaError_t e = bind_context(*d, device); e) return e;
  CUdeviceptr p = 0;
  if (CUresult r = d->mem_alloc(&p, size); r) return from_driver(r);
  *ptr = reinterpret_cast<void*>(uintptr_t(p));
  return cudaSuccess;
}

void forget_pool_allocation(const void* ptr);

// Freeing waits for the device first, as the real cudaFree does, so that no queued operation can
// still touch the memory.
cudaError_t free_device_memory(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::optional<Allocation> a = memory().find(ptr);
  if (!a || a->base != reinterpret_cast<uintptr_t>(ptr)) return cudaErrorInvalidValue;
  // A graph's allocation freed outside the graph: its address stays the graph's, for its next launch.
  if (graphs().is_graph_allocation(ptr)) {
    timeline().synchronize_device(a->device);
    graphs().free_graph_allocation(ptr);
    return cudaSuccess;
  }
  forget_pool_allocation(ptr);
  if (const DriverApi* d = driver(); d != nullptr && a->kind == MemoryKind::kDevice) {
    return from_driver(d->mem_free(dptr(ptr)));
  }
  timeline().synchronize_device(a->device);
  return from_status(memory().release(ptr, {MemoryKind::kDevice, MemoryKind::kManaged}));
}

// Memory pools. Each device has its default pool, and cudaMemPoolCreate makes others; the
// stream-ordered allocations are counted against their pool. The simulation keeps no freed memory in
// a pool: a free returns it to the device when the stream reaches it, so the reserved bytes are the
// used bytes, as with a release threshold of 0 after each synchronisation.
struct MemPool {
  int device = 0;
  bool destroyed = false;
  int reuse[3] = {1, 1, 1};  // cudaMemPoolReuseFollowEventDependencies .. AllowInternalDependencies
  uint64_t release_threshold = 0;
  uint64_t used = 0;
  uint64_t used_high = 0;
  uint64_t reserved_high = 0;
  // cudaMemPoolSetAccess: what other devices may do with the pool's memory (its own device always
  // reads and writes it).
  cudaMemAccessFlags access[kMaxDeviceCount] = {};
};

struct Pools {
  std::mutex mu;
  // Never freed: an allocation or a stale handle may still name a destroyed pool.
  std::unordered_map<const void*, std::unique_ptr<MemPool>> all;
  MemPool* defaults[kMaxDeviceCount] = {};
  MemPool* current[kMaxDeviceCount] = {};
  std::unordered_map<const void*, std::pair<MemPool*, uint64_t>> allocations;
};

Pools& pools() {
  static Pools* p = new Pools;
  return *p;
}

MemPool* new_pool_locked(Pools& p, int device) {
  auto pool = std::make_unique<MemPool>();
  pool->device = device;
  MemPool* raw = pool.get();
  p.all[raw] = std::move(pool);
  return raw;
}

MemPool* default_pool_locked(Pools& p, int device) {
  if (p.defaults[device] == nullptr) p.defaults[device] = new_pool_locked(p, device);
  return p.defaults[device];
}

MemPool* find_pool_locked(Pools& p, cudaMemPool_t handle) {
  auto it = p.all.find(handle);
  return it == p.all.end() || it->second->destroyed ? nullptr : it->second.get();
}

cudaMemPool_t pool_handle(MemPool* pool) { return reinterpret_cast<cudaMemPool_t>(pool); }

// fn(pools, pool) under the pools' lock; an unknown or destroyed pool is an invalid value.
template <class Fn>
cudaError_t with_pool(cudaMemPool_t handle, Fn fn) {
  Pools& p = pools();
  std::lock_guard<std::mutex> lock(p.mu);
  MemPool* pool = find_pool_locked(p, handle);
  return record(pool != nullptr ? fn(p, *pool) : cudaErrorInvalidValue);
}

uint64_t rounded(size_t size) {
  return (uint64_t(size) + kAllocationGranularity - 1) / kAllocationGranularity * kAllocationGranularity;
}

void forget_pool_allocation(const void* ptr) {
  Pools& p = pools();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.allocations.find(ptr);
  if (it == p.allocations.end()) return;
  it->second.first->used -= it->second.second;
  p.allocations.erase(it);
}

// From `pool`, or the current pool of the stream's device when null.
cudaError_t malloc_async(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream, DefaultStream flavour) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  StreamInfo info;
  if (Status s = timeline().stream_info(sid, &info); s != Status::kOk) return from_status(s);
  // Captured, the allocation becomes a graph's allocation node (from the device's graph memory pool,
  // whatever pool was asked for, as CUDA does).
  if (graphs().capturing(sid)) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location = {cudaMemLocationTypeDevice, info.device};
    return graph_allocation(props, size, ptr, [&](GraphNode n) {
      return graphs().capture(sid, std::move(n)) ? cudaSuccess : cudaErrorStreamCaptureInvalidated;
    });
  }
  Pools& p = pools();
  MemPool* from = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    from = pool != nullptr ? find_pool_locked(p, pool)
           : p.current[info.device] != nullptr ? p.current[info.device]
                                               : default_pool_locked(p, info.device);
  }
  if (from == nullptr) return cudaErrorInvalidValue;
  if (Status s = memory().allocate(MemoryKind::kDevice, from->device, size, 0, ptr); s != Status::kOk) {
    return from_status(s);
  }
  if (*ptr != nullptr) {
    std::lock_guard<std::mutex> lock(p.mu);
    uint64_t bytes = rounded(size);
    p.allocations[*ptr] = {from, bytes};
    from->used += bytes;
    from->used_high = std::max(from->used_high, from->used);
    from->reserved_high = std::max(from->reserved_high, from->used);
  }
  return cudaSuccess;
}

cudaError_t free_async(void* ptr, cudaStream_t stream, DefaultStream flavour) {
  if (ptr == nullptr) return cudaSuccess;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().is_graph_allocation(ptr)) {
    // Captured, a free node; outside a graph, the graph's address is free once the stream gets there.
    if (graphs().capturing(sid))
      return graphs().capture(sid, free_node(ptr)) ? cudaSuccess : cudaErrorStreamCaptureInvalidated;
    return from_status(timeline().submit(sid, Work{OpKind::kFree, 0, [ptr] { graphs().free_graph_allocation(ptr); }, {}}));
  }
  if (Status s = memory().mark_free_pending(ptr); s != Status::kOk) return from_status(s);
  Work work{OpKind::kFree, 0, [ptr] {
    forget_pool_allocation(ptr);
    memory().release_pending(ptr);
  }, {}};
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kFree);
    info->address = reinterpret_cast<uintptr_t>(ptr);
    if (std::optional<Allocation> a = memory().find(ptr)) info->bytes = a->size;
    work.info = std::move(info);
  }
  if (Status s = timeline().submit(sid, std::move(work)); s != Status::kOk) {
    memory().cancel_free_pending(ptr);
    return from_status(s);
  }
  return cudaSuccess;
}

cudaError_t symbol_range(const void* symbol, size_t count, size_t offset, char** out) {
  std::optional<Symbol> s = kernels().find_symbol(symbol);
  if (!s) return cudaErrorInvalidSymbol;
  if (offset > s->size || count > s->size - offset) return cudaErrorInvalidValue;
  *out = static_cast<char*>(s->device_ptr) + offset;
  return cudaSuccess;
}

cudaError_t copy_to_symbol(const void* symbol, const void* src, size_t count, size_t offset,
                           cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour,
                           bool synchronous) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  char* dst;
  if (cudaError_t e = symbol_range(symbol, count, offset, &dst); e) return e;
  return copy_1d(dst, src, count, kind, stream, flavour, synchronous);
}

cudaError_t copy_from_symbol(void* dst, const void* symbol, size_t count, size_t offset,
                             cudaMemcpyKind kind, cudaStream_t stream, DefaultStream flavour,
                             bool synchronous) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  char* src;
  if (cudaError_t e = symbol_range(symbol, count, offset, &src); e) return e;
  return copy_1d(dst, src, count, kind, stream, flavour, synchronous);
}

}  // namespace
}  // namespace simcuda::rt

using rt::kLegacy;
using rt::kPerThread;

// ---- allocation ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMalloc_v3020), [&]() -> cudaError_t {
    return rt::record(rt::malloc_device(devPtr, size));
  });
}

// Through the driver's cuMemAllocPitch, as cudaMalloc goes through cuMemAlloc, with the widest
// element size (the runtime's rows serve any element).
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocPitch_v3020), [&]() -> cudaError_t {
    if (devPtr == nullptr || pitch == nullptr) return rt::record(cudaErrorInvalidValue);
    if (width == 0 || height == 0) {
      *devPtr = nullptr;
      *pitch = 0;
      return cudaSuccess;
    }
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    if (const rt::DriverApi* d = rt::driver()) {
      if (cudaError_t e = rt::bind_context(*d, device); e) return rt::record(e);
      CUdeviceptr p = 0;
      if (CUresult r = d->mem_alloc_pitch(&p, pitch, width, height, 16); r) return rt::record(rt::from_driver(r));
      *devPtr = reinterpret_cast<void*>(uintptr_t(p));
      return cudaSuccess;
    }
    *pitch = (width + 511) / 512 * 512;
    return rt::record(rt::allocate(MemoryKind::kDevice, devPtr, *pitch * height, 0));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFree_v3020), [&]() -> cudaError_t {
    return rt::record(rt::free_device_memory(devPtr));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void** devPtr, size_t size,
                                                       unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocManaged_v6000), [&]() -> cudaError_t {
    if (size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)) {
      return rt::record(cudaErrorInvalidValue);
    }
    return rt::record(rt::allocate(MemoryKind::kManaged, devPtr, size, flags));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocHost_v3020), [&]() -> cudaError_t {
    return rt::record(rt::allocate(MemoryKind::kPinnedHost, ptr, size, 0));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaHostAlloc_v3020), [&]() -> cudaError_t {
    constexpr unsigned kValid = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if ((flags & ~kValid) != 0) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::allocate(MemoryKind::kPinnedHost, pHost, size, flags));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFreeHost_v3020), [&]() -> cudaError_t {
    if (ptr == nullptr) return cudaSuccess;
    std::optional<Allocation> a = memory().find(ptr);
    if (!a || a->kind != MemoryKind::kPinnedHost || a->base != reinterpret_cast<uintptr_t>(ptr)) {
      return rt::record(cudaErrorInvalidValue);
    }
    // Pinned memory may be the source or target of work on any device.
    timeline().synchronize_all();
    return rt::record(rt::from_status(memory().release(ptr, {MemoryKind::kPinnedHost})));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaHostRegister_v4000), [&]() -> cudaError_t {
    constexpr unsigned kValid = cudaHostRegisterPortable | cudaHostRegisterMapped |
                                cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
    if ((flags & ~kValid) != 0) return rt::record(cudaErrorInvalidValue);
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    return rt::record(rt::from_status(memory().register_host(ptr, size, flags, device)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostUnregister(void* ptr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaHostUnregister_v4000), [&]() -> cudaError_t {
    return rt::record(rt::from_status(memory().unregister_host(ptr)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost,
                                                              unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaHostGetDevicePointer_v3020), [&]() -> cudaError_t {
    if (pDevice == nullptr || flags != 0) return rt::record(cudaErrorInvalidValue);
    std::optional<Allocation> a = memory().find(pHost);
    if (!a || !is_pinned_host(a->kind)) return rt::record(cudaErrorInvalidValue);
    // Unified addressing: the device sees host memory at the host address.
    *pDevice = pHost;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaHostGetFlags_v3020), [&]() -> cudaError_t {
    if (pFlags == nullptr) return rt::record(cudaErrorInvalidValue);
    std::optional<Allocation> a = memory().find(pHost);
    if (!a || a->kind != MemoryKind::kPinnedHost) return rt::record(cudaErrorInvalidValue);
    *pFlags = a->flags;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemGetInfo_v3020), [&]() -> cudaError_t {
    if (free == nullptr || total == nullptr) return rt::record(cudaErrorInvalidValue);
    int device;
    if (cudaError_t e = rt::current_device(&device); e) return rt::record(e);
    *total = config().device_memory_bytes;
    *free = *total - memory().used(device);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                                              const void* ptr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaPointerGetAttributes_v4000), [&]() -> cudaError_t {
    if (attributes == nullptr) return rt::record(cudaErrorInvalidValue);
    std::memset(attributes, 0, sizeof *attributes);
    std::optional<Allocation> a = memory().find(ptr);
    if (!a) {
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = cudaInvalidDeviceId;
      return cudaSuccess;
    }
    attributes->device = a->device;
    attributes->devicePointer = const_cast<void*>(ptr);
    switch (a->kind) {
      case MemoryKind::kDevice:
      case MemoryKind::kArray:
        attributes->type = cudaMemoryTypeDevice;
        break;
      case MemoryKind::kManaged:
        attributes->type = cudaMemoryTypeManaged;
        attributes->hostPointer = const_cast<void*>(ptr);
        break;
      case MemoryKind::kPinnedHost:
      case MemoryKind::kRegisteredHost:
        attributes->type = cudaMemoryTypeHost;
        attributes->hostPointer = const_cast<void*>(ptr);
        break;
    }
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size,
                                                     cudaStream_t hStream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocAsync_v11020), [&]() -> cudaError_t {
    return rt::record(rt::malloc_async(devPtr, size, nullptr, hStream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void** devPtr, size_t size,
                                                          cudaStream_t hStream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocAsync_ptsz_v11020), [&]() -> cudaError_t {
    return rt::record(rt::malloc_async(devPtr, size, nullptr, hStream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                                             cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocFromPoolAsync_v11020), [&]() -> cudaError_t {
    if (memPool == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::malloc_async(ptr, size, memPool, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                                                  cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMallocFromPoolAsync_ptsz_v11020), [&]() -> cudaError_t {
    if (memPool == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::malloc_async(ptr, size, memPool, stream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetDefaultMemPool_v11020), [&]() -> cudaError_t {
    if (memPool == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    rt::Pools& p = rt::pools();
    std::lock_guard<std::mutex> lock(p.mu);
    *memPool = rt::pool_handle(rt::default_pool_locked(p, device));
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetMemPool_v11020), [&]() -> cudaError_t {
    if (memPool == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    rt::Pools& p = rt::pools();
    std::lock_guard<std::mutex> lock(p.mu);
    rt::MemPool* current = p.current[device];
    *memPool = rt::pool_handle(current != nullptr && !current->destroyed ? current : rt::default_pool_locked(p, device));
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceSetMemPool_v11020), [&]() -> cudaError_t {
    if (cudaError_t e = rt::check_device(device); e != cudaSuccess) return rt::record(e);
    rt::Pools& p = rt::pools();
    std::lock_guard<std::mutex> lock(p.mu);
    rt::MemPool* pool = rt::find_pool_locked(p, memPool);
    if (pool == nullptr || pool->device != device) return rt::record(cudaErrorInvalidValue);
    p.current[device] = pool;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* props) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolCreate_v11020), [&]() -> cudaError_t {
    if (memPool == nullptr || props == nullptr || props->allocType != cudaMemAllocationTypePinned ||
        props->location.type != cudaMemLocationTypeDevice) {
      return rt::record(cudaErrorInvalidValue);
    }
    if (cudaError_t e = rt::check_device(props->location.id); e != cudaSuccess) return rt::record(cudaErrorInvalidValue);
    rt::Pools& p = rt::pools();
    std::lock_guard<std::mutex> lock(p.mu);
    *memPool = rt::pool_handle(rt::new_pool_locked(p, props->location.id));
    return cudaSuccess;
  });
}

// A device's default pool is not the program's to destroy; a pool that is the device's current one
// leaves the default in its place.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolDestroy_v11020), [&]() -> cudaError_t {
    return rt::with_pool(memPool, [](rt::Pools& p, rt::MemPool& pool) {
      if (p.defaults[pool.device] == &pool) return cudaErrorInvalidValue;
      if (p.current[pool.device] == &pool) p.current[pool.device] = nullptr;
      pool.destroyed = true;
      return cudaSuccess;
    });
  });
}

// Nothing is kept beyond what is in use (see MemPool), so there is nothing to trim.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t /*minBytesToKeep*/) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolTrimTo_v11020), [&]() -> cudaError_t {
    return rt::with_pool(memPool, [](rt::Pools&, rt::MemPool&) { return cudaSuccess; });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descs,
                                                          size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolSetAccess_v11020), [&]() -> cudaError_t {
    if (count > 0 && descs == nullptr) return rt::record(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; ++i) {
      const cudaMemAccessDesc& d = descs[i];
      if (d.location.type != cudaMemLocationTypeDevice || rt::check_device(d.location.id) != cudaSuccess ||
          (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
           d.flags != cudaMemAccessFlagsProtReadWrite))
        return rt::record(cudaErrorInvalidValue);
    }
    return rt::with_pool(memPool, [&](rt::Pools&, rt::MemPool& pool) {
      for (size_t i = 0; i < count; ++i) {
        // The pool's own device keeps its access.
        if (descs[i].location.id == pool.device && descs[i].flags != cudaMemAccessFlagsProtReadWrite)
          return cudaErrorInvalidDevice;
        pool.access[descs[i].location.id] = descs[i].flags;
      }
      return cudaSuccess;
    });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                                          cudaMemLocation* location) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolGetAccess_v11020), [&]() -> cudaError_t {
    if (flags == nullptr || location == nullptr || location->type != cudaMemLocationTypeDevice ||
        rt::check_device(location->id) != cudaSuccess)
      return rt::record(cudaErrorInvalidValue);
    return rt::with_pool(memPool, [&](rt::Pools&, rt::MemPool& pool) {
      *flags = location->id == pool.device ? cudaMemAccessFlagsProtReadWrite : pool.access[location->id];
      return cudaSuccess;
    });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolSetAttribute_v11020), [&]() -> cudaError_t {
    if (value == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::with_pool(memPool, [&](rt::Pools&, rt::MemPool& pool) {
      uint64_t wide = 0;
      switch (attr) {
        case cudaMemPoolReuseFollowEventDependencies:
        case cudaMemPoolReuseAllowOpportunistic:
        case cudaMemPoolReuseAllowInternalDependencies:
          std::memcpy(&pool.reuse[int(attr) - 1], value, sizeof(int));
          return cudaSuccess;
        case cudaMemPoolAttrReleaseThreshold:
          std::memcpy(&pool.release_threshold, value, sizeof(uint64_t));
          return cudaSuccess;
        // The high-water marks may only be reset, to zero: they restart from what is in use.
        case cudaMemPoolAttrReservedMemHigh:
        case cudaMemPoolAttrUsedMemHigh:
          std::memcpy(&wide, value, sizeof wide);
          if (wide != 0) return cudaErrorInvalidValue;
          (attr == cudaMemPoolAttrUsedMemHigh ? pool.used_high : pool.reserved_high) = pool.used;
          return cudaSuccess;
        default: return cudaErrorInvalidValue;
      }
    });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPoolGetAttribute_v11020), [&]() -> cudaError_t {
    if (value == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::with_pool(memPool, [&](rt::Pools&, rt::MemPool& pool) {
      uint64_t wide = 0;
      switch (attr) {
        case cudaMemPoolReuseFollowEventDependencies:
        case cudaMemPoolReuseAllowOpportunistic:
        case cudaMemPoolReuseAllowInternalDependencies:
          std::memcpy(value, &pool.reuse[int(attr) - 1], sizeof(int));
          return cudaSuccess;
        case cudaMemPoolAttrReleaseThreshold: wide = pool.release_threshold; break;
        case cudaMemPoolAttrReservedMemCurrent:
        case cudaMemPoolAttrUsedMemCurrent: wide = pool.used; break;
        case cudaMemPoolAttrReservedMemHigh: wide = pool.reserved_high; break;
        case cudaMemPoolAttrUsedMemHigh: wide = pool.used_high; break;
        default: return cudaErrorInvalidValue;
      }
      std::memcpy(value, &wide, sizeof wide);
      return cudaSuccess;
    });
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFreeAsync_v11020), [&]() -> cudaError_t {
    return rt::record(rt::free_async(devPtr, hStream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaFreeAsync_ptsz_v11020), [&]() -> cudaError_t {
    return rt::record(rt::free_async(devPtr, hStream, kPerThread));
  });
}

// ---- copies ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count,
                                                cudaMemcpyKind kind) {
  // Any number may come in (the tests pass invalid kinds): the lambda reads it as a number, since
  // UBSan checks every load of an enum's value and the capture is one.
  int raw_kind;
  std::memcpy(&raw_kind, &kind, sizeof raw_kind);
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_1d(dst, src, count, cudaMemcpyKind(raw_kind), nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy_ptds(void* dst, const void* src, size_t count,
                                                     cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_1d(dst, src, count, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                                     cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::copy_1d(dst, src, count, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                                          cudaMemcpyKind kind,
                                                          cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::copy_1d(dst, src, count, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2D(void* dst, size_t dpitch, const void* src,
                                                  size_t spitch, size_t width, size_t height,
                                                  cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2D_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy(dst, src, {width, height, dpitch, spitch}, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src,
                                                       size_t spitch, size_t width, size_t height,
                                                       cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2D_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy(dst, src, {width, height, dpitch, spitch}, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src,
                                                       size_t spitch, size_t width, size_t height,
                                                       cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DAsync_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy(dst, src, {width, height, dpitch, spitch}, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch,
                                                            const void* src, size_t spitch,
                                                            size_t width, size_t height,
                                                            cudaMemcpyKind kind,
                                                            cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpy2DAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy(dst, src, {width, height, dpitch, spitch}, kind, stream, kPerThread, false));
  });
}

// ---- memset ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset_v3020), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, count, count, 1, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset_ptds(void* devPtr, int value, size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, count, count, 1, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count,
                                                     cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemsetAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, count, count, 1, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count,
                                                          cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemsetAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, count, count, 1, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset2D(void* devPtr, size_t pitch, int value,
                                                  size_t width, size_t height) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset2D_v3020), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, pitch, width, height, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset2D_ptds(void* devPtr, size_t pitch, int value,
                                                       size_t width, size_t height) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset2D_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, pitch, width, height, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset2DAsync(void* devPtr, size_t pitch, int value,
                                                       size_t width, size_t height,
                                                       cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset2DAsync_v3020), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, pitch, width, height, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset2DAsync_ptsz(void* devPtr, size_t pitch, int value,
                                                            size_t width, size_t height,
                                                            cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemset2DAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::set(devPtr, value, pitch, width, height, stream, kPerThread, false));
  });
}

// ---- module variables ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetSymbolAddress_v3020), [&]() -> cudaError_t {
    if (devPtr == nullptr) return rt::record(cudaErrorInvalidValue);
    std::optional<Symbol> s = kernels().find_symbol(symbol);
    if (!s) return rt::record(cudaErrorInvalidSymbol);
    *devPtr = s->device_ptr;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetSymbolSize(size_t* size, const void* symbol) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGetSymbolSize_v3020), [&]() -> cudaError_t {
    if (size == nullptr) return rt::record(cudaErrorInvalidValue);
    std::optional<Symbol> s = kernels().find_symbol(symbol);
    if (!s) return rt::record(cudaErrorInvalidSymbol);
    *size = s->size;
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToSymbol(const void* symbol, const void* src,
                                                        size_t count, size_t offset,
                                                        cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToSymbol_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_symbol(symbol, src, count, offset, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToSymbol_ptds(const void* symbol, const void* src,
                                                             size_t count, size_t offset,
                                                             cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToSymbol_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_symbol(symbol, src, count, offset, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromSymbol(void* dst, const void* symbol,
                                                          size_t count, size_t offset,
                                                          cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromSymbol_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_symbol(dst, symbol, count, offset, kind, nullptr, kLegacy, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol,
                                                               size_t count, size_t offset,
                                                               cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromSymbol_ptds_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_symbol(dst, symbol, count, offset, kind, nullptr, kPerThread, true));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToSymbolAsync(const void* symbol, const void* src,
                                                             size_t count, size_t offset,
                                                             cudaMemcpyKind kind,
                                                             cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToSymbolAsync_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_symbol(symbol, src, count, offset, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyToSymbolAsync_ptsz(const void* symbol,
                                                                  const void* src, size_t count,
                                                                  size_t offset,
                                                                  cudaMemcpyKind kind,
                                                                  cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyToSymbolAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_to_symbol(symbol, src, count, offset, kind, stream, kPerThread, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromSymbolAsync(void* dst, const void* symbol,
                                                               size_t count, size_t offset,
                                                               cudaMemcpyKind kind,
                                                               cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromSymbolAsync_v3020), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_symbol(dst, symbol, count, offset, kind, stream, kLegacy, false));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol,
                                                                    size_t count, size_t offset,
                                                                    cudaMemcpyKind kind,
                                                                    cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemcpyFromSymbolAsync_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(
        rt::copy_from_symbol(dst, symbol, count, offset, kind, stream, kPerThread, false));
  });
}

namespace simcuda::rt {
namespace {

// Prefetching moves nothing on the simulated device. It checks what the real runtime checks (a range
// the device knows, a location that exists, a stream of this process), so that a call that reaches it
// with its arguments garbled (forwarded through another version's prototype) fails.
cudaError_t prefetch(const void* ptr, size_t count, cudaMemLocationType type, int id, cudaStream_t stream,
                     DefaultStream flavour) {
  std::optional<Allocation> a = memory().find(ptr);
  if (!a || count == 0 || !a->contains(ptr, count)) return cudaErrorInvalidValue;
  if (type == cudaMemLocationTypeDevice) {
    if (cudaError_t e = check_device(id); e) return e;
  } else if (type != cudaMemLocationTypeHost) {
    return cudaErrorInvalidValue;
  }
  StreamId sid;
  return resolve_stream(stream, flavour, &sid);
}

#if CUDART_VERSION < 13000
cudaError_t prefetch_to_device(const void* ptr, size_t count, int device, cudaStream_t stream, DefaultStream flavour) {
  return device == cudaCpuDeviceId ? prefetch(ptr, count, cudaMemLocationTypeHost, 0, stream, flavour)
                                   : prefetch(ptr, count, cudaMemLocationTypeDevice, device, stream, flavour);
}
#endif

}  // namespace
}  // namespace simcuda::rt

#if CUDART_VERSION >= 13000
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void* devPtr, size_t count, cudaMemLocation location,
                                                          unsigned int, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_v12020), [&]() -> cudaError_t {
    return rt::record(rt::prefetch(devPtr, count, location.type, location.id, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count,
                                                               cudaMemLocation location, unsigned int,
                                                               cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_ptsz_v12020), [&]() -> cudaError_t {
    return rt::record(rt::prefetch(devPtr, count, location.type, location.id, stream, kPerThread));
  });
}
#else
// CUDA 12: a device number (cudaCpuDeviceId for the host); _v2 has CUDA 13's prototype.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void* devPtr, size_t count, int dstDevice,
                                                          cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_v8000), [&]() -> cudaError_t {
    return rt::record(rt::prefetch_to_device(devPtr, count, dstDevice, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, int dstDevice,
                                                               cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_ptsz_v8000), [&]() -> cudaError_t {
    return rt::record(rt::prefetch_to_device(devPtr, count, dstDevice, stream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2(const void* devPtr, size_t count,
                                                             cudaMemLocation location, unsigned int,
                                                             cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_v12020), [&]() -> cudaError_t {
    return rt::record(rt::prefetch(devPtr, count, location.type, location.id, stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2_ptsz(const void* devPtr, size_t count,
                                                                  cudaMemLocation location, unsigned int,
                                                                  cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaMemPrefetchAsync_ptsz_v12020), [&]() -> cudaError_t {
    return rt::record(rt::prefetch(devPtr, count, location.type, location.id, stream, kPerThread));
  });
}
#endif
