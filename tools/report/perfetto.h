// Chrome trace-event JSON, the format ui.perfetto.dev and chrome://tracing open.
//
// One track per process (pid) and thread (tid), named by process_name/thread_name metadata events; each
// timed call is a complete event ("ph":"X") named as reports name it (display names), with its decoded
// arguments. Calls made inside other recorded calls (a runtime call's driver calls, cuDNN's cuBLAS
// calls) are slices nested under their parent on the same track. Times are microseconds with
// three decimals (nanosecond precision) since the trace file was created, so the numbers stay small
// enough for a double to hold every nanosecond; otherData.time_origin_ns gives that origin on
// CLOCK_MONOTONIC. Events are written as they are read: memory does not grow with the trace.
//
// A call with a backtrace carries "backtrace" (module+offset frames, what addr2line and other
// symbolisers take) and "stack" (the same frames named from the binaries: function (file:line), inlined
// calls as frames of their own marked [inlined]).
//
// A thread's intervals off its CPU (--cpuctxsw) are async slices ("cat":"off_cpu", one id per thread).
// CPU samples (-s cpu) are thread-scoped instants ("cat":"cpu_sample") named by the function they found
// running, with the stack ("stack") and the CPU in their arguments.
// GPU work from CUPTI (kernels, copies, sets) is on a track per device and stream of its process
// ("CUDA HW (device D, stream S)"), as complete events ("cat":"cuda_gpu"), with a flow ("cat":
// "cuda_flow") from the call that issued it, bound to that call's slice. Python samples (--python-sampling)
// are thread-scoped instants ("cat":"python_sample") named by the innermost Python function, with the
// Python stack ("python_stack").
//
// NVTX: push/pop ranges are complete events ("cat":"nvtx") on their thread, enclosing the calls made
// inside them; start/end ranges, which may end on another thread, are async events ("b"/"e") of their
// process; marks are thread-scoped instants ("i"); a thread named with nvtxNameOsThread shows that name.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "reader/trace_reader.h"
#include "report/exporter.h"

namespace cutrace::report {

struct PerfettoCounts {
  uint64_t calls = 0;      // complete events written
  uint64_t processes = 0;  // process tracks
  uint64_t threads = 0;    // thread tracks
  uint64_t nvtx = 0;       // NVTX ranges and marks written
  uint64_t samples = 0;    // CPU samples written (instants on their threads' tracks)
  uint64_t python_samples = 0;  // Python samples written (the same)
  uint64_t gpu = 0;             // kernels, copies and sets written on GPU tracks
  uint64_t off_cpu = 0;    // intervals off CPU written (--cpuctxsw)
  // Modules whose backtrace frames could not be named (Symbolizer::notes), one line each.
  std::vector<std::string> symbol_notes;
};

using PerfettoOptions = ExportOptions;

// Reads `reader` to its end and writes the JSON document to `out`.
PerfettoCounts write_perfetto(reader::TraceReader& reader, FILE* out, const PerfettoOptions& options = {});

// Several traces (the ranks of a job, on one host or many) as one timeline: each trace's times are put
// on the wall clock by its start anchor (docs/jobs.md) and counted from the earliest trace's start;
// each process is named "rank N (host, pid P): command" (its own rank, else its trace's job.rank, else
// "trace K"); processes of different traces never share a track. `notes` gets one line per trace
// placed without a paired anchor. otherData lists the traces with the shift each was given.
PerfettoCounts write_perfetto_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                  const PerfettoOptions& options, std::vector<std::string>& notes);


}  // namespace cutrace::report
