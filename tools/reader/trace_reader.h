// Streaming reader of .cutrace files (include/cutrace/format.h, docs/trace-format.md).
//
// Memory stays bounded by one chunk (at most format::kMaxChunkRawBytes decompressed) plus the tables a
// trace names things with (threads, processes, api table, kernel names), so traces of billions of events
// read in constant memory. Every report and exporter shares the same pull loop:
//
//   reader::TraceReader r;
//   if (!r.open(path)) { fprintf(stderr, "%s\n", r.error().c_str()); return 1; }
//   reader::Event ev;
//   while (r.next(ev)) {
//     if (ev.kind == reader::EventKind::kApiCall) use(ev.call, *ev.thread);
//   }
//   if (!r.status().complete()) warn(r.status().describe());
//
// A chunk is delivered all or nothing: it is decompressed and checked completely before its first event
// is handed out, so a corrupt chunk never yields half its events, and everything before it still does.
// The file is never trusted: every length and offset is bounds-checked against the chunk it lives in.
//
// Exporters (report/exporter.h) build on the same loop: the Perfetto export writes each event as it
// comes. One that writes tables (nsys's SQLite schema, for instance) would insert a row per kApiCall
// inside one transaction per chunk (ev.chunk changes), intern api and kernel names as they first
// appear, and write the thread and process tables from threads(), processes() and metadata() once
// next() returns false: nothing has to be held beyond the current chunk.
#pragma once

#include <zstd.h>

#include "reader/nvtx_payload.h"

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cutrace/abi.h"
#include "cutrace/format.h"
#include "cutrace/names_chunk.h"
#include "cutrace/record_codec.h"

namespace cutrace::reader {

struct ApiArgSpec {
  std::string name;
  abi::ArgFormat format = abi::ArgFormat::kUnsigned;
  bool out = false;       // an out-parameter: the value the call wrote
  std::string type_name;  // the C type of a kEnum argument
};

// Formats whose values name a kernel: host stubs and driver or runtime handles.
inline bool names_kernel(abi::ArgFormat f) {
  return f == abi::ArgFormat::kKernelStub || f == abi::ArgFormat::kKernelHandle || f == abi::ArgFormat::kFunction;
}

// One entry of the trace's own api table: api ids mean nothing outside the file that defines them.
struct ApiSpec {
  uint32_t id = 0;
  std::string name;          // the entry point, e.g. "__cudaLaunchKernel"
  std::string display_name;  // what reports call it, e.g. "cudaLaunchKernel"; equals name unless renamed
  bool internal = false;     // format::kApiFlagInternal: runtime plumbing reports leave out by default
  abi::ApiDomain domain = abi::ApiDomain::kInternal;
  abi::ApiClass api_class = abi::ApiClass::kOther;
  format::ResultKind result_kind = format::ResultKind::kErrorCode;
  std::vector<ApiArgSpec> args;
  bool known = false;  // false: the file's api table has no entry for this id (name is "api#<id>")
  int kernel_arg = -1;  // the first argument that names a kernel (names_kernel): the kernel a launch names
  // An out-parameter that names a kernel and an in argument that names one: the call says the value
  // it wrote names the same kernel (__cudaGetKernel, cudaGetFuncBySymbol, cuKernelGetFunction).
  int alias_out_arg = -1, alias_in_arg = -1;
};

struct KernelName {
  std::string mangled;    // as given to __cudaRegisterFunction, cuModuleGetFunction, ...
  std::string demangled;  // for display; equals mangled when it does not demangle
};

// A loaded object of a process (abi::ModuleRecord).
struct Module {
  std::string path;
  uint64_t base = 0;
  uint64_t text_start = 0, text_end = 0;
  uint32_t flags = 0;     // abi::kModuleFlag*
  std::string build_id;   // raw bytes
  uint64_t loaded_at = 0;              // ns: when the shim found it loaded (0 in traces that predate it)
  uint64_t unloaded_at = UINT64_MAX;   // ns: when the shim found it unloaded; UINT64_MAX while loaded
};

// A process instance: (pid, start time) tells a reused pid apart.
// A GPU as CUPTI described it to one process (a kGpuDevice record): its fields as recorded, and its name.
struct GpuDevice {
  abi::GpuDeviceRecord record{};
  std::string name;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes a UUID.
std::string gpu_uuid_text(const uint8_t (&uuid)[16]);

struct Process {
  uint32_t index = 0;  // position in TraceReader::processes()
  uint32_t pid = 0;
  uint32_t ppid = 0;
  uint64_t start_ticks = 0;
  std::string command;  // kProcessCommand; empty when the trace has none
  std::string exe;      // kProcessExe
  uint32_t cuda_runtime_version = 0;  // kCudaRuntime: cudaRuntimeGetVersion(), e.g. 12080; 0 when unknown
  std::string cuda_runtime_path;      // the runtime library the process used
  // kProcessJob: the process's rank in its job, from its own environment (cutrace/job.h); -1 unknown.
  int64_t rank = -1, local_rank = -1, world_size = -1;
  std::string rank_variable;  // the variable the rank came from; empty when unknown
  std::vector<uint32_t> threads;  // thread indexes, in definition order
  // Kernel identity is per process: host stubs and driver handles are addresses in one process.
  // kernel_names: stub or handle -> name; kernel_aliases: a handle -> the stub or handle it was
  // derived from (__cudaGetKernel, cuKernelGetFunction).
  std::unordered_map<uint64_t, KernelName> kernel_names;
  std::unordered_map<uint64_t, uint64_t> kernel_aliases;
  std::vector<Module> modules;  // in the order reported; a path may repeat after a reload
  // kPythonFunction: the function id of a Python frame -> its qualified name and file.
  struct PythonFunction {
    std::string name, file;
  };
  std::unordered_map<uint64_t, PythonFunction> python_functions;
  // kGpuKernelName: the name id of a GPU kernel record -> its name.
  std::unordered_map<uint64_t, KernelName> gpu_kernel_names;
  // kGpuActivityStatus: CUPTI's result when the process started GPU activity (-1: it did not try) and
  // what the shim said of it.
  int64_t gpu_status_code = -1;
  std::string gpu_status;
  // kPythonFramesStatus: whether its slow calls' Python frames were read (0), were refused (1), or it
  // said nothing (-1: no slow call in a CPython process), and the interpreter and why.
  int64_t python_frames_code = -1;
  std::string python_frames_status;
  // kPytorchStatus: whether --pytorch's annotations started (0) or not (1), or the process never said
  // (-1: it did not import torch with them), and what it said.
  int64_t pytorch_code = -1;
  std::string pytorch_status;
  // kGpuDevice: the devices CUPTI described to the process, by its device id, in the order first seen.
  std::vector<GpuDevice> gpu_devices;

  // The module whose executable range held `address` at `time` (ns): of the objects there, the one
  // loaded last by then and not unloaded yet. An address in an object the shim found loaded only after
  // `time` (a sample taken before anything made the shim look) goes to the earliest such object not
  // unloaded by then. Null when no object was there.
  const Module* module_at(uint64_t address, uint64_t time) const {
    const Module* found = nullptr;
    for (const Module& m : modules) {
      if (address < m.text_start || address >= m.text_end || m.unloaded_at <= time) continue;
      if (found == nullptr) {
        found = &m;
      } else if (m.loaded_at <= time) {
        if (found->loaded_at > time || m.loaded_at >= found->loaded_at) found = &m;
      } else if (found->loaded_at > time && m.loaded_at < found->loaded_at) {
        found = &m;
      }
    }
    return found;
  }
  // NVTX names, from the naming records (already applied when the chunk's events are delivered):
  // domain id -> name; (domain << 32 | category) -> name; registered string id -> text; (NvtxResource
  // << 56 ^ handle) -> name; tid -> the name nvtxNameOsThread gave it.
  std::unordered_map<uint32_t, std::string> nvtx_domains;
  std::unordered_map<uint64_t, std::string> nvtx_categories;
  std::unordered_map<uint64_t, std::string> nvtx_strings;
  std::unordered_map<uint64_t, std::string> nvtx_resources;
  std::unordered_map<uint32_t, std::string> nvtx_thread_names;
  // The payload extension's schemas and enums (nvtx_payload.h decodes payloads by them).
  NvtxPayloadTypes nvtx_payload_types;
};

// A thread instance (one claimed ring). Indexes are the file's; they are unique even when tids repeat.
struct Thread {
  uint32_t index = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t ppid = 0;
  uint64_t process_start_ticks = 0;
  uint64_t claim_serial = 0;
  uint64_t first_seen_ns = 0;
  uint32_t process = 0;  // index into TraceReader::processes()
  std::string name;      // kThreadName; empty when the trace has none
  int32_t priority = -1;  // from its thread start record (20 + nice); -1 until known
  uint64_t records_read = 0;  // records of this thread delivered so far
  bool has_stats = false;     // stats below come from the kEnd chunk: false for an incomplete trace
  uint64_t records_written = 0;
  uint64_t records_dropped = 0;
  uint64_t records_malformed = 0;
};

// One intercepted call, with the delta coding of the file undone.
struct ApiCall {
  uint32_t api_id = 0;
  const ApiSpec* api = nullptr;  // never null: unknown ids get a placeholder spec
  uint64_t begin_ns = 0;         // CLOCK_MONOTONIC
  uint64_t end_ns = 0;
  uint64_t result = 0;           // sign-extended for error enums; see api->result_kind
  uint16_t depth = 0;            // nesting of recorded calls on the thread (0 = outermost)
  abi::DomainSet outer_domains = 0;  // abi::domain_bit() of every recorded call around this one
  uint8_t flags = 0;             // abi::kCallFlag*
  uint32_t correlation = 0;
  uint8_t arg_count = 0;
  uint64_t args[255] = {};       // arg_count slots; meaning given by api->args (which may be shorter)
  // The call's stack when it was slow enough to have one taken (abi::BacktraceRecord): return
  // addresses, innermost first, in the process's address space (Process::module_at places them).
  // Valid until the next call of next(); null when the call has none.
  const uint64_t* frames = nullptr;
  uint32_t frame_count = 0;
  // The Python frames of the thread (a CPython thread that held the GIL), innermost first; their
  // functions are named by Process::python_functions. Valid like `frames`.
  const abi::PythonFrame* python_frames = nullptr;
  uint32_t python_frame_count = 0;

  uint64_t duration_ns() const { return end_ns - begin_ns; }
  bool outside_capture() const { return flags & abi::kCallFlagOutsideCapture; }
  // Still in progress when recording of its thread ended: end_ns is then, the result unknown.
  bool not_returned() const { return flags & abi::kCallFlagNotReturned; }
  // Made inside a recorded call of one of `domains` (a set of abi::domain_bit()).
  bool inside(abi::DomainSet domains) const { return outer_domains & domains; }
};

// What a result column says of a call that had not returned when recording of its thread ended
// (ApiCall::not_returned): its result is unknown.
inline constexpr const char* kNotReturned = "not returned";

struct StringEvent {
  abi::StringKind kind = abi::StringKind::kKernelName;  // may hold a value this reader does not know
  uint64_t key = 0;
  std::string_view text;  // valid until the next call of next()
};

struct ThreadStartEvent {
  uint64_t time_ns = 0;
  uint32_t pid = 0, tid = 0, ppid = 0, flags = 0;
  int32_t priority = -1;  // 20 + nice when the thread started recording; -1 unknown
};

// An NVTX range event or mark (abi::NvtxRecord). Naming records are applied to the process instead
// and delivered as kRecord.
struct NvtxEvent {
  abi::NvtxEvent type = abi::NvtxEvent::kMark;
  uint64_t time_ns = 0;
  uint64_t range_id = 0;  // kStart, kEnd
  uint32_t domain = 0;    // 0: the default domain
  uint32_t category = 0;
  std::optional<uint32_t> color;  // ARGB
  abi::NvtxPayload payload_type = abi::NvtxPayload::kNone;
  uint64_t payload = 0;  // kExtension: the schema id
  // kExtension: the payload's bytes as recorded (valid until the next call of next()), and why some
  // were left out (abi::kNvtxPayloadCut*; 0: none).
  std::string_view payload_bytes;
  uint8_t payload_cut = 0;
  // The message: inline text, or the registered string's text (the id's own "#<id>" when the trace
  // never named it). Valid until the next call of next().
  std::string_view text;
  bool text_cut = false;
};

// A capture range of the thread's process opened or closed (abi::CaptureStateRecord).
struct CaptureEvent {
  bool begin = true;
  uint64_t time_ns = 0;
  uint32_t range = 0;  // 1 for the process's first range, ...
  abi::CaptureReason reason = abi::CaptureReason::kProfilerApi;
};

// A record of a kind this reader does not decode (backtraces, module maps, NVTX, GPU activity, ...).
struct RawRecord {
  uint16_t kind = 0;
  uint32_t aux = 0;
  const uint8_t* bytes = nullptr;  // the whole record, header included; valid until the next next()
  uint32_t size = 0;
};

enum class EventKind : uint8_t {
  kMetadata,     // a kMetadata chunk was read: TraceReader::metadata() grew
  kApiTable,     // a kApiTable chunk was read: api() knows more ids
  kThreadDef,    // a new thread (ev.thread); its process may be new too
  kApiCall,      // ev.call on ev.thread
  kString,       // ev.string on ev.thread (already applied: names, command lines, kernel names)
  kThreadStart,  // ev.thread_start on ev.thread
  kModule,       // ev.module on ev.thread: its process reported a loaded object (already applied)
  kNvtx,         // ev.nvtx on ev.thread: an NVTX range event or mark
  kCapture,      // ev.capture on ev.thread: its process opened or closed a capture range (-c)
  kCpuSample,    // ev.sample on ev.thread: a CPU sample (-s cpu)
  kContextSwitch,  // ev.context_switch on ev.thread: it left its CPU or got one (--cpuctxsw)
  kPythonSample,   // ev.python_sample on ev.thread: its Python stack (--python-sampling)
  kGpuActivity,    // ev.gpu: GPU activity from CUPTI, delivered on the thread that received it
  kRecord,       // ev.record on ev.thread: a record kind without a decoder here
  kEnd,          // the kEnd chunk: summary() and per-thread stats are filled in
};

// Where a thread was running when the sampling clock ticked (abi::CpuSampleRecord).
struct CpuSampleEvent {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  // The instruction (an exact address), then return addresses; valid until the next call of next().
  const uint64_t* frames = nullptr;
  uint32_t frame_count = 0;
};

// The Python stack of a thread at one tick of the Python sampler (abi::PythonSampleRecord): innermost
// first, each named by Process::python_functions; valid until the next call of next().
struct PythonSampleEvent {
  uint64_t time_ns = 0;
  const abi::PythonFrame* frames = nullptr;
  uint32_t frame_count = 0;
};

// What CUPTI said the device did (abi::GpuActivity records), decoded. The fields of other kinds are 0.
struct GpuActivityEvent {
  abi::GpuActivity kind = abi::GpuActivity::kKernel;
  uint64_t start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC; kDropped: when it was learnt
  uint32_t correlation = 0;
  uint32_t device = UINT32_MAX, context = 0, stream = UINT32_MAX;
  // kKernel: its name (null when the trace does not name it), launch shape and resources.
  const KernelName* name = nullptr;
  int32_t grid[3] = {}, block[3] = {};
  uint32_t static_shared_bytes = 0, dynamic_shared_bytes = 0, registers_per_thread = 0;
  // kMemcpy, kMemset, kMemory
  uint64_t bytes = 0;
  uint32_t runtime_correlation = 0;           // kMemcpy
  uint8_t copy_kind = 0, src_kind = 0, dst_kind = 0, flags = 0;  // kMemcpy (flags: kMemset's too)
  uint32_t value = 0;                         // kMemset
  uint32_t memory_kind = 0;                   // kMemset, kMemory
  uint64_t address = 0;                       // kMemory
  uint32_t operation = 0;                     // kMemory: 1 allocation, 2 release
  uint32_t sync_type = 0, event = UINT32_MAX; // kSync
  uint32_t tid = 0, api_id = 0, result = 0;   // kApiLink
  uint64_t dropped = 0;                       // kDropped
  // kKernel, kMemcpy, kMemset: the graph and node whose launch ran it (--cuda-graph-trace node), 0 when
  // none; kGraph: the graph launched.
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint64_t duration_ns() const { return end_ns - start_ns; }
};

// A thread left its CPU or got one back (abi::ContextSwitchRecord). A thread's switches may be read out
// of time order (each CPU's are read in turn): order them by time before pairing.
struct ContextSwitchEvent {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  abi::ContextSwitch change = abi::ContextSwitch::kIn;
};

struct Event {
  EventKind kind = EventKind::kMetadata;
  uint64_t chunk = 0;              // sequence number of the chunk the event came from
  const Thread* thread = nullptr;  // kThreadDef and record events
  ApiCall call;
  StringEvent string;
  ThreadStartEvent thread_start;
  const Module* module = nullptr;  // kModule: in processes()[thread->process].modules
  NvtxEvent nvtx;
  CaptureEvent capture;
  CpuSampleEvent sample;
  PythonSampleEvent python_sample;
  GpuActivityEvent gpu;
  ContextSwitchEvent context_switch;
  RawRecord record;
};

enum class TraceState : uint8_t {
  kReading,     // next() has not returned false yet
  kComplete,    // the kEnd chunk was read
  kIncomplete,  // the file ends cleanly after a chunk, but without kEnd
  kTruncated,   // the file ends inside a chunk
  kCorrupt,     // a chunk failed its checks and no intact chunk could be found after it
};

struct Status {
  TraceState state = TraceState::kReading;
  uint64_t intact_chunks = 0;   // chunks read and delivered
  uint64_t events = 0;          // records delivered
  uint64_t offset = 0;          // kTruncated: the file size; kCorrupt: where the bad chunk starts
  uint64_t bad_chunk = 0;       // kCorrupt, kTruncated: index of the chunk that could not be read
  std::string reason;           // kCorrupt: what check failed
  uint64_t trailing_bytes = 0;  // kComplete: bytes after the kEnd chunk, ignored
  uint64_t skipped_chunks = 0;  // chunks of a type this reader does not know, skipped
  // Damaged or missing chunks passed over to read the intact ones after them; the first is described.
  uint64_t damaged_chunks = 0;
  uint64_t first_damage_chunk = 0;
  uint64_t first_damage_offset = 0;
  std::string first_damage_reason;
  // Set when the file is the partial file of a run still in progress: who is writing it.
  std::string in_progress_by;
  // Set when the recorder stopped while traced processes went on (its end summary's cut_off.reason):
  // why, and where its last record is. The file is whole, the run's later calls are not in it.
  std::string cut_off;

  // The whole trace was read: the end chunk, and no damaged chunk on the way; and the recording was
  // not cut off while the program ran.
  bool complete() const { return state == TraceState::kComplete && damaged_chunks == 0 && cut_off.empty(); }
  // One sentence for users, e.g. "incomplete: the recorder did not finish (killed or crashed);
  // 1,024 events in 3 intact chunks are shown".
  std::string describe() const;
};

class TraceReader {
 public:
  TraceReader();
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Opens `path` and checks its FileHeader. Returns false with error() set to one sentence when the file
  // cannot be read at all (missing, not a cutrace trace, a newer format version).
  bool open(const std::string& path);
  const std::string& error() const { return error_; }

  // Fills `ev` with the next event. Returns false at the end of what can be read; status() then says
  // whether the trace was complete, and if not, why it stopped.
  bool next(Event& ev);

  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }
  uint64_t file_bytes() const { return file_bytes_; }
  // How far into the file reading has come (the start of the next chunk): for progress bars.
  uint64_t bytes_read() const { return offset_; }
  // Called with bytes_read() after each chunk is read (a progress bar); empty: none.
  void on_chunk(std::function<void(uint64_t bytes_read)> callback) { on_chunk_ = std::move(callback); }
  const format::FileHeader& file_header() const { return header_; }

  // Key/value pairs of every kMetadata chunk read so far, in file order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  // The kEnd summary pairs; empty until kEnd is read.
  const std::vector<std::pair<std::string, std::string>>& summary() const { return summary_; }
  // First value of `key` in metadata() (or summary()), or nullptr.
  const std::string* metadata_value(std::string_view key) const;
  const std::string* summary_value(std::string_view key) const;
  // A CLOCK_MONOTONIC time of the trace as a user reads it: "12.345 s into the recording" (from the
  // metadata's start.monotonic_ns), or the raw value when the start is unknown or later.
  std::string time_into_recording(uint64_t monotonic_ns) const;

  // The spec of an api id. References stay valid for the reader's life; a later kApiTable chunk may
  // update the entry in place.
  const ApiSpec& api(uint32_t id);
  // The entries of the api tables read so far, by id.
  std::vector<const ApiSpec*> api_table() const;

  const std::deque<Thread>& threads() const { return threads_; }
  const std::deque<Process>& processes() const { return processes_; }
  const Thread* thread(uint32_t index) const;
  const Process& process_of(const Thread& t) const { return processes_[t.process]; }

  // The kernel an argument of a names_kernel() format names, or nullptr when the trace read so far
  // does not say (no __cudaRegisterFunction, __cudaGetKernel, cuModuleGetFunction, ... for it).
  const KernelName* kernel(const Thread& t, abi::ArgFormat format, uint64_t value) const;
  // The kernel a launch call names: its first names_kernel() argument.
  const KernelName* kernel_of(const ApiCall& call, const Thread& t) const;

 private:
  enum class ReadResult { kOk, kStop };
  ReadResult read_chunk();
  // A chunk at `chunk_offset` cannot be read: notes why, then goes on with the next intact chunk
  // (right after it when its header is sound, else the next valid header found in the file), or
  // stops with kCorrupt when there is none.
  ReadResult fail_corrupt(uint64_t chunk_offset, std::string reason, const format::ChunkHeader* sound_header = nullptr);
  // The first chunk header at or after `from` that passes its own checks and whose sequence number
  // is at least `min_sequence`; false when the file holds none.
  bool find_chunk_header(uint64_t from, uint64_t min_sequence, format::ChunkHeader& out, uint64_t& where);
  // Counts `chunks` lost from the expected chunk on; the first loss is the one described.
  void note_damage(uint64_t chunk_offset, std::string reason, uint64_t chunks);
  // Whether a header read from the file passes the checks that need nothing but itself.
  bool header_sound(const format::ChunkHeader& ch, uint64_t at) const;
  bool decode_payload(uint16_t type);
  bool parse_metadata(std::vector<std::pair<std::string, std::string>>& out, const uint8_t* p, size_t n);
  bool parse_api_table();
  bool parse_end();
  bool validate_events();
  void apply_events();
  void apply_call_names(Thread& t, const uint8_t* rec, uint32_t size);
  void apply_module(Thread& t, const uint8_t* rec);
  void deliver_gpu_activity(Event& ev, const uint8_t* record, uint32_t aux);
  void apply_nvtx_name(Thread& t, const uint8_t* rec);
  void apply_gpu_device(Thread& t, const uint8_t* rec);
  void deliver_nvtx(Event& ev, const uint8_t* rec);
  bool deliver_event(Event& ev);
  Process& process_for(const format::ThreadDef& def);
  const ApiSpec* find_api(uint32_t id) const;
  Thread* mutable_thread(uint32_t index);
  // The kNames chunk, found by walking the chunk headers, so that launches are named even where the
  // records naming their kernels come later in the file.
  void read_names_ahead();
  void add_kernel_names(std::vector<names::ProcessNames>& list);
  void apply_kernel_names(Process& p, const names::ProcessNames& n);

  std::string path_, error_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  // Calls without a CUPTI correlation id are numbered in file order, so every report names a call by
  // the same CorrID.
  uint32_t call_sequence_ = 0;
  uint64_t offset_ = 0;  // where the next chunk starts
  std::function<void(uint64_t)> on_chunk_;
  uint64_t next_sequence_ = 0;
  format::FileHeader header_{};
  Status status_;
  ZSTD_DCtx* dctx_ = nullptr;
  // raw_ holds the chunk's payload; for an events chunk, validate_events() replaces every kRecords
  // block by its decoded records (ring layout, absolute times) so the rest of the reader walks
  // fixed-layout records.
  // Growing a buffer leaves the new bytes uninitialised: they are about to be overwritten, and zeroing
  // them would touch every page of the largest chunk twice. It grows by realloc, which moves a large
  // buffer's pages (mremap) instead of copying its bytes into new ones.
  class ByteBuffer {
   public:
    ByteBuffer() = default;
    ByteBuffer(const ByteBuffer&) = delete;
    ByteBuffer& operator=(const ByteBuffer&) = delete;
    ~ByteBuffer() { std::free(data_); }
    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    uint8_t operator[](size_t i) const { return data_[i]; }
    // Keeps the first min(size(), bytes) bytes.
    void resize(size_t bytes) {
      if (bytes > capacity_) {
        void* more = std::realloc(data_, bytes);
        if (!more) throw std::bad_alloc();
        data_ = static_cast<uint8_t*>(more);
        capacity_ = bytes;
      }
      size_ = bytes;
    }
    void swap(ByteBuffer& other) noexcept {
      std::swap(data_, other.data_);
      std::swap(size_, other.size_);
      std::swap(capacity_, other.capacity_);
    }

   private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0, capacity_ = 0;
  };
  ByteBuffer stored_, raw_, decoded_;
  bool decoded_in_raw_ = false;  // raw_ and decoded_ swapped by the last events chunk
  // Bytes raw_ holds past raw_size_ after validate_events(), so deliveries can copy fixed widths.
  static constexpr size_t kDeliverySlack = 8 * abi::kMaxApiArgs;
  // What apply_events() must look at: a thread definition (offset of its block header) or a record.
  struct PendingApply {
    size_t offset;
    uint32_t thread_index;
    bool thread_def;
  };
  std::vector<PendingApply> to_apply_;
  std::string nvtx_unnamed_;  // the text of a registered string the trace does not name
  codec::BlockState codec_state_;
  size_t raw_size_ = 0;
  std::string chunk_error_;

  // Delivery cursor over the current kEvents chunk.
  uint16_t current_type_ = 0;
  bool pending_chunk_event_ = false;
  bool ended_ = false;  // the kEnd chunk was read
  size_t block_pos_ = 0, block_end_ = 0, rec_pos_ = 0;
  Thread* block_thread_ = nullptr;

  std::vector<std::pair<std::string, std::string>> metadata_, summary_;
  std::unordered_map<uint32_t, ApiSpec> apis_;  // node-based: references stay valid
  std::vector<ApiSpec*> api_index_;               // fast path for the dense ids of generated tables
  std::deque<Thread> threads_;
  std::unordered_map<uint32_t, uint32_t> thread_pos_;  // file thread index -> position in threads_
  std::deque<Process> processes_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> processes_by_pid_;
  // Names for processes not defined yet, by (pid, start ticks).
  std::map<std::pair<uint32_t, uint64_t>, names::ProcessNames> pending_names_;
  // Per process: how many of its modules were delivered as events (apply_events adds a chunk's
  // modules before its records are delivered, in the same order).
  std::unordered_map<uint32_t, size_t> module_cursor_;
  // A backtrace record waits for the call record that follows it on its thread (possibly in a later
  // block): by file thread index.
  struct PendingBacktrace {
    uint64_t call_begin = 0;
    uint32_t api_id = 0;
    bool waiting = false;
    std::vector<uint64_t> frames;
    std::vector<abi::PythonFrame> python_frames;
  };
  std::unordered_map<uint32_t, PendingBacktrace> backtraces_;
  std::vector<uint64_t> sample_frames_;  // the frames of the CpuSampleEvent last delivered
  std::vector<abi::PythonFrame> python_sample_frames_;  // and of the PythonSampleEvent
  uint32_t backtraces_waiting_ = 0;
};

}  // namespace cutrace::reader
