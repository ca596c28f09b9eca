#include "model/timeline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "reader/decode.h"
#include "model/nvtx_ranges.h"
#include "model/calls.h"
#include "model/symbolizer.h"

namespace cutrace::model {

void TimelineCounts::add(const TimelineCounts& o) {
  calls += o.calls;
  processes += o.processes;
  threads += o.threads;
  nvtx += o.nvtx;
  samples += o.samples;
  python_samples += o.python_samples;
  gpu += o.gpu;
  off_cpu += o.off_cpu;
  symbol_notes.insert(symbol_notes.end(), o.symbol_notes.begin(), o.symbol_notes.end());
}

namespace {

using reader::EventKind;

// "arg<i>": the name of a slot beyond what the api table describes (a newer writer's), kept for the
// life of the process so that arguments can refer to it.
std::string_view slot_name(uint32_t i) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (uint32_t k = 0; k < 256; ++k) all.push_back("arg" + std::to_string(k));
    return all;
  }();
  return names[i & 0xff];
}

class Timeline {
 public:
  Timeline(reader::TraceReader& reader, TimelineSink& sink, const ExportOptions& options, const TimelinePlacement& placement)
      : reader_(reader), sink_(sink), options_(options), placement_(placement) {}

  TimelineCounts run(uint64_t* origin) {
    origin_ = placement_.merged ? placement_.origin_ns : reader_.file_header().created_monotonic_ns;
    if (origin) *origin = origin_;
    reader::Event ev;
    while (reader_.next(ev)) {
      switch (ev.kind) {
        case EventKind::kThreadDef: thread_def(*ev.thread); break;
        case EventKind::kString: string_event(ev); break;
        case EventKind::kApiCall: call(ev.call, *ev.thread); break;
        case EventKind::kNvtx:
          if (ev.nvtx.type == abi::NvtxEvent::kMark) {
            mark(ev);
            break;
          }
          if (ev.nvtx.type == abi::NvtxEvent::kPush) {
            std::vector<uint64_t>& starts = open_range_starts_[ev.thread->index];
            starts.insert(std::upper_bound(starts.begin(), starts.end(), ev.nvtx.time_ns), ev.nvtx.time_ns);
          }
          nvtx_.add(reader_, ev);
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
    for (auto& [thread, pending] : held_) hand_over(thread, pending);
    // Ranges inside one that never ended (the program ended, or was cut off, inside it).
    for (auto& [thread, tied] : tied_ranges_) hand_over_ranges(tied, false, 0);
    off_cpu_slices();
    sink_.end_of_trace();
    counts_.symbol_notes = symbols_.notes();
    return counts_;
  }

 private:
  uint32_t pid_of(uint32_t pid) const { return placement_.pid_base + pid; }
  int64_t at(uint64_t monotonic_ns) const { return int64_t(monotonic_ns - origin_); }

  bool in_window(uint64_t begin_ns, uint64_t end_ns) const {
    const uint64_t from = begin_ns > origin_ ? begin_ns - origin_ : 0, to = end_ns > origin_ ? end_ns - origin_ : 0;
    return to >= options_.window_begin_ns && from < options_.window_end_ns;
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
    sink_.name_process(pid_of(p.pid), name);
  }

  void thread_name(const reader::Thread& t) {
    std::string& named = thread_names_[t.index];
    if (t.name.empty() || named == t.name) return;
    named = t.name;
    sink_.name_thread(pid_of(t.pid), t.tid, t.name);
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
    if (it != p.nvtx_thread_names.end()) sink_.name_thread(pid_of(p.pid), uint32_t(r.range_id), it->second);
  }

  void nvtx_args(TimelineArgs& args, uint32_t category, const reader::Thread& t, uint32_t domain) {
    const reader::Process& p = reader_.process_of(t);
    auto d = p.nvtx_domains.find(domain);
    args.add_text("domain", domain == 0 ? std::string() : d != p.nvtx_domains.end() ? d->second : std::to_string(domain),
                  true);
    if (category) {
      auto c = p.nvtx_categories.find(uint64_t(domain) << 32 | category);
      if (c != p.nvtx_categories.end()) args.add_text("category", c->second, true);
      else args.add_unsigned("category", category);
    }
  }

  // An extended payload's fields (NCCL's message size, communicator, ...), each an argument by its
  // schema's name for it.
  void payload_args(TimelineArgs& args, const reader::Thread& t, uint32_t domain, abi::NvtxPayload type,
                    uint64_t schema, std::string_view bytes, uint8_t cut) {
    if (type != abi::NvtxPayload::kExtension) return;
    // Arguments hold views: the decoded names and texts live in payload_ until the next event's.
    payload_ = reader::decode_nvtx_payload(reader_.process_of(t).nvtx_payload_types, domain, schema, bytes, cut);
    for (reader::NvtxPayloadField& f : payload_.fields) {
      switch (f.value.kind) {
        case reader::NvtxPayloadValue::Kind::kSigned: args.add_signed(f.name, f.value.i); break;
        case reader::NvtxPayloadValue::Kind::kUnsigned: args.add_unsigned(f.name, f.value.u); break;
        default:
          f.value.text = reader::nvtx_payload_text(f.value);
          args.add_text(f.name, f.value.text);
          break;
      }
    }
    if (!payload_.problem.empty()) args.add_text("payload problem", payload_.problem);
  }
  reader::DecodedPayload payload_;

  // Push/pop ranges are slices on their thread, around the calls made inside them; start/end ranges
  // may end on another thread, so they are spans of their process, on a track per name.
  void nvtx_range(const NvtxRange& r) {
    const reader::Thread& t = *r.thread;
    // Whether a push/pop range that encloses this one, still open, began on the same nanosecond.
    bool tied = false;
    if (r.push_pop) {
      // Sorted, so that ranges a program never popped (thousands, in a leaky loop) cost a search only.
      std::vector<uint64_t>& starts = open_range_starts_[t.index];
      const auto [first, last] = std::equal_range(starts.begin(), starts.end(), r.start_ns);
      const auto same_start = last - first;
      if (same_start > 0) starts.erase(first);
      tied = same_start > 1;
    }
    if (!in_window(r.start_ns, r.end_ns)) return;
    if (r.push_pop) {
      range_.begin_ns = at(r.start_ns);
      range_.end_ns = at(r.end_ns);
      range_.depth = 0;
      range_.name = r.message;  // the domain is an argument
      range_.category = "nvtx";
      range_.args.clear();
      nvtx_args(range_.args, 0, t, r.domain);
      range_.args.add_unsigned("level", r.level);
      payload_args(range_.args, t, r.domain, r.payload_type, r.payload, r.payload_bytes, r.payload_cut);
      std::vector<TiedRange>& waiting = tied_ranges_[t.index];
      if (tied) {
        waiting.push_back({pid_of(t.pid), t.tid, range_, std::string(range_.name)});
      } else {
        sink_.range(pid_of(t.pid), t.tid, range_);
        if (!waiting.empty()) hand_over_ranges(waiting, true, range_.begin_ns);
      }
    } else {
      args_.clear();
      nvtx_args(args_, 0, t, r.domain);
      payload_args(args_, t, r.domain, r.payload_type, r.payload, r.payload_bytes, r.payload_cut);
      sink_.async_slice(pid_of(t.pid), r.message, r.message, "nvtx", placement_.id_base + r.id, t.tid, at(r.start_ns),
                        r.end_thread->tid, at(r.end_ns), args_);
    }
    ++counts_.nvtx;
  }

  // A process's capture ranges (-c), "capture range N".
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
    if (!in_window(from, c.time_ns)) return;
    args_.clear();
    args_.add_text("opened_by", c.reason == abi::CaptureReason::kNvtx ? "nvtx" : "cudaProfilerApi", true);
    sink_.async_slice(pid_of(t.pid), "capture ranges", "capture range " + std::to_string(c.range), "capture",
                      placement_.id_base + (uint64_t(t.process) << 32 | c.range), t.tid, at(from), t.tid, at(c.time_ns),
                      args_);
  }

  void mark(const reader::Event& ev) {
    const reader::NvtxEvent& n = ev.nvtx;
    if (!in_window(n.time_ns, n.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    args_.clear();
    nvtx_args(args_, n.category, t, n.domain);
    payload_args(args_, t, n.domain, n.payload_type, n.payload, n.payload_bytes, n.payload_cut);
    sink_.instant(pid_of(t.pid), t.tid, n.text, "nvtx", at(n.time_ns), args_);
    ++counts_.nvtx;
  }

  // --cpuctxsw: each time a thread was off its CPU, the thread's switches put in time order first.
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
        if (!in_window(left, time)) continue;
        sink_.off_cpu(pid_of(thread->pid), thread->tid, why == abi::ContextSwitch::kPreempted ? "preempted" : "off CPU",
                      at(left), at(time));
        ++counts_.off_cpu;
      }
    }
  }

  // A CPU sample: a point on its thread, named by the function it found running, with the stack.
  void sample(const reader::Event& ev) {
    const reader::CpuSampleEvent& s = ev.sample;
    if (!in_window(s.time_ns, s.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    const reader::Process& p = reader_.process_of(t);
    const ResolvedAddress& top = symbols_.resolve(p, s.frames[0], s.time_ns, true);
    const std::string name = top.frames.empty() ? raw_frame(top) : top.frames.front().function;
    args_.clear();
    args_.add_unsigned("cpu", s.cpu);
    args_.add_texts("stack", symbols_.named_stack(p, s.frames, s.frame_count, s.time_ns, true));
    sink_.instant(pid_of(t.pid), t.tid, name, "cpu_sample", at(s.time_ns), args_);
    ++counts_.samples;
  }

  // A Python sample: a point on its thread, named by the innermost Python function.
  void python_sample(const reader::Event& ev) {
    const reader::PythonSampleEvent& s = ev.python_sample;
    if (!in_window(s.time_ns, s.time_ns)) return;
    const reader::Thread& t = *ev.thread;
    std::vector<std::string> stack = python_stack(reader_.process_of(t), s.frames, s.frame_count);
    const std::string top = stack.front().substr(0, stack.front().rfind(" ("));
    args_.clear();
    args_.add_texts("python_stack", std::move(stack));
    sink_.instant(pid_of(t.pid), t.tid, top, "python_sample", at(s.time_ns), args_);
    ++counts_.python_samples;
  }

  // --cuda-memory-usage: the device memory a process has allocated, per device, from CUPTI's
  // allocation and release records (a release names its allocation by address).
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
    if (!in_window(g.start_ns, g.start_ns)) return;
    sink_.counter(pid_of(t.pid), "CUDA device memory (device " + std::to_string(g.device) + ")", "bytes", at(g.start_ns),
                  in_use);
  }

  // GPU work goes on a track per device and stream of its process, as nsys's "CUDA HW" rows: a
  // thread id of its own, above any real one (pid_max is at most 2^22).
  static uint32_t gpu_track(uint32_t device, uint32_t stream) {
    return 0x40000000u + (device == UINT32_MAX ? 0xffffu : device & 0xffffu) * 0x4000u + (stream & 0x3fffu);
  }

  void gpu_activity(const reader::Event& ev) {
    const reader::GpuActivityEvent& g = ev.gpu;
    const reader::Thread& t = *ev.thread;
    // A flow from the call that issued GPU work to that work.
    const uint64_t flow = uint64_t(pid_of(t.pid)) << 32 | g.correlation;
    if (g.kind == abi::GpuActivity::kApiLink) {
      if (in_window(g.start_ns, g.end_ns)) sink_.flow_start(pid_of(t.pid), g.tid, at(g.start_ns), g.api_id, flow);
      return;
    }
    if (g.kind == abi::GpuActivity::kMemory) {
      memory_usage(ev);
      return;
    }
    if (g.kind != abi::GpuActivity::kKernel && g.kind != abi::GpuActivity::kMemcpy &&
        g.kind != abi::GpuActivity::kMemset && g.kind != abi::GpuActivity::kGraph)
      return;
    if (!in_window(g.start_ns, g.end_ns)) return;
    const uint32_t track = gpu_track(g.device, g.stream);
    if (gpu_tracks_.insert(uint64_t(pid_of(t.pid)) << 32 | track).second)
      sink_.name_gpu_track(pid_of(t.pid), track,
                           "CUDA HW (device " + (g.device == UINT32_MAX ? std::string("?") : std::to_string(g.device)) +
                               ", stream " + std::to_string(g.stream) + ")");
    const bool kernel = g.kind == abi::GpuActivity::kKernel;
    std::string operation;
    if (g.kind == abi::GpuActivity::kGraph)
      operation = "[CUDA graph " + std::to_string(g.graph_id) + "]";
    else if (!kernel)
      operation = reader::gpu_memory_operation(g.kind, g.copy_kind);
    TimelineSlice& s = gpu_;
    s.begin_ns = at(g.start_ns);
    s.end_ns = s.begin_ns + int64_t(g.duration_ns());
    s.name = kernel ? (g.name ? std::string_view(g.name->demangled) : std::string_view("[unnamed kernel]")) : operation;
    s.category = "cuda_gpu";
    s.args.clear();
    s.args.add_unsigned("correlation", g.correlation);
    s.args.add_signed("device", g.device == UINT32_MAX ? -1 : int64_t(g.device));
    s.args.add_unsigned("context", g.context);
    s.args.add_unsigned("stream", g.stream);
    if (kernel) {
      s.args.add_numbers("grid", {g.grid[0], g.grid[1], g.grid[2]});
      s.args.add_numbers("block", {g.block[0], g.block[1], g.block[2]});
      s.args.add_unsigned("registers_per_thread", g.registers_per_thread);
      s.args.add_unsigned("static_shared_bytes", g.static_shared_bytes);
      s.args.add_unsigned("dynamic_shared_bytes", g.dynamic_shared_bytes);
      if (g.name) s.args.add_text("mangled", g.name->mangled, true);
    } else if (g.kind != abi::GpuActivity::kGraph) {
      s.args.add_unsigned("bytes", g.bytes);
    }
    if (g.graph_id) s.args.add_unsigned("graph_id", g.graph_id);
    if (g.graph_node_id) s.args.add_unsigned("graph_node_id", g.graph_node_id);
    sink_.gpu_slice(pid_of(t.pid), track, s, g.correlation ? flow : 0);
    ++counts_.gpu;
  }

  struct Held {
    uint32_t pid, tid;
    TimelineSlice slice;
  };

  // Hands held calls over parent first: a thread's records come in the order its calls ended,
  // children before their parent, and a timeline wants an enclosing slice before the ones inside
  // it, above all when both start on the same nanosecond.
  void hand_over(uint32_t, std::vector<Held>& held) {
    std::stable_sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
      return a.slice.begin_ns != b.slice.begin_ns ? a.slice.begin_ns < b.slice.begin_ns : a.slice.depth < b.slice.depth;
    });
    for (const Held& h : held) {
      sink_.slice(h.pid, h.tid, h.slice);
      ++counts_.calls;
    }
    held.clear();
  }

  // Hands over the ranges that ended inside an enclosing range begun on the same nanosecond (all of
  // them, or those begun at `begin_ns`), outermost first: ranges end innermost first, and a timeline
  // nests slices that begin together by the order it is given them.
  struct TiedRange {
    uint32_t pid, tid;
    TimelineSlice slice;
    std::string name;  // the slice's name, which otherwise lives only as long as the sink call
  };
  void hand_over_ranges(std::vector<TiedRange>& waiting, bool only_at, int64_t begin_ns) {
    auto now = std::stable_partition(waiting.begin(), waiting.end(),
                                     [&](const TiedRange& h) { return only_at && h.slice.begin_ns != begin_ns; });
    std::stable_sort(now, waiting.end(), [](const TiedRange& a, const TiedRange& b) {
      return a.slice.begin_ns != b.slice.begin_ns ? a.slice.begin_ns < b.slice.begin_ns : a.slice.end_ns > b.slice.end_ns;
    });
    for (auto it = now; it != waiting.end(); ++it) {
      it->slice.name = it->name;
      sink_.range(it->pid, it->tid, it->slice);
    }
    waiting.erase(now, waiting.end());
  }

  void call(const reader::ApiCall& c, const reader::Thread& t) {
    // Nested calls wait for their outermost parent; a parent lost to a drop only delays them to the
    // next outermost call, and a bound keeps a thread that never returns to depth 0 from holding more.
    const uint64_t from = c.begin_ns > origin_ ? c.begin_ns - origin_ : 0, to = from + c.duration_ns();
    const bool in_window = to >= options_.window_begin_ns && from < options_.window_end_ns;
    const bool shown = in_window && model::is_shown_call(c, options_.show_internal);
    auto held = held_.find(t.index);
    if (c.depth == 0 && (held == held_.end() || held->second.empty())) {
      if (!shown) return;
      // The common case, a call with nothing recorded inside it, goes straight out.
      fill_call(call_, c, t);
      sink_.slice(pid_of(t.pid), t.tid, call_);
      ++counts_.calls;
      return;
    }
    std::vector<Held>& pending = held == held_.end() ? held_[t.index] : held->second;
    if (shown) {
      pending.push_back({pid_of(t.pid), t.tid, {}});
      fill_call(pending.back().slice, c, t);
    }
    if (c.depth == 0 || pending.size() >= 4096) hand_over(t.index, pending);
  }

  // reader::result_name, which searches its domain's status table, remembered per domain for the
  // last result: almost every call of a domain returns the same (success). The names are the
  // table's, so they live as long as the program.
  std::string_view result_name(const reader::ApiSpec& api, uint64_t result) {
    const size_t domain = size_t(api.domain);
    if (domain >= std::size(last_result_)) return reader::result_name(api, result);
    LastResult& last = last_result_[domain];
    if (!last.known || last.result != result) {
      last.name = reader::result_name(api, result);
      last.result = result;
      last.known = true;
    }
    return last.name;
  }

  // Read at the first call: the trace's metadata comes before its calls.
  bool has_links() {
    if (!links_checked_) {
      links_ = trace_has_gpu_activity(reader_);
      links_checked_ = true;
    }
    return links_;
  }

  void fill_call(TimelineSlice& s, const reader::ApiCall& c, const reader::Thread& t) {
    const reader::ApiSpec& api = *c.api;
    s.begin_ns = at(c.begin_ns);
    s.end_ns = s.begin_ns + int64_t(c.duration_ns());
    s.depth = c.depth;
    s.name = api.display_name;
    s.category = reader::domain_name(api.domain);
    s.api_id = c.api_id;
    s.awaits_link = has_links() && api.api_class != abi::ApiClass::kOther && (abi::domain_bit(api.domain) & abi::kCudaDomains);
    TimelineArgs& args = s.args;
    args.clear();
    for (uint32_t i = 0; i < c.arg_count; ++i) {
      // Slots beyond what the api table describes come from a newer writer: shown raw, by position.
      const std::string_view key = i < api.args.size() ? std::string_view(api.args[i].name) : slot_name(i);
      auto v = reader::decode_call_arg(reader_, t, c, i);
      switch (v.type) {
        case reader::ArgValue::Type::kUnsigned: args.add_unsigned(key, v.u); break;
        case reader::ArgValue::Type::kSigned: args.add_signed(key, v.s); break;
        case reader::ArgValue::Type::kText: args.add_text(key, v.text); break;
      }
    }
    // A call still in progress when recording of its thread ended has no result to show.
    switch (c.not_returned() ? format::ResultKind::kVoid : api.result_kind) {
      case format::ResultKind::kVoid: break;
      case format::ResultKind::kPointer: args.add_text("result", reader::hex(c.result)); break;
      case format::ResultKind::kUnsigned: args.add_unsigned("result", c.result); break;
      case format::ResultKind::kSigned: args.add_signed("result", int64_t(c.result)); break;
      case format::ResultKind::kErrorCode: {
        // A success (0, every named domain's success code) carries only its name, which implies the
        // number: 6 of the 43 bytes a call took in the protobuf export. A failure, or a result that
        // has no name (OS runtime, MPI), keeps the number. SQL over args (`WHERE args.result != 0`)
        // finds the failures either way: an absent result is NULL.
        std::string_view name = result_name(api, c.result);
        if (c.result != 0 || name.empty()) args.add_signed("result", int64_t(c.result));
        if (!name.empty()) args.add_lasting_text("result_name", name, true);
        break;
      }
    }
    if (c.not_returned()) args.add_lasting_text("not_returned", "true", true);
    if (c.depth) args.add_unsigned("depth", c.depth);
    s.numbering_arg = -1;
    if (c.correlation) {
      s.numbering_arg = int(args.size());
      args.add_unsigned("correlation", c.correlation);
    }
    if (api.display_name != api.name) args.add_text("entry_point", api.name, true);  // where reports show another name
    if (c.python_frame_count) {
      // The script's own frames, innermost first: the line of Python that made the call.
      args.add_texts("python_stack", python_stack(reader_.process_of(t), c.python_frames, c.python_frame_count));
    }
    if (c.frame_count) {
      // Innermost first, each as the file and the offset a symboliser takes (addr2line -e FILE OFFSET);
      // an address in no reported module stays an address.
      const reader::Process& p = reader_.process_of(t);
      std::vector<std::string> frames;
      for (uint32_t i = 0; i < c.frame_count; ++i) {
        const reader::Module* m = p.module_at(c.frames[i], c.begin_ns);
        if (!m) {
          frames.push_back(reader::hex(c.frames[i]));
          continue;
        }
        const size_t slash = m->path.rfind('/');
        frames.push_back((slash == std::string::npos ? m->path : m->path.substr(slash + 1)) + "+" +
                         reader::hex(c.frames[i] - m->base));
      }
      args.add_texts("backtrace", std::move(frames));
      // The same frames named from the binaries (function, file:line), the functions inlined at a
      // call each a frame of its own; a frame that cannot be named stays module+offset.
      args.add_texts("stack", symbols_.named_stack(p, c.frames, c.frame_count, c.begin_ns));
      // One stack of both, where the interpreter's eval-loop frames are named: each gives way to the
      // Python frames it ran.
      std::vector<std::string> mixed =
          symbols_.mixed_stack(p, c.frames, c.frame_count, c.begin_ns, c.python_frames, c.python_frame_count);
      if (!mixed.empty()) args.add_texts("mixed_stack", std::move(mixed));
    }
  }

  reader::TraceReader& reader_;
  TimelineSink& sink_;
  const ExportOptions& options_;
  const TimelinePlacement& placement_;
  uint64_t origin_ = 0;
  bool links_checked_ = false;
  bool links_ = false;  // the trace has GPU activity: calls that give the device work get API links
  TimelineSlice call_, range_, gpu_;  // reused from item to item
  TimelineArgs args_;
  struct LastResult {
    bool known = false;
    uint64_t result = 0;
    std::string_view name;
  };
  LastResult last_result_[64];  // by domain
  bool memory_usage_checked_ = false, memory_usage_ = false;
  std::unordered_map<uint64_t, int64_t> device_memory_;  // pid << 32 | device -> bytes allocated
  std::unordered_map<uint64_t, uint64_t> allocations_;   // of an allocation by address -> its bytes
  std::unordered_set<uint64_t> gpu_tracks_;              // pid << 32 | track: named already
  std::unordered_map<uint32_t, std::vector<Held>> held_;  // per thread: calls awaiting their parent
  // Per thread: the starts of its push/pop ranges still open (any domain), and the ranges that ended
  // inside one of them begun on the same nanosecond, which wait for it (hand_over_ranges).
  std::unordered_map<uint32_t, std::vector<uint64_t>> open_range_starts_;
  std::unordered_map<uint32_t, std::vector<TiedRange>> tied_ranges_;
  std::vector<bool> process_seen_;
  std::vector<std::string> process_names_;  // last name given per process
  std::unordered_map<uint32_t, std::string> thread_names_;
  TimelineCounts counts_;
  Symbolizer symbols_;
  std::map<const reader::Thread*, std::vector<std::pair<uint64_t, abi::ContextSwitch>>> switches_;
  NvtxRangeTracker nvtx_{[this](const NvtxRange& r) { nvtx_range(r); }};
  std::unordered_map<uint32_t, uint64_t> capture_open_;  // process -> start of its open capture range
};

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

TimelineCounts run_timeline(reader::TraceReader& reader, TimelineSink& sink, const ExportOptions& options,
                            const TimelinePlacement& placement, uint64_t* origin_ns) {
  return Timeline(reader, sink, options, placement).run(origin_ns);
}

JobPlacement place_job(const std::vector<reader::TraceReader*>& traces, std::vector<std::string>& notes) {
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
  JobPlacement job;
  job.zero_realtime_ns = traces.empty() ? 0 : *std::min_element(starts.begin(), starts.end());
  for (size_t k = 0; k < traces.size(); ++k) {
    TimelinePlacement p;
    p.merged = true;
    // Linux pids stay below 2^22: a trace's processes keep their pid, offset by its place in the list.
    p.pid_base = uint32_t(k) << 22;
    p.id_base = uint64_t(k) << 56;
    p.origin_ns = job.zero_realtime_ns - offsets[k];  // the trace's monotonic time at the timeline's 0
    p.index = k;
    if (const std::string* rank = value_of(metadata[k], "job.rank")) p.rank = *rank;
    const std::string* host = value_of(metadata[k], "host");
    p.host = host ? *host : "unknown host";
    job.traces.push_back(std::move(p));
    job.shift_ns.push_back(starts[k] - job.zero_realtime_ns);
  }
  return job;
}

}  // namespace cutrace::model
