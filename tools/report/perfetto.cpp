#include "report/perfetto.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "reader/decode.h"
#include "report/nvtx_ranges.h"
#include "report/reports.h"
#include "report/symbolizer.h"
#include "report/table.h"

namespace cutrace::report {
namespace {

using reader::EventKind;

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

// Where a trace's events go on the timeline: by itself, as the file has them; merged with other
// traces, its processes' ids offset so that processes of different traces (hosts) never share a
// track, its async ids offset likewise, and its times shifted onto the common clock.
struct Placement {
  bool merged = false;
  uint32_t pid_base = 0;
  uint64_t id_base = 0;
  uint64_t origin_ns = 0;  // the trace's CLOCK_MONOTONIC time at the timeline's 0
  size_t index = 0;        // its place among the traces merged
  std::string rank;        // the trace's job.rank, "" when it has none
  std::string host;
};

class Writer {
 public:
  Writer(reader::TraceReader& reader, FILE* out, const PerfettoOptions& options, bool& first, Placement placement)
      : reader_(reader), out_(out), options_(options), first_(first), placement_(std::move(placement)) {}

  // One trace's whole document.
  PerfettoCounts run() {
    std::fputs("{\"traceEvents\":[", out_);
    events();
    buf_ += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cutrace\",\"trace\":";
    append_json_string(buf_, reader_.path());
    buf_ += ",\"status\":";
    append_json_string(buf_, reader_.status().describe());
    buf_ += ",\"clock\":\"CLOCK_MONOTONIC\",\"time_origin_ns\":\"" + std::to_string(origin_) + "\"}}\n";
    flush();
    return counts_;
  }

  // The trace's events, into the traceEvents array another writes the rest of.
  PerfettoCounts events() {
    origin_ = placement_.merged ? placement_.origin_ns : reader_.file_header().created_monotonic_ns;
    reader::Event ev;
    while (reader_.next(ev)) {
      switch (ev.kind) {
        case EventKind::kThreadDef: thread_def(*ev.thread); break;
        case EventKind::kString: string_event(ev); break;
        case EventKind::kApiCall: call(ev.call, *ev.thread); break;
        case EventKind::kNvtx:
          if (ev.nvtx.type == abi::NvtxEvent::kMark) mark(ev);
          else nvtx_.add(reader_, ev);
          break;
        case EventKind::kRecord: named_by_nvtx(ev); break;
        case EventKind::kCapture: capture(ev); break;
        case EventKind::kCpuSample: sample(ev); break;
        case EventKind::kPythonSample: python_sample(ev); break;
        case EventKind::kGpuActivity: gpu_activity(ev); break;
        case EventKind::kContextSwitch:
          switches_[ev.thread].push_back({ev.context_switch.time_ns, ev.context_switch.change});
          break;
        default: break;
      }
    }
    for (auto& [thread, pending] : nested_) emit(pending);
    off_cpu_slices();
    flush();
    counts_.symbol_notes = symbols_.notes();
    return counts_;
  }

 private:
  uint32_t pid_of(uint32_t pid) const { return placement_.pid_base + pid; }

  void begin_event() {
    buf_ += first_ ? "\n" : ",\n";
    first_ = false;
  }

  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), out_);
    buf_.clear();
  }

  void name_event(const char* what, uint32_t pid, uint32_t tid, const std::string& name) {
    begin_event();
    buf_ += "{\"ph\":\"M\",\"name\":\"";
    buf_ += what;
    buf_ += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
    append_json_string(buf_, name);
    buf_ += "}}";
    flush();
  }

  void process_name(const reader::Process& p) {
    std::string name = p.command.empty() ? p.exe : p.command;
    if (placement_.merged) {
      // Its own rank where its environment gave one, else the trace's: "rank 3 (node01, pid 4242): app".
      const std::string rank = p.rank >= 0 ? std::to_string(p.rank) : placement_.rank;
      name = (rank.empty() ? "trace " + std::to_string(placement_.index) : "rank " + rank) + " (" + placement_.host +
             ", pid " + std::to_string(p.pid) + ")" + (name.empty() ? "" : ": " + name);
    }
    if (p.index >= process_names_.size()) process_names_.resize(p.index + 1);
    if (name.empty() || process_names_[p.index] == name) return;
    process_names_[p.index] = name;
    name_event("process_name", pid_of(p.pid), pid_of(p.pid), name);
  }

  void thread_name(const reader::Thread& t) {
    std::string& named = thread_names_[t.index];
    if (t.name.empty() || named == t.name) return;
    named = t.name;
    name_event("thread_name", pid_of(t.pid), t.tid, t.name);
  }

  void thread_def(const reader::Thread& t) {
    const reader::Process& p = reader_.process_of(t);
    if (p.index >= process_seen_.size()) process_seen_.resize(p.index + 1, false);
    if (!process_seen_[p.index]) {
      process_seen_[p.index] = true;
      ++counts_.processes;
      process_name(p);
    }
    ++counts_.threads;
    thread_name(t);
  }

  // The reader applies a chunk's names before its events, so names are usually known at the thread
  // definition; one that arrives in a later chunk renames the track.
  void string_event(const reader::Event& ev) {
    const reader::Thread& t = *ev.thread;
    if (ev.string.kind == abi::StringKind::kThreadName) thread_name(t);
    else if (ev.string.kind == abi::StringKind::kProcessCommand || ev.string.kind == abi::StringKind::kProcessExe)
      process_name(reader_.process_of(t));
  }

  // A thread named by nvtxNameOsThread shows under that name, as in nsys.
  void named_by_nvtx(const reader::Event& ev) {
    if (ev.record.kind != uint16_t(abi::RecordKind::kNvtx) || ev.record.aux != uint32_t(abi::NvtxEvent::kNameThread) ||
        ev.record.size < sizeof(abi::NvtxRecord))
      return;
    abi::NvtxRecord r;
    std::memcpy(&r, ev.record.bytes, sizeof r);
    const reader::Process& p = reader_.process_of(*ev.thread);
    auto it = p.nvtx_thread_names.find(uint32_t(r.range_id));
    if (it != p.nvtx_thread_names.end()) name_event("thread_name", pid_of(p.pid), uint32_t(r.range_id), it->second);
  }

  bool nvtx_in_window(uint64_t begin_ns, uint64_t end_ns) const {
    const uint64_t from = begin_ns > origin_ ? begin_ns - origin_ : 0, to = end_ns > origin_ ? end_ns - origin_ : 0;
    return to >= options_.window_begin_ns && from < options_.window_end_ns;
  }

  void nvtx_args(std::string& j, uint32_t category, const reader::Thread& t, uint32_t domain) {
    j += ",\"args\":{\"domain\":";
    const reader::Process& p = reader_.process_of(t);
    auto d = p.nvtx_domains.find(domain);
    append_json_string(j, domain == 0 ? std::string() : d != p.nvtx_domains.end() ? d->second : std::to_string(domain));
    if (category) {
      j += ",\"category\":";
      auto c = p.nvtx_categories.find(uint64_t(domain) << 32 | category);
      if (c != p.nvtx_categories.end()) append_json_string(j, c->second);
      else append_number(j, category);
    }
  }

  // Push/pop ranges are slices on their thread, around the calls made inside them; start/end ranges
  // may end on another thread, so they are async slices of their process, one track per name.
  void nvtx_range(const NvtxRange& r) {
    if (!nvtx_in_window(r.start_ns, r.end_ns)) return;
    const reader::Thread& t = *r.thread;
    const std::string& name = r.message;  // the domain is an argument
    if (r.push_pop) {
      begin_event();
      buf_ += "{\"ph\":\"X\",\"name\":";
      append_json_string(buf_, name);
      buf_ += ",\"cat\":\"nvtx\",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(t.tid) + ",\"ts\":";
      append_us(buf_, int64_t(r.start_ns - origin_));
      buf_ += ",\"dur\":";
      append_us(buf_, int64_t(r.end_ns - r.start_ns));
      nvtx_args(buf_, 0, t, r.domain);
      buf_ += ",\"level\":" + std::to_string(r.level) + "}}";
    } else {
      std::string args;
      nvtx_args(args, 0, t, r.domain);
      args += "}";
      async_slice(name, "nvtx", placement_.id_base + r.id, pid_of(t.pid), t.tid, r.start_ns, r.end_thread->tid, r.end_ns, args);
    }
    ++counts_.nvtx;
    if (buf_.size() >= 1 << 16) flush();
  }

  // A process's capture ranges (-c) as async slices of the process, "capture range N".
  void capture(const reader::Event& ev) {
    const reader::Thread& t = *ev.thread;
    const reader::CaptureEvent& c = ev.capture;
    if (c.begin) {
      capture_open_[t.process] = c.time_ns;
      return;
    }
    auto open = capture_open_.find(t.process);
    if (open == capture_open_.end()) return;
    const uint64_t from = open->second;
    capture_open_.erase(open);
    if (!nvtx_in_window(from, c.time_ns)) return;
    const std::string name = "capture range " + std::to_string(c.range);
    const std::string args = std::string(",\"args\":{\"opened_by\":\"") +
                             (c.reason == abi::CaptureReason::kNvtx ? "nvtx" : "cudaProfilerApi") + "\"}";
    async_slice(name, "capture", placement_.id_base + (uint64_t(t.process) << 32 | c.range), pid_of(t.pid), t.tid, from, t.tid, c.time_ns, args);
  }

  // An async slice of process `pid` ("b" then "e", one id): a span that may end on another thread.
  // `begin_args` (",\"args\":{...}") goes with the begin.
  void async_slice(std::string_view name, const char* category, uint64_t id, uint32_t pid, uint32_t begin_tid,
                   uint64_t begin_ns, uint32_t end_tid, uint64_t end_ns, const std::string& begin_args) {
    for (const bool begin : {true, false}) {
      begin_event();
      buf_ += begin ? "{\"ph\":\"b\",\"name\":" : "{\"ph\":\"e\",\"name\":";
      append_json_string(buf_, name);
      buf_ += ",\"cat\":\"";
      buf_ += category;
      buf_ += "\",\"id\":" + std::to_string(id) + ",\"pid\":" + std::to_string(pid) +
              ",\"tid\":" + std::to_string(begin ? begin_tid : end_tid) + ",\"ts\":";
      append_us(buf_, int64_t((begin ? begin_ns : end_ns) - origin_));
      if (begin) buf_ += begin_args;
      buf_ += "}";
    }
  }

  void mark(const reader::Event& ev) {
    const reader::NvtxEvent& n = ev.nvtx;
    if (!nvtx_in_window(n.time_ns, n.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    begin_event();
    buf_ += "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
    append_json_string(buf_, n.text);
    buf_ += ",\"cat\":\"nvtx\",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(t.tid) + ",\"ts\":";
    append_us(buf_, int64_t(n.time_ns - origin_));
    nvtx_args(buf_, n.category, t, n.domain);
    buf_ += "}}";
    ++counts_.nvtx;
  }

  // --cpuctxsw: each time a thread was off its CPU, an async slice ("off CPU", or "preempted" when it
  // was still runnable) of its own track, the thread's switches put in time order first.
  void off_cpu_slices() {
    for (auto& [thread, changes] : switches_) {
      std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      uint64_t left = 0;
      abi::ContextSwitch why = abi::ContextSwitch::kOut;
      bool off = false;
      for (const auto& [time, change] : changes) {
        if (change != abi::ContextSwitch::kIn) {
          left = time;
          why = change;
          off = true;
          continue;
        }
        if (!off) continue;
        off = false;
        if (!nvtx_in_window(left, time)) continue;
        const std::string ids = ",\"cat\":\"off_cpu\",\"id\":\"off-cpu-" + std::to_string(pid_of(thread->pid)) + "-" + std::to_string(thread->tid) +
                                "\",\"pid\":" + std::to_string(pid_of(thread->pid)) + ",\"tid\":" + std::to_string(thread->tid);
        const char* name = why == abi::ContextSwitch::kPreempted ? "preempted" : "off CPU";
        for (bool begin : {true, false}) {
          begin_event();
          buf_ += std::string("{\"ph\":\"") + (begin ? "b" : "e") + "\",\"name\":\"" + name + "\"" + ids + ",\"ts\":";
          append_us(buf_, int64_t((begin ? left : time) - origin_));
          buf_ += "}";
        }
        ++counts_.off_cpu;
      }
    }
  }

  // A CPU sample: an instant on its thread's track, with the stack it interrupted, named.
  void sample(const reader::Event& ev) {
    const reader::CpuSampleEvent& s = ev.sample;
    if (!nvtx_in_window(s.time_ns, s.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    const reader::Process& p = reader_.process_of(t);
    begin_event();
    buf_ += "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
    const ResolvedAddress& top = symbols_.resolve(p, s.frames[0], s.time_ns, true);
    append_json_string(buf_, top.frames.empty() ? raw_frame(top) : top.frames.front().function);
    buf_ += ",\"cat\":\"cpu_sample\",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(t.tid) +
            ",\"ts\":";
    append_us(buf_, int64_t(s.time_ns - origin_));
    buf_ += ",\"args\":{\"cpu\":" + std::to_string(s.cpu) + ",\"stack\":";
    append_json_strings(buf_, symbols_.named_stack(p, s.frames, s.frame_count, s.time_ns, true));
    buf_ += "}}";
    ++counts_.samples;
  }

  // A Python sample: an instant on its thread's track, named by the function it found running.
  void python_sample(const reader::Event& ev) {
    const reader::PythonSampleEvent& s = ev.python_sample;
    if (!nvtx_in_window(s.time_ns, s.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    const std::vector<std::string> stack = python_stack(reader_.process_of(t), s.frames, s.frame_count);
    begin_event();
    buf_ += "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
    const std::string& top = stack.front();
    append_json_string(buf_, top.substr(0, top.rfind(" (")));
    buf_ += ",\"cat\":\"python_sample\",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(t.tid) +
            ",\"ts\":";
    append_us(buf_, int64_t(s.time_ns - origin_));
    buf_ += ",\"args\":{\"python_stack\":";
    append_json_strings(buf_, stack);
    buf_ += "}}";
    ++counts_.python_samples;
  }

  // --cuda-memory-usage: the device memory a process has allocated, as a counter per device, from
  // CUPTI's allocation and release records (a release names its allocation by address).
  void memory_usage(const reader::Event& ev) {
    const reader::GpuActivityEvent& g = ev.gpu;
    if (g.memory_kind != 3 /* CUPTI_ACTIVITY_MEMORY_KIND_DEVICE */) return;
    if (!memory_usage_checked_) {
      const std::string* asked = reader_.metadata_value("cuda_memory_usage");
      memory_usage_ = asked && *asked == "true";
      memory_usage_checked_ = true;
    }
    if (!memory_usage_) return;
    const reader::Thread& t = *ev.thread;
    const uint64_t device_key = uint64_t(pid_of(t.pid)) << 32 | g.device;
    int64_t& in_use = device_memory_[device_key];
    const uint64_t address_key = device_key ^ (g.address * 0x9E3779B97F4A7C15ull);
    if (g.operation == 1) {
      allocations_[address_key] = g.bytes;
      in_use += int64_t(g.bytes);
    } else if (g.operation == 2) {
      auto it = allocations_.find(address_key);
      const uint64_t bytes = it != allocations_.end() ? it->second : g.bytes;
      if (it != allocations_.end()) allocations_.erase(it);
      in_use -= int64_t(bytes);
      if (in_use < 0) in_use = 0;  // released what was allocated before the trace began
    } else {
      return;
    }
    if (!nvtx_in_window(g.start_ns, g.start_ns)) return;
    begin_event();
    buf_ += "{\"ph\":\"C\",\"name\":\"CUDA device memory (device " + std::to_string(g.device) +
            ")\",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"ts\":";
    append_us(buf_, int64_t(g.start_ns - origin_));
    buf_ += ",\"args\":{\"bytes\":" + std::to_string(in_use) + "}}";
  }

  // GPU work goes on a track per device and stream of its process, as nsys's "CUDA HW" rows: a
  // thread id of its own, above any real one (pid_max is at most 2^22).
  static uint32_t gpu_track(uint32_t device, uint32_t stream) {
    return 0x40000000u + (device == UINT32_MAX ? 0xffffu : device & 0xffffu) * 0x4000u + (stream & 0x3fffu);
  }

  void gpu_activity(const reader::Event& ev) {
    const reader::GpuActivityEvent& g = ev.gpu;
    const reader::Thread& t = *ev.thread;
    // A flow from the call that issued GPU work to that work: its start binds to the call's slice on
    // the calling thread, its end to the work's slice on the GPU track.
    const uint64_t flow = uint64_t(pid_of(t.pid)) << 32 | g.correlation;
    if (g.kind == abi::GpuActivity::kApiLink) {
      if (!nvtx_in_window(g.start_ns, g.end_ns)) return;
      begin_event();
      buf_ += "{\"ph\":\"s\",\"cat\":\"cuda_flow\",\"name\":\"cuda launch\",\"id\":" + std::to_string(flow) +
              ",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(g.tid) + ",\"ts\":";
      append_us(buf_, int64_t(g.start_ns - origin_));
      buf_ += "}";
      return;
    }
    if (g.kind == abi::GpuActivity::kMemory) {
      memory_usage(ev);
      return;
    }
    if (g.kind != abi::GpuActivity::kKernel && g.kind != abi::GpuActivity::kMemcpy &&
        g.kind != abi::GpuActivity::kMemset)
      return;
    if (!nvtx_in_window(g.start_ns, g.end_ns)) return;
    const uint32_t track = gpu_track(g.device, g.stream);
    const uint64_t key = uint64_t(pid_of(t.pid)) << 32 | track;
    if (gpu_tracks_.insert(key).second)
      name_event("thread_name", pid_of(t.pid), track,
                 "CUDA HW (device " + (g.device == UINT32_MAX ? std::string("?") : std::to_string(g.device)) +
                     ", stream " + std::to_string(g.stream) + ")");
    begin_event();
    buf_ += "{\"ph\":\"X\",\"cat\":\"cuda_gpu\",\"name\":";
    if (g.kind == abi::GpuActivity::kKernel) {
      append_json_string(buf_, g.name ? g.name->demangled : std::string("[unnamed kernel]"));
    } else {
      append_json_string(buf_, reader::gpu_memory_operation(g.kind, g.copy_kind));
    }
    buf_ += ",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(track) + ",\"ts\":";
    append_us(buf_, int64_t(g.start_ns - origin_));
    buf_ += ",\"dur\":";
    append_us(buf_, int64_t(g.duration_ns()));
    buf_ += ",\"args\":{\"correlation\":" + std::to_string(g.correlation) + ",\"device\":" +
            std::to_string(int64_t(g.device == UINT32_MAX ? -1 : int64_t(g.device))) + ",\"context\":" +
            std::to_string(g.context) + ",\"stream\":" + std::to_string(g.stream);
    if (g.kind == abi::GpuActivity::kKernel) {
      buf_ += ",\"grid\":[" + std::to_string(g.grid[0]) + "," + std::to_string(g.grid[1]) + "," + std::to_string(g.grid[2]) +
              "],\"block\":[" + std::to_string(g.block[0]) + "," + std::to_string(g.block[1]) + "," +
              std::to_string(g.block[2]) + "],\"registers_per_thread\":" + std::to_string(g.registers_per_thread) +
              ",\"static_shared_bytes\":" + std::to_string(g.static_shared_bytes) +
              ",\"dynamic_shared_bytes\":" + std::to_string(g.dynamic_shared_bytes);
      if (g.name) {
        buf_ += ",\"mangled\":";
        append_json_string(buf_, g.name->mangled);
      }
    } else {
      buf_ += ",\"bytes\":" + std::to_string(g.bytes);
    }
    buf_ += "}}";
    ++counts_.gpu;
    // The flow's end: the same correlation id as the call's link.
    if (g.correlation) {
      begin_event();
      buf_ += "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"cuda_flow\",\"name\":\"cuda launch\",\"id\":" +
              std::to_string(flow) + ",\"pid\":" + std::to_string(pid_of(t.pid)) + ",\"tid\":" + std::to_string(track) +
              ",\"ts\":";
      append_us(buf_, int64_t(g.start_ns - origin_));
      buf_ += "}";
    }
    if (buf_.size() >= 1 << 16) flush();
  }

  struct Slice {
    uint64_t begin;
    uint16_t depth;
    std::string json;
  };

  // Writes held slices parent first: a thread's records come in the order its calls ended, children
  // before their parent, and a viewer building the slice stack from the file wants an enclosing slice
  // before the ones inside it, above all when both start on the same nanosecond.
  void emit(std::vector<Slice>& slices) {
    std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.depth < b.depth;
    });
    for (Slice& s : slices) {
      begin_event();
      buf_ += s.json;
      ++counts_.calls;
    }
    slices.clear();
    if (buf_.size() >= 1 << 16) flush();
  }

  void call(const reader::ApiCall& c, const reader::Thread& t) {
    // Nested calls wait for their outermost parent; a parent lost to a drop only delays them to the
    // next outermost call, and a bound keeps a thread that never returns to depth 0 from holding more.
    const uint64_t from = c.begin_ns > origin_ ? c.begin_ns - origin_ : 0, to = from + c.duration_ns();
    const bool in_window = to >= options_.window_begin_ns && from < options_.window_end_ns;
    const bool shown = in_window && report::is_shown_call(c, options_.show_internal);
    auto held = nested_.find(t.index);
    if (c.depth == 0 && (held == nested_.end() || held->second.empty())) {
      if (!shown) return;
      // The common case, a call with nothing recorded inside it, goes straight out.
      begin_event();
      slice_json(buf_, c, t);
      ++counts_.calls;
      if (buf_.size() >= 1 << 16) flush();
      return;
    }
    std::vector<Slice>& pending = held == nested_.end() ? nested_[t.index] : held->second;
    if (shown) {
      pending.push_back({c.begin_ns, c.depth, {}});
      slice_json(pending.back().json, c, t);
    }
    if (c.depth == 0 || pending.size() >= 4096) emit(pending);
  }

  // Appends the complete event of `c` to `j`.
  void slice_json(std::string& j, const reader::ApiCall& c, const reader::Thread& t) {
    const reader::ApiSpec& api = *c.api;
    j += "{\"ph\":\"X\",\"name\":";
    append_json_string(j, api.display_name);
    j += ",\"cat\":\"";
    j += reader::domain_name(api.domain);
    j += "\",\"pid\":";
    append_number(j, pid_of(t.pid));
    j += ",\"tid\":";
    append_number(j, t.tid);
    j += ",\"ts\":";
    append_us(j, int64_t(c.begin_ns - origin_));
    j += ",\"dur\":";
    append_us(j, int64_t(c.duration_ns()));
    j += ",\"args\":{";
    bool first_arg = true;
    auto key = [&](const std::string& k) {
      if (!first_arg) j += ',';
      first_arg = false;
      append_json_string(j, k);
      j += ':';
    };
    for (uint32_t i = 0; i < c.arg_count; ++i) {
      // Slots beyond what the api table describes come from a newer writer: shown raw, by position.
      key(reader::arg_name(api, i));
      auto v = reader::decode_call_arg(reader_, t, c, i);
      switch (v.type) {
        case reader::ArgValue::Type::kUnsigned: append_number(j, v.u); break;
        case reader::ArgValue::Type::kSigned: append_number(j, v.s); break;
        case reader::ArgValue::Type::kText: append_json_string(j, v.text); break;
      }
    }
    switch (api.result_kind) {
      case format::ResultKind::kVoid: break;
      case format::ResultKind::kPointer:
        key("result");
        append_json_string(j, reader::hex(c.result));
        break;
      case format::ResultKind::kUnsigned:
        key("result");
        j += std::to_string(c.result);
        break;
      case format::ResultKind::kSigned:
        key("result");
        append_number(j, int64_t(c.result));
        break;
      case format::ResultKind::kErrorCode: {
        key("result");
        append_number(j, int64_t(c.result));
        std::string_view name = reader::result_name(api, c.result);
        if (!name.empty()) {
          key("result_name");
          append_json_string(j, name);
        }
        break;
      }
    }
    if (c.depth) {
      key("depth");
      j += std::to_string(c.depth);
    }
    if (c.correlation) {
      key("correlation");
      j += std::to_string(c.correlation);
    }
    if (api.display_name != api.name) {  // the entry point, where reports show another name
      key("entry_point");
      append_json_string(j, api.name);
    }
    if (c.python_frame_count) {
      // The script's own frames, innermost first: the line of Python that made the call.
      key("python_stack");
      append_json_strings(j, python_stack(reader_.process_of(t), c.python_frames, c.python_frame_count));
    }
    if (c.frame_count) {
      // Innermost first, each as the file and the offset a symboliser takes (addr2line -e FILE OFFSET);
      // an address in no reported module stays an address.
      key("backtrace");
      j += '[';
      const reader::Process& p = reader_.process_of(t);
      for (uint32_t i = 0; i < c.frame_count; ++i) {
        if (i) j += ',';
        const reader::Module* m = p.module_at(c.frames[i], c.begin_ns);
        if (!m) {
          append_json_string(j, reader::hex(c.frames[i]));
          continue;
        }
        const size_t slash = m->path.rfind('/');
        append_json_string(j, (slash == std::string::npos ? m->path : m->path.substr(slash + 1)) + "+" +
                                  reader::hex(c.frames[i] - m->base));
      }
      j += ']';
      // The same frames named from the binaries (function, file:line), the functions inlined at a
      // call each a frame of its own; a frame that cannot be named stays module+offset.
      key("stack");
      append_json_strings(j, symbols_.named_stack(p, c.frames, c.frame_count, c.begin_ns));
      // One stack of both, where the interpreter's eval-loop frames are named: each gives way to the
      // Python frames it ran.
      const std::vector<std::string> mixed =
          symbols_.mixed_stack(p, c.frames, c.frame_count, c.begin_ns, c.python_frames, c.python_frame_count);
      if (!mixed.empty()) {
        key("mixed_stack");
        append_json_strings(j, mixed);
      }
    }
    j += "}}";
  }

  bool memory_usage_checked_ = false, memory_usage_ = false;
  std::unordered_map<uint64_t, int64_t> device_memory_;  // pid << 32 | device -> bytes allocated
  std::unordered_map<uint64_t, uint64_t> allocations_;   // of an allocation by address -> its bytes
  std::unordered_set<uint64_t> gpu_tracks_;  // pid << 32 | track: named already
  reader::TraceReader& reader_;
  FILE* out_;
  PerfettoOptions options_;
  std::unordered_map<uint32_t, std::vector<Slice>> nested_;  // per thread: slices awaiting their parent
  uint64_t origin_ = 0;
  std::string buf_;
  bool& first_;  // no event written yet in the whole document: shared by the writers of a merge
  Placement placement_;
  std::vector<bool> process_seen_;
  std::vector<std::string> process_names_;  // last name written per process
  std::unordered_map<uint32_t, std::string> thread_names_;
  PerfettoCounts counts_;
  Symbolizer symbols_;
  std::map<const reader::Thread*, std::vector<std::pair<uint64_t, abi::ContextSwitch>>> switches_;
  NvtxRangeTracker nvtx_{[this](const NvtxRange& r) { nvtx_range(r); }};
  std::unordered_map<uint32_t, uint64_t> capture_open_;  // process -> start of its open capture range
};

}  // namespace

PerfettoCounts write_perfetto(reader::TraceReader& reader, FILE* out, const PerfettoOptions& options) {
  bool first = true;
  return Writer(reader, out, options, first, Placement{}).run();
}

namespace {

// A trace's metadata, read before its events: a probe reads the file's first chunks, which hold it.
std::vector<std::pair<std::string, std::string>> metadata_of(const std::string& path) {
  reader::TraceReader probe;
  if (!probe.open(path)) return {};
  reader::Event ev;
  while (probe.next(ev))
    if (ev.kind != EventKind::kMetadata && ev.kind != EventKind::kApiTable) break;
  return probe.metadata();
}

const std::string* value_of(const std::vector<std::pair<std::string, std::string>>& metadata, std::string_view key) {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC at the trace's start: by its paired anchor (`paired` set), else by
// the file header's two readings; none when it has neither.
std::optional<uint64_t> wall_clock_offset(const reader::TraceReader& reader,
                                          const std::vector<std::pair<std::string, std::string>>& metadata,
                                          bool* paired) {
  auto number = [&](const char* key) -> std::optional<uint64_t> {
    const std::string* v = value_of(metadata, key);
    if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::strtoull(v->c_str(), nullptr, 10);
  };
  const auto real = number("start.realtime_ns"), mono = number("start.monotonic_ns");
  *paired = real && mono;
  if (*paired) return *real - *mono;
  const format::FileHeader& h = reader.file_header();
  if (h.created_realtime_ns == 0 || h.created_monotonic_ns == 0) return std::nullopt;
  return h.created_realtime_ns - h.created_monotonic_ns;
}

}  // namespace

PerfettoCounts write_perfetto_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                  const PerfettoOptions& options, std::vector<std::string>& notes) {
  // Each trace's wall-clock time of its creation; the earliest is the timeline's 0.
  std::vector<uint64_t> offsets, starts;
  std::vector<std::vector<std::pair<std::string, std::string>>> metadata;
  for (reader::TraceReader* t : traces) {
    bool paired = false;
    metadata.push_back(metadata_of(t->path()));
    const uint64_t offset = wall_clock_offset(*t, metadata.back(), &paired).value_or(0);
    if (!paired)
      notes.push_back(t->path() + " has no paired wall-clock anchor (start.realtime_ns): it is placed by the file's "
                      "own two clock readings, which may be off by the time between them");
    offsets.push_back(offset);
    starts.push_back(t->file_header().created_monotonic_ns + offset);
  }
  const uint64_t zero = *std::min_element(starts.begin(), starts.end());
  PerfettoCounts total;
  bool first = true;
  std::fputs("{\"traceEvents\":[", out);
  for (size_t k = 0; k < traces.size(); ++k) {
    reader::TraceReader& t = *traces[k];
    Placement placement;
    placement.merged = true;
    // Linux pids stay below 2^22: a trace's processes keep their pid, offset by its place in the list.
    placement.pid_base = uint32_t(k) << 22;
    placement.id_base = uint64_t(k) << 56;
    placement.origin_ns = zero - offsets[k];  // the trace's monotonic time at the timeline's 0
    placement.index = k;
    if (const std::string* rank = value_of(metadata[k], "job.rank")) placement.rank = *rank;
    const std::string* host = value_of(metadata[k], "host");
    placement.host = host ? *host : "unknown host";
    const PerfettoCounts c = Writer(t, out, options, first, placement).events();
    total.calls += c.calls;
    total.processes += c.processes;
    total.threads += c.threads;
    total.nvtx += c.nvtx;
    total.samples += c.samples;
    total.python_samples += c.python_samples;
    total.gpu += c.gpu;
    total.off_cpu += c.off_cpu;
    total.symbol_notes.insert(total.symbol_notes.end(), c.symbol_notes.begin(), c.symbol_notes.end());
  }
  std::string tail = "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cutrace\",\"traces\":[";
  for (size_t k = 0; k < traces.size(); ++k) {
    tail += k ? ",{\"trace\":" : "{\"trace\":";
    append_json_string(tail, traces[k]->path());
    tail += ",\"status\":";
    append_json_string(tail, traces[k]->status().describe());
    tail += ",\"shift_ns\":\"" + std::to_string(starts[k] - zero) + "\"}";
  }
  tail += "],\"clock\":\"CLOCK_REALTIME\",\"time_origin_realtime_ns\":\"" + std::to_string(zero) + "\"}}\n";
  std::fwrite(tail.data(), 1, tail.size(), out);
  return total;
}

}  // namespace cutrace::report
