// The timeline (timeline.h) in the two formats ui.perfetto.dev opens.
//
// Protobuf (kProtobuf, `cutrace export --type perfetto`, NAME.pftrace): Perfetto's own trace format,
// written with libprotobuf from the part of Perfetto's schema this writer uses
// (perfetto_trace.proto, compiled at build time). Track descriptors for processes, threads, GPU
// streams, NVTX start/end ranges, capture ranges, time off CPU and device memory; slices as
// begin/end pairs, instants, counters; a flow from each call to the GPU work it issued (flow_ids on
// the call, terminating_flow_ids on the work); arguments as debug annotations, a call's "correlation"
// being CUPTI's id that joins it to its work (as nsys's CorrID), on the calls that gave the device
// work only, where the JSON shows the reader's numbering of every call. Names, argument names and
// repeated values are interned. Each thread's calls are a packet sequence of their own whose defaults
// name the thread's track and whose timestamps are deltas (an incremental clock), which keeps a call
// with three arguments near 43 bytes; everything else is one sequence per trace with absolute times.
// Times count from the timeline's 0 (timeline.h) on the default trace clock.
//
// JSON (kJson, `--type perfetto-json`): Chrome's trace-event format. One track per process (pid) and
// thread (tid), named by process_name/thread_name metadata events; calls, push/pop ranges and GPU
// work are complete events ("ph":"X"); start/end ranges, capture ranges and time off CPU are async
// events ("b"/"e"); marks and samples thread-scoped instants ("i"); device memory a counter ("C");
// flows "s" (at CUPTI's record of the call, bound to the enclosing slice) and "f". Times are
// microseconds with three decimals (nanosecond precision), so a double holds every nanosecond;
// otherData gives the origin (time_origin_ns on CLOCK_MONOTONIC, or for a job the traces' shifts and
// time_origin_realtime_ns).
//
// Both stream: memory does not grow with the trace.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "reader/trace_reader.h"
#include "export/exporter.h"
#include "model/timeline.h"

namespace cutrace::exporting {

enum class PerfettoFormat { kProtobuf, kJson };

using PerfettoCounts = model::TimelineCounts;

// Reads `reader` to its end and writes its timeline to `out`.
PerfettoCounts write_perfetto(reader::TraceReader& reader, FILE* out, const model::ExportOptions& options,
                              PerfettoFormat format);

// Several traces as one timeline (place_job); `notes` gets one line per trace placed without a paired
// wall-clock anchor.
PerfettoCounts write_perfetto_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                  const model::ExportOptions& options, PerfettoFormat format,
                                  std::vector<std::string>& notes);

}  // namespace cutrace::exporting
