// libcutrace-osrt.so's own state: binding to the shim and finding libc's real functions.
#include "osrt.h"

#include <dlfcn.h>

#include <cerrno>

namespace cutrace::preload {
// now() reads it; this library's copy of the shim's, set when binding.
bool g_clock_is_tsc = false;
}  // namespace cutrace::preload

namespace cutrace::osrt {
namespace {

// Stands in for the session when there is none (the library preloaded without the launcher): its
// capture word is 0, so every call passes through after one look.
abi::SessionHeader g_no_session{};
constinit std::atomic<abi::DomainSet> g_gate_open{~abi::DomainSet(0)};

}  // namespace

std::atomic<abi::SessionHeader*> g_session{nullptr};
const std::atomic<abi::DomainSet>* g_process_capture = &g_gate_open;

abi::SessionHeader* bind() {
  // One thread binds; the others pass their calls through meanwhile, as before the shim attached.
  static std::atomic<bool> binding{false};
  if (binding.exchange(true, std::memory_order_acquire)) return nullptr;
  preload::OsrtBinding b{};
  switch (cutrace_preload_osrt_binding(&b)) {
    case preload::OsrtBindingState::kNotYet:
      binding.store(false, std::memory_order_release);
      return nullptr;
    case preload::OsrtBindingState::kNoSession:
      g_session.store(&g_no_session, std::memory_order_release);
      return &g_no_session;
    case preload::OsrtBindingState::kBound: break;
  }
  preload::g_clock_is_tsc = b.clock_is_tsc;
  g_process_capture = b.process_capture;
  // Release: a thread that sees the session also sees the clock kind and the gate above.
  g_session.store(b.session, std::memory_order_release);
  return b.session;
}

void* resolve_real(uint32_t index) {
  if (index >= kFunctionCount) return nullptr;
  const int saved_errno = errno;
  // RTLD_NEXT from this library: libc's definition (or another preloaded tool's after this one). The
  // shim's dlsym passes RTLD_NEXT to glibc with this library as the caller.
  void* fn = dlsym(RTLD_NEXT, kFunctionNames[index]);
  errno = saved_errno;
  if (fn) g_real_functions[index].store(fn, std::memory_order_relaxed);
  return fn;
}

namespace {

// A first call made while another thread holds the loader's lock would wait in dlsym for it; resolving
// everything while the process is starting keeps dlsym off the wrappers' paths.
__attribute__((constructor)) void resolve_all() {
  for (uint32_t i = 0; i < kFunctionCount; ++i)
    if (!g_real_functions[i].load(std::memory_order_relaxed)) resolve_real(i);
  bind();
}

}  // namespace
}  // namespace cutrace::osrt
