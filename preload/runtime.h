// What the generated wrappers call. Everything a wrapper does on every call is inline here; everything
// else (attaching to the session, claiming a ring, resolving a real symbol) is out of line and cold.
//
// The shape of a generated wrapper (see preload/gen/cutrace_gen/emit_wrappers.py, emit_wrapper):
//
//   extern "C" CUTRACE_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
//     using Fn = decltype(&::cudaMalloc);
//     Fn real = cutrace::preload::real_function<Fn>(kApi_cudaMalloc);
//     if (!real) return cudaErrorNotSupported;           // from the annotations
//     auto& ts = cutrace::preload::t_thread;
//     constexpr cutrace::abi::DomainSet domain = cutrace::abi::domain_bit(cutrace::abi::ApiDomain::kCudaRuntime);
//     if (!cutrace::preload::should_record(ts, domain)) return real(devPtr, size);
//     cutrace::preload::CallScope scope(ts, domain, kApi_cudaMalloc);
//     cudaError_t result = real(devPtr, size);
//     scope.finish();
//     uint64_t args[2] = {uint64_t(size), devPtr ? uint64_t(*devPtr) : 0};
//     scope.emit(cutrace::preload::as_result(result), 0, args, 2);
//     return result;
//   }
#pragma once

#include <errno.h>
#include <time.h>
#include <x86intrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "capture.h"
#include "cutrace/abi.h"
#include "cutrace/ring.h"

#define CUTRACE_EXPORT __attribute__((visibility("default")))
#define CUTRACE_LIKELY(x) __builtin_expect(!!(x), 1)
#define CUTRACE_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace cutrace::preload {

struct ThreadState {
  ring::Producer producer;  // producer.header == nullptr until this thread has claimed a ring
  abi::DomainSet domains;   // abi::domain_bit() of every recorded call in progress on this thread
  uint32_t depth;           // recorded calls in progress on this thread
  uint32_t in_tracer;       // > 0 while the tracer itself runs: its own calls are never recorded
};

// initial-exec: the library is always loaded at start-up (LD_PRELOAD), and global-dynamic TLS may
// call malloc inside __tls_get_addr, which must never happen on the hot path or in a forked child.
// constinit: constant-initialised, so no wrapper calls a TLS init function (or __tls_get_addr) first.
// Exported: libcutrace-osrt.so (osrt.h) shares it.
extern constinit thread_local ThreadState t_thread __attribute__((tls_model("initial-exec"), visibility("default")));

// The session this process writes to, or nullptr when there is none (pure pass-through).
extern abi::SessionHeader* g_session CUTRACE_SHIM_NAME("session");
// True when timestamps are rdtsc ticks; fixed before the first ring is claimed.
extern bool g_clock_is_tsc CUTRACE_SHIM_NAME("clock_is_tsc");

// Claims a ring for this thread, attaching the process to the session first if needed. Returns false
// when there is no session or no ring could be had; in the latter case the lost record is counted.
bool prepare_thread(ThreadState& ts) CUTRACE_SHIM_NAME("prepare_thread") __attribute__((noinline, cold));

// Whether some thread of this process has announced it to the session (its first ring was claimed).
bool process_announced();
// Names the CUDA runtime the process uses (once, when one is loaded; the thread must have a ring).
void report_cuda_runtime(ThreadState& ts);

// Returns the real function for an api id, resolving it on first use, or nullptr if no loaded library
// provides it.
void* resolve_real(uint32_t api_id) CUTRACE_SHIM_NAME("resolve_real") __attribute__((noinline, cold));
extern std::atomic<void*> g_real_functions[] CUTRACE_SHIM_NAME("real_functions");
// A wrapper whose real function no loaded library provides (a program built against a newer runtime
// than the one it meets): ends the process as the loader's lazy binding would have, with its message
// on stderr and exit status 127. `caller` is the wrapper's return address.
[[noreturn]] void missing_function(uint32_t api_id, const void* caller) CUTRACE_SHIM_NAME("missing_function")
    __attribute__((noinline, cold));
// Per api id (real_functions.cpp): the symbol version its real function is defined under (nullptr:
// unversioned), and whether it may call another major version's function when its own is not loaded.
extern const char* const g_real_versions[];
extern const bool g_may_fall_back[];

template <class Fn>
inline Fn real_function(uint32_t api_id) {
  void* p = g_real_functions[api_id].load(std::memory_order_relaxed);
  if (CUTRACE_UNLIKELY(!p)) p = resolve_real(api_id);
  return reinterpret_cast<Fn>(p);
}

__attribute__((always_inline)) inline uint64_t now() {
  if (CUTRACE_LIKELY(g_clock_is_tsc)) return __rdtsc();
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// CLOCK_MONOTONIC in ns, whatever the session's clock: what CUPTI and the capture ranges' GPU side use.
inline uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// FNV-1a of `length` bytes: the ids names are sent by (never 0, which marks an empty slot below).
inline uint64_t name_hash(const char* text, size_t length) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < length; ++i) h = (h ^ uint8_t(text[i])) * 1099511628211ull;
  return h ? h : 1;
}

// The ids whose names (a Python function's, a GPU kernel's) this process has sent in a string record:
// each goes out once per process, and a forked child, a process of its own, sends them afresh. Open
// addressing without allocation; once full, a name is sent again rather than left out.
template <size_t kSlots>
class SentNames {
 public:
  // Whether `id` (not 0) still has to be sent; marks it sent.
  bool first_sending(uint64_t id) {
    while (lock_.test_and_set(std::memory_order_acquire)) {
    }
    bool first = true;
    for (size_t i = 0; i < kSlots; ++i) {
      uint64_t& slot = ids_[(id + i) % kSlots];
      if (slot == id) {
        first = false;
        break;
      }
      if (slot == 0) {
        slot = id;
        break;
      }
    }
    lock_.clear(std::memory_order_release);
    return first;
  }
  void forget() {
    for (uint64_t& id : ids_) id = 0;
    lock_.clear(std::memory_order_relaxed);
  }

 private:
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  uint64_t ids_[kSlots] = {};
};

// The "capturing?" test of every call: a TLS load, and for threads with a ring one relaxed load of the
// session's capture word, tested for the call's own domain (a domain `-t` left out costs the same).
// With capture ranges (-c) the process's own gate is ANDed in: one more load of a word that is all
// ones without -c and 0 outside a range.
__attribute__((always_inline)) inline bool should_record(ThreadState& ts, abi::DomainSet domain) {
  if (CUTRACE_UNLIKELY(ts.producer.header == nullptr) && !prepare_thread(ts)) return false;
  return (g_session->capture_domains.load(std::memory_order_relaxed) & g_process_capture.load(std::memory_order_relaxed) &
          domain) != 0 &&
         ts.in_tracer == 0;
}

// For calls whose records the tools need even while capture is off (kernel registration): records
// whenever there is a ring, flagging the record when its domain was not being captured.
inline bool should_record_always(ThreadState& ts, abi::DomainSet domain, uint8_t& flags) {
  if (CUTRACE_UNLIKELY(ts.producer.header == nullptr) && !prepare_thread(ts)) return false;
  if (ts.in_tracer) return false;
  if ((g_session->capture_domains.load(std::memory_order_relaxed) & g_process_capture.load(std::memory_order_relaxed) &
       domain) == 0)
    flags |= abi::kCallFlagOutsideCapture;
  return true;
}

template <class R>
inline uint64_t as_result(R r) {
  if constexpr (std::is_pointer_v<R>) return reinterpret_cast<uint64_t>(r);
  else if constexpr (std::is_enum_v<R>) return uint64_t(int64_t(std::underlying_type_t<R>(r)));
  else if constexpr (std::is_signed_v<R>) return uint64_t(int64_t(r));
  else return uint64_t(r);
}

// dim3 packed into one slot (abi::ArgFormat::kDim3).
template <class D>
inline uint64_t pack_dim3(const D& d) {
  auto sat = [](uint32_t v) -> uint64_t { return v > 0xffff ? 0xffff : v; };
  return uint64_t(d.x) | sat(d.y) << 32 | sat(d.z) << 48;
}

// Marks the writing of a record (reserve to commit) as the tracer's own work: a signal handler that
// interrupts it on this thread and makes a traced call (write(2) in a handler, under -t osrt) must not
// reserve the same ring space again. The fences only keep the compiler from moving ring stores out.
struct WritingRecord {
  __attribute__((always_inline)) explicit WritingRecord(ThreadState& ts) : ts_(ts) {
    ++ts_.in_tracer;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  __attribute__((always_inline)) ~WritingRecord() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    --ts_.in_tracer;
  }
  ThreadState& ts_;
};

// Takes the stack of a call that lasted `duration` (session clock units) when that reaches the
// threshold of its backtrace class (the api's class, or the OS runtime's with `osrt`), and writes it
// just before the call's own record, without the tracer's own frames. Out of line: only calls at
// least as long as the smallest CUDA threshold come here, and only calls made outside any other
// recorded call.
void record_backtrace(ThreadState& ts, uint32_t api_id, uint64_t begin, uint64_t duration, bool osrt)
    CUTRACE_SHIM_NAME("record_backtrace") __attribute__((noinline, cold));

static_assert(offsetof(abi::ApiCallRecord, depth) == 40 && offsetof(abi::ApiCallRecord, arg_count) == 41 &&
                  offsetof(abi::ApiCallRecord, flags) == 42 && offsetof(abi::ApiCallRecord, reserved) == 43 &&
                  offsetof(abi::ApiCallRecord, correlation) == 44 && sizeof(abi::ApiCallRecord) == 48,
              "write_call_record stores depth to correlation as one little-endian word");

// Writes one call's record into the thread's ring (counted as dropped when it does not fit). Shared by
// CallScope and the OS runtime's out-of-line recording.
__attribute__((always_inline)) inline void write_call_record(ThreadState& ts, uint32_t api_id, uint64_t begin,
                                                             uint64_t end, uint64_t result, uint32_t depth,
                                                             abi::DomainSet outer_domains, uint8_t flags,
                                                             const uint64_t* args, uint32_t arg_count) {
  const uint32_t bytes = uint32_t(sizeof(abi::ApiCallRecord)) + 8u * arg_count;
  WritingRecord writing(ts);
  ts.producer.write(bytes, [&](uint8_t* p) {
    auto* r = reinterpret_cast<abi::ApiCallRecord*>(p);
    r->header.kind = uint16_t(abi::RecordKind::kApiCall);
    r->header.size = uint16_t(bytes);
    r->header.aux = api_id;
    r->begin = begin;
    r->end = end;
    r->result = result;
    r->outer_domains = outer_domains;
    // depth, arg_count, flags, reserved (0) and correlation (0) in one store.
    const uint64_t counts = uint64_t(depth < 255 ? depth : 255) | uint64_t(arg_count) << 8 | uint64_t(flags) << 16;
    std::memcpy(p + offsetof(abi::ApiCallRecord, depth), &counts, sizeof counts);
    if (arg_count) std::memcpy(r->args, args, 8u * arg_count);
  });
}

// Times one call and writes its record. Nothing between the real call's return and the wrapper's
// (rdtsc or the vDSO clock, plain stores into the ring) can change errno, so the program sees what the
// real function left there without a save and restore; the slow paths that can (claiming a ring,
// hooks) save and restore it themselves.
class CallScope {
 public:
  // always_inline: the generated file holds hundreds of wrappers, enough to exhaust the compiler's
  // inlining budget, and a call here would add to every recorded call.
  __attribute__((always_inline)) CallScope(ThreadState& ts, abi::DomainSet domain, uint32_t api_id)
      : ts_(ts), api_id_(api_id), depth_(ts.depth++), outer_domains_(ts.domains) {
    ts.domains = outer_domains_ | domain;
    begin_ = now();
    // The program's own call is what `cutrace status --calls` shows a hung thread in; the calls it
    // makes inside (the runtime's driver calls) would cost stores for no more insight.
    if (CUTRACE_LIKELY(depth_ == 0))
      ts.producer.header->call_in_progress.store(abi::call_in_progress(api_id, begin_), std::memory_order_relaxed);
  }
  __attribute__((always_inline)) inline void finish() {
    end_ = now();
    if (CUTRACE_LIKELY(depth_ == 0)) ts_.producer.header->call_in_progress.store(0, std::memory_order_relaxed);
    --ts_.depth;
    ts_.domains = outer_domains_;
  }
  __attribute__((always_inline)) inline void emit(uint64_t result, uint8_t flags, const uint64_t* args, uint32_t arg_count) {
    const uint32_t api_id = api_id_;
    // One comparison with a word of the cache line should_record() loaded (kBacktraceOff unless
    // --cudabacktrace asked for stacks). Only the program's own calls: a call made inside another
    // recorded call shares its stack.
    if (CUTRACE_UNLIKELY(end_ - begin_ >= g_session->backtrace_min_threshold) && depth_ == 0)
      record_backtrace(ts_, api_id, begin_, end_ - begin_, false);
    write_call_record(ts_, api_id, begin_, end_, result, depth_, outer_domains_, flags, args, arg_count);
  }

 private:
  ThreadState& ts_;
  uint32_t api_id_;
  uint32_t depth_;
  abi::DomainSet outer_domains_;
  uint64_t begin_ = 0, end_ = 0;
};

// Notes the mapped range of the cutrace object containing `address` (libcutrace-cuda12.so,
// libcutrace-osrt.so): backtraces leave its frames out.
void note_client_range(const void* address);

// Slow-path record helpers used by hooks (kernel registration) and by prepare_thread.
void emit_string(ThreadState& ts, abi::StringKind kind, uint64_t key, const char* text, size_t length);

// Starts one of the tracer's own threads (the Python sampler, the GPU activity flusher): detached,
// with a small stack and every signal blocked, so that it never takes a signal meant for the
// program's threads. errno is left as it was. Returns whether it started.
bool start_tracer_thread(void* (*body)(void*));

// Hand-written hooks the generated wrappers call for functions whose meaning needs more than argument
// slots. Each runs after the real call, whether or not capture is on.
namespace hooks {
void register_function(const void* host_stub, const char* device_name) CUTRACE_SHIM_NAME("register_function");
// A driver handle (CUfunction, CUkernel) the call wrote to *handle_slot is named `name`.
void name_kernel_handle(const void* handle_slot, const char* name) CUTRACE_SHIM_NAME("name_kernel_handle");
// cuFuncGetName: `handle` is named *name_slot.
void name_kernel_by_value(const void* handle, const char* const* name_slot) CUTRACE_SHIM_NAME("name_kernel_by_value");
// Entry-point queries: *pfn becomes the wrapper of the export it is (interpose.cpp).
void driver_entry_point(const char* symbol, void** pfn, int version, unsigned long long flags)
    CUTRACE_SHIM_NAME("driver_entry_point");
void runtime_entry_point(const char* symbol, void** pfn, unsigned long long flags) CUTRACE_SHIM_NAME("runtime_entry_point");
void runtime_entry_point_by_version(const char* symbol, void** pfn, int version, unsigned long long flags)
    CUTRACE_SHIM_NAME("runtime_entry_point_by_version");
// cuInit succeeded (gpu_activity.h).
void driver_initialized() CUTRACE_SHIM_NAME("driver_initialized");
// cudaProfilerStart/Stop, cuProfilerStart/Stop: open and close the process's capture range (capture.cpp).
void capture_start() CUTRACE_SHIM_NAME("capture_start");
void capture_stop() CUTRACE_SHIM_NAME("capture_stop");
}  // namespace hooks

// For the unit tests whose thread gets its ring from the test (tests/unit/gen/in_process_session.h)
// rather than from prepare_thread(), which announces the process (modules_test.cpp: module records are
// written only for an announced process): sets what process_announced() says.
namespace testing {
void set_process_announced(bool announced);
}  // namespace testing

}  // namespace cutrace::preload
