// The lookup routes besides symbol binding: dlsym/dlvsym on a library handle and the CUDA entry-point
// queries (cuGetProcAddress, cudaGetDriverEntryPoint). Each hands out the shim's wrapper where the
// program would have received the real function, so that ctypes, dlopen-based loaders, a static
// runtime and the CUDA libraries that reach the driver through cuGetProcAddress are all traced.
#pragma once

#include <cstdint>

namespace cutrace::preload {

// glibc's dlsym and dlvsym: the next definitions after the shim, as RTLD_NEXT would find them.
using DlsymFn = void* (*)(void*, const char*);
using DlvsymFn = void* (*)(void*, const char*, const char*);
DlsymFn real_dlsym();
DlvsymFn real_dlvsym();

// An address inside the shim (RTLD_NEXT lookups are relative to it).
uintptr_t self_address();

// Whether `p` is one of the shim's wrappers or trampolines.
bool is_wrapper(const void* p);

// The wrapper to hand out instead of `found`, the definition of export `api_id` that a lookup
// returned, given `real`, what the wrapper calls (nullptr when it is not resolved yet: the wrapper
// then takes `found`); `found` itself when the wrapper would not call exactly it (another major
// version of the library, a definition from elsewhere). Makes no dl call.
void* wrapper_for(int32_t api_id, void* found, void* real);

// Replaces *pfn, a driver entry point the driver returned for (symbol, version, flags), by the
// wrapper of the export it is. Leaves *pfn alone when it is not a wrapped export.
void hand_out_driver_wrapper(const char* symbol, void** pfn, int cuda_version, uint64_t flags);

}  // namespace cutrace::preload
