// The handles every simulated library hands out for the device's streams and events. A stream made
// by the runtime is a valid CUstream for the driver and the libraries over it (and the reverse), as
// cudaStream_t and CUstream are the same type on the real stack.
//
// Handles are ids under a recognisable base rather than pointers: a destroyed handle never aliases
// a new object and an arbitrary pointer is recognised as invalid instead of being dereferenced.
// 0x1 and 0x2 are the legacy and per-thread default streams (cudaStreamLegacy/CU_STREAM_LEGACY,
// cudaStreamPerThread/CU_STREAM_PER_THREAD); 0 means one of them, as the entry point says.
#pragma once

#include <cstdint>

#include "timeline.h"

namespace simcuda::handles {

inline constexpr uintptr_t kStreamBase = 0x5170'0000'0000;
inline constexpr uintptr_t kEventBase = 0x5e70'0000'0000;
inline constexpr uintptr_t kStride = 0x40;
inline constexpr uint64_t kIdLimit = uint64_t(1) << 32;
inline constexpr uintptr_t kLegacyStream = 0x1;
inline constexpr uintptr_t kPerThreadStream = 0x2;

inline bool decode(uintptr_t base, const void* handle, uint64_t* id) {
  uintptr_t h = reinterpret_cast<uintptr_t>(handle);
  if (h < base || (h - base) % kStride != 0 || (h - base) / kStride >= kIdLimit) return false;
  *id = (h - base) / kStride;
  return true;
}

inline uintptr_t stream(StreamId id) { return kStreamBase + id * kStride; }
inline uintptr_t event(EventId id) { return kEventBase + id * kStride; }
inline bool decode_stream(const void* handle, StreamId* id) { return decode(kStreamBase, handle, id); }
inline bool decode_event(const void* handle, EventId* id) { return decode(kEventBase, handle, id); }

}  // namespace simcuda::handles

namespace simcuda {

// The calling thread's per-thread default stream on a device, created on first use (and again after
// a device reset destroyed it) and destroyed with the thread. Shared by the runtime and the driver,
// so that cudaStreamPerThread and CU_STREAM_PER_THREAD are one stream, as on the real stack.
SIMCUDA_API Status per_thread_stream(int device, StreamId* out);

// The device whose primary context the runtime made current on the calling thread when the thread
// first used it (-1: none yet). The real runtime makes the primary context current in the driver,
// so that a library calling cuCtxGetCurrent after runtime calls (PyTorch does, before cuBLAS) finds
// it; the simulated driver answers from this until the thread sets a context itself.
SIMCUDA_API void note_runtime_context(int device);
SIMCUDA_API int runtime_context_device();

// Whether the runtime has initialised itself, which initialises the driver: the real runtime calls
// cuInit on its first call that needs a device (cudaGetDeviceCount, cudaSetDevice, ...), so a library
// using the driver after such a call (PyTorch's cuDevicePrimaryCtxGetState) finds it initialised
// without calling cuInit itself. Set by a way no tracer sees, as note_runtime_context.
SIMCUDA_API void note_runtime_initialized();
SIMCUDA_API bool runtime_initialized();

}  // namespace simcuda
