// CUDA graphs in the runtime: stream capture, graphs built node by node (kernel, memset, 1D copy and
// empty nodes), instantiation and launch, over the device's graph registry (core/graphs.h), which the
// driver's graph calls share.
#include <cstring>
#include <functional>

#include "core/graphs.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

Graph* graph_of(cudaGraph_t g) { return reinterpret_cast<Graph*>(g); }
GraphExec* exec_of(cudaGraphExec_t x) { return reinterpret_cast<GraphExec*>(x); }

cudaError_t add(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* dependencies, size_t count,
                GraphNode node) {
  GraphNode* added = nullptr;
  if (graphs().add_node(graph_of(graph), std::move(node), reinterpret_cast<const void* const*>(dependencies), count,
                        &added) != Status::kOk)
    return cudaErrorInvalidValue;
  *out = reinterpret_cast<cudaGraphNode_t>(added);
  return cudaSuccess;
}

cudaError_t begin_capture(cudaStream_t stream, DefaultStream flavour) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  StreamInfo info;
  if (Status s = timeline().stream_info(sid, &info); s != Status::kOk) return from_status(s);
  // The legacy stream cannot be captured (it synchronises with every blocking stream).
  if (info.legacy) return cudaErrorStreamCaptureUnsupported;
  return graphs().begin_capture(sid) == Status::kOk ? cudaSuccess : cudaErrorIllegalState;
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* out, DefaultStream flavour) {
  if (out == nullptr) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  // Only the stream that began a capture ends it; one that joined it must join back first.
  if (graphs().capturing(sid) && !graphs().capture_origin(sid)) return cudaErrorStreamCaptureUnmatched;
  Graph* g = nullptr;
  if (graphs().end_capture(sid, &g) != Status::kOk) return cudaErrorIllegalState;
  *out = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}

cudaError_t is_capturing(cudaStream_t stream, cudaStreamCaptureStatus* status, DefaultStream flavour) {
  if (status == nullptr) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  *status = graphs().capturing(sid) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t stream, DefaultStream flavour) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capturing(sid)) return cudaErrorStreamCaptureUnsupported;
  Status s = graphs().launch(exec_of(exec), sid);
  return s == Status::kInvalidValue ? cudaErrorInvalidValue : from_status(s);
}

// Uploading prepares a launch on the real device; here every launch is ready, so only the
// arguments are checked.
cudaError_t graph_upload(cudaGraphExec_t exec, cudaStream_t stream, DefaultStream flavour) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (exec == nullptr) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

GraphNode kernel_node(const Kernel& k, dim3 grid, dim3 block, size_t shared_mem) {
  GraphNode n;
  n.type = NodeType::kKernel;
  n.kind = OpKind::kKernel;
  n.duration_ns = k.duration_ns;
  n.kernel = &k;
  n.info.type = activity::OpType::kKernel;
  n.info.name = k.name.c_str();
  n.info.grid[0] = grid.x, n.info.grid[1] = grid.y, n.info.grid[2] = grid.z;
  n.info.block[0] = block.x, n.info.block[1] = block.y, n.info.block[2] = block.z;
  n.info.dynamic_shared = unsigned(shared_mem);
  return n;
}

// Rows of `width` elements of `element_size` bytes (1, 2 or 4), each element the value's low bytes.
GraphNode memset_node(void* ptr, unsigned value, unsigned element_size, size_t pitch, size_t width, size_t height) {
  GraphNode n;
  n.type = NodeType::kMemset;
  n.kind = OpKind::kMemset;
  const uint64_t bytes = uint64_t(width) * element_size * height;
  n.duration_ns = copy_duration_ns(bytes, config().copy_gbps);
  n.effect = [ptr, value, element_size, pitch, width, height] {
    for (size_t row = 0; row < height; ++row) {
      char* line = static_cast<char*>(ptr) + row * pitch;
      if (element_size == 1) {
        std::memset(line, int(value), width);
        continue;
      }
      for (size_t i = 0; i < width; ++i) std::memcpy(line + i * element_size, &value, element_size);
    }
  };
  n.info.type = activity::OpType::kMemset;
  n.info.dst = activity::memory_of(ptr);
  n.info.bytes = bytes;
  n.info.value = value;
  return n;
}

// `rows` rows of `width` bytes, each at its own pitch on either side.
GraphNode copy_rows_node(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  GraphNode n;
  n.type = NodeType::kMemcpy;
  n.kind = OpKind::kMemcpy;
  n.duration_ns = copy_duration_ns(uint64_t(width) * rows, config().copy_gbps);
  n.effect = [dst, dst_pitch, src, src_pitch, width, rows] {
    for (size_t r = 0; r < rows; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
    }
  };
  n.info.type = activity::OpType::kMemcpy;
  n.info.src = activity::memory_of(src);
  n.info.dst = activity::memory_of(dst);
  n.info.bytes = uint64_t(width) * rows;
  return n;
}

GraphNode copy_node(void* dst, const void* src, size_t bytes) {
  GraphNode n;
  n.type = NodeType::kMemcpy;
  n.kind = OpKind::kMemcpy;
  n.duration_ns = copy_duration_ns(bytes, config().copy_gbps);
  n.effect = [dst, src, bytes] { std::memmove(dst, src, bytes); };
  n.info.type = activity::OpType::kMemcpy;
  n.info.src = activity::memory_of(src);
  n.info.dst = activity::memory_of(dst);
  n.info.bytes = bytes;
  return n;
}

// Runs the function on the device thread when the stream reaches it, as cudaLaunchHostFunc's work.
GraphNode host_node(cudaHostFn_t fn, void* user_data) {
  GraphNode n;
  n.type = NodeType::kHost;
  n.kind = OpKind::kHostFunc;
  n.effect = [fn, user_data] { fn(user_data); };
  return n;
}

GraphNode empty_node() {
  GraphNode n;
  n.type = NodeType::kEmpty;
  n.empty = true;
  return n;
}

// The address is the device's from now on (graphs().add_graph_allocation); the node only counts it.
GraphNode alloc_node(void* address, uint64_t bytes, int device) {
  GraphNode n;
  n.type = NodeType::kMemAlloc;
  n.empty = true;
  n.address = address;
  n.bytes = bytes;
  n.device = device;
  n.effect = [address] { graphs().use_graph_allocation(address); };
  return n;
}

GraphNode free_node(void* address) {
  GraphNode n;
  n.type = NodeType::kMemFree;
  n.empty = true;
  n.address = address;
  n.effect = [address] { graphs().free_graph_allocation(address); };
  return n;
}

// Reserves the address an allocation node will hand out at every launch, on the device `location`
// names (device memory of the device's graph memory pool), and has `place` add the node to a graph or
// a capture. The address becomes the graph's once the node is placed, and is given back if it is not.
cudaError_t graph_allocation(const cudaMemPoolProps& props, size_t bytes, void** address,
                             const std::function<cudaError_t(GraphNode)>& place) {
  if (bytes == 0 || props.allocType != cudaMemAllocationTypePinned || props.location.type != cudaMemLocationTypeDevice ||
      props.handleTypes != cudaMemHandleTypeNone)
    return cudaErrorInvalidValue;
  const int device = props.location.id;
  if (cudaError_t e = check_device(device); e) return e;
  void* reserved = nullptr;
  if (Status s = memory().allocate(MemoryKind::kDevice, device, bytes, 0, &reserved); s != Status::kOk)
    return from_status(s);
  if (cudaError_t e = place(alloc_node(reserved, bytes, device)); e) {
    memory().release(reserved, {MemoryKind::kDevice});
    return e;
  }
  graphs().add_graph_allocation(reserved, bytes, device);
  *address = reserved;
  return cudaSuccess;
}

namespace {

// Whether the source (or the destination) of a copy of this kind is host memory; cudaMemcpyDefault
// leaves it to the pointer, which may then be pageable.
bool host_side(cudaMemcpyKind kind, bool source) {
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) return true;
  return source ? kind == cudaMemcpyHostToDevice : kind == cudaMemcpyDeviceToHost;
}

// One side of a graph's copy node: device, managed or pinned memory lies inside one allocation; the
// host side of a copy whose kind says it is host memory may also be pageable memory, which an
// explicitly built node copies when it runs, as with the real runtime.
bool copy_side_ok(const void* ptr, size_t bytes, bool may_be_pageable) {
  std::optional<Allocation> a = memory().find(ptr);
  if (a) return a->contains(ptr, bytes);
  return may_be_pageable;
}

cudaError_t add_alloc_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                           size_t count, const cudaMemPoolProps& props, size_t bytes, void** address) {
  return graph_allocation(props, bytes, address,
                          [&](GraphNode n) { return add(node, graph, dependencies, count, std::move(n)); });
}

// A memset node from cudaMemsetParams or its V2: elements of 1, 2 or 4 bytes, `width` of them a row,
// inside one allocation.
template <class Params>
cudaError_t memset_params_node(const Params& p, GraphNode* out) {
  if ((p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4) || p.width == 0 || p.height == 0)
    return cudaErrorInvalidValue;
  const size_t row_bytes = p.width * p.elementSize;
  const size_t pitch = p.height == 1 ? row_bytes : p.pitch;
  if (row_bytes > pitch) return cudaErrorInvalidValue;
  std::optional<Allocation> a = memory().find(p.dst);
  if (!a || !a->contains(p.dst, pitch * (p.height - 1) + row_bytes)) return cudaErrorInvalidValue;
  *out = memset_node(p.dst, p.value, p.elementSize, pitch, p.width, p.height);
  return cudaSuccess;
}

// A copy node between pitched pointers, an array taking part as its storage (linear_copy_params):
// extent.width bytes by height rows by depth slices, from and to the given positions.
cudaError_t copy3d_params_node(const cudaMemcpy3DParms& given, GraphNode* out) {
  cudaMemcpy3DParms p;
  if (cudaError_t e = linear_copy_params(given, &p); e) return e;
  const cudaExtent e = p.extent;
  if (e.width == 0 || e.height == 0 || e.depth == 0 || p.srcPtr.ptr == nullptr || p.dstPtr.ptr == nullptr ||
      e.width + p.srcPos.x > p.srcPtr.pitch || e.width + p.dstPos.x > p.dstPtr.pitch)
    return cudaErrorInvalidValue;
  // Rows of a slice are a pitch apart, slices ysize rows apart: one row sequence whenever a slice is
  // exactly its rows (a copy of one slice, or ysize equal to the extent's height on both sides).
  auto start = [](const cudaPitchedPtr& ptr, const cudaPos& pos) {
    return static_cast<char*>(ptr.ptr) + (pos.z * ptr.ysize + pos.y) * ptr.pitch + pos.x;
  };
  if (e.depth > 1 && (p.srcPtr.ysize != e.height || p.dstPtr.ysize != e.height)) return cudaErrorNotSupported;
  char* dst = start(p.dstPtr, p.dstPos);
  const char* src = start(p.srcPtr, p.srcPos);
  const size_t rows = e.height * e.depth;
  if (!copy_side_ok(dst, (rows - 1) * p.dstPtr.pitch + e.width, host_side(p.kind, false)) ||
      !copy_side_ok(src, (rows - 1) * p.srcPtr.pitch + e.width, host_side(p.kind, true)))
    return cudaErrorInvalidValue;
  *out = copy_rows_node(dst, p.dstPtr.pitch, src, p.srcPtr.pitch, e.width, rows);
  return cudaSuccess;
}

}  // namespace

}  // namespace simcuda::rt

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamBeginCapture_v10000),
                    [&] { return rt::record(rt::begin_capture(stream, rt::kLegacy)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamBeginCapture_ptsz_v10000),
                    [&] { return rt::record(rt::begin_capture(stream, rt::kPerThread)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamEndCapture_v10000),
                    [&] { return rt::record(rt::end_capture(stream, graph, rt::kLegacy)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamEndCapture_ptsz_v10000),
                    [&] { return rt::record(rt::end_capture(stream, graph, rt::kPerThread)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamIsCapturing_v10000),
                    [&] { return rt::record(rt::is_capturing(stream, status, rt::kLegacy)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                                cudaStreamCaptureStatus* status) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamIsCapturing_ptsz_v10000),
                    [&] { return rt::record(rt::is_capturing(stream, status, rt::kPerThread)); });
}

#if CUDART_VERSION >= 13000
// A capture's id is its graph's id (process-wide, from 1); the dependencies are not modelled, so a
// capturing stream reports none: the next captured node depends on the previous one anyway.
namespace {
cudaError_t capture_info(cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                         cudaGraph_t* graph, const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edges,
                         size_t* count, rt::DefaultStream flavour) {
  if (status == nullptr) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = rt::resolve_stream(stream, flavour, &sid); e) return e;
  Graph* g = graphs().capture_graph(sid);
  *status = g != nullptr ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (g == nullptr) return cudaSuccess;
  if (id != nullptr) *id = g->id;
  if (graph != nullptr) *graph = reinterpret_cast<cudaGraph_t>(g);
  if (dependencies != nullptr) *dependencies = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (count != nullptr) *count = 0;
  return cudaSuccess;
}
}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                              unsigned long long* id, cudaGraph_t* graph,
                                                              const cudaGraphNode_t** dependencies,
                                                              const cudaGraphEdgeData** edges, size_t* count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamGetCaptureInfo_v12030), [&] {
    return rt::record(capture_info(stream, status, id, graph, dependencies, edges, count, rt::kLegacy));
  });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(
    cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id, cudaGraph_t* graph,
    const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edges, size_t* count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamGetCaptureInfo_ptsz_v12030), [&] {
    return rt::record(capture_info(stream, status, id, graph, dependencies, edges, count, rt::kPerThread));
  });
}
#endif

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphCreate_v10000), [&] {
    if (graph == nullptr || flags != 0) return rt::record(cudaErrorInvalidValue);
    *graph = reinterpret_cast<cudaGraph_t>(graphs().create());
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                            const cudaGraphNode_t* dependencies, size_t count,
                                                            const cudaKernelNodeParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddKernelNode_v10000), [&] {
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    const Kernel* k = kernels().find(p->func);
    if (k == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    return rt::record(rt::add(node, graph, dependencies, count,
                              rt::kernel_node(*k, p->gridDim, p->blockDim, p->sharedMemBytes)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                            const cudaGraphNode_t* dependencies, size_t count,
                                                            const cudaMemsetParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemsetNode_v10000), [&] {
    GraphNode n;
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::memset_params_node(*p, &n); e) return rt::record(e);
    return rt::record(rt::add(node, graph, dependencies, count, std::move(n)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                            const cudaGraphNode_t* dependencies, size_t count,
                                                            const cudaMemcpy3DParms* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemcpyNode_v10000), [&] {
    GraphNode n;
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::copy3d_params_node(*p, &n); e) return rt::record(e);
    return rt::record(rt::add(node, graph, dependencies, count, std::move(n)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph,
                                                              const cudaGraphNode_t* dependencies, size_t count,
                                                              void* dst, const void* src, size_t bytes,
                                                              cudaMemcpyKind kind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemcpyNode1D_v11010), [&] {
    if (node == nullptr || dst == nullptr || src == nullptr || bytes == 0) return rt::record(cudaErrorInvalidValue);
    if (!rt::copy_side_ok(dst, bytes, rt::host_side(kind, false)) || !rt::copy_side_ok(src, bytes, rt::host_side(kind, true)))
      return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count, rt::copy_node(dst, src, bytes)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                           const cudaGraphNode_t* dependencies, size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddEmptyNode_v10000), [&] {
    if (node == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count, rt::empty_node()));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                          const cudaGraphNode_t* dependencies, size_t count,
                                                          const cudaHostNodeParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddHostNode_v10000), [&] {
    if (node == nullptr || p == nullptr || p->fn == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count, rt::host_node(p->fn, p->userData)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                              const cudaGraphNode_t* dependencies, size_t count,
                                                              cudaMemAllocNodeParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemAllocNode_v11040), [&] {
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add_alloc_node(node, graph, dependencies, count, p->poolProps, p->bytesize, &p->dptr));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                             const cudaGraphNode_t* dependencies, size_t count,
                                                             void* dptr) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemFreeNode_v11040), [&] {
    if (node == nullptr || !graphs().is_graph_allocation(dptr)) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count, rt::free_node(dptr)));
  });
}

#if CUDART_VERSION >= 13000
// CUDA 13's one entry for every node type, with edge data (only the default edge is modelled). The
// node types the simulation builds; the others (child graphs, events, semaphores, conditionals,
// whose branches would depend on what kernels compute) answer "not supported".
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                      const cudaGraphNode_t* dependencies,
                                                      const cudaGraphEdgeData* edges, size_t count,
                                                      cudaGraphNodeParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddNode_v12030), [&]() -> cudaError_t {
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    if (edges != nullptr)
      for (size_t i = 0; i < count; ++i)
        if (edges[i].type != cudaGraphDependencyTypeDefault) return rt::record(cudaErrorNotSupported);
    GraphNode n;
    switch (p->type) {
      case cudaGraphNodeTypeKernel: {
        const Kernel* k = kernels().find(p->kernel.func);
        if (k == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
        n = rt::kernel_node(*k, p->kernel.gridDim, p->kernel.blockDim, p->kernel.sharedMemBytes);
        break;
      }
      case cudaGraphNodeTypeMemcpy:
        if (cudaError_t e = rt::copy3d_params_node(p->memcpy.copyParams, &n); e) return rt::record(e);
        break;
      case cudaGraphNodeTypeMemset:
        if (cudaError_t e = rt::memset_params_node(p->memset, &n); e) return rt::record(e);
        break;
      case cudaGraphNodeTypeHost:
        if (p->host.fn == nullptr) return rt::record(cudaErrorInvalidValue);
        n = rt::host_node(p->host.fn, p->host.userData);
        break;
      case cudaGraphNodeTypeEmpty:
        n = rt::empty_node();
        break;
      case cudaGraphNodeTypeMemAlloc:
        return rt::record(rt::add_alloc_node(node, graph, dependencies, count, p->alloc.poolProps, p->alloc.bytesize,
                                             &p->alloc.dptr));
      case cudaGraphNodeTypeMemFree:
        if (!graphs().is_graph_allocation(p->free.dptr)) return rt::record(cudaErrorInvalidValue);
        n = rt::free_node(p->free.dptr);
        break;
      default:
        return rt::record(cudaErrorNotSupported);
    }
    return rt::record(rt::add(node, graph, dependencies, count, std::move(n)));
  });
}
#endif

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphNodeGetType_v10000), [&] {
    if (node == nullptr || type == nullptr) return rt::record(cudaErrorInvalidValue);
    switch (reinterpret_cast<const GraphNode*>(node)->type) {
      case NodeType::kKernel: *type = cudaGraphNodeTypeKernel; break;
      case NodeType::kMemcpy: *type = cudaGraphNodeTypeMemcpy; break;
      case NodeType::kMemset: *type = cudaGraphNodeTypeMemset; break;
      case NodeType::kHost: *type = cudaGraphNodeTypeHost; break;
      case NodeType::kEmpty: *type = cudaGraphNodeTypeEmpty; break;
      case NodeType::kMemAlloc: *type = cudaGraphNodeTypeMemAlloc; break;
      case NodeType::kMemFree: *type = cudaGraphNodeTypeMemFree; break;
    }
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphClone(cudaGraph_t* clone, cudaGraph_t original) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphClone_v10000), [&] {
    Graph* g = nullptr;
    if (graphs().clone(rt::graph_of(original), &g) != Status::kOk) return rt::record(cudaErrorInvalidValue);
    *clone = reinterpret_cast<cudaGraph_t>(g);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphNodeFindInClone(cudaGraphNode_t* node, cudaGraphNode_t original,
                                                              cudaGraph_t clone) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphNodeFindInClone_v10000), [&] {
    if (node == nullptr) return rt::record(cudaErrorInvalidValue);
    GraphNode* found = graphs().find_in_clone(rt::graph_of(clone), reinterpret_cast<const GraphNode*>(original));
    if (found == nullptr) return rt::record(cudaErrorInvalidValue);
    *node = reinterpret_cast<cudaGraphNode_t>(found);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphGetNodes_v10000), [&] {
    if (count == nullptr) return rt::record(cudaErrorInvalidValue);
    std::vector<GraphNode*> all;
    if (graphs().nodes(rt::graph_of(graph), &all) != Status::kOk) return rt::record(cudaErrorInvalidValue);
    // With no array, the count; with one, as many as it holds, and the count written.
    if (nodes != nullptr) {
      const size_t n = std::min(*count, all.size());
      for (size_t i = 0; i < n; ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(all[i]);
      *count = n;
    } else {
      *count = all.size();
    }
    return cudaSuccess;
  });
}

namespace {
cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t graph) {
  if (exec == nullptr) return rt::record(cudaErrorInvalidValue);
  GraphExec* x = nullptr;
  if (graphs().instantiate(rt::graph_of(graph), &x) != Status::kOk) return rt::record(cudaErrorInvalidValue);
  *exec = reinterpret_cast<cudaGraphExec_t>(x);
  return cudaSuccess;
}
}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                          unsigned long long) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphInstantiate_v12000), [&] { return instantiate(exec, graph); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                                   unsigned long long) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphInstantiateWithFlags_v11040),
                    [&] { return instantiate(exec, graph); });
}

// A kernel node of the graph the executable graph came from runs with new parameters from the next
// launch on; the graph itself keeps its own.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                                      const cudaKernelNodeParams* p) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphExecKernelNodeSetParams_v10010), [&] {
    if (node == nullptr || p == nullptr) return rt::record(cudaErrorInvalidValue);
    const Kernel* k = kernels().find(p->func);
    if (k == nullptr) return rt::record(cudaErrorInvalidDeviceFunction);
    return rt::record(graphs().set_exec_node(rt::exec_of(exec), reinterpret_cast<const GraphNode*>(node),
                                             rt::kernel_node(*k, p->gridDim, p->blockDim, p->sharedMemBytes)) ==
                              Status::kOk
                          ? cudaSuccess
                          : cudaErrorInvalidValue);
  });
}

// The executable graph takes the graph's nodes when they are of the same types in the same order:
// the updates the simulation can tell apart from a change of topology.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                                         cudaGraphExecUpdateResultInfo* info) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphExecUpdate_v10020), [&] {
    const bool updated = graphs().update_exec(rt::exec_of(exec), rt::graph_of(graph)) == Status::kOk;
    if (info != nullptr) {
      info->result = updated ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged;
      info->errorNode = nullptr;
      info->errorFromNode = nullptr;
    }
    return rt::record(updated ? cudaSuccess : cudaErrorGraphExecUpdateFailure);
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                                                    void* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGetGraphMemAttribute_v11040), [&] {
    if (value == nullptr) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e) return rt::record(e);
    const GraphRegistry::MemoryUse use = graphs().graph_memory(device);
    uint64_t out;
    switch (attr) {
      case cudaGraphMemAttrUsedMemCurrent: out = use.used; break;
      case cudaGraphMemAttrUsedMemHigh: out = use.used_high; break;
      case cudaGraphMemAttrReservedMemCurrent: out = use.reserved; break;
      case cudaGraphMemAttrReservedMemHigh: out = use.reserved_high; break;
      default: return rt::record(cudaErrorInvalidValue);
    }
    *static_cast<uint64_t*>(value) = out;
    return cudaSuccess;
  });
}

// Only the high marks can be set, and only to 0, which resets them to the current amounts.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                                                    void* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceSetGraphMemAttribute_v11040), [&] {
    if (value == nullptr || *static_cast<const uint64_t*>(value) != 0) return rt::record(cudaErrorInvalidValue);
    if (cudaError_t e = rt::check_device(device); e) return rt::record(e);
    if (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh)
      return rt::record(cudaErrorInvalidValue);
    graphs().reset_graph_memory_high(device, attr == cudaGraphMemAttrUsedMemHigh,
                                     attr == cudaGraphMemAttrReservedMemHigh);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int device) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaDeviceGraphMemTrim_v11040), [&] {
    if (cudaError_t e = rt::check_device(device); e) return rt::record(e);
    graphs().trim_graph_memory(device);
    return cudaSuccess;
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphLaunch_v10000),
                    [&] { return rt::record(rt::graph_launch(exec, stream, rt::kLegacy)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphLaunch_ptsz_v10000),
                    [&] { return rt::record(rt::graph_launch(exec, stream, rt::kPerThread)); });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphUpload_v10000),
                    [&] { return rt::record(rt::graph_upload(exec, stream, rt::kLegacy)); });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t exec) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphExecDestroy_v10000), [&] {
    return rt::record(graphs().destroy_exec(rt::exec_of(exec)) == Status::kOk ? cudaSuccess
                                                                              : cudaErrorInvalidValue);
  });
}
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphDestroy_v10000), [&] {
    return rt::record(graphs().destroy(rt::graph_of(graph)) == Status::kOk ? cudaSuccess : cudaErrorInvalidValue);
  });
}
