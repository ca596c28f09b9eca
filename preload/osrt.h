// OS runtime tracing (-t osrt): what the generated wrappers of libcutrace-osrt.so call.
//
// The wrappers of blocking libc calls (read, poll, nanosleep, pthread_mutex_lock, ...) live in a library
// of their own that the launcher preloads after the shim only when -t osrt asks for them, so that a
// program traced without osrt keeps calling libc directly. They share the shim's per-thread state (its
// ring, the depth of the calls in progress) through the shim's exported t_thread and the two functions
// below, and keep their own copies of the little they read on every call.
//
// The shape of a generated wrapper (see preload/gen/cutrace_gen/emit_interposers.py, emit_osrt_wrapper):
//
//   extern "C" ssize_t cutrace_osrt_read(int fd, void* buf, size_t nbytes) __asm__("read");
//   extern "C" ssize_t cutrace_osrt_read(int fd, void* buf, size_t nbytes) {
//     ... real = cutrace::osrt::real_function<Fn>(index);
//     auto& ts = cutrace::preload::t_thread;
//     if (!cutrace::osrt::should_time(ts)) return real(fd, buf, nbytes);
//     const uint64_t begin = now();  auto result = real(fd, buf, nbytes);  const uint64_t end = now();
//     if (!cutrace::osrt::reaches_threshold(begin, end)) return result;
//     cutrace::osrt::record(ts, kApi_read, begin, end, result, flags, args, 3, __builtin_return_address(0));
//     return result;
//   }
//
// A call under the threshold costs its two timestamps and a comparison. One that reaches it is
// recorded by the shim, out of line, which claims a ring for the thread if it has none yet and leaves
// errno as the call left it.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime.h"

namespace cutrace::preload {

// What libcutrace-osrt.so needs of the shim, filled once the shim has attached to its session.
struct OsrtBinding {
  abi::SessionHeader* session;
  const std::atomic<abi::DomainSet>* process_capture;  // g_process_capture (capture ranges)
  bool clock_is_tsc;
};

enum class OsrtBindingState : int { kNotYet = 0, kBound = 1, kNoSession = 2 };

}  // namespace cutrace::preload

extern "C" {
// Fills *out once the shim is attached. kNotYet while it is attaching or has not tried (its own
// system calls while attaching reach the OS runtime wrappers, which must then pass through).
CUTRACE_EXPORT cutrace::preload::OsrtBindingState cutrace_preload_osrt_binding(cutrace::preload::OsrtBinding* out);
// Writes the record of one OS runtime call that reached the threshold.
// `caller` is the wrapper's return address: calls the shim itself makes (reading a file while it holds
// a lock of its own, a lock inside its C++ runtime) are never the program's and are not recorded.
CUTRACE_EXPORT void cutrace_preload_record_osrt(cutrace::preload::ThreadState& ts, uint32_t api_id, uint64_t begin,
                                                uint64_t end, uint64_t result, uint8_t flags, const uint64_t* args,
                                                uint32_t arg_count, const void* caller);
}

namespace cutrace::osrt {

// The generated table: the libc functions wrapped, by their index in the wrappers file.
extern const char* const kFunctionNames[];
extern const uint32_t kFunctionCount;
extern std::atomic<void*> g_real_functions[];

// The session once bound (a zeroed stand-in when there is none, so the fast path needs no other test).
extern std::atomic<abi::SessionHeader*> g_session;
extern const std::atomic<abi::DomainSet>* g_process_capture;

abi::SessionHeader* bind() __attribute__((noinline, cold));
void* resolve_real(uint32_t index) __attribute__((noinline, cold));

template <class Fn>
inline Fn real_function(uint32_t index) {
  void* p = g_real_functions[index].load(std::memory_order_relaxed);
  if (CUTRACE_UNLIKELY(!p)) p = resolve_real(index);
  return reinterpret_cast<Fn>(p);
}

inline constexpr abi::DomainSet kDomain = abi::domain_bit(abi::ApiDomain::kOsRuntime);

// Whether this call is timed: the shim is attached, osrt is being captured (the session's word and the
// process's capture range), and the call is not the tracer's own (in_tracer also covers a signal
// handler that interrupted the writing of a record on this thread).
__attribute__((always_inline)) inline bool should_time(const preload::ThreadState& ts) {
  abi::SessionHeader* s = g_session.load(std::memory_order_acquire);
  if (CUTRACE_UNLIKELY(s == nullptr) && (s = bind()) == nullptr) return false;
  return (s->capture_domains.load(std::memory_order_relaxed) & g_process_capture->load(std::memory_order_relaxed) &
          kDomain) != 0 &&
         ts.in_tracer == 0;
}

__attribute__((always_inline)) inline bool reaches_threshold(uint64_t begin, uint64_t end) {
  return end - begin >= g_session.load(std::memory_order_relaxed)->osrt_threshold;
}

__attribute__((always_inline)) inline void record(preload::ThreadState& ts, uint32_t api_id, uint64_t begin,
                                                  uint64_t end, uint64_t result, uint8_t flags, const uint64_t* args,
                                                  uint32_t arg_count, const void* caller) {
  cutrace_preload_record_osrt(ts, api_id, begin, end, result, flags, args, arg_count, caller);
}

}  // namespace cutrace::osrt
