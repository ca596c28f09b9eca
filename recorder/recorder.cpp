#include "recorder/recorder.h"

#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "recorder/library_exports.h"
#include "recorder/warnings.h"

namespace cutrace::recorder {

namespace {

// Kernel names and handles kept for the kNames chunk, at most this much: a program registers a few
// thousand kernels, and a corrupt or hostile ring must not grow the recorder without bound (what is
// not kept is still in the event stream).
constexpr uint64_t kMaxKernelNameBytes = 64u << 20;

// The identity fields are plain (non-atomic) members written by another process; read them with
// relaxed atomic loads so a producer scribbling on them concurrently is not a data race here.
template <class T>
T load_field(const T& field) {
  return __atomic_load_n(&field, __ATOMIC_RELAXED);
}
template <class T>
void store_field(T& field, T value) {
  __atomic_store_n(&field, value, __ATOMIC_RELAXED);
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

}  // namespace

Recorder::Recorder(RecorderOptions options) : options_(options), monitor_(options.use_pidfd) {
  // A block must hold the largest record, and a block (two streams) plus its header must fit in one chunk.
  options_.batch_bytes = std::clamp<uint32_t>(
      options_.batch_bytes, codec::kMaxEncodedBytes,
      (format::kMaxChunkRawBytes - sizeof(format::BlockHeader) - codec::kBlockPrefixBytes) / 2);
  options_.scratch_bytes = std::max<uint32_t>(options_.scratch_bytes, abi::kMaxRecordBytes);
  options_.drain_bytes_per_visit = std::max<uint64_t>(options_.drain_bytes_per_visit, abi::kMaxRecordBytes);
  options_.idle_sleep_min_ns = std::max<uint64_t>(options_.idle_sleep_min_ns, 1);
  options_.idle_sleep_max_ns = std::max(options_.idle_sleep_max_ns, options_.idle_sleep_min_ns);
}

bool Recorder::attach(abi::SessionHeader* session, uint64_t mapped_bytes, trace::TraceWriter* writer,
                      std::string* error) {
  if (!abi::session_layout_valid(session, mapped_bytes)) {
    *error = "the session's shared memory has an invalid layout (a different cutrace version?)";
    return false;
  }
  // Copied once: a producer can overwrite the header later, but slot addresses never move again.
  session_ = session;
  base_ = reinterpret_cast<uint8_t*>(session);
  slot_count_ = session->slot_count;
  ring_bytes_ = session->ring_bytes;
  data_offset_ = abi::session_data_offset(slot_count_);
  clock_kind_ = abi::ClockKind(session->clock_kind);
  trace_domains_ = load_field(session->trace_domains);
  gpu_activity_ = (load_field(session->gpu_activity) & abi::kGpuActivityOn) != 0;
  writer_ = writer;
  if (!clock_.init(clock_kind_, options_.recalibration_interval_ns, error)) return false;
  osrt_threshold_ns_ = load_field(session->osrt_threshold_ns);
  timer_sampling_ = load_field(session->timer_sampling_hz) != 0;
  python_sampling_ = load_field(session->python_sampling_hz) != 0;
  for (uint32_t k = 0; k < abi::kBacktraceClasses; ++k)
    backtrace_threshold_ns_[k] = load_field(session->backtrace_threshold_ns[k]);
  if (clock_.is_tsc()) {
    // The shim compares raw timestamps with the thresholds; the program is still held, so no wrapper
    // reads them before these stores. Rounded up: a call is never taken for being just under one.
    auto to_ticks = [&](uint64_t ns) {
      if (ns == abi::kBacktraceOff) return ns;
      const double ticks = std::ceil(double(ns) * clock_.tsc_hz() / 1e9);
      return ticks >= 1.8e19 ? UINT64_MAX : uint64_t(ticks);
    };
    session->osrt_threshold = to_ticks(osrt_threshold_ns_);
    uint64_t min_cuda = abi::kBacktraceOff;
    for (uint32_t k = 0; k < abi::kBacktraceClasses; ++k) {
      session->backtrace_threshold[k] = to_ticks(backtrace_threshold_ns_[k]);
      if (k != abi::kBacktraceClassOsrt) min_cuda = std::min(min_cuda, session->backtrace_threshold[k]);
    }
    session->backtrace_min_threshold = min_cuda;
  }

  slots_.assign(slot_count_, SlotTrack{});
  threads_.clear();
  dropped_no_memory_.clear();
  kernels_.clear();
  kernels_index_.clear();
  kernels_of_thread_.clear();
  kernel_name_bytes_ = 0;
  // Not zeroed: every byte is written before it is read, and pages never touched cost nothing.
  scratch_ = std::make_unique_for_overwrite<uint8_t[]>(options_.scratch_bytes);
  batch_structure_ = std::make_unique_for_overwrite<uint8_t[]>(options_.batch_bytes);
  batch_times_ = std::make_unique_for_overwrite<uint8_t[]>(options_.batch_bytes);
  batch_cursors_ = {batch_structure_.get(), batch_times_.get()};
  batch_records_ = 0;
  const ClockAnchor start = take_clock_anchor();
  start_realtime_ns_ = start.realtime_ns;
  start_monotonic_ns_ = start.monotonic_ns;
  start_anchor_error_ns_ = start.error_ns;
  last_flush_ns_ = start_monotonic_ns_;
  next_process_check_ns_ = 0;
  finished_ = false;
  return true;
}

trace::KeyValues Recorder::metadata() const {
  trace::KeyValues kv = {
      {"session.clock", clock_kind_ == abi::ClockKind::kTsc ? "tsc" : "monotonic"},
      {"session.ring_bytes", std::to_string(ring_bytes_)},
      {"session.slot_count", std::to_string(slot_count_)},
      {"session.on_full", "drop"},
      {"start.realtime_ns", std::to_string(start_realtime_ns_)},
      {"start.monotonic_ns", std::to_string(start_monotonic_ns_)},
      {"start.anchor_error_ns", std::to_string(start_anchor_error_ns_)},
      {"recorder.process_check", monitor_.using_pidfd() ? "pidfd" : "proc"},
  };
  if (trace_domains_ & abi::domain_bit(abi::ApiDomain::kOsRuntime))
    kv.emplace_back("osrt.threshold_ns", std::to_string(osrt_threshold_ns_));
  // The backtrace thresholds asked for, by class ("kernel=1000,sync=1000"), and the depths.
  static constexpr const char* kClassNames[abi::kBacktraceClasses] = {"other", "sync", "memory", "kernel", "osrt"};
  std::string thresholds;
  for (uint32_t k = 0; k < abi::kBacktraceClasses; ++k) {
    if (backtrace_threshold_ns_[k] == abi::kBacktraceOff) continue;
    thresholds += (thresholds.empty() ? "" : ",") + std::string(kClassNames[k]) + "=" +
                  std::to_string(backtrace_threshold_ns_[k]);
  }
  if (!thresholds.empty()) {
    kv.emplace_back("backtrace.threshold_ns", thresholds);
    kv.emplace_back("backtrace.depth", std::to_string(load_field(session_->backtrace_depth_cuda)) + "," +
                                           std::to_string(load_field(session_->backtrace_depth_osrt)));
    kv.emplace_back("backtrace.python_depth", std::to_string(load_field(session_->backtrace_depth_python)));
  }
  if (clock_.is_tsc()) {
    char hz[32], err[32];
    std::snprintf(hz, sizeof hz, "%.0f", clock_.tsc_hz());
    std::snprintf(err, sizeof err, "%.0f", clock_.error_bound_ns(1e9));
    kv.emplace_back("clock.tsc_hz", hz);
    kv.emplace_back("clock.calibration_baseline_ns", std::to_string(clock_.baseline_ns()));
    // Worst case for a record one second away from the latest calibration pair.
    kv.emplace_back("clock.error_bound_ns", err);
  }
  return kv;
}

uint64_t Recorder::poll(uint64_t now) {
  periodic(now);
  uint64_t consumed = 0;
  slots_in_use_ = 0;
  for (uint32_t i = 0; i < slot_count_; ++i) consumed += visit_slot(i, false, now);
  // A sample is about a record's worth of work: a pass that wrote some is not idle.
  consumed += drain_cpu_samples(false) * sizeof(abi::CpuSampleRecord);
  return consumed;
}

uint64_t Recorder::drain_slot(uint32_t slot, uint64_t max_bytes) {
  if (slot >= slot_count_) return 0;
  abi::RingHeader* ring = slot_at(slot);
  const auto state = abi::SlotState(ring->state.load(std::memory_order_acquire));
  if (state != abi::SlotState::kActive && state != abi::SlotState::kRetired) return 0;
  ensure_tracked(slot, ring, monotonic_ns());
  return drain(slots_[slot], ring, max_bytes).bytes;
}

void Recorder::run(const std::function<bool()>& should_stop) {
  uint64_t sleep_ns = 0;
  // When the last pass began, and the nap chosen after it. Beyond the nap, the time until the next pass
  // is the pass's own work and any wait for the CPU or a SIGCONT: all of it time the rings were not read.
  uint64_t last_pass_ns = 0, planned_ns = 0;
  // A writer that failed (a full disk) does not end the run: the rings are still drained, so that the
  // program's own rings never fill for it, and what they held is counted (Totals::events against
  // TraceWriter::records_on_file()).
  while (!should_stop()) {
    const uint64_t pass_ns = monotonic_ns();
    if (last_pass_ns && pass_ns - last_pass_ns > planned_ns)
      longest_stall_ns_ = std::max(longest_stall_ns_, pass_ns - last_pass_ns - planned_ns);
    last_pass_ns = pass_ns;
    planned_ns = 0;
    // Read before the pass: a wake after it (a claim the pass missed) changes the word, and the nap
    // below then does not start.
    const uint32_t wake_seen = wake_word_ ? wake_word_->load(std::memory_order_acquire) : 0;
    const uint64_t consumed = poll(pass_ns);
    if (consumed >= options_.busy_pass_bytes) {
      // A ring is filling fast: go straight back for more.
      sleep_ns = 0;
      continue;
    }
    // A trickle, or nothing: let records gather and read them in larger batches. Reading a ring's
    // head line and fresh data lines while the producer writes them makes every one of its stores
    // wait for the cache line to come back, which costs the traced program far more than a pause
    // costs the recorder.
    const uint64_t max_nap = wake_word_ && slots_in_use_ == 0
                                 ? std::max(options_.idle_sleep_max_no_rings_ns, options_.idle_sleep_max_ns)
                                 : options_.idle_sleep_max_ns;
    sleep_ns = consumed ? options_.idle_sleep_min_ns
                        : (sleep_ns ? std::min(sleep_ns * 2, max_nap) : options_.idle_sleep_min_ns);
    planned_ns = sleep_ns;
    const timespec ts{time_t(sleep_ns / 1000000000ull), long(sleep_ns % 1000000000ull)};
    // EINTR (SIGTERM), EAGAIN (the word changed since the pass) and a wake all just end the nap early.
    if (wake_word_)
      syscall(SYS_futex, reinterpret_cast<const uint32_t*>(wake_word_), FUTEX_WAIT, wake_seen, &ts, nullptr, 0);
    else
      nanosleep(&ts, nullptr);
  }
}

void Recorder::final_drain() {
  const uint64_t now = monotonic_ns();
  monitor_.refresh(now);
  unreached_.collect();
  if (clock_.is_tsc()) clock_.recalibrate();
  for (uint32_t i = 0; i < slot_count_; ++i) visit_slot(i, true, now);
  for (uint32_t i = 0; i < slot_count_; ++i)
    if (slots_[i].tracked) capture_counters(slots_[i], slot_at(i));
  drain_cpu_samples(true);
  final_lost_no_slot_ = session_->lost_no_slot.load(std::memory_order_relaxed);
  processes_cut_off_ = session_->processes_cut_off.load(std::memory_order_acquire);
  foreign_shims_ = session_->foreign_shims.load(std::memory_order_relaxed);
  timer_samples_skipped_ = session_->timer_samples_skipped.load(std::memory_order_relaxed);
  finished_ = true;
}

void Recorder::periodic(uint64_t now_ns) {
  if (now_ns >= next_process_check_ns_) {
    monitor_.refresh(now_ns);
    unreached_.collect();
    next_process_check_ns_ = now_ns + options_.process_check_interval_ns;
  }
  clock_.maybe_recalibrate(now_ns);
  if (now_ns - last_flush_ns_ >= options_.flush_interval_ns) {
    if (writer_->pending_event_bytes()) writer_->flush_events();
    last_flush_ns_ = now_ns;
  }
}

uint64_t Recorder::visit_slot(uint32_t i, bool final, uint64_t now_ns) {
  abi::RingHeader* ring = slot_at(i);
  SlotTrack& track = slots_[i];
  // Acquire pairs with the producer's release of kActive (identity written) and kRetired (last push).
  const uint32_t state = ring->state.load(std::memory_order_acquire);
  if (state != uint32_t(abi::SlotState::kClaiming)) track.claiming_since_ns = 0;
  if (state != uint32_t(abi::SlotState::kFree)) ++slots_in_use_;
  switch (abi::SlotState(state)) {
    case abi::SlotState::kFree:
      if (track.tracked) {
        // Only the recorder frees a claimed slot; a producer that did so itself gave up its ring, so
        // keep what it reported and forget the claim.
        capture_counters(track, ring);
        track = SlotTrack{};
      }
      return 0;
    case abi::SlotState::kClaiming:
      if (!final) check_claiming(track, ring, now_ns);
      return 0;
    case abi::SlotState::kActive: {
      ensure_tracked(i, ring, now_ns);
      // The process check ran before this pass, so a dead owner has pushed its last record.
      if (monitor_.dead(track.process)) {
        const uint64_t bytes = drain_to_head(track, ring);
        record_call_not_returned(track, ring);
        free_slot(track, ring);
        return bytes;
      }
      if (final) {
        const uint64_t bytes = drain_to_head(track, ring);
        record_call_not_returned(track, ring);
        return bytes;
      }
      return drain(track, ring, options_.drain_bytes_per_visit).bytes;
    }
    case abi::SlotState::kRetired: {
      ensure_tracked(i, ring, now_ns);
      const uint64_t bytes = drain_to_head(track, ring);
      // A thread cancelled or ended inside a call retires its ring with the call still marked.
      record_call_not_returned(track, ring);
      free_slot(track, ring);
      return bytes;
    }
  }
  return 0;  // an unknown state value: nothing a producer of this ABI writes, leave the slot alone
}

void Recorder::ensure_tracked(uint32_t i, abi::RingHeader* ring, uint64_t now_ns) {
  SlotTrack& track = slots_[i];
  const uint64_t serial = load_field(ring->claim_serial);
  if (track.tracked && track.claim_serial == serial) return;
  if (track.tracked) {
    // A new claim the recorder did not free the slot for: close the old thread where it stands.
    capture_counters(track, ring);
  }
  format::ThreadDef def{};
  def.pid = load_field(ring->pid);
  def.tid = load_field(ring->tid);
  def.ppid = load_field(ring->ppid);
  def.process_start_ticks = load_field(ring->process_start_ticks);
  def.claim_serial = serial;
  def.first_seen_ns = now_ns;
  track.tracked = true;
  track.claim_serial = serial;
  track.thread_index = UINT32_MAX;
  // The thread was sampled before it made its first recorded call: its ring continues that thread.
  if (auto known = thread_of_tid_.find(uint64_t(def.pid) << 32 | def.tid);
      known != thread_of_tid_.end() && ringless_threads_.erase(known->second) &&
      kernels_[kernels_of_thread_[known->second]].start_ticks == def.process_start_ticks)
    track.thread_index = known->second;
  if (track.thread_index == UINT32_MAX) track.thread_index = define_thread(def);
  track.process = monitor_.track(def.pid, def.process_start_ticks, now_ns);
}

uint32_t Recorder::define_thread(format::ThreadDef def) {
  def.thread_index = uint32_t(threads_.size());
  format::ThreadStats stats{};
  stats.thread_index = def.thread_index;
  threads_.push_back(stats);
  dropped_no_memory_.push_back(0);
  const auto [it, added] =
      kernels_index_.emplace(std::make_pair(def.pid, def.process_start_ticks), uint32_t(kernels_.size()));
  if (added) {
    ProcessKernels& p = kernels_.emplace_back();
    p.pid = def.pid;
    p.start_ticks = def.process_start_ticks;
  }
  kernels_of_thread_.push_back(it->second);
  writer_->add_thread_def(def);
  thread_of_tid_[uint64_t(def.pid) << 32 | def.tid] = def.thread_index;
  process_of_pid_[def.pid] = {def.process_start_ticks, def.ppid};
  return def.thread_index;
}

void Recorder::encode_for_thread(uint32_t thread_index, const uint8_t* record, uint32_t bytes) {
  if (batch_records_ && batch_thread_ != thread_index) submit_batch();
  if (batch_cursors_.structure + codec::kMaxEncodedBytes > batch_structure_.get() + options_.batch_bytes)
    submit_batch();
  batch_thread_ = thread_index;
  codec::encode(codec_, record, bytes, batch_cursors_);
  ++batch_records_;
}

ring::DrainStats Recorder::drain(const SlotTrack& track, abi::RingHeader* ring, uint64_t max_bytes) {
  batch_thread_ = track.thread_index;
  batch_cursors_ = {batch_structure_.get(), batch_times_.get()};
  batch_records_ = 0;
  codec_.start_block();
  batch_domains_ = 0;
  batch_launches_ = batch_gpu_kernels_ = 0;
  batch_capture_ranges_ = false;
  const ring::DrainStats stats =
      ring::drain(ring, data_of(ring), ring_bytes_, scratch_.get(), options_.scratch_bytes, max_bytes,
                  [this](const uint8_t* record, uint32_t bytes) { convert(record, bytes); });
  submit_batch();
  ProcessKernels& process = kernels_[kernels_of_thread_[track.thread_index]];
  process.called_domains |= batch_domains_;
  process.launches += batch_launches_;
  process.gpu_kernels += batch_gpu_kernels_;
  if (batch_capture_ranges_) kernels_[kernels_of_thread_[track.thread_index]].opened_capture_range = true;
  threads_[track.thread_index].records_malformed += stats.malformed;
  return stats;
}

uint64_t Recorder::drain_to_head(const SlotTrack& track, abi::RingHeader* ring) {
  // One drain of a whole ring's worth reaches the head it loaded; the extra rounds pick up what a
  // still-running producer pushed meanwhile, without chasing it forever.
  uint64_t total = 0;
  for (int round = 0; round < 4; ++round) {
    const ring::DrainStats stats = drain(track, ring, ring_bytes_);
    total += stats.bytes;
    if (stats.bytes == 0 && stats.malformed == 0) break;
  }
  return total;
}

void Recorder::convert(const uint8_t* record, uint32_t bytes) {
  if (batch_cursors_.structure + codec::kMaxEncodedBytes > batch_structure_.get() + options_.batch_bytes ||
      batch_cursors_.times + codec::kMaxEncodedTimeBytes > batch_times_.get() + options_.batch_bytes)
    submit_batch();
  abi::RecordHeader header;
  std::memcpy(&header, record, sizeof header);
  const abi::RecordKindInfo* info = abi::record_kind_info(header.kind);
  if (info == nullptr || !info->from_producers) {  // ring contents are untrusted
    ++threads_[batch_thread_].records_malformed;
    return;
  }
  // Every kind has its case, and no default: the compiler names a kind added without one. What each
  // does beyond storing the record; its time, where it has one in the ring clock, is its row's.
  switch (abi::RecordKind(header.kind)) {
    case abi::RecordKind::kApiCall: {
      uint64_t begin, end;
      std::memcpy(&begin, record + offsetof(abi::ApiCallRecord, begin), sizeof begin);
      std::memcpy(&end, record + offsetof(abi::ApiCallRecord, end), sizeof end);
      // A producer claiming that a call did not return would have the recorder's word put in its mouth.
      if (end < begin || (record[offsetof(abi::ApiCallRecord, flags)] & abi::kCallFlagNotReturned)) {
        ++threads_[batch_thread_].records_malformed;
        return;
      }
      const uint64_t end_ns = clock_.to_ns(end);
      last_record_ns_ = std::max(last_record_ns_, end_ns);
      codec::encode_call(codec_, record, clock_.to_ns(begin), end_ns, batch_cursors_);
      // One OR per call, folded into the process once per drain: what warnings() needs to tell a
      // library the program never reached from one it did.
      if (header.aux < api_domain_bits_.size()) {
        batch_domains_ |= api_domain_bits_[header.aux];
        batch_launches_ += api_launches_[header.aux];
      }
      if (!naming_args_.empty()) remember_kernel_handle(record);
      if (gpu_activity_) note_no_driver(header.aux, record);
      ++batch_records_;
      return;  // encoded with both its times
    }
    case abi::RecordKind::kThreadStart:
    case abi::RecordKind::kNvtx:
    case abi::RecordKind::kBacktrace:
    case abi::RecordKind::kGpuDevice:
      break;
    case abi::RecordKind::kCaptureState:
      batch_capture_ranges_ = true;
      break;
    case abi::RecordKind::kCpuSample:  // from the timer sampler (-s cpu without perf events)
      ++cpu_samples_written_;
      break;
    case abi::RecordKind::kPythonSample:
      write_python_sample(record, bytes);
      return;  // counted where it was written
    case abi::RecordKind::kGpuActivity:
      // Checked for size by the ring.
      ++gpu_records_[header.aux];
      if (header.aux == uint32_t(abi::GpuActivity::kKernel)) ++batch_gpu_kernels_;
      if (header.aux == uint32_t(abi::GpuActivity::kDropped)) {
        uint64_t dropped;
        std::memcpy(&dropped, record + offsetof(abi::GpuDroppedRecord, dropped), sizeof dropped);
        gpu_dropped_ += dropped;
      }
      break;
    case abi::RecordKind::kString:
      remember_string(record);
      break;
    case abi::RecordKind::kModuleMap:
      if (header.aux == uint32_t(abi::ModuleEvent::kLoaded)) remember_module(record, bytes);
      break;
    // Not from producers (refused above); here for the compiler's count.
    case abi::RecordKind::kInvalid:
    case abi::RecordKind::kPad:
    case abi::RecordKind::kContextSwitch:
    case abi::RecordKind::kKindCount:
      ++threads_[batch_thread_].records_malformed;
      return;
  }
  if (info->ring_time_offset != abi::kNoRingTime) encode_with_time(record, bytes, info->ring_time_offset);
  else codec::encode(codec_, record, bytes, batch_cursors_);
  ++batch_records_;
}

// Records other than calls are few (one thread start per thread, annotations, capture ranges): a copy
// with its one time field converted to ns is fine.
void Recorder::encode_with_time(const uint8_t* record, uint32_t bytes, size_t time_offset) {
  uint8_t converted[abi::kMaxRecordBytes];
  std::memcpy(converted, record, bytes);
  uint64_t time;
  std::memcpy(&time, record + time_offset, sizeof time);
  time = clock_.to_ns(time);
  last_record_ns_ = std::max(last_record_ns_, time);
  std::memcpy(converted + time_offset, &time, sizeof time);
  codec::encode(codec_, converted, bytes, batch_cursors_);
}

// A Python sample comes from the sampler thread's ring and names the sampled thread of the same
// process by tid: it is filed under that thread, which gets a thread of its own in the trace if it made
// no recorded call. A tid that is not a thread of the process (it exited since, or the ring lies) is
// counted, not filed.
void Recorder::write_python_sample(const uint8_t* record, uint32_t bytes) {
  const uint32_t drained = batch_thread_;
  abi::PythonSampleRecord r;
  std::memcpy(&r, record, sizeof r);
  const uint32_t pid = kernels_[kernels_of_thread_[drained]].pid;
  const uint64_t now = monotonic_ns();
  uint32_t target = UINT32_MAX;
  if (thread_of_tid_.count(uint64_t(pid) << 32 | r.tid)) {
    target = sampled_thread(pid, r.tid, now);
  } else if (r.tid != 0) {
    char task[64];
    std::snprintf(task, sizeof task, "/proc/%u/task/%u", pid, r.tid);
    struct stat st;
    if (stat(task, &st) == 0) target = sampled_thread(pid, r.tid, now);
  }
  if (target == UINT32_MAX) {
    ++python_samples_unplaced_;
    return;
  }
  uint8_t converted[abi::kMaxRecordBytes];
  std::memcpy(converted, record, bytes);
  const uint64_t time = clock_.to_ns(r.time);
  std::memcpy(converted + offsetof(abi::PythonSampleRecord, time), &time, sizeof time);
  encode_for_thread(target, converted, bytes);
  ++python_samples_written_;
  // The drained thread's records go on in a block of their own.
  if (batch_thread_ != drained) {
    submit_batch();
    batch_thread_ = drained;
  }
}

bool Recorder::attach_cpu_samples(const std::vector<int>& fds, std::string* error) {
  cpu_samples_ = std::make_unique<CpuSampleReader>();
  return cpu_samples_->attach(fds, error);
}

uint32_t Recorder::sampled_thread(uint32_t pid, uint32_t tid, uint64_t now_ns) {
  const uint64_t key = uint64_t(pid) << 32 | tid;
  if (auto t = thread_of_tid_.find(key); t != thread_of_tid_.end()) return t->second;
  auto p = process_of_pid_.find(pid);
  if (p == process_of_pid_.end()) return UINT32_MAX;
  // A thread of a traced process that made no recorded call (a data loader, a compute pool): it gets
  // a thread of its own in the trace, with claim serial 0 (it claimed no ring) and its name.
  format::ThreadDef def{};
  def.pid = pid;
  def.tid = tid;
  def.ppid = p->second.ppid;
  def.process_start_ticks = p->second.start_ticks;
  def.claim_serial = 0;
  def.first_seen_ns = now_ns;
  const uint32_t thread_index = define_thread(def);
  ringless_threads_.insert(thread_index);
  // Its name, as the shim sends a thread's at its claim.
  char path[64], name[32] = {};
  std::snprintf(path, sizeof path, "/proc/%u/task/%u/comm", pid, tid);
  if (FILE* f = std::fopen(path, "re")) {
    if (std::fgets(name, sizeof name, f)) {
      const size_t length = strcspn(name, "\n");
      uint8_t record[sizeof(abi::StringRecord) + 32] = {};
      const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::StringRecord) + length));
      auto* r = reinterpret_cast<abi::StringRecord*>(record);
      r->header = {uint16_t(abi::RecordKind::kString), uint16_t(bytes), uint32_t(abi::StringKind::kThreadName)};
      r->length = uint32_t(length);
      std::memcpy(record + sizeof(abi::StringRecord), name, length);
      encode_for_thread(thread_index, record, bytes);
    }
    std::fclose(f);
  }
  return thread_index;
}

void Recorder::write_cpu_sample(uint32_t thread_index, const CpuSample& s) {
  if (s.context_switch) {
    abi::ContextSwitchRecord r{};
    r.header = {uint16_t(abi::RecordKind::kContextSwitch), uint16_t(sizeof r), s.context_switch};
    r.time = s.time_ns;
    r.cpu = s.cpu;
    encode_for_thread(thread_index, reinterpret_cast<const uint8_t*>(&r), sizeof r);
    ++context_switches_written_;
    return;
  }
  uint8_t record[sizeof(abi::CpuSampleRecord) + 8 * abi::kMaxSampleFrames];
  const uint32_t frames = std::min(s.frame_count, abi::kMaxSampleFrames);
  const uint32_t bytes = uint32_t(sizeof(abi::CpuSampleRecord)) + 8 * frames;
  auto* r = reinterpret_cast<abi::CpuSampleRecord*>(record);
  r->header = {uint16_t(abi::RecordKind::kCpuSample), uint16_t(bytes), frames};
  r->time = s.time_ns;
  r->cpu = s.cpu;
  r->flags = 0;
  std::memcpy(r->frames, s.frames, 8u * frames);
  encode_for_thread(thread_index, record, bytes);
  ++cpu_samples_written_;
}

uint64_t Recorder::drain_cpu_samples(bool final) {
  if (!cpu_samples_) return 0;
  // Bounded: a process that never records keeps its samples here until the end.
  constexpr size_t kMaxPendingSamples = 200000;
  const uint64_t now = monotonic_ns();
  if (!pending_samples_.empty()) {
    std::vector<PendingSample> still;
    for (PendingSample& p : pending_samples_) {
      const uint32_t t = sampled_thread(p.pid, p.tid, now);
      if (t != UINT32_MAX)
        write_cpu_sample(t, CpuSample{p.pid, p.tid, p.cpu, p.time_ns, p.frames.data(), uint32_t(p.frames.size()),
                                      p.context_switch});
      else if (final)
        cpu_samples_untraced_ += p.context_switch == 0;
      else
        still.push_back(std::move(p));
    }
    pending_samples_.swap(still);
  }
  const uint64_t n = cpu_samples_->drain([&](const CpuSample& s) {
    const uint32_t t = sampled_thread(s.pid, s.tid, now);
    if (t != UINT32_MAX)
      write_cpu_sample(t, s);
    else if (final || pending_samples_.size() >= kMaxPendingSamples)
      cpu_samples_untraced_ += s.context_switch == 0;  // a switch of an untraced process is no loss
    else
      pending_samples_.push_back(
          {s.pid, s.tid, s.cpu, s.time_ns, {s.frames, s.frames + s.frame_count}, s.context_switch});
  });
  submit_batch();
  return n;
}

void Recorder::set_api_table(const ApiInfo* table, uint32_t count) {
  api_table_ = table;
  api_count_ = count;
  cuinit_api_ = UINT32_MAX;
  naming_args_.assign(count, {-1, -1});
  api_domain_bits_.assign(count, 0);
  api_launches_.assign(count, 0);
  table_domains_ = 0;
  wrapped_by_soname_.clear();
  for (uint32_t id = 0; id < count; ++id) {
    if (table[id].name && std::strcmp(table[id].name, "cuInit") == 0) cuinit_api_ = id;
    api_launches_[id] = table[id].api_class == abi::ApiClass::kKernel;
    if (uint32_t(table[id].domain) < abi::kMaxDomains) {
      api_domain_bits_[id] = abi::domain_bit(table[id].domain);
      table_domains_ |= api_domain_bits_[id];
    }
    int derived = -1, from = -1;
    for (uint32_t a = 0; table[id].args && a < table[id].arg_count && a < abi::kMaxApiArgs; ++a) {
      const abi::ArgFormat f = table[id].args[a].format;
      if (f != abi::ArgFormat::kKernelHandle && f != abi::ArgFormat::kKernelStub && f != abi::ArgFormat::kFunction)
        continue;
      int& slot = table[id].args[a].flags & format::kArgFlagOut ? derived : from;
      if (slot < 0) slot = int(a);
    }
    if (derived >= 0 && from >= 0) naming_args_[id] = {int8_t(derived), int8_t(from)};
  }
}

void Recorder::remember_string(const uint8_t* record) {
  abi::StringRecord s;
  std::memcpy(&s, record, sizeof s);
  if (s.header.aux == uint32_t(abi::StringKind::kProcessCommand) ||
      s.header.aux == uint32_t(abi::StringKind::kProcessExe)) {
    // Only to name the process in a warning: the command line wins over the executable's path.
    std::string& command = kernels_[kernels_of_thread_[batch_thread_]].command;
    if (command.empty() || s.header.aux == uint32_t(abi::StringKind::kProcessCommand))
      command.assign(reinterpret_cast<const char*>(record + sizeof s), std::min<uint32_t>(s.length, 200));
    return;
  }
  if (s.header.aux == uint32_t(abi::StringKind::kGpuActivityStatus)) {
    ProcessKernels& p = kernels_[kernels_of_thread_[batch_thread_]];
    // CUPTI that started late, after the shim said it had not started in time: the start wins, in
    // whichever order the two threads' rings are drained.
    if (p.gpu_status_code == 0 && s.key != 0) return;
    const std::string_view text(reinterpret_cast<const char*>(record + sizeof s), std::min<uint32_t>(s.length, 600));
    // The end of capture restates the start's status with how it ended ("..., until capture ended for
    // good"): the start, drained later from its own thread's ring, does not take that back.
    if (p.gpu_status_code == 0 && s.key == 0 && p.gpu_status.size() > text.size() && p.gpu_status.starts_with(text))
      return;
    p.gpu_status_code = uint32_t(s.key);
    p.gpu_status.assign(text);
    return;
  }
  if (s.header.aux == uint32_t(abi::StringKind::kPythonFramesStatus)) {
    ProcessKernels& p = kernels_[kernels_of_thread_[batch_thread_]];
    // A check that failed after the frames were accepted: the refusal wins, whichever ring came first.
    if (p.python_frames_code == 1 && s.key != 1) return;
    p.python_frames_code = s.key == 0 ? 0 : 1;
    p.python_frames_status.assign(reinterpret_cast<const char*>(record + sizeof s), std::min<uint32_t>(s.length, 400));
    return;
  }
  if (s.header.aux == uint32_t(abi::StringKind::kPytorchStatus)) {
    ProcessKernels& p = kernels_[kernels_of_thread_[batch_thread_]];
    // A failure is not taken back by a later success of another thread's import.
    if (p.pytorch_code == 1 && s.key != 1) return;
    p.pytorch_code = s.key == 0 ? 0 : 1;
    p.pytorch_status.assign(reinterpret_cast<const char*>(record + sizeof s), std::min<uint32_t>(s.length, 400));
    return;
  }
  if (s.header.aux == uint32_t(abi::StringKind::kUnwrappedEntryPoint)) {
    // Bounded: a warning names a few, and ring contents are untrusted.
    std::set<std::string>& names = kernels_[kernels_of_thread_[batch_thread_]].unwrapped_entry_points;
    if (names.size() < 64) names.emplace(reinterpret_cast<const char*>(record + sizeof s), std::min<uint32_t>(s.length, 128));
    return;
  }
  if (s.header.aux != uint32_t(abi::StringKind::kKernelName) || kernel_name_bytes_ > kMaxKernelNameBytes) return;
  std::string& name = kernels_[kernels_of_thread_[batch_thread_]].kernels[s.key];
  if (!name.empty()) return;
  name.assign(reinterpret_cast<const char*>(record + sizeof s), s.length);
  kernel_name_bytes_ += s.length + 16;
}

void Recorder::note_no_driver(uint32_t api_id, const uint8_t* record) {
  uint64_t result;
  std::memcpy(&result, record + offsetof(abi::ApiCallRecord, result), sizeof result);
  if (result == 0 || api_id >= api_domain_bits_.size()) return;
  // 35 and 100 (cudaErrorInsufficientDriver, cudaErrorNoDevice) are the runtime's; cuInit fails for
  // any reason with its own code.
  const bool runtime = api_domain_bits_[api_id] == abi::domain_bit(abi::ApiDomain::kCudaRuntime);
  if (!(runtime && (result == 35 || result == 100)) && api_id != cuinit_api_) return;
  ProcessKernels& p = kernels_[kernels_of_thread_[batch_thread_]];
  if (p.no_driver_api != UINT32_MAX) return;
  p.no_driver_api = api_id;
  p.no_driver_result = result;
}

void Recorder::remember_kernel_handle(const uint8_t* record) {
  abi::ApiCallRecord r;
  std::memcpy(&r, record, sizeof r);
  if (r.header.aux >= naming_args_.size()) return;
  const auto [derived_arg, from_arg] = naming_args_[r.header.aux];
  if (derived_arg < 0 || derived_arg >= r.arg_count || from_arg >= r.arg_count) return;
  uint64_t handle, stub;
  std::memcpy(&handle, record + sizeof r + 8 * size_t(derived_arg), 8);
  std::memcpy(&stub, record + sizeof r + 8 * size_t(from_arg), 8);
  // A failed call leaves its out-parameter at 0 (recorded as 0): nothing to learn from it.
  if (!handle || !stub || handle == stub || kernel_name_bytes_ > kMaxKernelNameBytes) return;
  if (kernels_[kernels_of_thread_[batch_thread_]].handles.emplace(handle, stub).second) kernel_name_bytes_ += 32;
}

void Recorder::remember_module(const uint8_t* record, uint32_t bytes) {
  abi::ModuleRecord m;
  std::memcpy(&m, record, sizeof m);
  ProcessKernels& p = kernels_[kernels_of_thread_[batch_thread_]];
  if (m.flags & (abi::kModuleFlagDeviceCode | abi::kModuleFlagNeedsCudart)) p.cuda_program = true;
  const uint32_t length = std::min<uint32_t>(m.path_bytes, bytes - uint32_t(sizeof m));
  std::string_view path(reinterpret_cast<const char*>(record + sizeof m), length);
  const size_t slash = path.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  // cuDNN 9's sub-libraries (libcudnn_ops.so.9, ...) are cuDNN's too: domains.def lists the prefixes.
  const abi::DomainSet domain = abi::library_domain(file);
  if (!domain) return;
  p.loaded_domains |= domain;
  p.loaded_library.emplace(domain, std::string(file.substr(0, 120)));
  // Bounded: the paths come from the rings. A path that is not absolute names no file to read. Only
  // the CUDA libraries, every export of which the build wraps: MPI's are wrapped by a chosen list.
  if (domain != abi::domain_bit(abi::ApiDomain::kCudaDriver) &&
      (domain & (abi::kCudaDomains | abi::kCudaLibraryDomains)) && !path.empty() && path[0] == '/' &&
      cuda_library_files_.size() < 256)
    cuda_library_files_.emplace(std::string(path), std::make_pair(p.pid, domain));
}

std::vector<std::string> Recorder::warnings() const {
  using abi::ApiDomain;
  using abi::domain_bit;
  const abi::DomainSet runtime = domain_bit(ApiDomain::kCudaRuntime), driver = domain_bit(ApiDomain::kCudaDriver);
  const abi::DomainSet cuda_any = abi::kCudaDomains | abi::kCudaLibraryDomains;
  // Only what could have been recorded: a domain `-t` left out, or that this build's api table has no
  // function of, is silent by design.
  const abi::DomainSet watched = trace_domains_ & table_domains_;
  std::vector<std::string> out;
  // Read by final_drain(): nothing here touches the session, which may be gone by now.
  if (foreign_shims_) out.push_back(warning_text(Warning::kForeignShim, foreign_shims_));
  const std::vector<std::string> unreached = unreached_.warnings();
  out.insert(out.end(), unreached.begin(), unreached.end());
  if (processes_cut_off_) out.push_back(warning_text(Warning::kProcessesCutOff, processes_cut_off_));
  if (calls_not_returned_) {
    std::vector<std::string> named = calls_not_returned_named_;
    if (calls_not_returned_ > named.size())
      named.push_back(std::to_string(calls_not_returned_ - named.size()) + " more");
    out.push_back(warning_text(Warning::kCallsNotReturned, calls_not_returned_, {{"calls", listed(named)}}));
  }
  if (!(watched & cuda_any)) return out;
  bool any_cuda = false;
  for (const ProcessKernels& p : kernels_) {
    const abi::DomainSet called = p.called_domains & cuda_any;
    any_cuda |= called || p.loaded_domains || p.cuda_program;
    auto library = [&](abi::DomainSet bit) {
      auto it = p.loaded_library.find(bit);
      return it == p.loaded_library.end() ? std::string() : it->second;
    };
    std::vector<std::string> silent;  // libraries loaded with none of their calls recorded
    // The runtime and the driver reach each other: a driver without recorded calls is silent only
    // when nothing of CUDA was recorded. cuBLASLt counts with cuBLAS, which loads it.
    if ((p.loaded_domains & runtime & watched) && !(called & runtime)) silent.push_back(library(runtime));
    if ((p.loaded_domains & driver & watched) && !called) silent.push_back(library(driver));
    abi::DomainSet families_seen = 0;
    for (const abi::DomainInfo& info : abi::kDomains) {
      const abi::DomainSet family = abi::group_domains(info.group);
      if (!(abi::domain_bit(info.domain) & abi::kCudaLibraryDomains) || (family & families_seen)) continue;
      families_seen |= family;
      if (!(p.loaded_domains & family & watched) || (called & family)) continue;
      for (uint32_t d = 0; d < abi::kMaxDomains; ++d)
        if (p.loaded_domains & family & (abi::DomainSet(1) << d)) silent.push_back(library(abi::DomainSet(1) << d));
    }
    const std::string who = process_name(p.pid, p.command);
    if (!p.unwrapped_entry_points.empty() && (watched & driver)) {
      std::string names;
      for (const std::string& n : p.unwrapped_entry_points) names += (names.empty() ? "" : ", ") + n;
      out.push_back(warning_text(Warning::kUnwrappedEntryPoints, p.unwrapped_entry_points.size(),
                                 {{"who", who}, {"names", names}}));
    }
    if (!capture_range_.empty() && !p.opened_capture_range) {
      // With -c a process is recorded only inside its ranges: one that never opened one says so, and
      // that is the whole story of its silent libraries.
      if (p.loaded_domains || p.cuda_program || called)
        out.push_back(warning_text(Warning::kNoCaptureRange, 1, {{"who", who}, {"range", capture_range_}}));
      any_cuda = true;
      continue;
    }
    if (!called && p.cuda_program && !(p.loaded_domains & runtime)) {
      // Device code without a shared runtime: the static runtime, which reaches the driver through
      // cuGetProcAddress, so only driver calls could show its work.
      const Warning w = !(p.loaded_domains & driver) ? Warning::kStaticRuntimeWithoutDriver
                        : (watched & driver)         ? Warning::kStaticRuntimeDriverSilent
                                                     : Warning::kStaticRuntimeDriverUntraced;
      out.push_back(warning_text(w, 1, {{"who", who}, {"driver", library(driver)}}));
    } else if (p.gpu_kernels && !p.launches) {
      // A library loaded and never called is no blind spot (cuDNN in a model without convolutions, CUDA
      // in a DataLoader worker); kernels that no recorded call launched are one. The libraries loaded
      // without a recorded call are where to look.
      const std::string loaded = silent.empty() ? "" : "; loaded with no recorded call: " + listed(silent);
      out.push_back(warning_text(Warning::kUnlaunchedKernels, p.gpu_kernels, {{"who", who}, {"libraries", loaded}}));
    }
  }
  // A process that could not reach the session has been named above, with the real reason.
  if (!any_cuda && capture_range_.empty() && unreached_.processes().empty())
    out.push_back(warning_text(Warning::kNoCuda, 0));
  for (const std::string& w : library_warnings()) out.push_back(w);
  // One line per reason: a run of many processes without a driver says so once.
  std::map<std::string, std::vector<const ProcessKernels*>> without_gpu;
  for (const ProcessKernels& p : kernels_) {
    if (p.gpu_status_code != UINT32_MAX && p.gpu_status_code != 0) without_gpu[p.gpu_status].push_back(&p);
    // CUPTI starts once a driver is initialised; a process whose calls found none says so.
    if (p.gpu_status_code == UINT32_MAX && p.no_driver_api < api_count_)
      without_gpu[no_driver_reason(p)].push_back(&p);
  }
  auto named = [](const std::vector<const ProcessKernels*>& processes) {
    std::vector<NamedProcess> out;
    for (const ProcessKernels* p : processes) out.push_back({p->pid, p->command});
    return out;
  };
  for (const auto& [reason, processes] : without_gpu)
    out.push_back(warning_text(Warning::kNoGpuActivity, processes.size(),
                               {{"who", processes_name(named(processes))}, {"reason", reason}}));
  // One line per reason, as above: every rank of a job on one interpreter says so once.
  std::map<std::string, std::vector<const ProcessKernels*>> without_python;
  for (const ProcessKernels& p : kernels_)
    if (p.python_frames_code == 1) without_python[p.python_frames_status].push_back(&p);
  // Many processes are counted, not listed: the reason is usually the interpreter's, the same in all.
  for (const auto& [reason, processes] : without_python) {
    const std::string who = processes.size() == 1 ? process_name(processes.front()->pid, processes.front()->command)
                                                  : std::to_string(processes.size()) + " processes";
    out.push_back(warning_text(Warning::kNoPythonFrames, processes.size(), {{"who", who}, {"reason", reason}}));
  }
  // --pytorch: a process whose annotations could not start, one line per reason; none at all started.
  std::map<std::string, std::vector<const ProcessKernels*>> without_pytorch;
  bool pytorch_reported = false;
  for (const ProcessKernels& p : kernels_) {
    pytorch_reported |= p.pytorch_code != UINT32_MAX;
    if (p.pytorch_code == 1) without_pytorch[p.pytorch_status].push_back(&p);
  }
  for (const auto& [reason, processes] : without_pytorch)
    out.push_back(warning_text(Warning::kPytorchNotStarted, processes.size(),
                               {{"who", processes_name(named(processes))}, {"reason", reason}}));
  if (!pytorch_modes_.empty() && !pytorch_reported)
    out.push_back(warning_text(Warning::kPytorchNoProcess, 0, {{"modes", pytorch_modes_}}));
  if (gpu_dropped_) out.push_back(warning_text(Warning::kGpuRecordsDropped, gpu_dropped_));
  if (cpu_samples_ && cpu_samples_->lost()) out.push_back(warning_text(Warning::kCpuSamplesLost, cpu_samples_->lost()));
  if (timer_samples_skipped_) out.push_back(warning_text(Warning::kTimerSamplesSkipped, timer_samples_skipped_));

  if (cpu_samples_untraced_) out.push_back(warning_text(Warning::kUntracedCpuSamples, cpu_samples_untraced_));
  return out;
}

namespace {

// libcudart.so.13 -> libcudart.so: the library whatever its major version.
std::string_view soname_stem(std::string_view soname) {
  const size_t so = soname.find(".so");
  return so == std::string_view::npos ? soname : soname.substr(0, so + 3);
}

}  // namespace

const std::vector<std::string>& Recorder::library_warnings() const {
  if (library_warnings_) return *library_warnings_;
  library_warnings_.emplace();
  if (cuda_library_files_.empty()) return *library_warnings_;
  // Built here, not in set_api_table(): thousands of strings that a run loading no CUDA library (and
  // every recorder's start-up, which the program waits for) need not pay for.
  if (wrapped_by_soname_.empty())
    for (uint32_t id = 0; id < api_count_; ++id)
      if (api_table_[id].library && api_table_[id].name)
        wrapped_by_soname_[api_table_[id].library].insert(api_table_[id].name);
  const abi::DomainSet watched = trace_domains_ & table_domains_;
  std::set<std::string_view> wrapped_stems;
  for (const auto& [soname, names] : wrapped_by_soname_) wrapped_stems.insert(soname_stem(soname));
  for (const auto& [path, loaded] : cuda_library_files_) {
    const auto [pid, domain] = loaded;
    if (!(domain & watched)) continue;  // a domain -t left out is silent by design
    LibraryExports exports;
    std::string error;
    // A file that has gone or cannot be read since: nothing can be said about it.
    if (!read_library_exports(path, &exports, &error) || exports.soname.empty()) continue;
    const std::string who = path + " (" + exports.soname + ", loaded by process " + std::to_string(pid) + ")";
    auto wrapped = wrapped_by_soname_.find(exports.soname);
    if (wrapped == wrapped_by_soname_.end()) {
      // cuDNN's parts (libcudnn_ops.so.9) are reached through libcudnn.so.9, whose exports are wrapped.
      if (wrapped_stems.count(soname_stem(exports.soname)))
        // Its calls that bind by name to another version's unversioned wrappers are recorded (the
        // wrappers fall back to it where the prototypes agree); those through its own handles are not.
        library_warnings_->push_back(warning_text(Warning::kOtherMajorVersion, 1, {{"library", who}}));
      continue;
    }
    std::vector<std::string_view> missing;
    for (const std::string& name : exports.functions)
      if (!wrapped->second.count(name)) missing.push_back(name);
    if (missing.empty()) continue;
    std::string names;
    const size_t shown = std::min<size_t>(missing.size(), 8);
    for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + std::string(missing[i]);
    if (shown < missing.size()) names += ", ... (scripts/coverage.py --libraries lists them all)";
    library_warnings_->push_back(
        warning_text(Warning::kUnwrappedExports, missing.size(), {{"library", who}, {"names", names}}));
  }
  return *library_warnings_;
}

std::vector<names::ProcessNames> Recorder::kernel_names() const {
  std::vector<names::ProcessNames> out;
  for (const ProcessKernels& p : kernels_) {
    if (p.kernels.empty() && p.handles.empty()) continue;
    names::ProcessNames& n = out.emplace_back();
    n.pid = p.pid;
    n.start_ticks = p.start_ticks;
    n.kernels.assign(p.kernels.begin(), p.kernels.end());
    std::sort(n.kernels.begin(), n.kernels.end());
    n.handles.assign(p.handles.begin(), p.handles.end());
    std::sort(n.handles.begin(), n.handles.end());
  }
  return out;
}

void Recorder::submit_batch() {
  if (batch_records_) {
    writer_->add_records(batch_thread_, batch_structure_.get(),
                         uint32_t(batch_cursors_.structure - batch_structure_.get()), batch_times_.get(),
                         uint32_t(batch_cursors_.times - batch_times_.get()), batch_records_);
    threads_[batch_thread_].records_written += batch_records_;
  }
  batch_cursors_ = {batch_structure_.get(), batch_times_.get()};
  batch_records_ = 0;
  codec_.start_block();
}

void Recorder::capture_counters(const SlotTrack& track, abi::RingHeader* ring) {
  // The producer's count is cumulative for its claim, so the latest value replaces earlier ones.
  threads_[track.thread_index].records_dropped = ring->dropped_records.load(std::memory_order_relaxed);
  dropped_no_memory_[track.thread_index] = ring->dropped_no_memory.load(std::memory_order_relaxed);
}

void Recorder::free_slot(SlotTrack& track, abi::RingHeader* ring) {
  capture_counters(track, ring);
  ring->head.store(0, std::memory_order_relaxed);
  ring->tail.store(0, std::memory_order_relaxed);
  ring->dropped_records.store(0, std::memory_order_relaxed);
  ring->dropped_no_memory.store(0, std::memory_order_relaxed);
  ring->call_in_progress.store(0, std::memory_order_relaxed);
  // Cleared so that a claimer dying before it writes its identity leaves a recognisably dead slot.
  store_field(ring->pid, 0u);
  store_field(ring->process_start_ticks, uint64_t(0));
  // Release: the resets above are visible to the next claimer, which acquires kFree in its CAS.
  ring->state.store(uint32_t(abi::SlotState::kFree), std::memory_order_release);
  track = SlotTrack{};
}

void Recorder::record_call_not_returned(const SlotTrack& track, abi::RingHeader* ring) {
  // Untrusted like everything a producer writes: an api id outside the table is not named.
  const uint64_t word = ring->call_in_progress.load(std::memory_order_relaxed);
  const uint32_t api_plus_one = abi::call_in_progress_api(word);
  if (word == 0 || !track.tracked || track.thread_index == UINT32_MAX) return;
  if (api_plus_one == 0 || api_plus_one == abi::kCallInProgressUnknownApi ||
      (api_table_ && api_plus_one - 1 >= api_count_)) {
    ++threads_[track.thread_index].records_malformed;
    return;
  }
  // The start kept its low bits only: it lies less than 2^48 ticks before now.
  const uint64_t now = clock_.is_tsc() ? __rdtsc() : monotonic_ns();
  const uint64_t begin = now - ((now - abi::call_in_progress_begin(word)) & abi::kCallInProgressBeginMask);
  const uint64_t begin_ns = clock_.to_ns(begin), end_ns = clock_.to_ns(now);
  abi::ApiCallRecord call{};
  call.header.kind = uint16_t(abi::RecordKind::kApiCall);
  call.header.size = uint16_t(sizeof call);
  call.header.aux = api_plus_one - 1;
  call.begin = begin_ns;
  call.end = end_ns;
  call.flags = abi::kCallFlagNotReturned;
  encode_for_thread(track.thread_index, reinterpret_cast<const uint8_t*>(&call), sizeof call);
  last_record_ns_ = std::max(last_record_ns_, end_ns);
  submit_batch();
  ++calls_not_returned_;
  constexpr size_t kCallsNamed = 4;
  if (calls_not_returned_named_.size() < kCallsNamed) {
    const ProcessKernels& process = kernels_[kernels_of_thread_[track.thread_index]];
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f s", double(end_ns - begin_ns) / 1e9);
    const std::string api = api_table_ ? api_table_[api_plus_one - 1].name : "api#" + std::to_string(api_plus_one - 1);
    calls_not_returned_named_.push_back(api + " for " + seconds + " in thread " + std::to_string(load_field(ring->tid)) +
                                        " of " +
                                        process_name(process.pid, process.command));
  }
}

void Recorder::check_claiming(SlotTrack& track, abi::RingHeader* ring, uint64_t now_ns) {
  // A claim takes microseconds; only a slot stuck in kClaiming for a long time is looked at.
  if (track.claiming_since_ns == 0) {
    track.claiming_since_ns = now_ns;
    return;
  }
  if (now_ns - track.claiming_since_ns < options_.claiming_timeout_ns) return;
  track.claiming_since_ns = now_ns;
  const uint32_t pid = load_field(ring->pid);
  const uint64_t start_ticks = load_field(ring->process_start_ticks);
  ProcStat st;
  const bool alive = pid_plausible(pid) && read_proc_stat(pid, &st) && st.state != 'Z' && st.state != 'X' &&
                     (start_ticks == 0 || st.start_ticks == start_ticks);
  if (alive) return;
  // CAS, not a store: if the claimer finished after all, its kActive must stand.
  uint32_t expected = uint32_t(abi::SlotState::kClaiming);
  if (ring->state.compare_exchange_strong(expected, uint32_t(abi::SlotState::kFree), std::memory_order_acq_rel))
    track.claiming_since_ns = 0;
}

Totals Recorder::totals() const {
  Totals t;
  t.processes = monitor_.count();
  t.threads = threads_.size();
  for (const format::ThreadStats& thread : threads_) {
    t.events += thread.records_written;
    t.dropped = saturating_add(t.dropped, thread.records_dropped);
    t.malformed += thread.records_malformed;
  }
  for (uint64_t n : dropped_no_memory_) t.dropped_no_memory = saturating_add(t.dropped_no_memory, n);
  // A producer's counters are untrusted: the part never exceeds the whole.
  t.dropped_no_memory = std::min(t.dropped_no_memory, t.dropped);
  t.lost_no_slot =
      finished_ || !session_ ? final_lost_no_slot_ : session_->lost_no_slot.load(std::memory_order_relaxed);
  return t;
}

std::vector<format::ThreadStats> Recorder::thread_stats() const {
  return threads_;
}

trace::KeyValues Recorder::summary() const {
  const Totals t = totals();
  const ClockAnchor end = take_clock_anchor();
  trace::KeyValues kv = {
      {"events", std::to_string(t.events)},
      {"processes", std::to_string(t.processes)},
      {"threads", std::to_string(t.threads)},
      {"dropped", std::to_string(t.dropped)},
      {"dropped_no_memory", std::to_string(t.dropped_no_memory)},
      {"malformed", std::to_string(t.malformed)},
      {"lost_no_slot", std::to_string(t.lost_no_slot)},
      {"calls_not_returned", std::to_string(calls_not_returned_)},
      {"end.realtime_ns", std::to_string(end.realtime_ns)},
      {"end.monotonic_ns", std::to_string(end.monotonic_ns)},
      {"end.anchor_error_ns", std::to_string(end.error_ns)},
  };
  if (launcher_died_ns_) kv.emplace_back("launcher.died_ns", std::to_string(launcher_died_ns_));
  kv.emplace_back("recorder.longest_stall_ns", std::to_string(longest_stall_ns_));
  if (!unreached_.processes().empty())
    kv.emplace_back("processes_unreached", std::to_string(unreached_.processes().size()));
  if (!cut_off_.empty()) {
    kv.emplace_back("cut_off.reason", cut_off_);
    kv.emplace_back("cut_off.last_record_ns", std::to_string(last_record_ns_));
  }
  if (clock_.is_tsc()) {
    char hz[32];
    std::snprintf(hz, sizeof hz, "%.0f", clock_.tsc_hz());
    kv.emplace_back("clock.tsc_hz", hz);
    kv.emplace_back("clock.calibration_baseline_ns", std::to_string(clock_.baseline_ns()));
  }
  std::string runtimes;
  for (const std::string& path : monitor_.cuda_runtime_libraries()) {
    if (!runtimes.empty()) runtimes += ';';
    runtimes += path;
  }
  if (!runtimes.empty()) kv.emplace_back("cuda.runtime_library", runtimes);
  if (cpu_samples_ || timer_sampling_) {
    kv.emplace_back("cpu_samples", std::to_string(cpu_samples_written_));
    if (timer_sampling_) kv.emplace_back("cpu_samples.skipped", std::to_string(timer_samples_skipped_));
    if (cpu_samples_) {
      kv.emplace_back("cpu_samples.lost", std::to_string(cpu_samples_->lost()));
      kv.emplace_back("cpu_samples.untraced", std::to_string(cpu_samples_untraced_));
      kv.emplace_back("context_switches", std::to_string(context_switches_written_));
    }
  }
  bool gpu_tried = false;
  for (const ProcessKernels& p : kernels_) gpu_tried |= p.gpu_status_code != UINT32_MAX;
  if (gpu_tried) {
    static const char* const kNames[] = {"", "kernels", "memcpy", "memset", "sync", "memory", "api_links", "", "graphs"};
    static_assert(std::size(kNames) == sizeof gpu_records_ / sizeof gpu_records_[0]);
    for (uint32_t k = 1; k < std::size(kNames); ++k)
      if (k != uint32_t(abi::GpuActivity::kDropped))
        kv.emplace_back(std::string("gpu_activity.") + kNames[k], std::to_string(gpu_records_[k]));
    kv.emplace_back("gpu_activity.dropped", std::to_string(gpu_dropped_));
    for (const ProcessKernels& p : kernels_)
      if (p.gpu_status_code == 0) {
        kv.emplace_back("gpu_activity.source", p.gpu_status);
        break;
      }
  }
  for (const ProcessKernels& p : kernels_)
    if (p.python_frames_code == 0) {
      kv.emplace_back("python_frames.interpreter", p.python_frames_status);
      break;
    }
  if (python_sampling_) {
    kv.emplace_back("python_samples", std::to_string(python_samples_written_));
    kv.emplace_back("python_samples.unplaced", std::to_string(python_samples_unplaced_));
  }
  const std::vector<std::string> w = warnings();
  for (size_t i = 0; i < w.size(); ++i) kv.emplace_back("warning." + std::to_string(i), w[i]);
  return kv;
}

std::string Recorder::no_driver_reason(const ProcessKernels& p) const {
  const uint64_t r = p.no_driver_result;
  const char* name = api_table_[p.no_driver_api].name;
  std::string why;
  if (p.no_driver_api == cuinit_api_)
    why = r == 100 ? "CUDA_ERROR_NO_DEVICE: no CUDA device is visible to the process"
                   : "the driver could not be initialised";
  else
    why = r == 35 ? "cudaErrorInsufficientDriver: no CUDA driver is installed, or it is older than the runtime"
                  : "cudaErrorNoDevice: no CUDA device is visible to the process";
  return "its CUDA calls found no usable driver (" + std::string(name ? name : "?") + " returned " +
         std::to_string(int64_t(r)) + ", " + why + "), so CUPTI was not started";
}

std::string Recorder::summary_line(uint64_t file_bytes) const {
  const Totals t = totals();
  auto field = [](const char* key, uint64_t value) { return std::string(" ") + key + "=" + std::to_string(value); };
  std::string line = "summary" + field("events", t.events) + field("processes", t.processes) +
                     field("threads", t.threads) + field("dropped", t.dropped) +
                     field("dropped_no_memory", t.dropped_no_memory) + field("malformed", t.malformed) +
                     field("lost", t.lost_no_slot) + field("bytes", file_bytes);
  // The launcher explains drops by it rather than by the ring size.
  if (longest_stall_ns_ >= kLongStallNs) line += field("stalled_ms", longest_stall_ns_ / 1000000);
  line += '\n';
  // Warnings first: a launcher reads lines up to the summary, and one that does not know them skips them.
  std::string out;
  if (!cut_off_.empty()) {
    std::string why = cut_off_;
    std::replace_if(why.begin(), why.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    out += "warning " + warning_text(Warning::kCutOff, 1, {{"why", why}}) + "\n";
  }
  for (std::string w : warnings()) {
    std::replace_if(w.begin(), w.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    out += "warning " + w + "\n";
  }
  return out + line;
}

}  // namespace cutrace::recorder
