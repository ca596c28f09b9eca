// The recorder's core: drains every ring of a session, converts records to the file encoding and hands
// them to a TraceWriter, and runs the slot life cycle (reclaiming retired rings and those of dead
// processes). `cutrace-recorder` is a thin main over it; tests and benchmarks use it in-process:
//
//   trace::TraceWriter writer;  writer.open(path);
//   recorder::Recorder rec;     rec.attach(session.header(), session.bytes(), &writer, &error);
//   rec.poll();                 // one pass over all slots: drains whatever the producers pushed
//   rec.final_drain();
//   writer.finish(rec.summary(), rec.thread_stats());
//
// Nothing read from shared memory is trusted: the layout is copied once at attach, every ring is read
// through ring::drain (which validates every record) and slot identity fields are only ever used as
// numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cutrace/abi.h"
#include "cutrace/api_table.h"
#include "cutrace/format.h"
#include "cutrace/names_chunk.h"
#include "cutrace/record_codec.h"
#include "cutrace/ring.h"
#include "recorder/clock.h"
#include "recorder/cpu_samples.h"
#include "recorder/process_monitor.h"
#include "recorder/trace_writer.h"
#include "recorder/unreached.h"

namespace cutrace::recorder {

// A stall of run() this long or longer is named with the drops it may have caused: far beyond the
// longest nap (idle_sleep_max_no_rings_ns) and a busy pass.
inline constexpr uint64_t kLongStallNs = 250'000'000;

struct RecorderOptions {
  // Room for each of a kRecords block's two streams (record_codec.h); each block restarts the delta
  // coding, so larger blocks compress better.
  uint32_t batch_bytes = 256u << 10;
  // Ring bytes drained from one slot per pass, so one busy thread cannot starve the others.
  uint64_t drain_bytes_per_visit = 1u << 20;
  // Copy buffer between shared memory and validation; at least abi::kMaxRecordBytes.
  uint32_t scratch_bytes = 256u << 10;
  uint64_t process_check_interval_ns = 10'000'000;
  // A slot stuck in kClaiming this long is checked for a dead claimer.
  uint64_t claiming_timeout_ns = 1'000'000'000;
  // Pending events are written as a chunk at least this often, so a recorder killed mid-run loses at
  // most this much of the trace.
  uint64_t flush_interval_ns = 1'000'000'000;
  uint64_t recalibration_interval_ns = 500'000'000;
  // Idle backoff of run(): the first sleep after an empty pass, doubling up to the maximum. The
  // maximum bounds how long a ring fills unobserved: at 20 M records/s (56-byte records, about
  // 1.1 GB/s) the smallest default ring (4 MiB) lasts 3.7 ms, so 1 ms leaves a margin of more than 3.
  uint64_t idle_sleep_min_ns = 50'000;
  // A pass that consumed at least this much is followed by another at once; smaller ones by a pause
  // of idle_sleep_min_ns, so that a steady producer is read in batches.
  uint64_t busy_pass_bytes = 256u << 10;
  uint64_t idle_sleep_max_ns = 1'000'000;
  // The longest nap while no ring is claimed, with a wake word set: a claim wakes the recorder, and
  // nothing else needs it sooner (process checks, clock pairs and flushes are far less frequent).
  uint64_t idle_sleep_max_no_rings_ns = 50'000'000;
  bool use_pidfd = true;
};

struct Totals {
  uint64_t events = 0;     // records written to the file
  uint64_t processes = 0;  // distinct process instances seen
  uint64_t threads = 0;    // rings claimed (thread definitions written)
  uint64_t dropped = 0;    // records the producers could not store (ring full, or no memory for it)
  uint64_t dropped_no_memory = 0;  // of `dropped`, those for want of /dev/shm space
  uint64_t malformed = 0;  // records or spans rejected by validation
  uint64_t lost_no_slot = 0;
};

class Recorder {
 public:
  explicit Recorder(RecorderOptions options = {});
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Copies the session's layout (validated against `mapped_bytes`) and starts the clock calibration
  // (about 2 ms for a TSC session). `writer` must be open and outlive the recorder.
  bool attach(abi::SessionHeader* session, uint64_t mapped_bytes, trace::TraceWriter* writer, std::string* error);

  // Metadata the recorder itself knows: clock kind and calibration, ring geometry.
  trace::KeyValues metadata() const;

  // One pass over every slot: drains active and retired rings, frees retired ones and those of dead
  // processes, and runs the periodic work (process checks, clock pairs, timed chunk flushes). Returns
  // the ring bytes consumed, 0 when there was nothing to do.
  uint64_t poll() { return poll(monotonic_ns()); }
  // The same, for a pass that began at `now_ns` (CLOCK_MONOTONIC), which run() has already read.
  uint64_t poll(uint64_t now_ns);
  // Drains up to `max_bytes` of one slot that is kActive or kRetired (registering its thread on first
  // sight) without freeing it. Returns the ring bytes consumed.
  uint64_t drain_slot(uint32_t slot, uint64_t max_bytes);
  // Calls poll() until `should_stop` returns true, sleeping with exponential backoff while idle.
  void run(const std::function<bool()>& should_stop);
  // While idle, run() naps on this word (SessionHeader::recorder_wake) instead of sleeping blindly: a
  // change of the word with a FUTEX_WAKE (abi::wake_recorder) ends the nap at once, and with no ring
  // in use the nap may last idle_sleep_max_no_rings_ns. `should_stop` still decides when run() ends.
  void set_wake_word(const std::atomic<uint32_t>* word) { wake_word_ = word; }
  // The last pass at shutdown: drains every ring in any state up to its head (also kActive ones of
  // live processes: a program may exit without retiring its threads) and captures the producers'
  // drop counters.
  void final_drain();
  // After the session's memory became unreadable (another process shrank the object): from now on
  // nothing is read from it; summary() and thread_stats() report what was drained before.
  void abandon_session() { finished_ = true; }
  // -s cpu: the perf events (one per CPU) whose samples go into the trace, each with the thread it
  // interrupted. Takes the descriptors over. False (and `error`) when a buffer cannot be mapped.
  bool attach_cpu_samples(const std::vector<int>& fds, std::string* error);
  // Hears of the session's processes that cannot open its shared memory (UnreachedWatch), so that
  // the trace names them and their cause instead of looking like a program without CUDA.
  bool watch_unreached(const std::string& session_name, std::string* error) {
    return unreached_.start(session_name, error);
  }

  // Traced processes (those that claimed a ring) not known to have exited, as of the latest process
  // check; final_drain() makes one.
  size_t processes_alive() const { return monitor_.alive(); }
  // Whether a traced process may still push records: one is alive, or the last pass found a ring
  // in use (a claim under way, or the ring of a process whose death the pass has just noticed).
  bool producers_running() const { return monitor_.alive() != 0 || slots_in_use_ != 0; }
  // The launcher vanished without asking for shutdown, at `at_ns` (monotonic): said in the summary
  // (launcher.died_ns), as the launcher's own report of the run is missing.
  void set_launcher_died(uint64_t at_ns) { launcher_died_ns_ = at_ns; }
  // Recording stopped while the program went on: the summary says so (cut_off.reason) with the
  // time of the latest record written, and the reader calls the trace cut off rather than complete.
  void set_cut_off(std::string reason) { cut_off_ = std::move(reason); }

  Totals totals() const;
  std::vector<format::ThreadStats> thread_stats() const;
  // The kEnd key/values: totals, end times, final clock calibration, CUDA runtime seen.
  trace::KeyValues summary() const;

  // The api table the producers write ids of: a call with an out-argument that names a kernel and an
  // in-argument that names one (__cudaGetKernel, cuKernelGetFunction) tells which kernel a handle
  // names. Without it no handle is learned.
  void set_api_table(const ApiInfo* table, uint32_t count);
  // Capture ranges are in use (-c): how warnings() explains a process that recorded nothing, e.g.
  // "cudaProfilerStart/cuProfilerStart" or "the NVTX range train@*".
  void set_capture_range(std::string what_opens_a_range) { capture_range_ = std::move(what_opens_a_range); }
  // --pytorch was given ("autograd-nvtx,functions-trace"): warnings() says when no process started it.
  void set_pytorch(std::string modes) { pytorch_modes_ = std::move(modes); }
  // Every kernel name and handle seen so far, per process instance, for the kNames chunk; sorted so
  // that the same run gives the same file.
  std::vector<names::ProcessNames> kernel_names() const;

  uint32_t slot_count() const { return slot_count_; }
  const TimestampConverter& clock() const { return clock_; }
  // The line the launcher reads from the ready fd at the end:
  // "summary events=N processes=N threads=N dropped=N dropped_no_memory=N malformed=N lost=N bytes=N\n".
  std::string summary_line(uint64_t file_bytes) const;

  // Why a trace may be missing what the user expected, one sentence each without the final period: a
  // process loaded a CUDA library (or carries device code) and none of the calls `-t` asked for of
  // that library was recorded; or no process used CUDA at all. Written as warning.N in the kEnd
  // summary and as "warning TEXT" lines before the summary line, for the launcher to print.
  std::vector<std::string> warnings() const;

 private:
  struct SlotTrack {
    bool tracked = false;
    uint64_t claim_serial = 0;
    uint32_t thread_index = 0;
    uint32_t process = 0;
    uint64_t claiming_since_ns = 0;
  };

  // From the geometry copied at attach(), never from what producers can write.
  abi::RingHeader* slot_at(uint32_t i) const {
    return reinterpret_cast<abi::RingHeader*>(base_ + sizeof(abi::SessionHeader) + uint64_t(i) * sizeof(abi::RingHeader));
  }
  const uint8_t* data_of(const abi::RingHeader* ring) const {
    const uint64_t slot = uint64_t(reinterpret_cast<const uint8_t*>(ring) - base_ - sizeof(abi::SessionHeader)) /
                          sizeof(abi::RingHeader);
    return base_ + data_offset_ + slot * ring_bytes_;
  }
  uint64_t visit_slot(uint32_t i, bool final, uint64_t now_ns);
  void ensure_tracked(uint32_t i, abi::RingHeader* ring, uint64_t now_ns);
  // Defines a thread of the trace (one that claimed a ring, or one only sampled): its index, stats, process
  // and the lookups by tid and pid. `def.thread_index` is assigned here.
  uint32_t define_thread(format::ThreadDef def);
  // Encodes one record written by the recorder itself into `thread_index`'s batch, switching batches as needed.
  void encode_for_thread(uint32_t thread_index, const uint8_t* record, uint32_t bytes);
  ring::DrainStats drain(const SlotTrack& track, abi::RingHeader* ring, uint64_t max_bytes);
  uint64_t drain_to_head(const SlotTrack& track, abi::RingHeader* ring);
  void convert(const uint8_t* record, uint32_t bytes);
  void write_python_sample(const uint8_t* record, uint32_t bytes);
  void encode_with_time(const uint8_t* record, uint32_t bytes, size_t time_offset);
  void submit_batch();
  void capture_counters(const SlotTrack& track, abi::RingHeader* ring);
  void free_slot(SlotTrack& track, abi::RingHeader* ring);
  // Writes the call the slot's thread was in when recording of it ended (RingHeader::call_in_progress),
  // flagged kCallFlagNotReturned and ending now; after the ring's last record was drained.
  void record_call_not_returned(const SlotTrack& track, abi::RingHeader* ring);
  void check_claiming(SlotTrack& track, abi::RingHeader* ring, uint64_t now_ns);
  void periodic(uint64_t now_ns);

  RecorderOptions options_;
  abi::SessionHeader* session_ = nullptr;
  uint8_t* base_ = nullptr;
  uint64_t data_offset_ = 0;
  uint32_t slot_count_ = 0, ring_bytes_ = 0;
  abi::ClockKind clock_kind_ = abi::ClockKind::kMonotonicNs;
  trace::TraceWriter* writer_ = nullptr;

  TimestampConverter clock_;
  ProcessMonitor monitor_;
  UnreachedWatch unreached_;
  std::vector<SlotTrack> slots_;
  std::vector<format::ThreadStats> threads_;  // indexed by thread_index
  std::vector<uint64_t> dropped_no_memory_;   // indexed by thread_index

  // Kernel naming seen in the records, per process instance (pid, start ticks).
  struct ProcessKernels {
    uint32_t pid = 0;
    uint64_t start_ticks = 0;
    std::unordered_map<uint64_t, std::string> kernels;  // stub or driver handle -> mangled name
    std::unordered_map<uint64_t, uint64_t> handles;     // handle -> the stub or handle it derives from
    // What the process did with CUDA, for warnings(): domain_bit() of the domains it called, those
    // of the libraries it loaded (with the first file name of each), whether it carries device code.
    abi::DomainSet called_domains = 0;
    abi::DomainSet loaded_domains = 0;
    // Kernels the GPU ran for it (CUPTI's records) and recorded calls that launch kernels: kernels
    // without any launch are the evidence that its calls took a route cutrace does not see.
    uint64_t gpu_kernels = 0, launches = 0;
    std::map<abi::DomainSet, std::string> loaded_library;  // domain bit -> file name
    bool cuda_program = false;
    bool opened_capture_range = false;  // a kCaptureState record came from it
    std::string command;  // kProcessCommand, else kProcessExe; bounded
    std::set<std::string> unwrapped_entry_points;  // kUnwrappedEntryPoint: driver entry points without a wrapper
    // kGpuActivityStatus: CUPTI's result when the process started GPU activity (UINT32_MAX: it did not
    // try), and what the shim said of it; bounded.
    uint32_t gpu_status_code = UINT32_MAX;
    std::string gpu_status;
    // kPythonFramesStatus: 0 when its Python frames were read, 1 when refused (UINT32_MAX: not said),
    // and the interpreter, with why; bounded.
    uint32_t python_frames_code = UINT32_MAX;
    std::string python_frames_status;
    // kPytorchStatus: 0 when --pytorch's annotations started, 1 when they could not (UINT32_MAX: the
    // process never imported torch with them), and what it said; bounded.
    uint32_t pytorch_code = UINT32_MAX;
    std::string pytorch_status;
    // The first recorded call that found no usable driver or device (a runtime call returning
    // cudaErrorInsufficientDriver or cudaErrorNoDevice, a failed cuInit): why a process that never
    // initialised a driver has no GPU activity. UINT32_MAX: none.
    uint32_t no_driver_api = UINT32_MAX;
    uint64_t no_driver_result = 0;
  };
  void remember_string(const uint8_t* record);
  // Keeps the first call of the batch's process whose result says no driver or device was usable.
  void note_no_driver(uint32_t api_id, const uint8_t* record);
  std::string no_driver_reason(const ProcessKernels& p) const;
  void remember_module(const uint8_t* record, uint32_t bytes);
  // Warnings for CUDA library files that export functions the api table has no wrapper for (a newer
  // version than the build's): their calls are not recorded. Read from the files once, when asked.
  const std::vector<std::string>& library_warnings() const;
  // CUDA library files the processes loaded (the driver aside: its exports are reached through
  // cuGetProcAddress, and every newer driver adds some): path -> (pid of the first process, domain bit).
  std::map<std::string, std::pair<uint32_t, abi::DomainSet>> cuda_library_files_;
  // The functions the api table wraps, by the soname of their library.
  // Built on first use by library_warnings().
  mutable std::map<std::string, std::set<std::string>, std::less<>> wrapped_by_soname_;
  mutable std::optional<std::vector<std::string>> library_warnings_;
  void remember_kernel_handle(const uint8_t* record);
  // Writes the samples the perf buffers hold; at the final drain, those of processes never seen are
  // counted as untraced.
  uint64_t drain_cpu_samples(bool final);
  void write_cpu_sample(uint32_t thread_index, const CpuSample& s);
  // The thread a sample of (pid, tid) belongs to: the ring it claimed, or one defined for it when its
  // process is traced; UINT32_MAX when the process has not shown itself yet.
  uint32_t sampled_thread(uint32_t pid, uint32_t tid, uint64_t now_ns);
  std::vector<ProcessKernels> kernels_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> kernels_index_;
  std::vector<uint32_t> kernels_of_thread_;  // thread_index -> index into kernels_
  uint64_t kernel_name_bytes_ = 0;           // bounded: ring contents are untrusted
  // Per api id: the slots of an out-argument that names a kernel and of the in-argument it derives
  // from (__cudaGetKernel, cuKernelGetFunction); -1 when the call has not both.
  std::vector<std::pair<int8_t, int8_t>> naming_args_;
  std::vector<abi::DomainSet> api_domain_bits_;  // per api id: domain_bit() of its domain
  std::vector<uint8_t> api_launches_;            // per api id: 1 for a call that launches kernels
  abi::DomainSet table_domains_ = 0;      // domains the api table has functions of
  abi::DomainSet trace_domains_ = 0;            // domains `-t` selected (SessionHeader::trace_domains)
  bool gpu_activity_ = false;             // --gpu-activity (SessionHeader::gpu_activity)
  uint32_t cuinit_api_ = UINT32_MAX;      // the api id of cuInit, whose failure says why CUPTI never started
  const ApiInfo* api_table_ = nullptr;    // set_api_table(), for names in warnings
  uint32_t api_count_ = 0;
  uint64_t osrt_threshold_ns_ = 0;        // --osrt-threshold (SessionHeader::osrt_threshold_ns)
  uint64_t backtrace_threshold_ns_[abi::kBacktraceClasses] = {};  // SessionHeader::backtrace_threshold_ns
  uint32_t foreign_shims_ = 0;          // SessionHeader::foreign_shims, read by final_drain()
  abi::DomainSet batch_domains_ = 0;      // domains called in the drain under way, merged after it
  uint64_t batch_launches_ = 0, batch_gpu_kernels_ = 0;  // likewise
  bool batch_capture_ranges_ = false;     // the drain under way held a capture range record
  std::string capture_range_;             // set_capture_range()
  std::string pytorch_modes_;             // set_pytorch()

  std::unique_ptr<uint8_t[]> scratch_, batch_structure_, batch_times_;
  codec::StreamCursors batch_cursors_{};
  uint32_t batch_records_ = 0;
  codec::BlockState codec_;  // one block's delta state; restarted with every batch
  uint32_t batch_thread_ = 0;

  uint64_t next_process_check_ns_ = 0, last_flush_ns_ = 0;
  uint64_t start_realtime_ns_ = 0, start_monotonic_ns_ = 0, start_anchor_error_ns_ = 0;
  bool finished_ = false;
  const std::atomic<uint32_t>* wake_word_ = nullptr;
  uint32_t slots_in_use_ = 0;  // claimed (or being claimed) in the last poll() pass
  uint64_t final_lost_no_slot_ = 0;
  uint32_t processes_cut_off_ = 0;  // SessionHeader::processes_cut_off at the final drain
  uint64_t launcher_died_ns_ = 0;  // set_launcher_died()
  // The longest time run() went without starting a pass beyond the nap it chose: the recorder was
  // stopped (SIGSTOP), had no CPU, or took that long over one pass. Rings fill meanwhile, and a larger
  // ring is not the cure, so drops are explained by it when it is long (kLongStallNs).
  uint64_t longest_stall_ns_ = 0;
  std::string cut_off_;            // set_cut_off()
  uint64_t last_record_ns_ = 0;    // the latest time of a record written, in ns
  // -s cpu.
  std::unique_ptr<CpuSampleReader> cpu_samples_;
  std::unordered_map<uint64_t, uint32_t> thread_of_tid_;  // pid << 32 | tid -> its latest thread index
  // Threads defined because they were sampled before they claimed a ring (claim serial 0): a ring
  // the same thread claims later continues that thread rather than defining it again.
  std::unordered_set<uint32_t> ringless_threads_;
  struct TracedProcess {
    uint64_t start_ticks = 0;
    uint32_t ppid = 0;
  };
  std::unordered_map<uint32_t, TracedProcess> process_of_pid_;  // pid -> its latest process instance
  // Samples of processes not seen yet (a process shows itself at its first record), kept for them.
  struct PendingSample {
    uint32_t pid, tid, cpu;
    uint64_t time_ns;
    std::vector<uint64_t> frames;
    uint32_t context_switch;
  };
  std::vector<PendingSample> pending_samples_;
  uint64_t cpu_samples_written_ = 0;
  bool python_sampling_ = false;
  // GPU activity records written, by abi::GpuActivity (whose largest value sizes it).
  uint64_t gpu_records_[uint32_t(abi::GpuActivity::kGraph) + 1] = {};
  uint64_t gpu_dropped_ = 0;      // records CUPTI said it dropped
  // record_call_not_returned(): how many, and the first few as the warning names them.
  uint64_t calls_not_returned_ = 0;
  std::vector<std::string> calls_not_returned_named_;
  uint64_t python_samples_written_ = 0;
  uint64_t python_samples_unplaced_ = 0;  // named a thread that is not (or no longer) the process's
  uint64_t cpu_samples_untraced_ = 0;
  uint64_t context_switches_written_ = 0;
  bool timer_sampling_ = false;          // SessionHeader::timer_sampling_hz was set
  uint64_t timer_samples_skipped_ = 0;   // SessionHeader::timer_samples_skipped, read by final_drain()
};

}  // namespace cutrace::recorder
