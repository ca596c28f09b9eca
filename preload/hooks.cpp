// Hooks the generated wrappers call for functions whose meaning needs more than argument slots. They
// run after the real call whether or not capture is on: the names they record are needed to name
// calls made later, inside a capture range or not (counted as dropped like any record if the ring is
// full). The entry-point hooks are in interpose.cpp.
#include <cstring>

#include "gpu_activity.h"
#include "runtime.h"

namespace cutrace::preload::hooks {
namespace {

void name_kernel(uint64_t key, const char* name) {
  ThreadState& ts = t_thread;
  if (!key || !name || ts.in_tracer) return;
  if (!ts.producer.header && !prepare_thread(ts)) return;
  const int saved_errno = errno;
  emit_string(ts, abi::StringKind::kKernelName, key, name, strnlen(name, abi::kMaxStringBytes));
  errno = saved_errno;
}

}  // namespace

// nvcc-generated static constructors register every kernel, usually long before a capture range
// starts: the stub -> name mapping names the runtime's launches.
void register_function(const void* host_stub, const char* device_name) {
  name_kernel(reinterpret_cast<uint64_t>(host_stub), device_name);
}

// cuModuleGetFunction, cuLibraryGetKernel: the handle the call wrote names the kernel it looked up,
// for the driver launches that pass it (a failed call leaves no handle, and nothing is recorded).
void name_kernel_handle(const void* handle_slot, const char* name) {
  if (!handle_slot) return;
  uint64_t handle;
  std::memcpy(&handle, handle_slot, sizeof handle);
  name_kernel(handle, name);
}

// cuFuncGetName: a function whose name the program asked for (it may come from a library the shim
// did not see being loaded).
void name_kernel_by_value(const void* handle, const char* const* name_slot) {
  if (!name_slot) return;
  name_kernel(reinterpret_cast<uint64_t>(handle), *name_slot);
}

// cuInit succeeded: the driver is there and initialised, so GPU activity can start (gpu_activity.h).
void driver_initialized() { on_driver_initialized(); }

}  // namespace cutrace::preload::hooks
