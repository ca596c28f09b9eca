// CUDA graphs in the runtime: stream capture, graphs built node by node (kernel, memset, 1D copy and
// empty nodes), instantiation and launch, over the device's graph registry (core/graphs.h), which the
// driver's graph calls share.
#include <cstring>

#include "core/graphs.h"
#include "runtime.h"
#include "simcuda.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

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

GraphNode memset_node(void* ptr, int value, size_t pitch, size_t width, size_t height) {
  GraphNode n;
  n.kind = OpKind::kMemset;
  n.duration_ns = copy_duration_ns(uint64_t(width) * height, config().copy_gbps);
  n.effect = [ptr, value, pitch, width, height] {
    for (size_t row = 0; row < height; ++row) std::memset(static_cast<char*>(ptr) + row * pitch, value, width);
  };
  n.info.type = activity::OpType::kMemset;
  n.info.dst = activity::memory_of(ptr);
  n.info.bytes = uint64_t(width) * height;
  n.info.value = uint32_t(value);
  return n;
}

GraphNode copy_node(void* dst, const void* src, size_t bytes) {
  GraphNode n;
  n.kind = OpKind::kMemcpy;
  n.duration_ns = copy_duration_ns(bytes, config().copy_gbps);
  n.effect = [dst, src, bytes] { std::memmove(dst, src, bytes); };
  n.info.type = activity::OpType::kMemcpy;
  n.info.src = activity::memory_of(src);
  n.info.dst = activity::memory_of(dst);
  n.info.bytes = bytes;
  return n;
}

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
    // Elements of 2 and 4 bytes repeat a value of that width; this device sets bytes only.
    if (node == nullptr || p == nullptr || p->elementSize != 1 || p->width == 0 || p->height == 0)
      return rt::record(cudaErrorInvalidValue);
    const size_t pitch = p->height == 1 ? p->width : p->pitch;
    if (p->width > pitch) return rt::record(cudaErrorInvalidValue);
    std::optional<Allocation> a = memory().find(p->dst);
    if (!a || !a->contains(p->dst, pitch * (p->height - 1) + p->width)) return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count,
                              rt::memset_node(p->dst, int(p->value), pitch, p->width, p->height)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph,
                                                              const cudaGraphNode_t* dependencies, size_t count,
                                                              void* dst, const void* src, size_t bytes,
                                                              cudaMemcpyKind) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddMemcpyNode1D_v11010), [&] {
    if (node == nullptr || dst == nullptr || src == nullptr || bytes == 0) return rt::record(cudaErrorInvalidValue);
    // A graph copies between memories the device reaches: device, managed or pinned host memory.
    std::optional<Allocation> to = memory().find(dst), from = memory().find(src);
    if (!to || !to->contains(dst, bytes) || !from || !from->contains(src, bytes))
      return rt::record(cudaErrorInvalidValue);
    return rt::record(rt::add(node, graph, dependencies, count, rt::copy_node(dst, src, bytes)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                           const cudaGraphNode_t* dependencies, size_t count) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaGraphAddEmptyNode_v10000), [&] {
    if (node == nullptr) return rt::record(cudaErrorInvalidValue);
    GraphNode empty;
    empty.empty = true;
    return rt::record(rt::add(node, graph, dependencies, count, std::move(empty)));
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
