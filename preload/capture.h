// Capture ranges (`-c cudaProfilerApi|nvtx`): each process gates its own calls. Outside a range the
// process's gate is 0, so the one extra load on the hot path (should_record) makes every call pass
// through untouched; cudaProfilerStart/Stop, cuProfilerStart/Stop and the NVTX range named by -p open
// and close ranges, as --capture-range-end says.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cutrace/domains.h"
#include "shim_names.h"

namespace cutrace::preload {

// ANDed with the session's capture word on every call: all ones unless capture ranges are in use.
extern std::atomic<abi::DomainSet> g_process_capture CUTRACE_SHIM_NAME("process_capture");

// Whether [start_ns, end_ns] (CLOCK_MONOTONIC) overlaps one of the process's capture ranges (always,
// without -c): GPU activity arrives after the fact and is kept only where it does.
bool capture_overlaps(uint64_t start_ns, uint64_t end_ns);

// Reads the launcher's capture settings (abi::kCaptureEnvVar) once the session is attached.
void init_capture();
// Whether -c nvtx is in use: the NVTX tool then checks ranges against it. Set once, at attach.
extern bool g_nvtx_capture_enabled;
inline bool nvtx_capture_enabled() { return g_nvtx_capture_enabled; }

// NVTX side: a domain was created or a string registered (so that registered messages match by id),
// and ranges opened and closed. `level` is the push level of the thread's domain stack.
void nvtx_capture_domain_created(uint32_t domain, const char* name, size_t bytes);
void nvtx_capture_string_registered(uint32_t domain, uint64_t id, const char* text, size_t bytes);
void nvtx_capture_push(uint32_t domain, uint32_t level, const char* text, size_t bytes, uint64_t string_id);
void nvtx_capture_pop(uint32_t domain, uint32_t level);
void nvtx_capture_start(uint32_t domain, uint64_t range_id, const char* text, size_t bytes, uint64_t string_id);
void nvtx_capture_end(uint64_t range_id);

// For the unit tests (tests/unit/gen/capture_test.cpp), which run init_capture() with one setting after
// another in one process: forgets the settings, every range and the -c nvtx matching state (the
// calling thread's push level included), as before init_capture() first ran.
namespace testing {
void reset_capture();
}  // namespace testing

}  // namespace cutrace::preload
