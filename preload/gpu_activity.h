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

// Whether `address` lies in the CUPTI library the shim loaded: CUPTI's own lookups of CUDA functions
// must get the real ones, or its internal calls would show as the program's.
bool in_shims_cupti(uintptr_t address);

// As the process leaves through _exit (no exit handlers run: multiprocessing's children): has the
// flusher thread hand CUPTI's records to the trace, waiting for it at most `limit_ms`, so that a
// process that _exits from a bad state (a crash handler, with CUPTI's locks held) still ends.
void flush_gpu_activity_before_exit(uint32_t limit_ms);

// In a forked child: the parent's CUPTI, if it had started one, is not the child's.
void forget_gpu_activity();

}  // namespace cutrace::preload
