// Tables the generator writes for the shim's lookups by name (api_lookup.cpp in the build tree).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cutrace::preload {

// Id of the wrapped export `name` (any library), or -1. Binary search over a generated sorted table.
// A name wrapped for two major versions (cudaMalloc of libcudart.so.13 and .12) gives the plain wrapper's.
int32_t find_api(const char* name);
// Major versions of one library that a build wraps side by side, at most (CUDA 13 and 12 today).
inline constexpr size_t kMaxMajorVersions = 4;
// Every id wrapping `name`, the plain wrapper's first; returns how many (at most `capacity`).
size_t find_apis(const char* name, int32_t* ids, size_t capacity);

// The address of the wrapper (or untimed trampoline) of every api id: what dlsym and
// cuGetProcAddress hand out instead of the real function. The versioned wrappers' entries stay null
// until libcutrace-cuda12.so registers them (cutrace_shim_register_wrappers).
extern void* g_wrapper_addresses[];  // kApiCount entries

// The driver export that cuGetProcAddress(symbol, cudaVersion, flags) returns, or -1 when the symbol
// is unknown or not available at that version. flags: 0 default (= legacy stream),
// 1 CU_GET_PROC_ADDRESS_LEGACY_STREAM, 2 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
int32_t driver_proc_api(const char* symbol, int cuda_version, uint64_t flags);

// Whether cuGetProcAddress's `symbol` is a graphics interop entry point (cudaGL.h, cudaEGL.h,
// cudaVDPAU.h) that the build forwards untimed, as it does the runtime's interop functions: the driver
// hands these out to every runtime at start-up, so their lookup says nothing about the program.
bool untimed_graphics_interop(const char* symbol);

}  // namespace cutrace::preload
