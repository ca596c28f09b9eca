// The trace reader's delivery: the model's accessors (threads, processes, apis, kernels, metadata) and
// next(), which turns the validated records of the current chunk into events. Its other parts:
// trace_file.cpp (chunks, salvage, the header chunks), trace_validate.cpp, trace_names.cpp and
// trace_gpu.cpp.
#include "reader/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "cutrace/job.h"
#include "reader/decode.h"
#include "reader/trace_claim.h"
#include "reader/trace_reader_internal.h"

namespace cutrace::reader {

using namespace detail;

std::string Status::describe() const {
  const std::string ev = thousands(events) + (events == 1 ? " event" : " events");
  const std::string ch = thousands(intact_chunks) + (intact_chunks == 1 ? " intact chunk" : " intact chunks");
  std::string damage;
  if (damaged_chunks)
    damage = thousands(damaged_chunks) + (damaged_chunks == 1 ? " damaged chunk was" : " damaged chunks were") +
             " skipped (the first, chunk " + std::to_string(first_damage_chunk) + " at byte " +
             thousands(first_damage_offset) + ": " + first_damage_reason + ")";
  const std::string earlier = damage.empty() ? "" : "; before that, " + damage;
  switch (state) {
    case TraceState::kReading:
      return "reading: " + ev + " in " + ch + " so far" + earlier;
    case TraceState::kComplete: {
      std::string s = damage.empty() ? "complete: " + ev + " in " + thousands(intact_chunks) + " chunks"
                                     : "damaged: " + damage + "; " + ev + " in the other " + ch + " are shown";
      // Never "complete" over calls the program made after recording stopped.
      if (!cut_off.empty()) s = "cut off: " + cut_off + "; " + (damage.empty() ? ev + " in " + thousands(intact_chunks) + " chunks" : s);
      if (trailing_bytes)
        s += "; " + thousands(trailing_bytes) + " bytes after the end chunk were ignored";
      return s;
    }
    case TraceState::kIncomplete:
      if (!in_progress_by.empty())
        return "in progress: " + in_progress_by + " is still writing it; " + ev + " in " + ch + " so far are shown" +
               earlier;
      return "incomplete: the recorder did not finish (killed or crashed); " + ev + " in " + ch + " are shown" + earlier;
    case TraceState::kTruncated:
      if (!in_progress_by.empty())
        return "in progress: " + in_progress_by + " is still writing it; " + ev + " in " + ch + " so far are shown" +
               earlier;
      return "truncated at byte " + thousands(offset) + " after " + ch +
             ": the recorder did not finish writing chunk " + std::to_string(bad_chunk) + "; " + ev + " are shown" +
             earlier;
    case TraceState::kCorrupt:
      return "corrupt chunk " + std::to_string(bad_chunk) + " at byte " + thousands(offset) + ": " + reason +
             ", and no intact chunk follows; " + ev + " in the " + ch + " before it are shown" + earlier;
  }
  return {};
}

TraceReader::TraceReader() = default;

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeDCtx(dctx_);
}

const std::string* TraceReader::metadata_value(std::string_view key) const {
  for (auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

std::string TraceReader::time_into_recording(uint64_t monotonic_ns) const {
  const std::string* start = metadata_value("start.monotonic_ns");
  const uint64_t start_ns = start ? std::strtoull(start->c_str(), nullptr, 10) : 0;
  if (!start_ns || monotonic_ns < start_ns) return "at " + std::to_string(monotonic_ns) + " ns (CLOCK_MONOTONIC)";
  char text[64];
  std::snprintf(text, sizeof text, "%.3f s into the recording", double(monotonic_ns - start_ns) / 1e9);
  return text;
}

const std::string* TraceReader::summary_value(std::string_view key) const {
  for (auto& [k, v] : summary_)
    if (k == key) return &v;
  return nullptr;
}

const ApiSpec& TraceReader::api(uint32_t id) {
  if (id < api_index_.size() && api_index_[id]) return *api_index_[id];
  auto it = apis_.find(id);
  if (it != apis_.end()) return it->second;
  ApiSpec& spec = apis_[id];
  spec.id = id;
  spec.name = "api#" + std::to_string(id);
  spec.known = false;
  return spec;
}

std::vector<const ApiSpec*> TraceReader::api_table() const {
  std::vector<const ApiSpec*> out;
  for (auto& [id, spec] : apis_)
    if (spec.known) out.push_back(&spec);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->id < b->id; });
  return out;
}

const Thread* TraceReader::thread(uint32_t index) const {
  auto it = thread_pos_.find(index);
  return it == thread_pos_.end() ? nullptr : &threads_[it->second];
}

Thread* TraceReader::mutable_thread(uint32_t index) {
  auto it = thread_pos_.find(index);
  return it == thread_pos_.end() ? nullptr : &threads_[it->second];
}

const KernelName* TraceReader::kernel(const Thread& t, abi::ArgFormat format, uint64_t value) const {
  if (!names_kernel(format) || value == 0) return nullptr;
  const Process& p = processes_[t.process];
  // A handle is named directly (cuModuleGetFunction) or through what it was derived from: a
  // cudaKernel_t from its stub, a CUfunction from its CUkernel, which may itself come from a stub.
  // The chain is short; the bound only guards against a cycle in an untrusted file.
  for (int step = 0; step < 4; ++step) {
    if (auto k = p.kernel_names.find(value); k != p.kernel_names.end()) return &k->second;
    auto a = p.kernel_aliases.find(value);
    if (a == p.kernel_aliases.end()) return nullptr;
    value = a->second;
  }
  return nullptr;
}

const KernelName* TraceReader::kernel_of(const ApiCall& call, const Thread& t) const {
  const int i = call.api->kernel_arg;
  if (i < 0 || i >= call.arg_count) return nullptr;
  return kernel(t, call.api->args[size_t(i)].format, call.args[i]);
}

const ApiSpec* TraceReader::find_api(uint32_t id) const {
  if (id < api_index_.size()) return api_index_[id];
  auto it = apis_.find(id);
  return it == apis_.end() || !it->second.known ? nullptr : &it->second;
}

Process& TraceReader::process_for(const format::ThreadDef& def) {
  auto& same_pid = processes_by_pid_[def.pid];
  for (uint32_t i : same_pid)
    if (processes_[i].start_ticks == def.process_start_ticks) return processes_[i];
  Process& p = processes_.emplace_back();
  p.index = uint32_t(processes_.size() - 1);
  p.pid = def.pid;
  p.ppid = def.ppid;
  p.start_ticks = def.process_start_ticks;
  same_pid.push_back(p.index);
  if (auto pending = pending_names_.find({def.pid, def.process_start_ticks}); pending != pending_names_.end()) {
    apply_kernel_names(p, pending->second);
    pending_names_.erase(pending);
  }
  return p;
}

bool TraceReader::deliver_event(Event& ev) {
  const uint8_t* p = raw_.data();
  while (true) {
    if (rec_pos_ < block_pos_) {
      // Inside a kRecords block: [rec_pos_, block_pos_) holds its remaining records.
      const uint8_t* r = p + rec_pos_;
      auto h = load<abi::RecordHeader>(r);
      rec_pos_ += h.size;
      ev.chunk = next_sequence_ - 1;
      ev.thread = block_thread_;
      ++block_thread_->records_read;
      ++status_.events;
      switch (abi::RecordKind(h.kind)) {
        case abi::RecordKind::kApiCall: {
          auto rec = load<abi::ApiCallRecord>(r);
          ApiCall& c = ev.call;
          ev.kind = EventKind::kApiCall;
          c.api_id = h.aux;
          c.api = &api(h.aux);
          c.begin_ns = rec.begin;
          c.end_ns = rec.end;
          c.result = rec.result;
          c.depth = rec.depth;
          c.outer_domains = rec.outer_domains;
          c.flags = rec.flags;
          c.correlation = rec.correlation ? rec.correlation : ++call_sequence_;
          c.arg_count = rec.arg_count;
          // A fixed width (decoded calls have at most kMaxApiArgs; raw_ has the slack): an inline copy
          // instead of a call into memcpy. Slots past arg_count hold whatever followed.
          static_assert(kDeliverySlack >= 8 * abi::kMaxApiArgs);
          std::memcpy(c.args, r + sizeof(abi::ApiCallRecord), 8 * abi::kMaxApiArgs);
          c.frames = nullptr;
          c.frame_count = 0;
          c.python_frames = nullptr;
          c.python_frame_count = 0;
          if (backtraces_waiting_) {
            // The stack written just before this call's record, if it is this call's (a backtrace
            // whose call was lost to a full ring is dropped here).
            auto b = backtraces_.find(block_thread_->index);
            if (b != backtraces_.end() && b->second.waiting) {
              b->second.waiting = false;
              --backtraces_waiting_;
              if (b->second.call_begin == rec.begin && b->second.api_id == h.aux) {
                c.frames = b->second.frames.data();
                c.frame_count = uint32_t(b->second.frames.size());
                c.python_frames = b->second.python_frames.data();
                c.python_frame_count = uint32_t(b->second.python_frames.size());
              }
            }
          }
          return true;
        }
        case abi::RecordKind::kBacktrace: {
          auto rec = load<abi::BacktraceRecord>(r);
          PendingBacktrace& b = backtraces_[block_thread_->index];
          if (!b.waiting) ++backtraces_waiting_;
          b.waiting = true;
          b.call_begin = rec.call_begin;
          b.api_id = rec.api_id;
          // Either list may be empty (a record of Python frames alone, or of native ones alone), and an
          // empty vector's data() may be null, which memcpy must not be given.
          b.frames.resize(h.aux);
          if (h.aux) std::memcpy(b.frames.data(), r + sizeof(abi::BacktraceRecord), 8u * h.aux);
          b.python_frames.resize(rec.python_frames);
          if (rec.python_frames)
            std::memcpy(b.python_frames.data(), r + abi::backtrace_record_bytes(h.aux, 0),
                        sizeof(abi::PythonFrame) * rec.python_frames);
          continue;  // delivered with its call
        }
        case abi::RecordKind::kString: {
          auto rec = load<abi::StringRecord>(r);
          ev.kind = EventKind::kString;
          ev.string.kind = abi::StringKind(h.aux);
          ev.string.key = rec.key;
          ev.string.text = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::StringRecord)), rec.length);
          return true;
        }
        case abi::RecordKind::kThreadStart: {
          auto rec = load<abi::ThreadStartRecord>(r);
          ev.kind = EventKind::kThreadStart;
          const int32_t priority =
              rec.header.aux & abi::kThreadPriorityKnown ? int32_t(rec.header.aux & 0xff) : -1;
          ev.thread_start = {rec.time, rec.pid, rec.tid, rec.ppid, rec.flags, priority};
          if (priority >= 0) block_thread_->priority = priority;
          return true;
        }
        case abi::RecordKind::kModuleMap: {
          // apply_events() added the chunk's loads in record order; this is the next of them. An
          // unload was applied to its module there and is no event of its own.
          if (h.aux != uint32_t(abi::ModuleEvent::kLoaded)) continue;
          const Process& proc = processes_[block_thread_->process];
          size_t& delivered = module_cursor_[block_thread_->process];
          if (delivered >= proc.modules.size()) continue;
          ev.kind = EventKind::kModule;
          ev.module = &proc.modules[delivered++];
          return true;
        }
        case abi::RecordKind::kCaptureState: {
          auto rec = load<abi::CaptureStateRecord>(r);
          ev.kind = EventKind::kCapture;
          ev.capture = {h.aux == uint32_t(abi::CaptureEvent::kBegin), rec.time, rec.range,
                        abi::CaptureReason(rec.reason)};
          return true;
        }
        case abi::RecordKind::kContextSwitch: {
          auto rec = load<abi::ContextSwitchRecord>(r);
          ev.kind = EventKind::kContextSwitch;
          ev.context_switch = {rec.time, rec.cpu, abi::ContextSwitch(h.aux)};
          return true;
        }
        case abi::RecordKind::kCpuSample: {
          auto rec = load<abi::CpuSampleRecord>(r);
          ev.kind = EventKind::kCpuSample;
          sample_frames_.resize(h.aux);
          std::memcpy(sample_frames_.data(), r + sizeof(abi::CpuSampleRecord), 8u * h.aux);
          ev.sample = {rec.time, rec.cpu, sample_frames_.data(), h.aux};
          return true;
        }
        case abi::RecordKind::kGpuActivity:
          deliver_gpu_activity(ev, r, h.aux);
          return true;
        case abi::RecordKind::kPythonSample: {
          auto rec = load<abi::PythonSampleRecord>(r);
          ev.kind = EventKind::kPythonSample;
          python_sample_frames_.resize(h.aux);
          std::memcpy(python_sample_frames_.data(), r + sizeof(abi::PythonSampleRecord),
                      sizeof(abi::PythonFrame) * h.aux);
          ev.python_sample = {rec.time, python_sample_frames_.data(), h.aux};
          return true;
        }
        case abi::RecordKind::kNvtx:
          if (!is_nvtx_naming(h.aux)) {
            deliver_nvtx(ev, r);
            return true;
          }
          ev.kind = EventKind::kRecord;
          ev.record = {h.kind, h.aux, r, h.size};
          return true;
        case abi::RecordKind::kGpuDevice:  // applied to its process before delivery (Process::gpu_devices)
          break;
        case abi::RecordKind::kInvalid:  // refused by check_record; here for the compiler's count
        case abi::RecordKind::kPad:
        case abi::RecordKind::kKindCount:
          break;
      }
      // A kind without an event of its own (and any kind of a later build): the raw record.
      ev.kind = EventKind::kRecord;
      ev.record = {h.kind, h.aux, r, h.size};
      return true;
    }
    if (block_pos_ >= block_end_) return false;
    auto bh = load<BlockHeader>(p + block_pos_);
    const size_t payload = block_pos_ + sizeof bh;
    block_pos_ = payload + bh.bytes;
    if (BlockType(bh.type) == BlockType::kThreadDef) {
      ev.kind = EventKind::kThreadDef;
      ev.chunk = next_sequence_ - 1;
      ev.thread = thread(bh.thread_index);
      rec_pos_ = block_pos_;
      return true;
    }
    if (BlockType(bh.type) == BlockType::kRecords) {
      block_thread_ = mutable_thread(bh.thread_index);
      rec_pos_ = payload;
    } else {
      rec_pos_ = block_pos_;
    }
  }
}

void TraceReader::deliver_nvtx(Event& ev, const uint8_t* r) {
  auto rec = load<abi::NvtxRecord>(r);
  NvtxEvent& n = ev.nvtx;
  ev.kind = EventKind::kNvtx;
  n.type = abi::NvtxEvent(rec.header.aux);
  n.time_ns = rec.time;
  n.range_id = rec.range_id;
  n.domain = rec.domain;
  n.category = rec.category;
  n.color = rec.has_color ? std::optional<uint32_t>(rec.color) : std::nullopt;
  n.payload_type = abi::NvtxPayload(rec.payload_type);
  n.payload = rec.payload;
  n.text_cut = rec.text_cut;
  n.payload_cut = rec.payload_cut;
  n.payload_bytes = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::NvtxRecord)) + rec.text_bytes,
                                     rec.payload_bytes);
  n.text = {};
  if (abi::NvtxMessage(rec.message_type) == abi::NvtxMessage::kRegistered) {
    const Process& proc = processes_[block_thread_->process];
    auto it = proc.nvtx_strings.find(rec.string_id);
    if (it != proc.nvtx_strings.end()) {
      n.text = it->second;
    } else {
      nvtx_unnamed_ = "#" + std::to_string(rec.string_id);
      n.text = nvtx_unnamed_;
    }
  } else if (abi::NvtxMessage(rec.message_type) == abi::NvtxMessage::kText) {
    n.text = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::NvtxRecord)), rec.text_bytes);
  }
}

bool TraceReader::next(Event& ev) {
  if (fd_ < 0 || status_.state != TraceState::kReading) return false;
  while (true) {
    if (pending_chunk_event_) {
      pending_chunk_event_ = false;
      ev.chunk = next_sequence_ - 1;
      ev.thread = nullptr;
      switch (ChunkType(current_type_)) {
        case ChunkType::kMetadata: ev.kind = EventKind::kMetadata; break;
        case ChunkType::kApiTable: ev.kind = EventKind::kApiTable; break;
        default: ev.kind = EventKind::kEnd; break;
      }
      return true;
    }
    if (deliver_event(ev)) return true;
    if (ended_) {
      status_.state = TraceState::kComplete;
      return false;
    }
    const ReadResult result = read_chunk();
    if (on_chunk_) on_chunk_(offset_);
    if (result == ReadResult::kStop) return false;
  }
}

}  // namespace cutrace::reader
