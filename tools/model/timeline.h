// A trace as a timeline: what goes on which track, when, under which name and with which arguments,
// decided once for every timeline format (perfetto.h: Perfetto's protobuf and Chrome's trace-event
// JSON). `run_timeline` reads a trace to its end and hands each item to a TimelineSink, which only
// encodes it.
//
// Tracks: one per process and thread; GPU work on a track per device and stream of its process
// ("CUDA HW (device D, stream S)"); NVTX start/end ranges and capture ranges on tracks of their
// process; a thread's time off its CPU (--cpuctxsw) on a track of that thread, and in Perfetto's
// protobuf its push/pop ranges on another (they nest among its calls in the JSON).
//
// Times are nanoseconds from the timeline's 0: the trace file's creation, or, for several traces
// merged, the earliest trace's start on the wall clock (place_job).
//
// A thread's calls come to the sink parent first (the trace holds them in the order they ended): a
// call with calls recorded inside it is held until it ends, then it and its calls are handed over
// in the order they began, an enclosing call before the ones inside it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"
#include "model/export_options.h"

namespace cutrace::model {

struct TimelineArg {
  enum class Type : uint8_t { kUnsigned, kSigned, kText, kTexts, kNumbers };
  // Static, or an argument name of the trace's api table: it lives as long as the trace's reader.
  std::string_view key;
  Type type = Type::kUnsigned;
  // A value of few distinct values (a result's name, a domain): formats that intern strings intern it.
  bool repeats = false;
  // The text is a name from a table of the program's own (an enumerator's): it lives, unchanged, as
  // long as the program, so that a format may know it by where it is and it needs no copy.
  bool lasting = false;
  uint64_t u = 0;
  int64_t s = 0;
  std::string_view text() const { return lasting ? lasting_text : owned_text; }
  std::string owned_text;
  std::string_view lasting_text;
  std::vector<std::string> texts;
  std::vector<int64_t> numbers;
};

// The arguments of one item, in order. Reused from item to item: clear() keeps the strings' storage.
class TimelineArgs {
 public:
  void clear() { size_ = 0; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const TimelineArg& operator[](size_t i) const { return items_[i]; }
  const TimelineArg* begin() const { return items_.data(); }
  const TimelineArg* end() const { return items_.data() + size_; }

  void add_unsigned(std::string_view key, uint64_t v) { next(key, TimelineArg::Type::kUnsigned).u = v; }
  void add_signed(std::string_view key, int64_t v) { next(key, TimelineArg::Type::kSigned).s = v; }
  void add_text(std::string_view key, std::string_view v, bool repeats = false) {
    TimelineArg& a = next(key, TimelineArg::Type::kText);
    a.owned_text.assign(v);
    a.repeats = repeats;
  }
  // A text that lives as long as the program (TimelineArg::lasting).
  void add_lasting_text(std::string_view key, std::string_view v, bool repeats = false) {
    TimelineArg& a = next(key, TimelineArg::Type::kText);
    a.lasting_text = v;
    a.lasting = true;
    a.repeats = repeats;
  }
  void add_texts(std::string_view key, std::vector<std::string> v) { next(key, TimelineArg::Type::kTexts).texts = std::move(v); }
  void add_numbers(std::string_view key, std::initializer_list<int64_t> v) {
    next(key, TimelineArg::Type::kNumbers).numbers.assign(v);
  }

 private:
  TimelineArg& next(std::string_view key, TimelineArg::Type type) {
    if (size_ == items_.size()) items_.emplace_back();
    TimelineArg& a = items_[size_++];
    a.key = key;
    a.type = type;
    a.repeats = false;
    a.lasting = false;
    return a;
  }

  std::vector<TimelineArg> items_;
  size_t size_ = 0;
};

// A span on one track: a call, an NVTX push/pop range, a kernel, copy or set.
struct TimelineSlice {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  uint16_t depth = 0;            // a call's nesting in other recorded calls
  std::string_view name;         // lives as long as the trace's reader (calls) or the sink call
  std::string_view category;
  TimelineArgs args;
  // A call that gives the device work, in a trace with GPU activity: its API link (flow_start) may
  // follow, naming `api_id` on the same thread. 0: none will.
  uint32_t api_id = 0;
  bool awaits_link = false;
  // Which of `args` is the call's "correlation", the reader's numbering of calls (-1: none). A format
  // that joins calls to their GPU work by CUPTI's id shows that id instead, as nsys's CorrID.
  int numbering_arg = -1;
};

class TimelineSink {
 public:
  virtual ~TimelineSink() = default;
  // Names (and renames) a track. `pid` and `tid` are as placed (a merged trace's pids are offset).
  virtual void name_process(uint32_t pid, const std::string& name) = 0;
  virtual void name_thread(uint32_t pid, uint32_t tid, const std::string& name) = 0;
  virtual void name_gpu_track(uint32_t pid, uint32_t track, const std::string& name) = 0;
  // A call of a thread, parent first (see above).
  virtual void slice(uint32_t pid, uint32_t tid, const TimelineSlice& s) = 0;
  // An NVTX push/pop range of a thread, given when it ends: after the calls made inside it.
  virtual void range(uint32_t pid, uint32_t tid, const TimelineSlice& s) = 0;
  // GPU work; `flow` (0: none) ends the flow a call's API link started.
  virtual void gpu_slice(uint32_t pid, uint32_t track, const TimelineSlice& s, uint64_t flow) = 0;
  // CUPTI's record of a call that gave the device work: `time_ns` lies inside the call on thread `tid`
  // that started `flow`; `api_id` names its api.
  virtual void flow_start(uint32_t pid, uint32_t tid, int64_t time_ns, uint32_t api_id, uint64_t flow) = 0;
  // A span of the process that may end on another thread (NVTX start/end, capture ranges), shown on
  // a track named `track_name`; `id` is unique among them.
  virtual void async_slice(uint32_t pid, std::string_view track_name, std::string_view name, const char* category,
                           uint64_t id, uint32_t begin_tid, int64_t begin_ns, uint32_t end_tid, int64_t end_ns,
                           const TimelineArgs& args) = 0;
  // An interval a thread spent off its CPU ("off CPU", or "preempted" while it was still runnable).
  virtual void off_cpu(uint32_t pid, uint32_t tid, std::string_view name, int64_t begin_ns, int64_t end_ns) = 0;
  // A point on a thread: an NVTX mark, a CPU or Python sample.
  virtual void instant(uint32_t pid, uint32_t tid, std::string_view name, const char* category, int64_t time_ns,
                       const TimelineArgs& args) = 0;
  // A value of a process over time, as `arg`: the device memory in use.
  virtual void counter(uint32_t pid, std::string_view name, std::string_view arg, int64_t time_ns, int64_t value) = 0;
  // The trace is read: hand over what was held.
  virtual void end_of_trace() {}
};

struct TimelineCounts {
  uint64_t calls = 0;           // calls
  uint64_t processes = 0;       // process tracks
  uint64_t threads = 0;         // thread tracks
  uint64_t nvtx = 0;            // NVTX ranges and marks
  uint64_t samples = 0;         // CPU samples (instants on their threads' tracks)
  uint64_t python_samples = 0;  // Python samples (the same)
  uint64_t gpu = 0;             // kernels, copies and sets on GPU tracks
  uint64_t off_cpu = 0;         // intervals off CPU (--cpuctxsw)
  // Modules whose backtrace frames could not be named (Symbolizer::notes), one line each.
  std::vector<std::string> symbol_notes;

  void add(const TimelineCounts& other);
};

// Where a trace's items go: by itself, as the file has them; merged with other traces, its processes'
// ids offset so that processes of different traces (hosts) never share a track, its async ids offset
// likewise, and its times shifted onto the common clock.
struct TimelinePlacement {
  bool merged = false;
  uint32_t pid_base = 0;
  uint64_t id_base = 0;
  uint64_t origin_ns = 0;  // the trace's CLOCK_MONOTONIC time at the timeline's 0 (merged only)
  size_t index = 0;        // its place among the traces merged
  std::string rank;        // the trace's job.rank, "" when it has none
  std::string host;
};

// Reads `reader` to its end into `sink`. `origin_ns` gets the trace's CLOCK_MONOTONIC time at the
// timeline's 0.
TimelineCounts run_timeline(reader::TraceReader& reader, TimelineSink& sink, const ExportOptions& options,
                            const TimelinePlacement& placement, uint64_t* origin_ns = nullptr);

// Several traces (the ranks of a job, on one host or many) on one timeline: each trace's times are
// put on the wall clock by its start anchor (docs/jobs.md) and counted from the earliest trace's
// start; each process is named "rank N (host, pid P): command" (its own rank, else its trace's
// job.rank, else "trace K"). `notes` gets one line per trace placed without a paired anchor.
struct JobPlacement {
  std::vector<TimelinePlacement> traces;
  std::vector<uint64_t> shift_ns;   // each trace's start after the timeline's 0
  uint64_t zero_realtime_ns = 0;    // the timeline's 0 on CLOCK_REALTIME
};
JobPlacement place_job(const std::vector<reader::TraceReader*>& traces, std::vector<std::string>& notes);

}  // namespace cutrace::model
