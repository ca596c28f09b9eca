// The driver API entry points and cuGetProcAddress.
//
// Each entry point is an internal function (namespace impl, hidden) and a thin export that calls
// it. cuGetProcAddress hands out the internal function for most symbols, as the real driver hands
// out addresses that are not its exports: a tracer must wrap what it returns, not count on having
// interposed on the export.
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/device.h"
#include "cubin.h"
#include "core/graphs.h"
#include "driver.h"
#include "simcuda.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

// ---- modules and libraries ----

// A loaded module or library: its kernels are registered with the device under keys of its own
// (the addresses of its name strings), as nvcc-generated code registers host stubs.
struct Module {
  void** core_handle = nullptr;
  std::deque<std::string> names;
  std::vector<const Kernel*> kernels;
  bool library = false;
};

// Never destroyed: what is still loaded at exit stays reachable (no leak reports) and usable by
// exit handlers.
struct Registry {
  std::mutex modules_mu;
  std::unordered_set<Module*> modules;
};

Registry& reg() {
  static Registry* r = new Registry;
  return *r;
}

CUresult load_module(const void* image, bool library, Module** out) {
  if (image == nullptr || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = check_initialized(); e) return e;
  auto m = std::make_unique<Module>();
  m->library = library;
  m->core_handle = kernels().register_module(image);
  const char* p = static_cast<const char*>(image);
  // strncmp, not memcmp: an image shorter than the magic must not be read past its end.
  if (std::strncmp(p, kModuleMagic, sizeof kModuleMagic) == 0) {
    for (p += sizeof kModuleMagic; *p != '\0'; p += std::strlen(p) + 1) m->names.emplace_back(p);
  } else {
    for (std::string& name : image_kernels(image)) m->names.push_back(std::move(name));
  }
  for (const std::string& name : m->names) {
    const char* key = name.c_str();
    kernels().register_function(m->core_handle, key, key);
    m->kernels.push_back(kernels().find(key));
  }
  std::lock_guard<std::mutex> lock(reg().modules_mu);
  *out = m.get();
  reg().modules.insert(m.release());
  return CUDA_SUCCESS;
}

Module* find_module(const void* handle, bool library) {
  auto* m = static_cast<Module*>(const_cast<void*>(handle));
  std::lock_guard<std::mutex> lock(reg().modules_mu);
  return reg().modules.count(m) != 0 && m->library == library ? m : nullptr;
}

CUresult unload_module(const void* handle, bool library) {
  Module* m;
  {
    auto* candidate = static_cast<Module*>(const_cast<void*>(handle));
    std::lock_guard<std::mutex> lock(reg().modules_mu);
    if (reg().modules.count(candidate) == 0 || candidate->library != library) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    reg().modules.erase(candidate);
    m = candidate;
  }
  kernels().unregister_module(m->core_handle);
  delete m;
  return CUDA_SUCCESS;
}

CUresult module_kernel(const void* handle, bool library, const char* name, const Kernel** out) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = check_initialized(); e) return e;
  Module* m = find_module(handle, library);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < m->names.size(); ++i) {
    if (m->names[i] == name && m->kernels[i] != nullptr) {
      *out = m->kernels[i];
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

const Kernel* loaded_kernel(const void* handle) {
  return handle == nullptr ? nullptr : kernels().find(handle);
}

// ---- launches and graphs ----

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};

bool valid_configuration(const unsigned grid[3], const unsigned block[3]) {
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || block[i] == 0 || grid[i] > kMaxGridDim[i] || block[i] > kMaxBlockDim[i]) {
      return false;
    }
  }
  return uint64_t(block[0]) * block[1] * block[2] <= kMaxThreadsPerBlock;
}

// What `extra` adds to a launch: its own duration (kLaunchParamDurationNs, else the kernel's) and the
// effect the device thread runs when it ends (kLaunchParamEffect, moved from the caller's function).
struct LaunchExtras {
  uint64_t duration_ns = 0;
  std::function<void()> effect;
};

CUresult launch_extras(const Kernel& k, void** extra, LaunchExtras* out) {
  out->duration_ns = k.duration_ns;
  if (extra == nullptr) return CUDA_SUCCESS;
  for (void** p = extra; *p != CU_LAUNCH_PARAM_END; p += 2) {
    if (*p == kLaunchParamDurationNs) {
      if (p[1] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      out->duration_ns = *static_cast<const uint64_t*>(p[1]);
    } else if (*p == kLaunchParamEffect) {
      if (p[1] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      out->effect = std::move(*static_cast<std::function<void()>*>(p[1]));
    } else if (*p != CU_LAUNCH_PARAM_BUFFER_POINTER && *p != CU_LAUNCH_PARAM_BUFFER_SIZE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

struct Launch {
  CUfunction f;
  unsigned grid[3];
  unsigned block[3];
  CUstream stream;
  void** kernel_params;
  void** extra;
  unsigned shared_mem;
};

// What a profiler is told about a kernel queued while it listens.
std::shared_ptr<const activity::OpInfo> kernel_info(const Kernel& k, const unsigned grid[3],
                                                     const unsigned block[3], unsigned shared_mem) {
  if (!activity::active()) return nullptr;
  auto info = activity::new_op_info(activity::OpType::kKernel);
  info->name = k.name.c_str();
  for (int i = 0; i < 3; ++i) {
    info->grid[i] = grid[i];
    info->block[i] = block[i];
  }
  info->dynamic_shared = shared_mem;
  return info;
}

GraphNode kernel_node(const Kernel& k, uint64_t duration, const unsigned grid[3], const unsigned block[3],
                      unsigned shared_mem) {
  GraphNode n;
  n.kind = OpKind::kKernel;
  n.duration_ns = duration;
  n.kernel = &k;
  n.info.type = activity::OpType::kKernel;
  n.info.name = k.name.c_str();
  for (int i = 0; i < 3; ++i) {
    n.info.grid[i] = grid[i];
    n.info.block[i] = block[i];
  }
  n.info.dynamic_shared = shared_mem;
  return n;
}

CUresult launch(const Launch& l, DefaultStream flavour) {
  if (CUresult e = check_initialized(); e) return e;
  const Kernel* k = loaded_kernel(l.f);
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!valid_configuration(l.grid, l.block)) return CUDA_ERROR_INVALID_VALUE;
  if (l.kernel_params != nullptr && l.extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  LaunchExtras extras;
  if (CUresult e = launch_extras(*k, l.extra, &extras); e) return e;
  uint64_t duration = extras.duration_ns;
  StreamId sid;
  if (CUresult e = resolve_stream(l.stream, flavour, &sid); e) return e;
  GraphNode node = kernel_node(*k, duration, l.grid, l.block, l.shared_mem);
  node.effect = extras.effect;
  if (graphs().capture(sid, std::move(node))) return CUDA_SUCCESS;
  Status s = timeline().submit(sid, Work{OpKind::kKernel, duration, std::move(extras.effect),
                                         kernel_info(*k, l.grid, l.block, l.shared_mem)});
  if (s == Status::kOk) notify_launch(*k, duration);
  return from_status(s);
}

CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params, void** extra,
                   DefaultStream flavour) {
  if (c == nullptr || (c->numAttrs > 0 && c->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return launch({f, {c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                 c->hStream, params, extra, c->sharedMemBytes},
                flavour);
}

CUresult begin_capture(CUstream stream, DefaultStream flavour) {
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  StreamInfo info;
  if (Status s = timeline().stream_info(sid, &info); s != Status::kOk) return from_status(s);
  // The legacy stream cannot be captured on the real driver either.
  if (info.legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return graphs().begin_capture(sid) == Status::kOk ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
}

CUresult end_capture(CUstream stream, CUgraph* out, DefaultStream flavour) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  Graph* g = nullptr;
  if (graphs().end_capture(sid, &g) != Status::kOk) return CUDA_ERROR_ILLEGAL_STATE;
  *out = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

// The kernel node a driver's kernel node parameters describe (any version of the struct).
template <class Params>
CUresult kernel_node_of(CUfunction f, CUkernel kern, const Params& p, GraphNode* out) {
  if (CUresult e = check_initialized(); e) return e;
  const Kernel* k = loaded_kernel(f != nullptr ? static_cast<const void*>(f) : kern);
  if (k == nullptr) return CUDA_ERROR_INVALID_VALUE;
  LaunchExtras extras;
  if (CUresult e = launch_extras(*k, p.extra, &extras); e) return e;
  const unsigned grid[3] = {p.gridDimX, p.gridDimY, p.gridDimZ}, block[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
  *out = kernel_node(*k, extras.duration_ns, grid, block, p.sharedMemBytes);
  out->effect = std::move(extras.effect);
  return CUDA_SUCCESS;
}

template <class Params>
CUresult add_kernel_node(CUgraphNode* out, CUgraph graph, size_t num_dependencies,
                         const CUgraphNode* dependencies, CUfunction f, CUkernel kern,
                         const Params& p) {
  if (out == nullptr || (num_dependencies > 0 && dependencies == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  GraphNode added;
  if (CUresult e = kernel_node_of(f, kern, p, &added); e) return e;
  GraphNode* node = nullptr;
  if (graphs().add_node(reinterpret_cast<Graph*>(graph), std::move(added),
                        reinterpret_cast<const void* const*>(dependencies), num_dependencies, &node) != Status::kOk)
    return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}

CUresult graph_launch(CUgraphExec exec, CUstream stream, DefaultStream flavour) {
  if (CUresult e = check_initialized(); e) return e;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capturing(sid)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Status s = graphs().launch(reinterpret_cast<GraphExec*>(exec), sid);
  return s == Status::kInvalidValue ? CUDA_ERROR_INVALID_VALUE : from_status(s);
}

// ---- memory ----

CUresult not_capturing(StreamId sid) {
  return graphs().capturing(sid) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

// Which side of a copy is device memory: as the entry point says, or (kUnified, cuMemcpy) as the
// pointers say under unified addressing.
enum class Side : uint8_t { kHost, kDevice, kUnified };

CUresult check_side(const void* p, size_t n, Side side, bool* device, bool* pageable) {
  std::optional<Allocation> a = memory().find(p);
  *device = side == Side::kDevice || (side == Side::kUnified && a && !is_pinned_host(a->kind));
  if (*device) {
    if (!a || !a->contains(p, n)) return CUDA_ERROR_INVALID_VALUE;
    *pageable = false;
  } else {
    *pageable = !a.has_value();
  }
  return CUDA_SUCCESS;
}

// The same rules as the runtime's copies: a synchronous copy waits unless it is device to device;
// an async copy waits only for a pageable destination and stages a pageable source.
CUresult copy(void* dst, Side dst_side, const void* src, Side src_side, size_t n, CUstream stream,
              DefaultStream flavour, bool synchronous) {
  if (CUresult e = check_initialized(); e) return e;
  if (n == 0) return CUDA_SUCCESS;
  if (dst == nullptr || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool dst_device, src_device, dst_pageable, src_pageable;
  if (CUresult e = check_side(dst, n, dst_side, &dst_device, &dst_pageable); e) return e;
  if (CUresult e = check_side(src, n, src_side, &src_device, &src_pageable); e) return e;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (CUresult e = not_capturing(sid); e) return e;
  bool wait = synchronous ? !(dst_device && src_device) : dst_pageable;
  Work work;
  work.kind = OpKind::kMemcpy;
  work.duration_ns = copy_duration_ns(n, config().copy_gbps);
  if (src_pageable && !wait) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + n);
    work.effect = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  } else {
    work.effect = [dst, src, n] { std::memmove(dst, src, n); };
  }
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kMemcpy);
    info->src = activity::memory_of(src);
    info->dst = activity::memory_of(dst);
    info->bytes = n;
    work.info = std::move(info);
  }
  OpTimes times;
  if (Status s = timeline().submit(sid, std::move(work), &times); s != Status::kOk) {
    return from_status(s);
  }
  if (wait) timeline().wait(times.key);
  return CUDA_SUCCESS;
}

void* host(CUdeviceptr p) { return reinterpret_cast<void*>(uintptr_t(p)); }

// Sets n elements of `size` bytes (1 or 4) to the low bytes of value. A synchronous memset waits
// only when it sets pinned host memory, as the runtime's.
CUresult set(CUdeviceptr dst, unsigned value, unsigned size, size_t n, CUstream stream,
             DefaultStream flavour, bool synchronous) {
  if (CUresult e = check_initialized(); e) return e;
  void* p = host(dst);
  if (size == 4 && (dst % 4) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  std::optional<Allocation> a = memory().find(p);
  if (!a || !a->contains(p, n * size)) return CUDA_ERROR_INVALID_VALUE;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (CUresult e = not_capturing(sid); e) return e;
  Work work;
  work.kind = OpKind::kMemset;
  work.duration_ns = copy_duration_ns(uint64_t(n) * size, config().copy_gbps);
  work.effect = [p, value, size, n] {
    if (size == 1) {
      std::memset(p, int(value & 0xff), n);
    } else {
      auto* words = static_cast<uint32_t*>(p);
      for (size_t i = 0; i < n; ++i) words[i] = value;
    }
  };
  if (activity::active()) {
    auto info = activity::new_op_info(activity::OpType::kMemset);
    info->dst = activity::memory_of(p);
    info->bytes = uint64_t(n) * size;
    info->value = value;
    work.info = std::move(info);
  }
  OpTimes times;
  if (Status s = timeline().submit(sid, std::move(work), &times); s != Status::kOk) {
    return from_status(s);
  }
  if (synchronous && is_pinned_host(a->kind)) timeline().wait(times.key);
  return CUDA_SUCCESS;
}

// ---- streams and events ----

// The device of a stream, for a profiler's records; only asked while one listens.
int stream_device(StreamId sid) {
  StreamInfo info;
  if (!activity::active() || timeline().stream_info(sid, &info) != Status::kOk) return 0;
  return info.device;
}

// Waits for a device on behalf of cuCtxSynchronize.
CUresult synchronize_context(int device) {
  return activity::timed_sync(activity::SyncType::kContext, device, 0, 0, [&] {
    timeline().synchronize_device(device);
    return CUDA_SUCCESS;
  });
}

CUresult stream_op(CUstream stream, DefaultStream flavour, bool synchronize) {
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (synchronize) {
    if (CUresult e = not_capturing(sid); e) return e;
    return activity::timed_sync(activity::SyncType::kStream, stream_device(sid), sid, 0,
                                [&] { return from_status(timeline().synchronize_stream(sid)); });
  }
  return from_status(timeline().query_stream(sid));
}

CUresult event_id(CUevent event, EventId* id) {
  if (CUresult e = check_initialized(); e) return e;
  return handles::decode_event(event, id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult record_event(CUevent event, CUstream stream, DefaultStream flavour) {
  EventId eid;
  StreamId sid;
  if (CUresult e = event_id(event, &eid); e) return e;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (CUresult e = not_capturing(sid); e) return e;
  return from_status(timeline().record_event(eid, sid));
}

// As cudaStreamWaitEvent (cudart/stream.cpp): the stream's later work waits for the event's.
CUresult wait_event(CUstream stream, CUevent event, unsigned flags, DefaultStream flavour) {
  if ((flags & ~unsigned(CU_EVENT_WAIT_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
  StreamId sid;
  EventId eid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  if (CUresult e = event_id(event, &eid); e) return e;
  if (graphs().join_capture(sid, eid)) return CUDA_SUCCESS;
  return activity::timed_sync(activity::SyncType::kStreamWaitEvent, stream_device(sid), sid, eid,
                              [&] { return from_status(timeline().stream_wait_event(sid, eid)); });
}

// As cudaLaunchHostFunc (cudart/stream.cpp): the function runs on the device thread when the stream
// reaches it, or becomes a host node of the stream's capture.
CUresult launch_host_func(CUstream stream, CUhostFn fn, void* user_data, DefaultStream flavour) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  GraphNode node;
  node.type = NodeType::kHost;
  node.kind = OpKind::kHostFunc;
  node.effect = [fn, user_data] { fn(user_data); };
  if (graphs().capture(sid, node)) return CUDA_SUCCESS;
  return from_status(timeline().submit(sid, Work{OpKind::kHostFunc, 0, std::move(node.effect), {}}));
}

CUresult elapsed_time(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  EventId a, b;
  if (CUresult e = event_id(start, &a); e) return e;
  if (CUresult e = event_id(end, &b); e) return e;
  int64_t ns;
  if (Status s = timeline().elapsed_ns(a, b, &ns); s != Status::kOk) return from_status(s);
  *ms = float(double(ns) / 1e6);
  return CUDA_SUCCESS;
}

CUresult destroy_event(CUevent event) {
  EventId id;
  if (CUresult e = event_id(event, &id); e) return e;
  return from_status(timeline().destroy_event(id));
}

CUresult destroy_stream(CUstream stream) {
  if (CUresult e = check_initialized(); e) return e;
  StreamId id;
  if (!handles::decode_stream(stream, &id)) return CUDA_ERROR_INVALID_HANDLE;
  graphs().forget_stream(id);
  return from_status(timeline().destroy_stream(id));
}

CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status);

}  // namespace

// The internal functions behind the exports, hidden (the library's default visibility).
namespace impl {
namespace {

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGet), [&]() -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    if (ordinal < 0 || ordinal >= config().device_count) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetCount), [&]() -> CUresult {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    *count = config().device_count;
    return CUDA_SUCCESS;
  });
}

CUresult check_device(CUdevice dev) {
  if (CUresult e = check_initialized(); e) return e;
  return dev < 0 || dev >= config().device_count ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetName), [&]() -> CUresult {
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_device(dev); e) return e;
    device_name(dev, name, size_t(len));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetAttribute), [&]() -> CUresult {
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_device(dev); e) return e;
    // The runtime's cudaDeviceProp values for the same device (core/device.h).
    bool known = false;
    int v = device_attribute(int(attrib), dev, &known);
    if (!known) return CUDA_ERROR_INVALID_VALUE;
    *value = v;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDevicePrimaryCtxRetain), [&]() -> CUresult {
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_device(dev); e) return e;
    *ctx = primary_context(dev);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDevicePrimaryCtxRelease_v2), [&]() -> CUresult { return check_device(dev); });
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxGetCurrent), [&]() -> CUresult {
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    *ctx = current_context();
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxSetCurrent), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (ctx != nullptr && context_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    set_current_context(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxCreate_v4), [&]() -> CUresult {
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    if (CUresult e = check_device(dev); e) return e;
    // Execution affinity and shared-memory (CIG) contexts are features the simulation lacks.
    if (params != nullptr && (params->execAffinityParams != nullptr || params->cigParams != nullptr)) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    (void)flags;
    *ctx = create_context(dev);
    push_context(*ctx);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxDestroy_v2), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return destroy_context(ctx);
  });
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxPushCurrent_v2), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (ctx == nullptr || context_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    push_context(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxPopCurrent_v2), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    return pop_context(ctx);
  });
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceTotalMem_v2), [&]() -> CUresult {
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_device(dev); e) return e;
    *bytes = config().device_memory_bytes;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxGetDevice), [&]() -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return current_device(device);
  });
}

CUresult CUDAAPI cuCtxSynchronize() {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxSynchronize), [&]() -> CUresult {
    int device;
    if (CUresult e = current_device(&device); e) return e;
    return synchronize_context(device);
  });
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxSynchronize_v2), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (ctx == nullptr) return cuCtxSynchronize();
    int device = context_device(ctx);
    if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
    return synchronize_context(device);
  });
}

CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid* id) {
  return traced(SIMCUDA_DRIVER_CBID(cuGetExportTable), [&]() -> CUresult {
    if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *table = nullptr;
    return CUDA_ERROR_NOT_SUPPORTED;
  });
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuGetProcAddress), [&]() -> CUresult {
    return get_proc_address(symbol, pfn, version, flags, nullptr);
  });
}

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* status) {
  return traced(SIMCUDA_DRIVER_CBID(cuGetProcAddress_v2), [&]() -> CUresult {
    return get_proc_address(symbol, pfn, version, flags, status);
  });
}

// modules

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  return traced(SIMCUDA_DRIVER_CBID(cuModuleLoadData), [&]() -> CUresult {
    Module* m;
    if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = load_module(image, false, &m); e) return e;
    *module = reinterpret_cast<CUmodule>(m);
    return CUDA_SUCCESS;
  });
}

// A fatbin container, as cuModuleLoadData takes it (XLA loads the kernels it compiled so).
CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return traced(SIMCUDA_DRIVER_CBID(cuModuleLoadFatBinary), [&]() -> CUresult {
    Module* m;
    if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = load_module(fatCubin, false, &m); e) return e;
    *module = reinterpret_cast<CUmodule>(m);
    return CUDA_SUCCESS;
  });
}

// cuModuleLoadData with JIT options for a PTX image (link.cpp says what they get).
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n, CUjit_option* options,
                                    void** values) {
  return traced(SIMCUDA_DRIVER_CBID(cuModuleLoadDataEx), [&]() -> CUresult {
    Module* m;
    if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    if (CUresult e = apply_jit_options(n, options, values); e) return e;
    if (CUresult e = load_module(image, false, &m); e) return e;
    *module = reinterpret_cast<CUmodule>(m);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  return traced(SIMCUDA_DRIVER_CBID(cuModuleGetFunction), [&]() -> CUresult {
    const Kernel* k;
    if (CUresult e = module_kernel(module, false, name, &k); e) return e;
    *f = reinterpret_cast<CUfunction>(const_cast<Kernel*>(k));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  return traced(SIMCUDA_DRIVER_CBID(cuModuleUnload), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    return unload_module(module, false);
  });
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**,
                                   unsigned int, CUlibraryOption*, void**, unsigned int) {
  return traced(SIMCUDA_DRIVER_CBID(cuLibraryLoadData), [&]() -> CUresult {
    Module* m;
    if (library == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = load_module(code, true, &m); e) return e;
    *library = reinterpret_cast<CUlibrary>(m);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  return traced(SIMCUDA_DRIVER_CBID(cuLibraryGetKernel), [&]() -> CUresult {
    const Kernel* k;
    if (CUresult e = module_kernel(library, true, name, &k); e) return e;
    *kernel = reinterpret_cast<CUkernel>(const_cast<Kernel*>(k));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  return traced(SIMCUDA_DRIVER_CBID(cuLibraryUnload), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    return unload_module(library, true);
  });
}

// A CUkernel is a CUfunction of the current context, and either is the runtime's handle of the
// same kernel: the device keeps one record per kernel.
CUresult CUDAAPI cuKernelGetFunction(CUfunction* f, CUkernel kernel) {
  return traced(SIMCUDA_DRIVER_CBID(cuKernelGetFunction), [&]() -> CUresult {
    if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    const Kernel* k = loaded_kernel(kernel);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *f = reinterpret_cast<CUfunction>(const_cast<Kernel*>(k));
    return CUDA_SUCCESS;
  });
}

CUresult kernel_name(const char** name, const void* handle) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = check_initialized(); e) return e;
  const Kernel* k = loaded_kernel(handle);
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction f) {
  return traced(SIMCUDA_DRIVER_CBID(cuFuncGetName), [&]() -> CUresult { return kernel_name(name, f); });
}
CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel k) {
  return traced(SIMCUDA_DRIVER_CBID(cuKernelGetName), [&]() -> CUresult { return kernel_name(name, k); });
}

// launches

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned sm, CUstream stream, void** params,
                                void** extra) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchKernel), [&]() -> CUresult {
    return launch({f, {gx, gy, gz}, {bx, by, bz}, stream, params, extra, sm}, kLegacy);
  });
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned sm,
                                     CUstream stream, void** params, void** extra) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchKernel_ptsz), [&]() -> CUresult {
    return launch({f, {gx, gy, gz}, {bx, by, bz}, stream, params, extra, sm}, kPerThread);
  });
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                  void** extra) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchKernelEx), [&]() -> CUresult {
    return launch_ex(config, f, params, extra, kLegacy);
  });
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                       void** extra) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchKernelEx_ptsz), [&]() -> CUresult {
    return launch_ex(config, f, params, extra, kPerThread);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                           unsigned bx, unsigned by, unsigned bz, unsigned sm,
                                           CUstream stream, void** params) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchCooperativeKernel), [&]() -> CUresult {
    return launch({f, {gx, gy, gz}, {bx, by, bz}, stream, params, nullptr, sm}, kLegacy);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                                unsigned sm, CUstream stream, void** params) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchCooperativeKernel_ptsz), [&]() -> CUresult {
    return launch({f, {gx, gy, gz}, {bx, by, bz}, stream, params, nullptr, sm}, kPerThread);
  });
}

// graphs

CUresult is_capturing(CUstream stream, CUstreamCaptureStatus* status, DefaultStream flavour) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamId sid;
  if (CUresult e = resolve_stream(stream, flavour, &sid); e) return e;
  *status = graphs().capturing(sid) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamIsCapturing), [&]() -> CUresult {
    return is_capturing(stream, status, kLegacy);
  });
}
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamIsCapturing_ptsz), [&]() -> CUresult {
    return is_capturing(stream, status, kPerThread);
  });
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream stream) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamBeginCapture), [&]() -> CUresult { return begin_capture(stream, kLegacy); });
}
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream stream) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamBeginCapture_ptsz), [&]() -> CUresult {
    return begin_capture(stream, kPerThread);
  });
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamBeginCapture_v2), [&]() -> CUresult {
    return begin_capture(stream, kLegacy);
  });
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamBeginCapture_v2_ptsz), [&]() -> CUresult {
    return begin_capture(stream, kPerThread);
  });
}
CUresult CUDAAPI cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamEndCapture), [&]() -> CUresult {
    return end_capture(stream, graph, kLegacy);
  });
}
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamEndCapture_ptsz), [&]() -> CUresult {
    return end_capture(stream, graph, kPerThread);
  });
}

CUresult CUDAAPI cuGraphCreate(CUgraph* graph, unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphCreate), [&]() -> CUresult {
    if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    *graph = reinterpret_cast<CUgraph>(graphs().create());
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                      size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphAddKernelNode), [&]() -> CUresult {
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return add_kernel_node(node, graph, ndeps, deps, p->func, nullptr, *p);
  });
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                         size_t ndeps, const CUDA_KERNEL_NODE_PARAMS* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphAddKernelNode_v2), [&]() -> CUresult {
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return add_kernel_node(node, graph, ndeps, deps, p->func, p->kern, *p);
  });
}

namespace {

// CUDA 12.3's one entry for every node type (XLA's command buffers add their kernels through it), with
// edge data. The node types the simulation builds from the
// driver's parameters: kernels and empty nodes; the others answer "not supported".
CUresult add_node(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                  size_t ndeps, CUgraphNodeParams* p) {
  if (node == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // A programmatic edge (XLA's command buffers use them between kernels) lets the dependent kernel
  // start before the one it follows has ended; the simulation runs it after, as a default edge.
  if (edges != nullptr)
    for (size_t i = 0; i < ndeps; ++i)
      if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT && edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
        return CUDA_ERROR_NOT_SUPPORTED;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return add_kernel_node(node, graph, ndeps, deps, p->kernel.func, p->kernel.kern, p->kernel);
    case CU_GRAPH_NODE_TYPE_EMPTY: {
      if (ndeps > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
      if (CUresult e = check_initialized(); e) return e;
      GraphNode empty;
      empty.type = NodeType::kEmpty;
      empty.empty = true;
      GraphNode* added = nullptr;
      if (graphs().add_node(reinterpret_cast<Graph*>(graph), std::move(empty),
                            reinterpret_cast<const void* const*>(deps), ndeps, &added) != Status::kOk)
        return CUDA_ERROR_INVALID_VALUE;
      *node = reinterpret_cast<CUgraphNode>(added);
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

CUresult CUDAAPI cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                                CUgraphNodeParams* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphAddNode), [&]() -> CUresult {
    return add_node(node, graph, deps, nullptr, ndeps, p);
  });
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                   const CUgraphEdgeData* edges, size_t ndeps, CUgraphNodeParams* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphAddNode_v2), [&]() -> CUresult {
    return add_node(node, graph, deps, edges, ndeps, p);
  });
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphNodeGetType), [&]() -> CUresult {
    if (node == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (reinterpret_cast<const GraphNode*>(node)->type) {
      case NodeType::kKernel: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
      case NodeType::kMemcpy: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
      case NodeType::kMemset: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
      case NodeType::kHost: *type = CU_GRAPH_NODE_TYPE_HOST; break;
      case NodeType::kEmpty: *type = CU_GRAPH_NODE_TYPE_EMPTY; break;
      case NodeType::kMemAlloc: *type = CU_GRAPH_NODE_TYPE_MEM_ALLOC; break;
      case NodeType::kMemFree: *type = CU_GRAPH_NODE_TYPE_MEM_FREE; break;
    }
    return CUDA_SUCCESS;
  });
}

// A kernel node of an executable graph takes new parameters (XLA's command buffers update theirs before
// each launch); the node it replaces must be a kernel node of the graph it was instantiated from.
template <class Params>
CUresult set_exec_kernel_node(CUgraphExec exec, CUgraphNode node, CUfunction f, CUkernel kern, const Params* p) {
  if (exec == nullptr || node == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphNode replacement;
  if (CUresult e = kernel_node_of(f, kern, *p, &replacement); e) return e;
  return graphs().set_exec_node(reinterpret_cast<GraphExec*>(exec), reinterpret_cast<const GraphNode*>(node),
                                std::move(replacement)) == Status::kOk
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphExecKernelNodeSetParams), [&]() -> CUresult {
    return set_exec_kernel_node(exec, node, p != nullptr ? p->func : nullptr, nullptr, p);
  });
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphExecKernelNodeSetParams_v2), [&]() -> CUresult {
    return set_exec_kernel_node(exec, node, p != nullptr ? p->func : nullptr, p != nullptr ? p->kern : nullptr, p);
  });
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                             unsigned long long) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphInstantiateWithFlags), [&]() -> CUresult {
    if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    GraphExec* x = nullptr;
    if (graphs().instantiate(reinterpret_cast<Graph*>(graph), &x) != Status::kOk) return CUDA_ERROR_INVALID_VALUE;
    *exec = reinterpret_cast<CUgraphExec>(x);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphLaunch), [&]() -> CUresult {
    return graph_launch(exec, stream, kLegacy);
  });
}
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphLaunch_ptsz), [&]() -> CUresult {
    return graph_launch(exec, stream, kPerThread);
  });
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphDestroy), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    return graphs().destroy(reinterpret_cast<Graph*>(graph)) == Status::kOk ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  return traced(SIMCUDA_DRIVER_CBID(cuGraphExecDestroy), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    return graphs().destroy_exec(reinterpret_cast<GraphExec*>(exec)) == Status::kOk ? CUDA_SUCCESS
                                                                                  : CUDA_ERROR_INVALID_VALUE;
  });
}

// memory

// The current context's device: its memory less what its allocations (and physical allocations of
// virtual memory management) hold, as the runtime's cudaMemGetInfo says.
CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemGetInfo_v2), [&]() -> CUresult {
    if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int device;
    if (CUresult e = current_device(&device); e) return e;
    *total = config().device_memory_bytes;
    *free = *total - memory().used(device);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemAlloc_v2), [&]() -> CUresult {
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    int device;
    if (CUresult e = current_device(&device); e) return e;
    void* p = nullptr;
    if (Status s = memory().allocate(MemoryKind::kDevice, device, bytesize, 0, &p); s != Status::kOk) {
      return from_status(s);
    }
    *dptr = CUdeviceptr(reinterpret_cast<uintptr_t>(p));
    return CUDA_SUCCESS;
  });
}

// What the driver knows of an address, as cudaPointerGetAttributes says it (cudart/memory.cpp); an
// address of no allocation is an invalid value, as for the real driver. One address space for all
// contexts of a device: the context is the device's primary one.
CUresult pointer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = check_initialized(); e) return e;
  std::optional<Allocation> a = memory().find(host(ptr));
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  const bool on_host = a->kind == MemoryKind::kPinnedHost || a->kind == MemoryKind::kRegisteredHost;
  const bool managed = a->kind == MemoryKind::kManaged;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = primary_context(a->device);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = managed ? CU_MEMORYTYPE_UNIFIED : on_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!on_host && !managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = host(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned*>(data) = managed;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = a->device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = CUdeviceptr(a->base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = a->size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<unsigned*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = a->base;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return traced(SIMCUDA_DRIVER_CBID(cuPointerGetAttribute), [&]() -> CUresult {
    return pointer_attribute(data, attribute, ptr);
  });
}

// A TMA descriptor for a tiled region. Kernels never execute here (simcuda.h), so the descriptor's 128
// bytes only need to be those of a valid call: the region is checked as the real driver documents it
// (rank 1 to 5, a 16-byte aligned address, box sides of 1 to 256 elements) and the map written as
// zeros but for its first word, the global address.
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType, cuuint32_t tensorRank,
                                        void* globalAddress, const cuuint64_t* globalDim,
                                        const cuuint64_t* globalStrides, const cuuint32_t* boxDim,
                                        const cuuint32_t* elementStrides, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  return traced(SIMCUDA_DRIVER_CBID(cuTensorMapEncodeTiled), [&]() -> CUresult {
    if (tensorMap == nullptr || tensorRank < 1 || tensorRank > 5 || globalAddress == nullptr ||
        reinterpret_cast<uintptr_t>(globalAddress) % 16 != 0 || globalDim == nullptr || boxDim == nullptr ||
        elementStrides == nullptr || (tensorRank > 1 && globalStrides == nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (cuuint32_t i = 0; i < tensorRank; ++i) {
      if (globalDim[i] == 0 || boxDim[i] == 0 || boxDim[i] > 256 || elementStrides[i] == 0 || elementStrides[i] > 8) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    std::memset(tensorMap, 0, sizeof *tensorMap);
    const uint64_t address = reinterpret_cast<uintptr_t>(globalAddress);
    std::memcpy(tensorMap, &address, sizeof address);
    return CUDA_SUCCESS;
  });
}

// Page-locked host memory, as cudaHostAlloc's (cudart/memory.cpp): every device can reach it.
CUresult host_alloc(void** pp, size_t bytesize, unsigned int flags) {
  constexpr unsigned kValid = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (pp == nullptr || (flags & ~kValid) != 0) return CUDA_ERROR_INVALID_VALUE;
  int device;
  if (CUresult e = current_device(&device); e) return e;
  return from_status(memory().allocate(MemoryKind::kPinnedHost, device, bytesize, flags, pp));
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemHostAlloc), [&]() -> CUresult { return host_alloc(pp, bytesize, flags); });
}

CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemAllocHost_v2), [&]() -> CUresult { return host_alloc(pp, bytesize, 0); });
}

// Waits for every device first: pinned memory may be the source or target of work on any of them.
CUresult CUDAAPI cuMemFreeHost(void* p) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemFreeHost), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    std::optional<Allocation> a = memory().find(p);
    if (!a || a->kind != MemoryKind::kPinnedHost || a->base != reinterpret_cast<uintptr_t>(p)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    timeline().synchronize_all();
    return from_status(memory().release(p, {MemoryKind::kPinnedHost}));
  });
}

// Rows padded to kPitchAlignment bytes, as the real driver pads them for coalesced access; the
// element size must be one the driver documents.
constexpr size_t kPitchAlignment = 512;

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                    unsigned int element_size) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemAllocPitch_v2), [&]() -> CUresult {
    if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0 ||
        (element_size != 4 && element_size != 8 && element_size != 16)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    int device;
    if (CUresult e = current_device(&device); e) return e;
    const size_t padded = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    void* p = nullptr;
    if (Status s = memory().allocate(MemoryKind::kDevice, device, padded * height, 0, &p); s != Status::kOk) {
      return from_status(s);
    }
    *dptr = CUdeviceptr(reinterpret_cast<uintptr_t>(p));
    *pitch = padded;
    return CUDA_SUCCESS;
  });
}

// Waits for the device first, as the real cuMemFree does, so that no queued work still uses it.
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemFree_v2), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    void* p = host(dptr);
    std::optional<Allocation> a = memory().find(p);
    if (!a || a->base != uintptr_t(dptr)) return CUDA_ERROR_INVALID_VALUE;
    timeline().synchronize_device(a->device);
    return from_status(memory().release(p, {MemoryKind::kDevice, MemoryKind::kManaged}));
  });
}

constexpr Side kH = Side::kHost;
constexpr Side kD = Side::kDevice;
constexpr Side kU = Side::kUnified;

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpy), [&]() -> CUresult {
    return copy(host(dst), kU, host(src), kU, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpy_ptds), [&]() -> CUresult {
    return copy(host(dst), kU, host(src), kU, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyAsync), [&]() -> CUresult {
    return copy(host(dst), kU, host(src), kU, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyAsync_ptsz), [&]() -> CUresult {
    return copy(host(dst), kU, host(src), kU, n, s, kPerThread, false);
  });
}
CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyHtoD_v2), [&]() -> CUresult {
    return copy(host(dst), kD, src, kH, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyHtoD_v2_ptds), [&]() -> CUresult {
    return copy(host(dst), kD, src, kH, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoH_v2), [&]() -> CUresult {
    return copy(dst, kH, host(src), kD, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoH_v2_ptds), [&]() -> CUresult {
    return copy(dst, kH, host(src), kD, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoD_v2), [&]() -> CUresult {
    return copy(host(dst), kD, host(src), kD, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoD_v2_ptds), [&]() -> CUresult {
    return copy(host(dst), kD, host(src), kD, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyHtoDAsync_v2), [&]() -> CUresult {
    return copy(host(dst), kD, src, kH, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyHtoDAsync_v2_ptsz), [&]() -> CUresult {
    return copy(host(dst), kD, src, kH, n, s, kPerThread, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoHAsync_v2), [&]() -> CUresult {
    return copy(dst, kH, host(src), kD, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoHAsync_v2_ptsz), [&]() -> CUresult {
    return copy(dst, kH, host(src), kD, n, s, kPerThread, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoDAsync_v2), [&]() -> CUresult {
    return copy(host(dst), kD, host(src), kD, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemcpyDtoDAsync_v2_ptsz), [&]() -> CUresult {
    return copy(host(dst), kD, host(src), kD, n, s, kPerThread, false);
  });
}
CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD8_v2), [&]() -> CUresult {
    return set(dst, v, 1, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD8_v2_ptds), [&]() -> CUresult {
    return set(dst, v, 1, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD32_v2), [&]() -> CUresult {
    return set(dst, v, 4, n, nullptr, kLegacy, true);
  });
}
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD32_v2_ptds), [&]() -> CUresult {
    return set(dst, v, 4, n, nullptr, kPerThread, true);
  });
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD8Async), [&]() -> CUresult {
    return set(dst, v, 1, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD8Async_ptsz), [&]() -> CUresult {
    return set(dst, v, 1, n, s, kPerThread, false);
  });
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD32Async), [&]() -> CUresult {
    return set(dst, v, 4, n, s, kLegacy, false);
  });
}
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuMemsetD32Async_ptsz), [&]() -> CUresult {
    return set(dst, v, 4, n, s, kPerThread, false);
  });
}

// streams and events

CUresult create_stream(CUstream* stream, unsigned int flags, int priority) {
  if (stream == nullptr || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int device;
  if (CUresult e = current_device(&device); e) return e;
  StreamId id;
  if (Status s = timeline().create_stream(device, flags, priority, false, &id); s != Status::kOk) {
    return from_status(s);
  }
  *stream = reinterpret_cast<CUstream>(handles::stream(id));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamCreate), [&]() -> CUresult { return create_stream(stream, flags, 0); });
}

// A priority outside cuCtxGetStreamPriorityRange's [-5, 0] is clamped to it, as the driver does.
CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamCreateWithPriority), [&]() -> CUresult {
    return create_stream(stream, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority);
  });
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream stream) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamDestroy_v2), [&]() -> CUresult { return destroy_stream(stream); });
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamSynchronize), [&]() -> CUresult { return stream_op(s, kLegacy, true); });
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamSynchronize_ptsz), [&]() -> CUresult { return stream_op(s, kPerThread, true); });
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamQuery), [&]() -> CUresult { return stream_op(s, kLegacy, false); });
}
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamQuery_ptsz), [&]() -> CUresult { return stream_op(s, kPerThread, false); });
}

CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventCreate), [&]() -> CUresult {
    constexpr unsigned kValid = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (event == nullptr || (flags & ~kValid) != 0) return CUDA_ERROR_INVALID_VALUE;
    int device;
    if (CUresult e = current_device(&device); e) return e;
    EventId id;
    if (Status s = timeline().create_event(device, flags, &id); s != Status::kOk) {
      return from_status(s);
    }
    *event = reinterpret_cast<CUevent>(handles::event(id));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn f, void* u) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchHostFunc), [&]() -> CUresult { return launch_host_func(s, f, u, kLegacy); });
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn f, void* u) {
  return traced(SIMCUDA_DRIVER_CBID(cuLaunchHostFunc_ptsz), [&]() -> CUresult { return launch_host_func(s, f, u, kPerThread); });
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamWaitEvent), [&]() -> CUresult { return wait_event(s, e, f, kLegacy); });
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int f) {
  return traced(SIMCUDA_DRIVER_CBID(cuStreamWaitEvent_ptsz), [&]() -> CUresult { return wait_event(s, e, f, kPerThread); });
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventRecord), [&]() -> CUresult { return record_event(e, s, kLegacy); });
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventRecord_ptsz), [&]() -> CUresult { return record_event(e, s, kPerThread); });
}

CUresult CUDAAPI cuEventSynchronize(CUevent event) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventSynchronize), [&]() -> CUresult {
    EventId id;
    if (CUresult e = event_id(event, &id); e) return e;
    EventInfo info{};
    if (activity::active()) timeline().event_info(id, &info);
    return activity::timed_sync(activity::SyncType::kEvent, info.device, 0, id,
                                [&] { return from_status(timeline().synchronize_event(id)); });
  });
}

CUresult CUDAAPI cuEventQuery(CUevent event) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventQuery), [&]() -> CUresult {
    EventId id;
    if (CUresult e = event_id(event, &id); e) return e;
    return from_status(timeline().query_event(id));
  });
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventElapsedTime_v2), [&]() -> CUresult {
    return elapsed_time(ms, start, end);
  });
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent event) {
  return traced(SIMCUDA_DRIVER_CBID(cuEventDestroy_v2), [&]() -> CUresult { return destroy_event(event); });
}

// Profiler control: what a tracer's capture range follows. Nothing to do on a simulated device.
CUresult CUDAAPI cuProfilerStart() {
  return traced(SIMCUDA_DRIVER_CBID(cuProfilerStart), [&]() -> CUresult { return check_initialized(); });
}
CUresult CUDAAPI cuProfilerStop() {
  return traced(SIMCUDA_DRIVER_CBID(cuProfilerStop), [&]() -> CUresult { return check_initialized(); });
}

// An entry point of a driver newer than the toolkit: no header declares it and no export carries it,
// as with a function a newer driver hands out to a newer runtime through cuGetProcAddress.
CUresult CUDAAPI cuSimFutureFunction() { return check_initialized(); }

// OpenGL interop, which the real driver hands out to every runtime that asks at start-up, whether or
// not the program draws anything. Declared in cudaGL.h, which needs GL's own headers; no GL here.
CUresult CUDAAPI cuGLInit() {
  return traced(SIMCUDA_DRIVER_CBID(cuGLInit), [&]() -> CUresult { return check_initialized(); });
}

}  // namespace
}  // namespace impl

// ---- exports ----

// Entry points without an internal twin: cuGetProcAddress hands out these exports themselves.

SIMCUDA_EXPORT CUresult CUDAAPI cuInit(unsigned int flags) {
  return traced(SIMCUDA_DRIVER_CBID(cuInit), [&]() -> CUresult {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (config().device_count == 0) return CUDA_ERROR_NO_DEVICE;
    mark_initialized();
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* version) {
  return traced(SIMCUDA_DRIVER_CBID(cuDriverGetVersion), [&]() -> CUresult {
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = config().driver_version;
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** str) {
  // Any number may come in: read it as one, not as the enum (UBSan checks loads of an enum's value).
  int code;
  std::memcpy(&code, &error, sizeof code);
  return traced(SIMCUDA_DRIVER_CBID(cuGetErrorName), [&]() -> CUresult {
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *str = error_name(CUresult(code));
    return *str == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** str) {
  int code;  // as in cuGetErrorName
  std::memcpy(&code, &error, sizeof code);
  return traced(SIMCUDA_DRIVER_CBID(cuGetErrorString), [&]() -> CUresult {
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *str = error_string(CUresult(code));
    return *str == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  });
}

// The primary context of every device exists from cuInit on and is never reset, so it is always
// active (a framework asks before it creates one of its own), with the default flags.
SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  return traced(SIMCUDA_DRIVER_CBID(cuDevicePrimaryCtxGetState), [&]() -> CUresult {
    if (CUresult e = impl::check_device(dev); e) return e;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = 1;
    return CUDA_SUCCESS;
  });
}

// Each device's PCI address (core/device.h).
SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetPCIBusId), [&]() -> CUresult {
    if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = impl::check_device(dev); e) return e;
    device_pci_bus_id(dev, pciBusId, size_t(len));
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  return traced(SIMCUDA_DRIVER_CBID(cuDeviceGetByPCIBusId), [&]() -> CUresult {
    if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_initialized(); e) return e;
    unsigned domain, bus, slot, function;
    if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) return CUDA_ERROR_INVALID_VALUE;
    const int device = device_of_pci_bus_id(pciBusId);
    if (device < 0) return CUDA_ERROR_INVALID_DEVICE;
    *dev = device;
    return CUDA_SUCCESS;
  });
}

// Stream priorities as a Hopper GPU reports them: 0 the least, -5 the greatest (lower is higher).
SIMCUDA_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  return traced(SIMCUDA_DRIVER_CBID(cuCtxGetStreamPriorityRange), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    if (leastPriority != nullptr) *leastPriority = 0;
    if (greatestPriority != nullptr) *greatestPriority = -5;
    return CUDA_SUCCESS;
  });
}

// The export `name` calls impl::`target`.
#define FORWARD(name, target, params, args) \
  SIMCUDA_EXPORT CUresult CUDAAPI name params { return impl::target args; }
#define EXPORT(name, params, args) FORWARD(name, name, params, args)

EXPORT(cuDeviceGet, (CUdevice* d, int o), (d, o))
EXPORT(cuDeviceGetCount, (int* c), (c))
EXPORT(cuDeviceGetName, (char* n, int l, CUdevice d), (n, l, d))
EXPORT(cuDeviceGetAttribute, (int* v, CUdevice_attribute a, CUdevice d), (v, a, d))
EXPORT(cuDevicePrimaryCtxRetain, (CUcontext* c, CUdevice d), (c, d))
FORWARD(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
EXPORT(cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
EXPORT(cuCtxGetCurrent, (CUcontext* c), (c))
EXPORT(cuCtxSetCurrent, (CUcontext c), (c))
EXPORT(cuCtxGetDevice, (CUdevice* d), (d))
EXPORT(cuCtxCreate_v4, (CUcontext* c, CUctxCreateParams* p, unsigned int f, CUdevice d), (c, p, f, d))
EXPORT(cuCtxDestroy_v2, (CUcontext c), (c))
EXPORT(cuCtxPushCurrent_v2, (CUcontext c), (c))
EXPORT(cuCtxPopCurrent_v2, (CUcontext* c), (c))
EXPORT(cuDeviceTotalMem_v2, (size_t* b, CUdevice d), (b, d))
EXPORT(cuCtxSynchronize, (void), ())
EXPORT(cuProfilerStart, (void), ())
EXPORT(cuProfilerStop, (void), ())
EXPORT(cuCtxSynchronize_v2, (CUcontext c), (c))
EXPORT(cuGetExportTable, (const void** t, const CUuuid* id), (t, id))
EXPORT(cuGetProcAddress, (const char* s, void** p, int v, cuuint64_t f), (s, p, v, f))
EXPORT(cuGetProcAddress_v2,
       (const char* s, void** p, int v, cuuint64_t f, CUdriverProcAddressQueryResult* r),
       (s, p, v, f, r))

EXPORT(cuModuleLoadData, (CUmodule* m, const void* i), (m, i))
EXPORT(cuModuleLoadFatBinary, (CUmodule* m, const void* f), (m, f))
EXPORT(cuModuleGetFunction, (CUfunction* f, CUmodule m, const char* n), (f, m, n))
EXPORT(cuModuleLoadDataEx, (CUmodule* m, const void* i, unsigned int n, CUjit_option* o, void** v), (m, i, n, o, v))
EXPORT(cuModuleUnload, (CUmodule m), (m))
EXPORT(cuLibraryLoadData,
       (CUlibrary* l, const void* c, CUjit_option* jo, void** jv, unsigned int nj,
        CUlibraryOption* lo, void** lv, unsigned int nl),
       (l, c, jo, jv, nj, lo, lv, nl))
EXPORT(cuLibraryGetKernel, (CUkernel* k, CUlibrary l, const char* n), (k, l, n))
EXPORT(cuLibraryUnload, (CUlibrary l), (l))
EXPORT(cuKernelGetFunction, (CUfunction* f, CUkernel k), (f, k))
EXPORT(cuFuncGetName, (const char** n, CUfunction f), (n, f))
EXPORT(cuKernelGetName, (const char** n, CUkernel k), (n, k))

#define LAUNCH_PARAMS                                                                          \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
   unsigned sm, CUstream s, void** p, void** x)
EXPORT(cuLaunchKernel, LAUNCH_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, p, x))
EXPORT(cuLaunchKernel_ptsz, LAUNCH_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, p, x))
#define COOPERATIVE_PARAMS                                                                     \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
   unsigned sm, CUstream s, void** p)
EXPORT(cuLaunchCooperativeKernel, COOPERATIVE_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, p))
EXPORT(cuLaunchCooperativeKernel_ptsz, COOPERATIVE_PARAMS, (f, gx, gy, gz, bx, by, bz, sm, s, p))
EXPORT(cuLaunchKernelEx, (const CUlaunchConfig* c, CUfunction f, void** p, void** x), (c, f, p, x))
EXPORT(cuLaunchKernelEx_ptsz, (const CUlaunchConfig* c, CUfunction f, void** p, void** x),
       (c, f, p, x))

EXPORT(cuStreamBeginCapture, (CUstream s), (s))
EXPORT(cuStreamIsCapturing, (CUstream s, CUstreamCaptureStatus* c), (s, c))
EXPORT(cuStreamIsCapturing_ptsz, (CUstream s, CUstreamCaptureStatus* c), (s, c))
EXPORT(cuStreamBeginCapture_ptsz, (CUstream s), (s))
EXPORT(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m))
EXPORT(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m))
EXPORT(cuStreamEndCapture, (CUstream s, CUgraph* g), (s, g))
EXPORT(cuStreamEndCapture_ptsz, (CUstream s, CUgraph* g), (s, g))
EXPORT(cuGraphCreate, (CUgraph* g, unsigned int f), (g, f))
EXPORT(cuGraphAddKernelNode,
       (CUgraphNode* n, CUgraph g, const CUgraphNode* d, size_t nd,
        const CUDA_KERNEL_NODE_PARAMS_v1* p),
       (n, g, d, nd, p))
EXPORT(cuGraphAddKernelNode_v2,
       (CUgraphNode* n, CUgraph g, const CUgraphNode* d, size_t nd, const CUDA_KERNEL_NODE_PARAMS* p),
       (n, g, d, nd, p))
EXPORT(cuGraphAddNode, (CUgraphNode* n, CUgraph g, const CUgraphNode* d, size_t nd, CUgraphNodeParams* p),
       (n, g, d, nd, p))
EXPORT(cuGraphAddNode_v2,
       (CUgraphNode* n, CUgraph g, const CUgraphNode* d, const CUgraphEdgeData* e, size_t nd, CUgraphNodeParams* p),
       (n, g, d, e, nd, p))
EXPORT(cuGraphNodeGetType, (CUgraphNode n, CUgraphNodeType* t), (n, t))
EXPORT(cuGraphExecKernelNodeSetParams, (CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v1* p), (x, n, p))
EXPORT(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS* p), (x, n, p))
EXPORT(cuGraphInstantiateWithFlags, (CUgraphExec* x, CUgraph g, unsigned long long f), (x, g, f))
EXPORT(cuGraphLaunch, (CUgraphExec x, CUstream s), (x, s))
EXPORT(cuGraphLaunch_ptsz, (CUgraphExec x, CUstream s), (x, s))
EXPORT(cuGraphDestroy, (CUgraph g), (g))
EXPORT(cuGraphExecDestroy, (CUgraphExec x), (x))

EXPORT(cuMemAlloc_v2, (CUdeviceptr* p, size_t n), (p, n))
EXPORT(cuMemGetInfo_v2, (size_t* f, size_t* t), (f, t))
EXPORT(cuMemAllocPitch_v2, (CUdeviceptr* p, size_t* pitch, size_t w, size_t h, unsigned int e), (p, pitch, w, h, e))
EXPORT(cuMemFree_v2, (CUdeviceptr p), (p))
EXPORT(cuMemHostAlloc, (void** p, size_t n, unsigned int f), (p, n, f))
SIMCUDA_EXPORT CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* m, CUtensorMapDataType t, cuuint32_t r, void* a,
                                                       const cuuint64_t* d, const cuuint64_t* s, const cuuint32_t* b,
                                                       const cuuint32_t* e, CUtensorMapInterleave i,
                                                       CUtensorMapSwizzle w, CUtensorMapL2promotion l,
                                                       CUtensorMapFloatOOBfill o) {
  return impl::cuTensorMapEncodeTiled(m, t, r, a, d, s, b, e, i, w, l, o);
}
EXPORT(cuPointerGetAttribute, (void* d, CUpointer_attribute a, CUdeviceptr p), (d, a, p))
EXPORT(cuMemAllocHost_v2, (void** p, size_t n), (p, n))
EXPORT(cuMemFreeHost, (void* p), (p))
EXPORT(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyHtoD_v2, (CUdeviceptr d, const void* s, size_t n), (d, s, n))
EXPORT(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void* s, size_t n), (d, s, n))
EXPORT(cuMemcpyDtoH_v2, (void* d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpyDtoH_v2_ptds, (void* d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
EXPORT(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void* s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void* s, size_t n, CUstream h),
       (d, s, n, h))
EXPORT(cuMemcpyDtoHAsync_v2, (void* d, CUdeviceptr s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyDtoHAsync_v2_ptsz, (void* d, CUdeviceptr s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h), (d, s, n, h))
EXPORT(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h),
       (d, s, n, h))
EXPORT(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
EXPORT(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
EXPORT(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))
EXPORT(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))
EXPORT(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream h), (d, v, n, h))
EXPORT(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream h), (d, v, n, h))
EXPORT(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream h), (d, v, n, h))
EXPORT(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream h), (d, v, n, h))

EXPORT(cuStreamCreate, (CUstream* s, unsigned int f), (s, f))
EXPORT(cuStreamCreateWithPriority, (CUstream* s, unsigned int f, int p), (s, f, p))
FORWARD(cuStreamDestroy, cuStreamDestroy_v2, (CUstream s), (s))
EXPORT(cuStreamDestroy_v2, (CUstream s), (s))
EXPORT(cuStreamSynchronize, (CUstream s), (s))
EXPORT(cuStreamSynchronize_ptsz, (CUstream s), (s))
EXPORT(cuStreamQuery, (CUstream s), (s))
EXPORT(cuStreamQuery_ptsz, (CUstream s), (s))
EXPORT(cuEventCreate, (CUevent* e, unsigned int f), (e, f))
EXPORT(cuEventRecord, (CUevent e, CUstream s), (e, s))
EXPORT(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int f), (s, e, f))
EXPORT(cuLaunchHostFunc, (CUstream s, CUhostFn f, void* u), (s, f, u))
EXPORT(cuLaunchHostFunc_ptsz, (CUstream s, CUhostFn f, void* u), (s, f, u))
EXPORT(cuStreamWaitEvent_ptsz, (CUstream s, CUevent e, unsigned int f), (s, e, f))
EXPORT(cuEventRecord_ptsz, (CUevent e, CUstream s), (e, s))
EXPORT(cuEventSynchronize, (CUevent e), (e))
EXPORT(cuEventQuery, (CUevent e), (e))
FORWARD(cuEventElapsedTime, cuEventElapsedTime_v2, (float* ms, CUevent a, CUevent b), (ms, a, b))
EXPORT(cuEventElapsedTime_v2, (float* ms, CUevent a, CUevent b), (ms, a, b))
FORWARD(cuEventDestroy, cuEventDestroy_v2, (CUevent e), (e))
EXPORT(cuEventDestroy_v2, (CUevent e), (e))

// ---- cuGetProcAddress ----

namespace {

// One version of an entry point, as cudaTypedefs.h lists it (PFN_<symbol>_v<version>[_ptds|_ptsz]):
// the k-th legacy version is exported as <symbol>, <symbol>_v2, ..., a per-thread version as the
// export of the newest legacy version not newer than it plus its suffix. Sorted by symbol, then
// version. Only the versions implemented here: a program asking for an older one is told that its
// version is not sufficient.
struct ProcVersion {
  const char* symbol;
  int version;
  bool per_thread;
  const char* export_name;
  void* address;
};

#define I(sym, ver, pt, exp) {sym, ver, pt, #exp, reinterpret_cast<void*>(&impl::exp)}
#define E(sym, ver, pt, exp) {sym, ver, pt, #exp, reinterpret_cast<void*>(&::exp)}

const ProcVersion kProcVersions[] = {
    I("cuCtxCreate", 12050, false, cuCtxCreate_v4),
    I("cuCtxDestroy", 4000, false, cuCtxDestroy_v2),
    I("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    I("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    I("cuCtxPopCurrent", 4000, false, cuCtxPopCurrent_v2),
    I("cuCtxPushCurrent", 4000, false, cuCtxPushCurrent_v2),
    I("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    I("cuCtxSynchronize", 2000, false, cuCtxSynchronize),
    I("cuCtxSynchronize", 13000, false, cuCtxSynchronize_v2),
    I("cuDeviceGet", 2000, false, cuDeviceGet),
    I("cuDeviceGetAttribute", 2000, false, cuDeviceGetAttribute),
    I("cuDeviceGetCount", 2000, false, cuDeviceGetCount),
    I("cuDeviceGetName", 2000, false, cuDeviceGetName),
    I("cuDevicePrimaryCtxRelease", 11000, false, cuDevicePrimaryCtxRelease_v2),
    I("cuDevicePrimaryCtxRetain", 7000, false, cuDevicePrimaryCtxRetain),
    I("cuDeviceTotalMem", 3020, false, cuDeviceTotalMem_v2),
    E("cuDriverGetVersion", 2020, false, cuDriverGetVersion),
    I("cuEventCreate", 2000, false, cuEventCreate),
    I("cuEventDestroy", 4000, false, cuEventDestroy_v2),
    I("cuEventElapsedTime", 12080, false, cuEventElapsedTime_v2),
    I("cuEventQuery", 2000, false, cuEventQuery),
    I("cuEventRecord", 2000, false, cuEventRecord),
    I("cuEventRecord", 7000, true, cuEventRecord_ptsz),
    I("cuEventSynchronize", 2000, false, cuEventSynchronize),
    I("cuFuncGetName", 12030, false, cuFuncGetName),
    I("cuGLInit", 2000, false, cuGLInit),
    I("cuProfilerStart", 4000, false, cuProfilerStart),
    I("cuProfilerStop", 4000, false, cuProfilerStop),
    E("cuGetErrorName", 6000, false, cuGetErrorName),
    E("cuGetErrorString", 6000, false, cuGetErrorString),
    I("cuGetExportTable", 3000, false, cuGetExportTable),
    I("cuGetProcAddress", 11030, false, cuGetProcAddress),
    I("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
    I("cuGraphAddKernelNode", 10000, false, cuGraphAddKernelNode),
    I("cuGraphAddKernelNode", 12000, false, cuGraphAddKernelNode_v2),
    I("cuGraphAddNode", 12020, false, cuGraphAddNode),
    I("cuGraphAddNode", 12030, false, cuGraphAddNode_v2),
    I("cuGraphCreate", 10000, false, cuGraphCreate),
    I("cuGraphDestroy", 10000, false, cuGraphDestroy),
    I("cuGraphExecDestroy", 10000, false, cuGraphExecDestroy),
    I("cuGraphExecKernelNodeSetParams", 10010, false, cuGraphExecKernelNodeSetParams),
    I("cuGraphExecKernelNodeSetParams", 12000, false, cuGraphExecKernelNodeSetParams_v2),
    I("cuGraphInstantiateWithFlags", 11040, false, cuGraphInstantiateWithFlags),
    I("cuGraphNodeGetType", 10000, false, cuGraphNodeGetType),
    I("cuGraphLaunch", 10000, false, cuGraphLaunch),
    I("cuGraphLaunch", 10000, true, cuGraphLaunch_ptsz),
    E("cuInit", 2000, false, cuInit),
    I("cuKernelGetFunction", 12000, false, cuKernelGetFunction),
    I("cuKernelGetName", 12030, false, cuKernelGetName),
    I("cuLaunchCooperativeKernel", 9000, false, cuLaunchCooperativeKernel),
    I("cuLaunchCooperativeKernel", 9000, true, cuLaunchCooperativeKernel_ptsz),
    I("cuLaunchKernel", 4000, false, cuLaunchKernel),
    I("cuLaunchKernel", 7000, true, cuLaunchKernel_ptsz),
    I("cuLaunchKernelEx", 11060, false, cuLaunchKernelEx),
    I("cuLaunchKernelEx", 11060, true, cuLaunchKernelEx_ptsz),
    I("cuLibraryGetKernel", 12000, false, cuLibraryGetKernel),
    I("cuLibraryLoadData", 12000, false, cuLibraryLoadData),
    I("cuLibraryUnload", 12000, false, cuLibraryUnload),
    I("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    I("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    I("cuMemFree", 3020, false, cuMemFree_v2),
    I("cuMemHostAlloc", 2020, false, cuMemHostAlloc),
    I("cuPointerGetAttribute", 4000, false, cuPointerGetAttribute),
    I("cuMemAllocHost", 3020, false, cuMemAllocHost_v2),
    I("cuMemFreeHost", 2000, false, cuMemFreeHost),
    I("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    I("cuMemcpy", 4000, false, cuMemcpy),
    I("cuMemcpy", 7000, true, cuMemcpy_ptds),
    I("cuMemcpyAsync", 4000, false, cuMemcpyAsync),
    I("cuMemcpyAsync", 7000, true, cuMemcpyAsync_ptsz),
    I("cuMemcpyDtoD", 3020, false, cuMemcpyDtoD_v2),
    I("cuMemcpyDtoD", 7000, true, cuMemcpyDtoD_v2_ptds),
    I("cuMemcpyDtoDAsync", 3020, false, cuMemcpyDtoDAsync_v2),
    I("cuMemcpyDtoDAsync", 7000, true, cuMemcpyDtoDAsync_v2_ptsz),
    I("cuMemcpyDtoH", 3020, false, cuMemcpyDtoH_v2),
    I("cuMemcpyDtoH", 7000, true, cuMemcpyDtoH_v2_ptds),
    I("cuMemcpyDtoHAsync", 3020, false, cuMemcpyDtoHAsync_v2),
    I("cuMemcpyDtoHAsync", 7000, true, cuMemcpyDtoHAsync_v2_ptsz),
    I("cuMemcpyHtoD", 3020, false, cuMemcpyHtoD_v2),
    I("cuMemcpyHtoD", 7000, true, cuMemcpyHtoD_v2_ptds),
    I("cuMemcpyHtoDAsync", 3020, false, cuMemcpyHtoDAsync_v2),
    I("cuMemcpyHtoDAsync", 7000, true, cuMemcpyHtoDAsync_v2_ptsz),
    I("cuMemsetD32", 3020, false, cuMemsetD32_v2),
    I("cuMemsetD32", 7000, true, cuMemsetD32_v2_ptds),
    I("cuMemsetD32Async", 3020, false, cuMemsetD32Async),
    I("cuMemsetD32Async", 7000, true, cuMemsetD32Async_ptsz),
    I("cuMemsetD8", 3020, false, cuMemsetD8_v2),
    I("cuMemsetD8", 7000, true, cuMemsetD8_v2_ptds),
    I("cuMemsetD8Async", 3020, false, cuMemsetD8Async),
    I("cuMemsetD8Async", 7000, true, cuMemsetD8Async_ptsz),
    I("cuLaunchHostFunc", 10000, false, cuLaunchHostFunc),
    I("cuLaunchHostFunc", 10000, true, cuLaunchHostFunc_ptsz),
    I("cuModuleGetFunction", 2000, false, cuModuleGetFunction),
    I("cuModuleLoadData", 2000, false, cuModuleLoadData),
    I("cuModuleLoadFatBinary", 2000, false, cuModuleLoadFatBinary),
    I("cuModuleLoadDataEx", 2010, false, cuModuleLoadDataEx),
    I("cuModuleUnload", 2000, false, cuModuleUnload),
    I("cuSimFutureFunction", 13020, false, cuSimFutureFunction),
    I("cuStreamBeginCapture", 10000, false, cuStreamBeginCapture),
    I("cuStreamBeginCapture", 10000, true, cuStreamBeginCapture_ptsz),
    I("cuStreamBeginCapture", 10010, false, cuStreamBeginCapture_v2),
    I("cuStreamBeginCapture", 10010, true, cuStreamBeginCapture_v2_ptsz),
    I("cuStreamCreate", 2000, false, cuStreamCreate),
    I("cuStreamCreateWithPriority", 5050, false, cuStreamCreateWithPriority),
    I("cuStreamDestroy", 4000, false, cuStreamDestroy_v2),
    I("cuStreamEndCapture", 10000, false, cuStreamEndCapture),
    I("cuStreamEndCapture", 10000, true, cuStreamEndCapture_ptsz),
    I("cuStreamIsCapturing", 10000, false, cuStreamIsCapturing),
    I("cuStreamIsCapturing", 10000, true, cuStreamIsCapturing_ptsz),
    I("cuStreamQuery", 2000, false, cuStreamQuery),
    I("cuStreamQuery", 7000, true, cuStreamQuery_ptsz),
    I("cuStreamSynchronize", 2000, false, cuStreamSynchronize),
    I("cuStreamWaitEvent", 3020, false, cuStreamWaitEvent),
    I("cuStreamWaitEvent", 7000, true, cuStreamWaitEvent_ptsz),
    I("cuStreamSynchronize", 7000, true, cuStreamSynchronize_ptsz),
};

#undef I
#undef E

CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr ||
      (flags & ~cuuint64_t(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  bool known = false;
  const ProcVersion* legacy = nullptr;
  const ProcVersion* threaded = nullptr;
  for (const ProcVersion& v : kProcVersions) {
    if (std::strcmp(v.symbol, symbol) != 0) continue;
    known = true;
    if (v.version > version) continue;
    (v.per_thread ? threaded : legacy) = &v;
  }
  // A symbol this file does not implement: its export, generated or hand-written, as the headers list
  // its versions.
  const GeneratedProcVersion* generated_legacy = nullptr;
  const GeneratedProcVersion* generated_threaded = nullptr;
  bool generated_known = false;
  for (size_t i = 0; !known && i < kGeneratedProcVersionCount; ++i) {
    const GeneratedProcVersion& v = kGeneratedProcVersions[i];
    if (std::strcmp(v.symbol, symbol) != 0) continue;
    generated_known = true;
    if (v.version > version) continue;
    (v.per_thread ? generated_threaded : generated_legacy) = &v;
  }
  known = known || generated_known;
  const ProcVersion* found = per_thread && threaded != nullptr ? threaded : legacy;
  void* address = found == nullptr ? nullptr : found->address;
  if (found == nullptr) {
    const GeneratedProcVersion* g = per_thread && generated_threaded != nullptr ? generated_threaded : generated_legacy;
    address = g == nullptr ? nullptr : g->address;
  }
  *pfn = address;
  if (status != nullptr) {
    *status = address != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : known            ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return address == nullptr ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

}  // namespace
