// Hooks the generated wrappers call for functions whose meaning needs more than argument slots.
#include <cstring>

#include "runtime.h"

namespace cutrace::preload::hooks {

// nvcc-generated static constructors register every kernel, usually long before a capture range
// starts; the tools need the stub -> name mapping to name launches, so it is recorded regardless of
// capture (it is counted as dropped like any record if the ring is full).
void register_function(const void* host_stub, const char* device_name) {
  ThreadState& ts = t_thread;
  if (!device_name || ts.in_tracer) return;
  if (!ts.producer.header && !prepare_thread(ts)) return;
  const int saved_errno = errno;
  emit_string(ts, abi::StringKind::kKernelName, reinterpret_cast<uint64_t>(host_stub), device_name,
              strnlen(device_name, abi::kMaxStringBytes));
  errno = saved_errno;
}

}  // namespace cutrace::preload::hooks
