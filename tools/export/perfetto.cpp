#include "export/perfetto.h"

#include <charconv>
#include <string>
#include <unordered_set>
#include <vector>

#include "export/perfetto_proto.h"
#include "common/json.h"

namespace cutrace::exporting {
namespace {

using json::append_json_string;
using json::append_json_strings;
using model::ExportOptions;
using model::JobPlacement;
using model::TimelineArg;
using model::TimelineArgs;
using model::TimelinePlacement;
using model::TimelineSink;
using model::TimelineSlice;
using model::place_job;
using model::run_timeline;

template <class T>
void append_number(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Nanoseconds as microseconds with three decimals, exactly (no detour through a double).
void append_us(std::string& out, int64_t ns) {
  const uint64_t mag = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  if (ns < 0) out.push_back('-');
  append_number(out, mag / 1000);
  const unsigned frac = unsigned(mag % 1000);
  const char digits[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
  out.append(digits, 4);
}

// Chrome's trace-event JSON: the events of the traceEvents array, which the caller opens and closes.
class JsonSink final : public TimelineSink {
 public:
  explicit JsonSink(FILE* out) : out_(out) {}
  ~JsonSink() override { flush(); }

  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), out_);
    buf_.clear();
  }

  void name_process(uint32_t pid, const std::string& name) override { name_event("process_name", pid, pid, name); }
  void name_thread(uint32_t pid, uint32_t tid, const std::string& name) override {
    name_event("thread_name", pid, tid, name);
  }
  void name_gpu_track(uint32_t pid, uint32_t track, const std::string& name) override {
    name_event("thread_name", pid, track, name);
  }

  void slice(uint32_t pid, uint32_t tid, const TimelineSlice& s) override { complete(pid, tid, s); }
  void range(uint32_t pid, uint32_t tid, const TimelineSlice& s) override { complete(pid, tid, s); }

  void gpu_slice(uint32_t pid, uint32_t track, const TimelineSlice& s, uint64_t flow) override {
    complete(pid, track, s);
    // The flow's end, bound to this slice: the same id as the call's API link.
    if (flow) flow_event("{\"ph\":\"f\",\"bp\":\"e\"", pid, track, s.begin_ns, flow);
  }

  // Bound to the slice enclosing it on the calling thread: the call.
  void flow_start(uint32_t pid, uint32_t tid, int64_t time_ns, uint32_t, uint64_t flow) override {
    flow_event("{\"ph\":\"s\"", pid, tid, time_ns, flow);
  }

  void async_slice(uint32_t pid, std::string_view, std::string_view name, const char* category, uint64_t id,
                   uint32_t begin_tid, int64_t begin_ns, uint32_t end_tid, int64_t end_ns,
                   const TimelineArgs& args) override {
    for (const bool begin : {true, false}) {
      begin_event();
      buf_ += begin ? "{\"ph\":\"b\",\"name\":" : "{\"ph\":\"e\",\"name\":";
      append_json_string(buf_, name);
      buf_ += ",\"cat\":\"";
      buf_ += category;
      buf_ += "\",\"id\":";
      append_number(buf_, id);
      ids(pid, begin ? begin_tid : end_tid, begin ? begin_ns : end_ns);
      if (begin) append_args(args);
      buf_ += '}';
    }
  }

  // An async span of its own per thread, so that the thread's intervals stack on one row.
  void off_cpu(uint32_t pid, uint32_t tid, std::string_view name, int64_t begin_ns, int64_t end_ns) override {
    for (const bool begin : {true, false}) {
      begin_event();
      buf_ += begin ? "{\"ph\":\"b\",\"name\":" : "{\"ph\":\"e\",\"name\":";
      append_json_string(buf_, name);
      buf_ += ",\"cat\":\"off_cpu\",\"id\":\"off-cpu-";
      append_number(buf_, pid);
      buf_ += '-';
      append_number(buf_, tid);
      buf_ += '"';
      ids(pid, tid, begin ? begin_ns : end_ns);
      buf_ += '}';
    }
  }

  void instant(uint32_t pid, uint32_t tid, std::string_view name, const char* category, int64_t time_ns,
               const TimelineArgs& args) override {
    begin_event();
    buf_ += "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
    append_json_string(buf_, name);
    buf_ += ",\"cat\":\"";
    buf_ += category;
    buf_ += '"';
    ids(pid, tid, time_ns);
    append_args(args);
    buf_ += '}';
    flush_if_full();
  }

  void counter(uint32_t pid, std::string_view name, std::string_view arg, int64_t time_ns, int64_t value) override {
    begin_event();
    buf_ += "{\"ph\":\"C\",\"name\":";
    append_json_string(buf_, name);
    buf_ += ",\"pid\":";
    append_number(buf_, pid);
    buf_ += ",\"ts\":";
    append_us(buf_, time_ns);
    buf_ += ",\"args\":{";
    append_json_string(buf_, arg);
    buf_ += ':';
    append_number(buf_, value);
    buf_ += "}}";
  }

  void end_of_trace() override { flush(); }

 private:
  void begin_event() {
    buf_ += first_ ? "\n" : ",\n";
    first_ = false;
  }

  void flush_if_full() {
    if (buf_.size() >= 1 << 16) flush();
  }

  void ids(uint32_t pid, uint32_t tid, int64_t time_ns) {
    buf_ += ",\"pid\":";
    append_number(buf_, pid);
    buf_ += ",\"tid\":";
    append_number(buf_, tid);
    buf_ += ",\"ts\":";
    append_us(buf_, time_ns);
  }

  void name_event(const char* what, uint32_t pid, uint32_t tid, const std::string& name) {
    begin_event();
    buf_ += "{\"ph\":\"M\",\"name\":\"";
    buf_ += what;
    buf_ += "\",\"pid\":";
    append_number(buf_, pid);
    buf_ += ",\"tid\":";
    append_number(buf_, tid);
    buf_ += ",\"args\":{\"name\":";
    append_json_string(buf_, name);
    buf_ += "}}";
    flush();
  }

  void flow_event(const char* head, uint32_t pid, uint32_t tid, int64_t time_ns, uint64_t flow) {
    begin_event();
    buf_ += head;
    buf_ += ",\"cat\":\"cuda_flow\",\"name\":\"cuda launch\",\"id\":";
    append_number(buf_, flow);
    ids(pid, tid, time_ns);
    buf_ += '}';
  }

  void complete(uint32_t pid, uint32_t tid, const TimelineSlice& s) {
    begin_event();
    buf_ += "{\"ph\":\"X\",\"name\":";
    append_json_string(buf_, s.name);
    buf_ += ",\"cat\":\"";
    buf_ += s.category;
    buf_ += '"';
    ids(pid, tid, s.begin_ns);
    buf_ += ",\"dur\":";
    append_us(buf_, s.end_ns - s.begin_ns);
    append_args(s.args);
    buf_ += '}';
    flush_if_full();
  }

  void append_args(const TimelineArgs& args) {
    buf_ += ",\"args\":{";
    bool first = true;
    for (const TimelineArg& a : args) {
      if (!first) buf_ += ',';
      first = false;
      append_json_string(buf_, a.key);
      buf_ += ':';
      switch (a.type) {
        case TimelineArg::Type::kUnsigned: append_number(buf_, a.u); break;
        case TimelineArg::Type::kSigned: append_number(buf_, a.s); break;
        case TimelineArg::Type::kText: append_json_string(buf_, a.text()); break;
        case TimelineArg::Type::kTexts: append_json_strings(buf_, a.texts); break;
        case TimelineArg::Type::kNumbers:
          buf_ += '[';
          for (size_t i = 0; i < a.numbers.size(); ++i) {
            if (i) buf_ += ',';
            append_number(buf_, a.numbers[i]);
          }
          buf_ += ']';
          break;
      }
    }
    buf_ += '}';
  }

  FILE* out_;
  std::string buf_;
  bool first_ = true;  // no event written yet in the whole document
};

void write_json_tail(FILE* out, const std::string& other_data) {
  const std::string tail = "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cutrace\"," + other_data + "}}\n";
  std::fwrite(tail.data(), 1, tail.size(), out);
}

}  // namespace

PerfettoCounts write_perfetto(reader::TraceReader& reader, FILE* out, const ExportOptions& options,
                              PerfettoFormat format) {
  if (format == PerfettoFormat::kProtobuf) {
    ProtoSink sink(out);
    return run_timeline(reader, sink, options, TimelinePlacement{});
  }
  std::fputs("{\"traceEvents\":[", out);
  uint64_t origin = 0;
  PerfettoCounts counts;
  {
    JsonSink sink(out);
    counts = run_timeline(reader, sink, options, TimelinePlacement{}, &origin);
  }
  std::string other = "\"trace\":";
  append_json_string(other, reader.path());
  other += ",\"status\":";
  append_json_string(other, reader.status().describe());
  other += ",\"clock\":\"CLOCK_MONOTONIC\",\"time_origin_ns\":\"" + std::to_string(origin) + "\"";
  write_json_tail(out, other);
  return counts;
}

PerfettoCounts write_perfetto_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                  const ExportOptions& options, PerfettoFormat format, std::vector<std::string>& notes) {
  const JobPlacement job = place_job(traces, notes);
  PerfettoCounts total;
  if (format == PerfettoFormat::kProtobuf) {
    ProtoSink sink(out);
    for (size_t k = 0; k < traces.size(); ++k) total.add(run_timeline(*traces[k], sink, options, job.traces[k]));
    return total;
  }
  std::fputs("{\"traceEvents\":[", out);
  {
    JsonSink sink(out);
    for (size_t k = 0; k < traces.size(); ++k) total.add(run_timeline(*traces[k], sink, options, job.traces[k]));
  }
  std::string other = "\"traces\":[";
  for (size_t k = 0; k < traces.size(); ++k) {
    other += k ? ",{\"trace\":" : "{\"trace\":";
    append_json_string(other, traces[k]->path());
    other += ",\"status\":";
    append_json_string(other, traces[k]->status().describe());
    other += ",\"shift_ns\":\"" + std::to_string(job.shift_ns[k]) + "\"}";
  }
  other += "],\"clock\":\"CLOCK_REALTIME\",\"time_origin_realtime_ns\":\"" + std::to_string(job.zero_realtime_ns) + "\"";
  write_json_tail(out, other);
  return total;
}

}  // namespace cutrace::exporting
