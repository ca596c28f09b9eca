// What the runtime API translation units share: the per-thread runtime state, handle encoding and
// error bookkeeping over the simulated device in core/.
#pragma once

// The runtime's own build defines this so that cuda_runtime_api.h declares every _ptsz and _ptds
// export beside its plain name; every definition here is then checked against the real prototype.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <functional>

// The CUPTI cbids of CUDA 13 (copied beside the build, see CMakeLists.txt, so that the CUDA 12 build
// of this runtime, which has no CUPTI headers of its own, reports the same ids).
#include "cupti_runtime_cbid.h"

#include "core/activity.h"
#include "core/config.h"
#include "core/graphs.h"
#include "core/kernels.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "nvcc_abi.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))
#define SIMCUDA_RUNTIME_CBID(name) CUPTI_RUNTIME_TRACE_CBID_##name

namespace simcuda::rt {

// What stream 0 means to the entry point called: the legacy default stream, or the calling thread's
// per-thread default stream (the _ptsz and _ptds exports, used by code built with
// --default-stream per-thread).
enum class DefaultStream : uint8_t { kLegacy, kPerThread };
inline constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
inline constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

// Records a failure as the calling thread's last error (cudaGetLastError) and returns it.
// cudaErrorNotReady is a status, not an error, and is not recorded, as in the real runtime.
cudaError_t record(cudaError_t e);
// cudaGetLastError (reset) and cudaPeekAtLastError.
cudaError_t take_last_error(bool reset);

// The calling thread's current device; cudaErrorNoDevice when the process has none.
cudaError_t current_device(int* device);
void set_thread_device(int device);
cudaError_t check_device(int device);

// Resolves a stream argument to the device's stream, creating the per-thread stream on first use.
// cudaErrorInvalidResourceHandle for a destroyed or unknown stream.
cudaError_t resolve_stream(cudaStream_t stream, DefaultStream flavour, StreamId* out);
cudaStream_t stream_handle(StreamId id);
cudaEvent_t event_handle(EventId id);
bool decode_event(cudaEvent_t event, EventId* out);

// Graph nodes for the work a capturing stream receives or a graph is given (graph.cpp).
GraphNode kernel_node(const Kernel& k, dim3 grid, dim3 block, size_t shared_mem);
GraphNode memset_node(void* ptr, unsigned value, unsigned element_size, size_t pitch, size_t width, size_t height);
GraphNode copy_node(void* dst, const void* src, size_t bytes);
GraphNode copy_rows_node(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);
GraphNode host_node(cudaHostFn_t fn, void* user_data);
GraphNode empty_node();
GraphNode alloc_node(void* address, uint64_t bytes, int device);
GraphNode free_node(void* address);
cudaError_t graph_allocation(const cudaMemPoolProps& props, size_t bytes, void** address,
                             const std::function<cudaError_t(GraphNode)>& place);

// A copy of `depth` slices of `height` rows of `width` bytes: rows `pitch` bytes apart, slices
// `slice_pitch` bytes apart (unused for one slice), on either side.
struct Rect {
  size_t width;
  size_t height;
  size_t dst_pitch;
  size_t src_pitch;
  size_t depth = 1;
  size_t dst_slice_pitch = 0;
  size_t src_slice_pitch = 0;
  size_t bytes() const { return width * height * depth; }
  size_t dst_extent() const { return extent(dst_pitch, dst_slice_pitch); }
  size_t src_extent() const { return extent(src_pitch, src_slice_pitch); }
  size_t extent(size_t pitch, size_t slice_pitch) const {
    return height == 0 || depth == 0 ? 0 : slice_pitch * (depth - 1) + pitch * (height - 1) + width;
  }
};
// Every copy, 1D, 2D, 3D, to and from arrays (memory.cpp): validated, queued on the stream with the
// copy's duration, and waited for as the entry point's family says.
cudaError_t copy(void* dst, const void* src, const Rect& r, cudaMemcpyKind kind, cudaStream_t stream,
                 DefaultStream flavour, bool synchronous);

// A cudaMemcpy3DParms whose arrays are replaced by their storage as pitched pointers (array.cpp):
// positions and the extent's width then in bytes, as for pointers. cudaErrorInvalidValue for an
// unknown array, a side given twice or not at all, or a box outside an array.
cudaError_t linear_copy_params(const cudaMemcpy3DParms& p, cudaMemcpy3DParms* out);

// The usual translation of a device status; handles are streams, events or functions as the caller
// says.
cudaError_t from_status(Status s, cudaError_t invalid_handle = cudaErrorInvalidResourceHandle);

// Launch configurations pushed by <<<...>>> and popped by the generated stub.
struct CallConfiguration {
  dim3 grid;
  dim3 block;
  size_t shared_mem;
  cudaStream_t stream;
};
void push_call_configuration(const CallConfiguration& c);
bool pop_call_configuration(CallConfiguration* out);

// The driver functions the runtime uses, obtained through cuGetProcAddress from libcuda.so.1 (see
// simcuda.h). The arrays are by DefaultStream: [0] legacy, [1] per-thread.
struct DriverApi {
  PFN_cuMemAlloc_v3020 mem_alloc;
  PFN_cuMemAllocPitch_v3020 mem_alloc_pitch;
  PFN_cuMemFree_v3020 mem_free;
#if CUDART_VERSION >= 13000
  PFN_cuCtxSynchronize_v13000 ctx_synchronize;  // the version CUDA 13 gets: it takes the context
#else
  PFN_cuCtxSynchronize_v2000 ctx_synchronize;   // CUDA 12's synchronises the current context
#endif
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current;
  PFN_cuMemcpy_v4000 memcpy[2];
  PFN_cuMemcpyAsync_v4000 memcpy_async[2];
  PFN_cuMemcpyHtoD_v3020 memcpy_htod[2];
  PFN_cuMemcpyDtoH_v3020 memcpy_dtoh[2];
  PFN_cuMemcpyDtoD_v3020 memcpy_dtod[2];
  PFN_cuMemcpyHtoDAsync_v3020 memcpy_htod_async[2];
  PFN_cuMemcpyDtoHAsync_v3020 memcpy_dtoh_async[2];
  PFN_cuMemcpyDtoDAsync_v3020 memcpy_dtod_async[2];
  PFN_cuMemsetD8_v3020 memset_d8[2];
  PFN_cuStreamSynchronize_v2000 stream_synchronize[2];
  PFN_cuLaunchKernel_v4000 launch_kernel[2];
  PFN_cuProfilerStart_v4000 profiler_start;
  PFN_cuProfilerStop_v4000 profiler_stop;
  PFN_cuGetProcAddress_v12000 get_proc_address;  // for cudaGetDriverEntryPoint
};
// Loaded on first use; nullptr when libcuda.so.1 is not there (or SIMCUDA_RUNTIME_DRIVER=0): the
// runtime then works on the device directly.
const DriverApi* driver();
// Makes the primary context of `device` current in the driver for this thread.
cudaError_t bind_context(const DriverApi& d, int device);
cudaError_t from_driver(CUresult r);
cudaError_t driver_entry_point(const char* symbol, void** function, unsigned int cuda_version,
                               unsigned long long flags, cudaDriverEntryPointQueryResult* status,
                               DefaultStream flavour);
inline int flavour_index(DefaultStream f) { return f == DefaultStream::kLegacy ? 0 : 1; }

// Runs an export's body as one runtime API call for a profiler (core/activity.h): every export that
// has a CUPTI cbid goes through this.
template <class F>
inline cudaError_t traced(uint32_t cbid, F&& body) {
  return activity::traced(activity::Domain::kRuntime, cbid, body);
}

cudaError_t launch(const void* function_or_handle, dim3 grid, dim3 block, size_t shared_mem,
                   cudaStream_t stream, DefaultStream flavour);

}  // namespace simcuda::rt
