// What libcutrace-cuda12.so (built with CUTRACE_SHIM_CLIENT, see shim_names.h) reaches in the shim:
// forwarders to the shim's cold paths, and the registration of its wrappers. The variables it reads on
// every call are exported as aliases next to their definitions (runtime.cpp, capture.cpp,
// real_functions.cpp), so that the shim's own code keeps its direct accesses.
#include <cerrno>

#include "api_ids.h"
#include "api_lookup.h"
#include "runtime.h"

using namespace cutrace;
using namespace cutrace::preload;

#define CUTRACE_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

CUTRACE_SHIM_EXPORT bool cutrace_shim_prepare_thread(ThreadState& ts) { return prepare_thread(ts); }
CUTRACE_SHIM_EXPORT void* cutrace_shim_resolve_real(uint32_t api_id) { return resolve_real(api_id); }
CUTRACE_SHIM_EXPORT void cutrace_shim_record_backtrace(ThreadState& ts, uint32_t api_id, uint64_t begin,
                                                       uint64_t duration, bool osrt) {
  record_backtrace(ts, api_id, begin, duration, osrt);
}

CUTRACE_SHIM_EXPORT void cutrace_shim_register_function(const void* host_stub, const char* device_name) {
  hooks::register_function(host_stub, device_name);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_name_kernel_handle(const void* handle_slot, const char* name) {
  hooks::name_kernel_handle(handle_slot, name);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_name_kernel_by_value(const void* handle, const char* const* name_slot) {
  hooks::name_kernel_by_value(handle, name_slot);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_driver_entry_point(const char* symbol, void** pfn, int version,
                                                         unsigned long long flags) {
  hooks::driver_entry_point(symbol, pfn, version, flags);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_runtime_entry_point(const char* symbol, void** pfn, unsigned long long flags) {
  hooks::runtime_entry_point(symbol, pfn, flags);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_runtime_entry_point_by_version(const char* symbol, void** pfn, int version,
                                                                     unsigned long long flags) {
  hooks::runtime_entry_point_by_version(symbol, pfn, version, flags);
}
CUTRACE_SHIM_EXPORT __attribute__((noreturn)) void cutrace_shim_missing_function(uint32_t api_id, const void* caller) {
  missing_function(api_id, caller);
}
CUTRACE_SHIM_EXPORT void cutrace_shim_driver_initialized() { hooks::driver_initialized(); }
CUTRACE_SHIM_EXPORT void cutrace_shim_capture_start() { hooks::capture_start(); }
CUTRACE_SHIM_EXPORT void cutrace_shim_capture_stop() { hooks::capture_stop(); }

// The versioned wrappers' addresses, by api id, for dlsym to hand out (interpose.cpp). Called from the
// library's constructor, before the program runs; an id range outside the table (a library from
// another build) is refused.
CUTRACE_SHIM_EXPORT void cutrace_shim_register_wrappers(uint32_t first_id, uint32_t count, void* const* addresses) {
  if (first_id > kApiCount || count > kApiCount - first_id) return;
  for (uint32_t k = 0; k < count; ++k) g_wrapper_addresses[first_id + k] = addresses[k];
  // Their frames are the tracer's, left out of backtraces.
  if (count) note_client_range(addresses[0]);
}
