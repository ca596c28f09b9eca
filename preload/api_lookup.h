// Tables the generator writes for the shim's lookups by name (api_lookup.cpp in the build tree).
#pragma once

#include <cstdint>

namespace cutrace::preload {

// Id of the wrapped export `name` (any library), or -1. Binary search over a generated sorted table.
int32_t find_api(const char* name);

// The address of the wrapper (or untimed trampoline) of every api id: what dlsym and
// cuGetProcAddress hand out instead of the real function.
extern void* const g_wrapper_addresses[];  // kApiCount entries

// The driver export that cuGetProcAddress(symbol, cudaVersion, flags) returns, or -1 when the symbol
// is unknown or not available at that version. flags: 0 default (= legacy stream),
// 1 CU_GET_PROC_ADDRESS_LEGACY_STREAM, 2 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
int32_t driver_proc_api(const char* symbol, int cuda_version, uint64_t flags);

}  // namespace cutrace::preload
