// GPU activity (-t cuda): what the device ran, from CUPTI's Activity API, when a driver and CUPTI are
// present. Once the process has initialised a driver, the shim loads the process's CUPTI (libcupti.so.<runtime major>: one already loaded, one
// beside the CUDA runtime, one on the library path, the toolkit's), takes CUPTI's single subscriber
// slot so that a second profiler cannot silently take its buffers, gives CUPTI the trace's clock,
// and re-encodes every buffer CUPTI completes into GpuActivity records in the ring of the thread that
// received it (docs/trace-format.md, "GPU activity"). Any failure (no driver: 999; another profiler
// holds CUPTI: 39; no CUPTI at all) leaves the API trace as it was and says why in the trace.
#pragma once

#include <cstdint>

#include "runtime.h"

namespace cutrace::preload {

// The process's first successful cuInit: a driver is present and initialised, the one moment CUPTI
// can start safely (some CUPTI versions crash without a driver, and NVIDIA's own injection starts
// there too) and before any context exists, so that every kernel is seen. Starts GPU activity once
// per process, on a thread of its own, and waits a bounded time for it. A forked child starts its own
// only where its parent had not started one (CUDA does not survive a fork: a child can use it only
// when its parent had not).
void on_driver_initialized();

// Hands every record CUPTI holds to the trace, incomplete buffers too: at the end of a capture range
// and at exit.
void flush_gpu_activity();

// Capture is over for good in this process (its last capture range ended and the program goes on):
// CUPTI is finalised at the exit of the next runtime or driver call, so that nothing of it keeps
// costing the program (kernel instrumentation, its threads), and its subscriber slot is free again.
void tear_down_gpu_activity();

// Whether `address` lies in the CUPTI library the shim loaded: CUPTI's own lookups of CUDA functions
// must get the real ones, or its internal calls would show as the program's.
bool in_shims_cupti(uintptr_t address);

// As the process leaves through _exit (no exit handlers run: multiprocessing's children): has the
// flusher thread hand CUPTI's records to the trace, waiting for it at most `limit_ms`, so that a
// process that _exits from a bad state (a crash handler, with CUPTI's locks held) still ends.
void flush_gpu_activity_before_exit(uint32_t limit_ms);

// A lookup of `name` through one of the program's handles (dlsym, dlvsym) found `found`: the shim's own
// function where it stands in front of CUPTI's of that name (its activity callbacks, enabling,
// flushing, subscribing, finalising: see gpu_activity.cpp), which then calls `found` where the
// shim's CUPTI session is not the process's; else `found`.
void* route_programs_cupti_lookup(const char* name, void* found);

// In a forked child: the parent's CUPTI, if it had started one, is not the child's.
void forget_gpu_activity();

// For the unit tests (tests/unit/gen/gpu_activity_test.cpp), which feed the shim's CUPTI handlers
// buffers and callbacks of their own making, with no device and no CUPTI started.
namespace testing {
// Takes CUPTI's record, name and callback functions from `cupti` (a dlopen handle of a CUPTI
// library); `enable_callback`, when given, stands in for cuptiEnableCallback. Whether all were found.
bool bind_cupti(void* cupti, int (*enable_callback)(uint32_t, void*, int, uint32_t) = nullptr);
// The handlers CUPTI calls: the subscriber's callback, and a completed activity buffer (handed back
// to the shim's pool afterwards: it must come from request_activity_buffer).
void callback(int domain, uint32_t cbid, const void* callback_data);
uint8_t* request_activity_buffer(size_t* size);
void buffer_completed(uint8_t* buffer, size_t valid_bytes);
// Enables the callbacks of the calls that give the device work through bind_cupti's stand-in; how many.
uint32_t enable_work_callbacks();
}  // namespace testing

}  // namespace cutrace::preload
