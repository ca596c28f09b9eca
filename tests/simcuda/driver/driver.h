// What the driver's translation units share: contexts, stream resolution and status translation
// over the simulated device in core/.
#pragma once

// As in the real driver's build: cuda.h then declares every legacy, _v2, _ptds and _ptsz export
// under its own name, and each definition here is checked against the real prototype.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include <cstdint>

#include "cupti_driver_cbid.h"  // copied beside the build, as for the runtime

#include "core/activity.h"
#include "core/config.h"
#include "core/handles.h"
#include "core/kernels.h"
#include "core/memory.h"
#include "core/timeline.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))
#define SIMCUDA_DRIVER_CBID(name) CUPTI_DRIVER_TRACE_CBID_##name

namespace simcuda::drv {

// What stream 0 means to the entry point called: the legacy default stream, or the calling thread's
// per-thread default stream (the _ptsz and _ptds exports).
enum class DefaultStream : uint8_t { kLegacy, kPerThread };
inline constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
inline constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

// Runs an entry point's body as one driver API call for a profiler (core/activity.h): every entry
// point that has a CUPTI cbid goes through this, whether reached by its export or cuGetProcAddress.
template <class F>
inline CUresult traced(uint32_t cbid, F&& body) {
  return activity::traced(activity::Domain::kDriver, cbid, body);
}

CUresult from_status(Status s);

// cuLinkCreate's and cuModuleLoadDataEx's JIT options (link.cpp): the outputs a program asked for are
// written (empty logs, a wall time of 0); an unknown option is an invalid value.
CUresult apply_jit_options(unsigned n, CUjit_option* options, void** values);

// CUDA_ERROR_NOT_INITIALIZED before cuInit, else the device of the calling thread's context.
CUresult current_device(int* device);
CUresult check_initialized();

// Resolves a stream argument to the device's stream: 0 as the entry point's flavour says,
// CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, or a handle of a created stream (validated by its user).
CUresult resolve_stream(CUstream stream, DefaultStream flavour, StreamId* out);

// Contexts: each device's primary context, and those cuCtxCreate makes.
CUcontext primary_context(int device);
// The device of a context handle, or -1.
int context_device(CUcontext ctx);
void set_current_context(CUcontext ctx);
CUcontext current_context();
void push_context(CUcontext ctx);
CUresult pop_context(CUcontext* out);
// A context of cuCtxCreate: a handle of its own over the device's state (one address space for all
// contexts of a device, unlike the real driver's).
CUcontext create_context(int device);
CUresult destroy_context(CUcontext ctx);
void mark_initialized();

// Name and description of a result code, nullptr for an unknown one.
const char* error_name(CUresult e);
const char* error_string(CUresult e);

// One version of an entry point whose export exists, for those cuGetProcAddress's own table lacks:
// generated with the library's missing exports (gen/gen_missing.py), sorted by symbol, then version.
struct GeneratedProcVersion {
  const char* symbol;
  int version;
  bool per_thread;
  void* address;
};
extern const GeneratedProcVersion kGeneratedProcVersions[];
extern const size_t kGeneratedProcVersionCount;

}  // namespace simcuda::drv
