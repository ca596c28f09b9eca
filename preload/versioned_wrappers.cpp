// libcutrace-cuda12.so: the wrappers of CUDA 12's runtime and cuBLAS (generated wrappers_*12.cpp),
// built with CUTRACE_SHIM_CLIENT so that they use the shim's state (shim_names.h). What the generated
// files need besides the shim's exports is here.
#include "runtime.h"

// Called by the trampolines of functions without a prototype on their first call.
extern "C" __attribute__((visibility("hidden"))) void* cutrace_gen_resolve_untyped(uint32_t api_id) {
  return cutrace::preload::real_function<void*>(api_id);
}
