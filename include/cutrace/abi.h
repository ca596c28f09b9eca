// The shared-memory ABI between the preloaded shim (producer) and the recorder (consumer).
//
// This header is the only thing the two sides share. Everything in shared memory is fixed-width and
// position independent (offsets, never pointers), because each process maps the session at a different
// address. The recorder treats every byte of it as untrusted: a buggy or hostile target can write
// anything into its rings, so every size and offset read from here is validated before use.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "cutrace/domains.h"

namespace cutrace::abi {

// Bumped whenever any layout in this header changes; a shim and a recorder of different versions
// refuse to talk to each other rather than misread records.
inline constexpr uint32_t kAbiVersion = 12;
inline constexpr uint64_t kSessionMagic = 0x314e4f4953534354ull;  // "TCSSION1" little-endian
inline constexpr const char* kSessionEnvVar = "CUTRACE_SESSION";
// "<fd>:<st_dev>:<st_ino>": a descriptor of the session object that every process of the session
// inherits, so that one which changed user (su, runuser, gosu, setpriv), and may no longer open the
// object by name (mode 0600), maps it through the descriptor instead. The device and inode tell the
// session's descriptor from whatever a program may have put at that number since.
inline constexpr const char* kSessionFdEnvVar = "CUTRACE_SESSION_FD";
// A process that can reach the session neither way says so by creating and at once removing
// "<session name><kUnreachedMarker><pid>.<uid>.<errno>" in /dev/shm, which the recorder watches
// (inotify): it cannot write into the session, and the name alone carries what happened.
inline constexpr const char* kUnreachedMarker = ".unreached.";
// Capture ranges, set by the launcher for every process of the session (each gates itself):
// "<cudaProfilerApi|nvtx>,<none|stop|stop-shutdown|repeat|repeat-shutdown>,<count, 0 = unlimited>"
// and, with nvtx, the range to follow as -p gives it: "RANGE", "RANGE@DOMAIN" or "RANGE@*".
inline constexpr const char* kCaptureEnvVar = "CUTRACE_CAPTURE";
inline constexpr const char* kNvtxCaptureEnvVar = "CUTRACE_NVTX_CAPTURE";

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be lock-free");

// How the shim takes timestamps. TSC is chosen by the launcher only when the kernel itself trusts the
// TSC (clocksource "tsc"); the recorder converts TSC ticks to CLOCK_MONOTONIC nanoseconds before
// anything reaches the trace file, so readers only ever see nanoseconds.
enum class ClockKind : uint32_t {
  kMonotonicNs = 1,  // clock_gettime(CLOCK_MONOTONIC)
  kTsc = 2,          // rdtsc, converted by the recorder
};

// What a producer does when its ring is full.
enum class OnFull : uint32_t {
  kDrop = 0,  // count the record as dropped and return at once (default: never stall the program)
};

// ---------------------------------------------------------------------------------------------
// Records: every record starts with RecordHeader; size is the whole record in bytes, a multiple of 8.
// ---------------------------------------------------------------------------------------------

inline constexpr uint32_t kRecordAlign = 8;
inline constexpr uint32_t kMaxRecordBytes = 4096;  // a producer never writes a larger record

enum class RecordKind : uint16_t {
  kInvalid = 0,      // zeroed memory never parses as a record
  kPad = 1,          // fills the tail of the ring before a wrap; no payload
  kApiCall = 2,      // ApiCallRecord: one intercepted call
  kString = 3,       // StringRecord: a name the tools need (kernel names, thread names, command line)
  kThreadStart = 4,  // ThreadStartRecord: first record of every claimed ring
  // Reserved for what follows the core (kept here so kinds never get renumbered):
  kBacktrace = 5,      // variable-length list of return addresses for the preceding call
  kModuleMap = 6,      // ModuleRecord: a loaded object (path, load bias, text range, build-id, flags)
  kNvtx = 7,           // NVTX push/pop/start/end/mark
  kGpuActivity = 8,    // GPU activity from CUPTI, re-encoded (GpuActivity records)
  kCaptureState = 9,   // capture switched on or off (profiler API, NVTX range)
  kCpuSample = 10,     // CpuSampleRecord: a CPU sample of a thread (-s cpu): the recorder's, or the timer sampler's
  kContextSwitch = 11, // ContextSwitchRecord: a thread left or got a CPU (--cpuctxsw); the recorder's alone
  kPythonSample = 12,  // PythonSampleRecord: the Python stack of a thread (--python-sampling)
  kGpuDevice = 13,     // GpuDeviceRecord: a GPU as CUPTI describes it (CUPTI_ACTIVITY_KIND_DEVICE)
  kKindCount = 14,
};

struct RecordHeader {
  uint16_t kind;  // RecordKind
  uint16_t size;  // bytes, including this header; multiple of kRecordAlign
  uint32_t aux;   // kind-specific (the api id for kApiCall, the StringKind for kString)
};
static_assert(sizeof(RecordHeader) == 8);

// Interface families (ApiDomain, domain_bit(), DomainSet): domains.def lists them; an api id is unique
// across all of them within one build's ApiTable.

// Backtrace classes, as in `--cudabacktrace kernel|memory|sync|other`.
enum class ApiClass : uint8_t { kOther = 0, kSync = 1, kMemory = 2, kKernel = 3 };

// How the tools print an argument slot. The generator picks one per annotated argument.
enum class ArgFormat : uint8_t {
  kUnsigned = 0,
  kSigned = 1,
  kBytes = 2,        // a byte count
  kPointer = 3,      // printed as hex
  kMemcpyKind = 4,   // cudaMemcpyKind
  kStream = 5,       // a stream handle (0 = legacy default stream)
  kDevice = 6,       // a device ordinal
  kKernelStub = 7,   // a host stub address, named through a kKernelName string
  kKernelHandle = 8, // a cudaKernel_t, named through the __cudaGetKernel call that returned it
  kDim3 = 9,         // x in bits 0-31, y in bits 32-47, z in bits 48-63 (y and z saturate at 65535)
  kFlags = 10,       // printed as hex
  // A driver function or kernel (CUfunction, CUkernel, cudaFunction_t), named through the kKernelName
  // string keyed by the handle, or through a call that derives it from another kernel identity.
  kFunction = 11,
  kEnum = 12,        // a C enum, printed by the enumerator names of ApiArgInfo::type_name
  // An MPI rank, translated to its rank in MPI_COMM_WORLD where the call's communicator allows; the
  // implementations' special values are stored as kMpiRank* below, whatever their own numbers.
  kMpiRank = 13,
  kMpiDatatype = 14, // an MPI datatype: kMpiDatatypeNames's index, 0 for a derived or unknown type
};

// The special ranks of an MPI call, as a kMpiRank slot stores them (Open MPI and MPICH number them
// differently).
inline constexpr int64_t kMpiRankAnySource = -1;
inline constexpr int64_t kMpiRankProcNull = -2;
inline constexpr int64_t kMpiRankRoot = -3;
inline constexpr int64_t kMpiRankUnknown = -4;  // not a rank of the communicator, or no communicator to read it by

// The predefined MPI datatypes a kMpiDatatype slot names, by index; never reordered (traces store the
// index), new names go at the end. The names are those MPI_Type_get_name gives predefined types.
inline constexpr const char* kMpiDatatypeNames[] = {
    "",  // a derived datatype, or one this list lacks
    "MPI_CHAR", "MPI_SIGNED_CHAR", "MPI_UNSIGNED_CHAR", "MPI_BYTE", "MPI_WCHAR", "MPI_SHORT",
    "MPI_UNSIGNED_SHORT", "MPI_INT", "MPI_UNSIGNED", "MPI_LONG", "MPI_UNSIGNED_LONG", "MPI_LONG_LONG",
    "MPI_UNSIGNED_LONG_LONG", "MPI_FLOAT", "MPI_DOUBLE", "MPI_LONG_DOUBLE", "MPI_INT8_T", "MPI_INT16_T",
    "MPI_INT32_T", "MPI_INT64_T", "MPI_UINT8_T", "MPI_UINT16_T", "MPI_UINT32_T", "MPI_UINT64_T",
    "MPI_C_BOOL", "MPI_C_FLOAT_COMPLEX", "MPI_C_DOUBLE_COMPLEX", "MPI_C_LONG_DOUBLE_COMPLEX", "MPI_AINT",
    "MPI_OFFSET", "MPI_COUNT", "MPI_PACKED", "MPI_FLOAT_INT", "MPI_DOUBLE_INT", "MPI_LONG_INT",
    "MPI_2INT", "MPI_SHORT_INT", "MPI_LONG_DOUBLE_INT", "MPI_LONG_LONG_INT",
};
inline constexpr uint32_t kMpiDatatypeCount = uint32_t(std::size(kMpiDatatypeNames));

inline constexpr uint32_t kMaxApiArgs = 12;

// Flags of an ApiCallRecord.
inline constexpr uint8_t kCallFlagResultIsPointer = 1;  // result holds a pointer, not an error code
inline constexpr uint8_t kCallFlagNoResult = 2;         // the function returns void
// Recorded while capture was off because the tools need it to name later calls (kernel registration,
// __cudaGetKernel); reports of timed calls leave such records out.
inline constexpr uint8_t kCallFlagOutsideCapture = 4;
// Written by the recorder, never by a producer: the call was still in progress when recording of its
// thread ended (its process died or hung in it, or recording stopped while it ran), as the thread's
// RingHeader::call_in_progress said. `end` is when the recorder found that, the result is unknown (0).
inline constexpr uint8_t kCallFlagNotReturned = 8;

// A call made inside another recorded call (a runtime call's driver calls, cuDNN's cuBLAS calls) is
// recorded too, one level deeper, and written before its parent: records of a thread are in the order
// the calls ended. Its parent is the next record of the same thread one level up. outer_domains says,
// without looking ahead, which domains the calls around it belong to, so that a report can count a
// driver call the program made and leave out one the runtime made for it.
struct ApiCallRecord {
  RecordHeader header;     // kind = kApiCall, aux = api id (index into the ApiTable of the trace)
  uint64_t begin;          // ring: ClockKind units; file: see format.h (delta-encoded)
  uint64_t end;            // ring: ClockKind units; file: duration in ns
  uint64_t result;         // the return value, sign-extended for error enums
  DomainSet outer_domains; // domain_bit() of every recorded call around this one
  uint8_t depth;           // recorded calls around this one on its thread (0 = outermost); saturates at 255
  uint8_t arg_count;       // slots that follow
  uint8_t flags;           // kCallFlag*
  uint8_t reserved;
  uint32_t correlation;    // reserved for CUPTI correlation ids; 0 today
  uint64_t args[];         // arg_count slots, meaning given by the ApiTable entry
};
static_assert(sizeof(ApiCallRecord) == 48);
static_assert(offsetof(ApiCallRecord, begin) == 8 && offsetof(ApiCallRecord, end) == 16);
static_assert(offsetof(ApiCallRecord, outer_domains) == 32 && offsetof(ApiCallRecord, depth) == 40 &&
              offsetof(ApiCallRecord, arg_count) == 41);

enum class StringKind : uint32_t {
  // key = what a launch names its kernel by: a host stub (__cudaRegisterFunction) or a driver handle
  // (CUfunction, CUkernel: cuModuleGetFunction, cuLibraryGetKernel, cuFuncGetName); text = mangled name
  kKernelName = 1,
  kThreadName = 2,     // key = 0, text = the thread's name (prctl PR_GET_NAME) at claim time
  kProcessCommand = 3, // key = 0, text = /proc/self/cmdline with NULs turned into spaces
  kProcessExe = 4,     // key = 0, text = the executable path
  // key = cudaRuntimeGetVersion() of the CUDA runtime the process uses (e.g. 12080 for 12.8), text =
  // that library's path. Sent once per process, when its first recorded call finds the runtime loaded.
  kCudaRuntime = 5,
  // key = the CUDA version asked for, text = the symbol: the driver handed out an entry point
  // (cuGetProcAddress, cudaGetDriverEntryPoint) that this build has no wrapper for, so calls through
  // it are not recorded. Sent once per symbol per process image.
  kUnwrappedEntryPoint = 6,
  // key = the id a BacktraceRecord's Python frames name a function by, text = its qualified name, a NUL,
  // and the file of its code. Sent once per id per process, before the first backtrace naming it.
  kPythonFunction = 7,
  // key = the id a GPU kernel record names its kernel by (a hash of the name), text = the kernel's
  // mangled name as CUPTI gives it. Sent once per id per process, before the first record naming it.
  kGpuKernelName = 8,
  // key = the CUPTI result code (0 when GPU activity is collected), text = what happened, one sentence:
  // why GPU activity is not collected for this process (no driver, another profiler holds CUPTI, ...),
  // or where CUPTI was loaded from. Sent once per process when it tries to start GPU activity.
  kGpuActivityStatus = 9,
  // key = 0 when the process's Python frames are read (text: the interpreter, "CPython 3.11.7"), 1 when
  // it has none (text: the interpreter and why, one sentence). Sent once per process, by the first slow
  // call of a CPython process; a refusal after an acceptance (a check that failed later) wins.
  kPythonFramesStatus = 10,
  // key = 0, text = the job variables of the process's environment that are set (cutrace/job.h's
  // kFamilies), each as NAME=VALUE, the value cut at job::kMaxValueBytes, NUL-separated. Sent once per
  // process, when it is announced, and only when one of them is set. Readers that predate it skip it.
  kProcessJob = 11,
  // key = 0 when --pytorch's annotations started in the process (text: "torch 2.15.0: autograd-nvtx,
  // functions-trace"), 1 when they could not (text: torch's version and why). Sent through
  // cutrace_pytorch_status() by python/bootstrap/_cutrace_pytorch.py, once per process that imports
  // torch. Readers that predate it skip it.
  kPytorchStatus = 12,
  // Sent by earlier builds when the program's own CUPTI client took CUPTI's buffers from the trace;
  // the shim now shares them (preload/gpu_activity.cpp) and sends none. Kept so that the number is not
  // given to another kind: traces of those builds hold it, and their readers skip it.
  kGpuActivityLent = 13,
};

struct StringRecord {
  RecordHeader header;  // kind = kString, aux = StringKind
  uint64_t key;
  uint32_t length;      // bytes of text, no terminator; header.size covers it rounded up to 8
  uint32_t reserved;
  char text[];
};
static_assert(sizeof(StringRecord) == 24);
inline constexpr uint32_t kMaxStringBytes = kMaxRecordBytes - sizeof(StringRecord);

inline constexpr uint32_t kThreadFlagForkedChild = 1;  // first ring of a child created by fork() without exec
inline constexpr uint32_t kThreadFlagFirstInProcess = 2;

// ThreadStartRecord's aux: the thread's scheduling priority as the kernel shows it for normal threads
// (20 + nice, 0..39), read when the thread claims its ring, flagged as known; 0 = unknown.
inline constexpr uint32_t kThreadPriorityKnown = 1u << 31;

struct ThreadStartRecord {
  RecordHeader header;  // kind = kThreadStart, aux = kThreadPriorityKnown | priority, or 0
  uint64_t time;        // ClockKind units in the ring
  uint32_t pid;
  uint32_t tid;
  uint32_t ppid;
  uint32_t flags;       // kThreadFlag*
};
static_assert(sizeof(ThreadStartRecord) == 32);

// The stack of a call that lasted at least its class's backtrace threshold (--cudabacktrace,
// --osrt-backtrace-threshold): return addresses, innermost first, from the code that made the call
// (the tracer's own frames are left out). Written just before the call's own record on the same ring,
// so a reader attaches it to the next call record of the thread with the same begin and api id.
// A Python frame of the thread that made a slow call (CPython processes only): the function's id (its
// names come in a kPythonFunction string) and the line the frame was at. The line's top bit
// (kPythonFrameEntry) marks the outermost frame that one run of the interpreter's eval loop
// (_PyEval_EvalFrameDefault) executes, where that is known, and the last frame kept of a deeper stack:
// the Python frames from the innermost to the first so marked belong in place of the innermost
// eval-loop frame of the native stack, and so on.
struct PythonFrame {
  uint64_t function;
  uint64_t line;
};
static_assert(sizeof(PythonFrame) == 16);
inline constexpr uint64_t kPythonFrameEntry = uint64_t(1) << 63;
inline constexpr uint64_t python_frame_line(const PythonFrame& f) { return f.line & ~kPythonFrameEntry; }

struct BacktraceRecord {
  RecordHeader header;     // kind = kBacktrace, aux = number of native frames (0 .. kMaxBacktraceFrames)
  uint64_t call_begin;     // the call's begin, in ClockKind units in the ring (ns in a trace file)
  uint32_t api_id;         // the call's api id
  uint32_t python_frames;  // PythonFrame entries after the native frames (0 .. kMaxPythonFrames; 0 before ABI 6)
  uint64_t frames[];       // native return addresses, innermost first; then the PythonFrames, innermost first
};
static_assert(sizeof(BacktraceRecord) == 24);
inline constexpr uint32_t kMaxBacktraceFrames = 128;
inline constexpr uint32_t kMaxPythonFrames = 64;
static_assert(sizeof(BacktraceRecord) + 8 * kMaxBacktraceFrames + sizeof(PythonFrame) * kMaxPythonFrames <=
              kMaxRecordBytes);
inline constexpr uint32_t backtrace_record_bytes(uint32_t native, uint32_t python) {
  return uint32_t(sizeof(BacktraceRecord)) + 8u * native + uint32_t(sizeof(PythonFrame)) * python;
}

// A CPU sample (-s cpu): where a thread of a traced process was running when the sampling clock
// ticked. The recorder reads them from the kernel's perf events and writes them into the sampled
// thread's records in the trace file; where perf events are forbidden, a thread's own timer signal
// writes them into its ring (time then in the session clock's units). aux = frames (1 .. kMaxSampleFrames).
struct CpuSampleRecord {
  RecordHeader header;
  uint64_t time;    // ns, CLOCK_MONOTONIC
  uint32_t cpu;     // the CPU it ran on
  uint32_t flags;   // 0
  uint64_t frames[];  // the instruction it was at, then the return addresses of its callers
};
static_assert(sizeof(CpuSampleRecord) == 24);
inline constexpr uint32_t kMaxSampleFrames = 64;

// --cpuctxsw: a thread of a traced process was switched out of its CPU or back in, from the same perf
// events. aux = ContextSwitch.
enum class ContextSwitch : uint32_t { kIn = 1, kOut = 2, kPreempted = 3 };  // kPreempted: out, still runnable
struct ContextSwitchRecord {
  RecordHeader header;
  uint64_t time;  // ns, CLOCK_MONOTONIC
  uint32_t cpu;
  uint32_t reserved;
};
static_assert(sizeof(ContextSwitchRecord) == 24);

// --python-sampling: the Python stack of a thread of a CPython process, read by the process's sampler
// thread while it held the GIL. In the ring it is the sampler's record, naming the sampled thread by
// `tid`; the recorder files it under that thread (tid is then the thread's own). aux = frames
// (1 .. kMaxPythonFrames), innermost first, named as a BacktraceRecord's.
struct PythonSampleRecord {
  RecordHeader header;
  uint64_t time;   // ClockKind units in the ring, ns in the file
  uint32_t tid;
  uint32_t flags;  // 0
  PythonFrame frames[];
};
static_assert(sizeof(PythonSampleRecord) == 24);

// GPU activity (-t cuda, where a driver and CUPTI are present): what CUPTI reported the device did,
// re-encoded by the shim from CUPTI's activity buffers into the ring of the thread that received them.
// Times are ns of CLOCK_MONOTONIC in the ring and in the file alike: CUPTI takes its timestamps from
// the shim's clock (cuptiActivityRegisterTimestampCallback). Device, context and stream ids are
// CUPTI's, per process. aux = GpuActivity.
enum class GpuActivity : uint32_t {
  kKernel = 1,   // GpuKernelRecord (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
  kMemcpy = 2,   // GpuMemcpyRecord (MEMCPY)
  kMemset = 3,   // GpuMemsetRecord (MEMSET)
  kSync = 4,     // GpuSyncRecord (SYNCHRONIZATION): a host wait, on the host's timeline
  kMemory = 5,   // GpuMemoryRecord (MEMORY2): a device allocation or release
  kApiLink = 6,  // GpuApiLinkRecord: which call of which thread a correlation id belongs to
  kDropped = 7,  // GpuDroppedRecord: records CUPTI could not deliver
  kGraph = 8,    // GpuGraphRecord (GRAPH_TRACE): one launch of a CUDA graph, its nodes not told apart
};

// The fields every GPU activity record but kApiLink and kDropped starts with.
struct GpuActivityHeader {
  RecordHeader header;   // kind = kGpuActivity, aux = GpuActivity
  uint64_t start;        // ns, CLOCK_MONOTONIC
  uint64_t end;          // ns; == start for an instant (an allocation)
  uint32_t correlation;  // CUPTI's correlation id of the API call that issued it (0: none known)
  uint32_t device;       // CUPTI device id; UINT32_MAX when CUPTI gives none (a synchronisation)
  uint32_t context;
  uint32_t stream;       // CUPTI stream id; UINT32_MAX when none
};
static_assert(sizeof(GpuActivityHeader) == 40);

struct GpuKernelRecord {
  GpuActivityHeader h;
  uint64_t name;         // id of the process's kGpuKernelName string; 0 when CUPTI gave no name
  int32_t grid[3];
  int32_t block[3];
  uint32_t static_shared_bytes;
  uint32_t dynamic_shared_bytes;
  uint32_t registers_per_thread;
  uint32_t graph_id;        // CUPTI's id of the graph whose launch ran it; 0: not run by a graph launch
  uint64_t graph_node_id;   // CUPTI's id of the graph node; 0 likewise
};
static_assert(sizeof(GpuKernelRecord) == 96);

struct GpuMemcpyRecord {
  GpuActivityHeader h;
  uint64_t bytes;
  uint32_t runtime_correlation;  // the enclosing runtime call's correlation id, 0 when none
  uint8_t copy_kind;             // CUpti_ActivityMemcpyKind
  uint8_t src_kind;              // CUpti_ActivityMemoryKind
  uint8_t dst_kind;
  uint8_t flags;                 // CUpti_ActivityFlag's low byte (1: asynchronous)
  uint32_t graph_id;             // as GpuKernelRecord's
  uint32_t reserved;
  uint64_t graph_node_id;
};
static_assert(sizeof(GpuMemcpyRecord) == 72);

struct GpuMemsetRecord {
  GpuActivityHeader h;
  uint64_t bytes;
  uint32_t value;
  uint16_t memory_kind;  // CUpti_ActivityMemoryKind
  uint16_t flags;
  uint32_t graph_id;     // as GpuKernelRecord's
  uint32_t reserved;
  uint64_t graph_node_id;
};
static_assert(sizeof(GpuMemsetRecord) == 72);

struct GpuSyncRecord {
  GpuActivityHeader h;
  uint32_t type;   // CUpti_ActivitySynchronizationType
  uint32_t event;  // CUPTI's event id for event synchronisations, else UINT32_MAX
};
static_assert(sizeof(GpuSyncRecord) == 48);

struct GpuMemoryRecord {
  GpuActivityHeader h;   // start == end: when it happened
  uint64_t address;
  uint64_t bytes;
  uint32_t operation;    // CUpti_ActivityMemoryOperationType: 1 allocation, 2 release
  uint32_t memory_kind;  // CUpti_ActivityMemoryKind
};
static_assert(sizeof(GpuMemoryRecord) == 64);

// A runtime or driver call as CUPTI saw it (its RUNTIME/DRIVER activity), kept only for calls that
// give the device work, wait for it or allocate (their api's class is not kOther): the link from a
// GPU record's correlation id to the call that issued it. CUPTI's interval lies inside the shim's own
// record of the same call on the same thread, since CUPTI times the call from within.
struct GpuApiLinkRecord {
  RecordHeader header;   // kind = kGpuActivity, aux = kApiLink
  uint64_t start;        // ns, CLOCK_MONOTONIC
  uint64_t end;
  uint32_t correlation;
  uint32_t tid;          // the calling thread (CUPTI's threadId of type SYSTEM)
  uint32_t api_id;       // the call's id in the trace's api table
  uint32_t result;       // its return value as CUPTI saw it
};
static_assert(sizeof(GpuApiLinkRecord) == 40);

// A graph launch as a whole (--cuda-graph-trace graph): from the start of its first node to the end of
// its last, on the stream it was launched into; correlation is the launching call's. The nodes of a
// launch traced this way have no records of their own.
struct GpuGraphRecord {
  GpuActivityHeader h;
  uint32_t graph_id;  // CUPTI's id of the graph launched
  uint32_t reserved;
};
static_assert(sizeof(GpuGraphRecord) == 48);

struct GpuDroppedRecord {
  RecordHeader header;  // kind = kGpuActivity, aux = kDropped
  uint64_t time;        // ns, CLOCK_MONOTONIC: when the shim learnt of them
  uint64_t dropped;     // records CUPTI dropped since the last such record
};
static_assert(sizeof(GpuDroppedRecord) == 24);

// A device of the process as CUPTI describes it (its CUPTI_ACTIVITY_KIND_DEVICE record), once per device
// CUPTI reports, in the records of the thread that received it. A kind of its own rather than a
// GpuActivity: a reader that predates it skips it as a record of an unknown kind, where an unknown
// GpuActivity aux would make it call the record damaged. Sizes are CUPTI's units. aux = 0; the
// device's name follows, name_bytes long.
struct GpuDeviceRecord {
  RecordHeader header;          // kind = kGpuDevice, aux = 0
  uint64_t global_memory_bytes;
  uint64_t memory_bandwidth;    // kB/s, as CUPTI gives it
  uint32_t device;              // CUPTI's device id, the CUDA ordinal in the process
  uint32_t compute_major;
  uint32_t compute_minor;
  uint32_t sm_count;
  uint32_t core_clock_khz;
  uint32_t l2_cache_bytes;
  uint32_t constant_memory_bytes;
  uint32_t threads_per_warp;
  uint32_t memcpy_engines;
  uint32_t max_ipc;
  uint32_t max_warps_per_sm;
  uint32_t max_blocks_per_sm;
  uint32_t max_shared_per_sm;
  uint32_t max_registers_per_sm;
  uint32_t max_registers_per_block;
  uint32_t max_shared_per_block;
  uint32_t max_threads_per_block;
  uint32_t max_block_dim[3];
  uint32_t max_grid_dim[3];
  uint32_t ecc_enabled;
  uint32_t flags;               // CUpti_ActivityFlag (1: concurrent kernels)
  uint32_t name_bytes;
  uint8_t uuid[16];
};
static_assert(sizeof(GpuDeviceRecord) == 144);
inline constexpr uint32_t kMaxGpuDeviceNameBytes = 256;

// The size of a GPU activity record of kind `aux`; 0 for an unknown kind.
inline constexpr uint32_t gpu_activity_bytes(uint32_t aux) {
  switch (GpuActivity(aux)) {
    case GpuActivity::kKernel: return sizeof(GpuKernelRecord);
    case GpuActivity::kMemcpy: return sizeof(GpuMemcpyRecord);
    case GpuActivity::kMemset: return sizeof(GpuMemsetRecord);
    case GpuActivity::kSync: return sizeof(GpuSyncRecord);
    case GpuActivity::kMemory: return sizeof(GpuMemoryRecord);
    case GpuActivity::kApiLink: return sizeof(GpuApiLinkRecord);
    case GpuActivity::kDropped: return sizeof(GpuDroppedRecord);
    case GpuActivity::kGraph: return sizeof(GpuGraphRecord);
  }
  return 0;
}

// Backtrace classes: ApiClass's values for CUDA calls, then the OS runtime's calls.
inline constexpr uint32_t kBacktraceClasses = 5;
inline constexpr uint32_t kBacktraceClassOsrt = 4;
inline constexpr uint64_t kBacktraceOff = UINT64_MAX;  // a threshold no call reaches

// A loaded object of the process, sent when the process first claims a ring and whenever the shim
// finds the set of loaded objects changed (it looks after dlsym, dlclose and driver lookups, before a
// backtrace, and at exit). aux = ModuleEvent. An unload repeats the fields of the object's load record
// (base, text range, build-id, flags) but not its path, so that a reader can end the right one.
enum class ModuleEvent : uint32_t { kLoaded = 1, kUnloaded = 2 };

inline constexpr uint32_t kModuleFlagMainProgram = 1;  // the executable itself
inline constexpr uint32_t kModuleFlagDeviceCode = 2;   // carries GPU code (an .nv_fatbin section)
inline constexpr uint32_t kModuleFlagNeedsCudart = 4;  // lists a libcudart.so.* in DT_NEEDED
inline constexpr uint32_t kMaxBuildIdBytes = 32;

struct ModuleRecord {
  RecordHeader header;   // kind = kModuleMap, aux = ModuleEvent
  // When the shim found the object loaded or gone (ClockKind units in the ring, ns in the file). A
  // load is found at the latest before the first backtrace that needs it, an unload right after the
  // dlclose that did it: so a frame taken at time t lies in the object loaded last before t and not
  // unloaded by then, even where a later object reuses its addresses.
  uint64_t time;
  uint64_t base;         // load bias (dl_iterate_phdr's dlpi_addr)
  uint64_t text_start;   // the executable PT_LOAD range, load bias applied; 0, 0 when there is none
  uint64_t text_end;
  uint32_t flags;        // kModuleFlag*
  uint8_t build_id_bytes;  // GNU build-id length (0 when the object has none), at most kMaxBuildIdBytes
  uint8_t reserved[3];
  uint8_t build_id[kMaxBuildIdBytes];
  uint32_t path_bytes;   // bytes of path, no terminator; header.size covers it rounded up to 8
  uint32_t reserved2;
  char path[];
};
static_assert(sizeof(ModuleRecord) == 88);
inline constexpr uint32_t kMaxModulePathBytes = kMaxRecordBytes - sizeof(ModuleRecord);

// NVTX annotations (the shim is the program's NVTX tool, loaded through NVTX_INJECTION64_PATH).
// aux = NvtxEvent. Ranges and marks are recorded while the nvtx domain is captured; the records that
// name things (domains, registered strings, categories, threads, CUDA resources) whenever the thread
// has a ring, since later events refer to them.
enum class NvtxEvent : uint32_t {
  kPush = 1,            // a thread range opens on this thread (nvtxRangePush*, nvtxDomainRangePushEx)
  kPop = 2,             // the innermost open thread range of `domain` on this thread closes
  kStart = 3,           // a process range `range_id` opens (nvtxRangeStart*, nvtxDomainRangeStartEx)
  kEnd = 4,             // process range `range_id` closes, on any thread of the process
  kMark = 5,            // an instant (nvtxMark*, nvtxDomainMarkEx)
  kDomainCreate = 6,    // domain id `domain` is named text
  kRegisterString = 7,  // registered string `string_id` of `domain` is text
  kNameCategory = 8,    // category `category` of `domain` is named text
  kNameThread = 9,      // OS thread `range_id` (a tid) is named text (nvtxNameOsThread*)
  kNameResource = 10,   // CUDA object `range_id` of NvtxResource `category` is named text
  // The NVTX payload extension's registrations (nvtxPayloadSchemaRegister, nvtxPayloadEnumRegister),
  // which later extended payloads are decoded by: one record for the schema or enum, then one per
  // entry. `string_id` is the schema id, unique within `domain`; `category` an entry's index; the
  // text a name (empty when none was given); the payload bytes hold NvtxSchemaInfo, NvtxSchemaEntry,
  // NvtxEnumInfo or NvtxEnumEntry.
  kPayloadSchema = 11,
  kPayloadSchemaEntry = 12,
  kPayloadEnum = 13,
  kPayloadEnumEntry = 14,
};

// The payload bytes of the payload extension's registration records (NvtxEvent kPayloadSchema ..
// kPayloadEnumEntry), the program's values as given (NVTX_PAYLOAD_SCHEMA_TYPE_*, _ENTRY_TYPE_*, ...).
struct NvtxSchemaInfo {
  uint64_t type;         // NVTX_PAYLOAD_SCHEMA_TYPE_*: static (1), dynamic (2), ...
  uint64_t flags;
  uint64_t static_size;  // 0: not given (the entries' layout decides)
  uint64_t entries;      // entry records that follow (the program's count, even where more than kept)
};
struct NvtxSchemaEntry {
  uint64_t type;    // NVTX_PAYLOAD_ENTRY_TYPE_*, or the id of a registered enum or schema
  uint64_t flags;   // NVTX_PAYLOAD_ENTRY_FLAG_*
  uint64_t offset;  // in the payload; 0 after the first entry: by natural alignment
  uint64_t array_or_union_detail;  // a fixed array's or string's length
};
struct NvtxEnumInfo {
  uint64_t size;     // bytes of a value of the enum
  uint64_t entries;  // entry records that follow
};
struct NvtxEnumEntry {
  uint64_t value;
  uint64_t is_flag;
};
static_assert(sizeof(NvtxSchemaInfo) == 32 && sizeof(NvtxSchemaEntry) == 32 && sizeof(NvtxEnumInfo) == 16 &&
              sizeof(NvtxEnumEntry) == 16);

// The kind of a named CUDA object (kNameResource).
enum class NvtxResource : uint32_t {
  kCuDevice = 1,
  kCuContext = 2,
  kCuStream = 3,
  kCuEvent = 4,
  kCudaDevice = 5,
  kCudaStream = 6,
  kCudaEvent = 7,
};

enum class NvtxMessage : uint8_t { kNone = 0, kText = 1, kRegistered = 2 };
// As nvtxEventAttributes_t says them (NVTX_PAYLOAD_TYPE_*, NVTX_COLOR_*): 0 = none.
// kExtension: NVTX's extended payload (NVTX_PAYLOAD_TYPE_EXT): `payload` is its schema id, the bytes
// follow the text.
enum class NvtxPayload : uint8_t {
  kNone = 0, kUnsigned64 = 1, kSigned64 = 2, kDouble = 3, kUnsigned32 = 4, kSigned32 = 5, kFloat = 6, kExtension = 7
};
// Why a record's payload bytes are fewer than the program gave (NvtxRecord::payload_cut, a set).
inline constexpr uint8_t kNvtxPayloadCutBytes = 1;   // longer than kMaxNvtxPayloadBytes: the rest left out
inline constexpr uint8_t kNvtxPayloadCutMore = 2;    // more payloads than the first: the others left out
inline constexpr uint8_t kNvtxPayloadCutEntries = 4; // a registration's names or entries cut

struct NvtxRecord {
  RecordHeader header;   // kind = kNvtx, aux = NvtxEvent
  uint64_t time;         // ClockKind units in the ring, ns in the file
  uint64_t range_id;     // kStart/kEnd: the range; kNameThread: the tid; kNameResource: the handle
  uint64_t payload;      // the payload's bits as given (a double stays a double); kExtension: its schema id
  uint64_t string_id;    // message_type kRegistered, and kRegisterString: the registered string's id
  uint32_t domain;       // 0 = the default domain; others numbered per process by the shim
  uint32_t category;     // 0 = none; kNameResource: NvtxResource
  uint32_t color;        // ARGB when has_color
  uint32_t text_bytes;   // bytes of text that follow (UTF-8, no terminator, possibly cut)
  uint8_t has_color;
  uint8_t payload_type;  // NvtxPayload
  uint8_t message_type;  // NvtxMessage
  uint8_t text_cut;      // the program's text was longer than kMaxNvtxTextBytes
  uint16_t payload_bytes;  // bytes after the text: an extended payload, or a registration's values
  uint8_t payload_cut;     // kNvtxPayloadCut*
  uint8_t reserved;
  char text[];             // text_bytes of text, then payload_bytes of payload
};
static_assert(sizeof(NvtxRecord) == 64);
// Longer messages are cut (and flagged); an annotation is a label, and this keeps a record small.
inline constexpr uint32_t kMaxNvtxTextBytes = 1024;
// Extended payloads are cut the same way: a payload describes a call (sizes, ids), not its data.
inline constexpr uint32_t kMaxNvtxPayloadBytes = 1024;
static_assert(sizeof(NvtxRecord) + kMaxNvtxTextBytes + kMaxNvtxPayloadBytes <= kMaxRecordBytes);

// A capture range of one process opened or closed (`-c cudaProfilerApi|nvtx`). aux = CaptureEvent.
// Each process gates itself: its own cudaProfilerStart/Stop or NVTX range open and close its ranges.
enum class CaptureEvent : uint32_t { kBegin = 1, kEnd = 2 };
enum class CaptureReason : uint32_t { kProfilerApi = 1, kNvtx = 2 };

struct CaptureStateRecord {
  RecordHeader header;  // kind = kCaptureState, aux = CaptureEvent
  uint64_t time;        // ClockKind units in the ring, ns in the file
  uint32_t range;       // 1 for the process's first range, 2 for its second, ...
  uint32_t reason;      // CaptureReason
};
static_assert(sizeof(CaptureStateRecord) == 24);

inline constexpr uint32_t align_record(uint32_t bytes) {
  return (bytes + kRecordAlign - 1) & ~(kRecordAlign - 1);
}

// ---------------------------------------------------------------------------------------------
// The record kinds, one row each: what the ring check, the recorder's time conversion and the
// reader's check of a trace take from a kind. A kind added to RecordKind without its row here fails
// to compile (the row's kind must equal its index), as does a switch over kinds that forgets it.
// ---------------------------------------------------------------------------------------------

// How the bytes after a record's fixed part are counted.
enum class RecordTail : uint8_t {
  kNone,        // a fixed size
  kAuxUnits,    // header.aux units of unit_bytes
  kFieldUnits,  // a count field's units of unit_bytes
  kFieldText,   // a u32 field's byte length of text, the record rounded up to kRecordAlign
  kByAux,       // a size per header.aux (gpu_activity_bytes)
  kNvtx,        // NvtxRecord: text_bytes of text, then payload_bytes, rounded up to kRecordAlign
  kBacktrace,   // header.aux native frames, then the python_frames field's PythonFrames
};

struct RecordKindInfo {
  RecordKind kind;
  const char* what;       // "an api call record": how messages about a damaged trace name it
  const char* tail_name;  // what follows the fixed part ("arguments"); nullptr for nothing
  uint16_t fixed_bytes;   // its struct
  RecordTail tail;
  uint8_t count_offset;   // kFieldUnits, kFieldText: where the count is
  uint8_t count_bytes;    // and its width (1 or 4)
  uint8_t unit_bytes;     // kAuxUnits, kFieldUnits: bytes per unit
  uint32_t min_count, max_count;  // the count's range
  uint32_t min_aux, max_aux;      // header.aux's range
  // Where a time in the session clock's units lies in a ring record, converted to ns by the
  // recorder; kNoRingTime for a kind without one (already ns, or no time).
  uint16_t ring_time_offset;
  bool from_producers;  // a shim writes it into rings; the others come from the recorder alone
};
inline constexpr uint16_t kNoRingTime = UINT16_MAX;

inline constexpr RecordKindInfo kRecordKinds[] = {
    {RecordKind::kInvalid, "a record of kind 0", nullptr, 0, RecordTail::kNone, 0, 0, 0, 0, 0, 0, 0, kNoRingTime, false},
    {RecordKind::kPad, "a pad record", nullptr, sizeof(RecordHeader), RecordTail::kNone, 0, 0, 0, 0, 0, 0, UINT32_MAX,
     kNoRingTime, false},
    // begin and end are both converted; encode_call takes them itself.
    {RecordKind::kApiCall, "an api call record", "arguments", sizeof(ApiCallRecord), RecordTail::kFieldUnits,
     offsetof(ApiCallRecord, arg_count), 1, 8, 0, kMaxApiArgs, 0, UINT32_MAX, kNoRingTime, true},
    {RecordKind::kString, "a string record", "text", sizeof(StringRecord), RecordTail::kFieldText,
     offsetof(StringRecord, length), 4, 1, 0, kMaxStringBytes, 0, UINT32_MAX, kNoRingTime, true},
    {RecordKind::kThreadStart, "a thread start record", nullptr, sizeof(ThreadStartRecord), RecordTail::kNone, 0, 0, 0, 0,
     0, 0, UINT32_MAX, offsetof(ThreadStartRecord, time), true},
    {RecordKind::kBacktrace, "a backtrace record", "frames", sizeof(BacktraceRecord), RecordTail::kBacktrace,
     offsetof(BacktraceRecord, python_frames), 4, 16, 0, kMaxPythonFrames, 0, kMaxBacktraceFrames,
     offsetof(BacktraceRecord, call_begin), true},
    {RecordKind::kModuleMap, "a module record", "path", sizeof(ModuleRecord), RecordTail::kFieldText,
     offsetof(ModuleRecord, path_bytes), 4, 1, 0, kMaxModulePathBytes, uint32_t(ModuleEvent::kLoaded),
     uint32_t(ModuleEvent::kUnloaded), offsetof(ModuleRecord, time), true},
    {RecordKind::kNvtx, "an NVTX record", "text", sizeof(NvtxRecord), RecordTail::kNvtx,
     offsetof(NvtxRecord, text_bytes), 4, 1, 0, kMaxNvtxTextBytes, 0, UINT32_MAX, offsetof(NvtxRecord, time), true},
    // Times are ns already: CUPTI takes the trace's clock.
    {RecordKind::kGpuActivity, "a GPU activity record", nullptr, sizeof(RecordHeader), RecordTail::kByAux, 0, 0, 0, 0, 0,
     uint32_t(GpuActivity::kKernel), uint32_t(GpuActivity::kGraph), kNoRingTime, true},
    {RecordKind::kCaptureState, "a capture range record", nullptr, sizeof(CaptureStateRecord), RecordTail::kNone, 0, 0,
     0, 0, 0, 0, UINT32_MAX, offsetof(CaptureStateRecord, time), true},
    // From the timer sampler, where perf events are forbidden; the recorder's own are ns already.
    {RecordKind::kCpuSample, "a CPU sample record", "frames", sizeof(CpuSampleRecord), RecordTail::kAuxUnits, 0, 0, 8,
     1, kMaxSampleFrames, 1, kMaxSampleFrames, offsetof(CpuSampleRecord, time), true},
    {RecordKind::kContextSwitch, "a context switch record", nullptr, sizeof(ContextSwitchRecord), RecordTail::kNone, 0,
     0, 0, 0, 0, uint32_t(ContextSwitch::kIn), uint32_t(ContextSwitch::kPreempted), kNoRingTime, false},
    // The sampler's record names another thread; the recorder files it there and converts its time.
    {RecordKind::kPythonSample, "a Python sample record", "frames", sizeof(PythonSampleRecord), RecordTail::kAuxUnits, 0,
     0, sizeof(PythonFrame), 1, kMaxPythonFrames, 1, kMaxPythonFrames, kNoRingTime, true},
    {RecordKind::kGpuDevice, "a GPU device record", "name", sizeof(GpuDeviceRecord), RecordTail::kFieldText,
     offsetof(GpuDeviceRecord, name_bytes), 4, 1, 0, kMaxGpuDeviceNameBytes, 0, 0, kNoRingTime, true},
};

namespace detail {
inline constexpr bool record_kinds_in_order() {
  if (std::size(kRecordKinds) != size_t(RecordKind::kKindCount)) return false;
  for (size_t i = 0; i < std::size(kRecordKinds); ++i)
    if (size_t(kRecordKinds[i].kind) != i || kRecordKinds[i].fixed_bytes % kRecordAlign) return false;
  return true;
}
}  // namespace detail
static_assert(detail::record_kinds_in_order(), "kRecordKinds has one row per RecordKind, in its order");

// nullptr for a kind of a later build.
inline const RecordKindInfo* record_kind_info(uint16_t kind) {
  return kind < std::size(kRecordKinds) ? &kRecordKinds[kind] : nullptr;
}

// The size `info`'s record at p (at least fixed_bytes long, as read) must have by its counts: 0 when
// a count or aux is out of its range. The caller has checked bytes >= info.fixed_bytes.
inline uint32_t record_bytes_by_counts(const RecordKindInfo& info, const uint8_t* p, uint32_t aux) {
  if (aux < info.min_aux || aux > info.max_aux) return 0;
  uint32_t count = 0;
  if (info.tail == RecordTail::kFieldUnits || info.tail == RecordTail::kFieldText || info.tail == RecordTail::kBacktrace ||
      info.tail == RecordTail::kNvtx) {
    if (info.count_bytes == 1) count = p[info.count_offset];
    else std::memcpy(&count, p + info.count_offset, sizeof count);
  }
  switch (info.tail) {
    case RecordTail::kNone: return info.fixed_bytes;
    case RecordTail::kAuxUnits:
      if (aux < info.min_count || aux > info.max_count) return 0;
      return info.fixed_bytes + uint32_t(info.unit_bytes) * aux;
    case RecordTail::kFieldUnits:
      if (count < info.min_count || count > info.max_count) return 0;
      return info.fixed_bytes + uint32_t(info.unit_bytes) * count;
    case RecordTail::kFieldText:
      if (count < info.min_count || count > info.max_count) return 0;
      return align_record(info.fixed_bytes + count);
    case RecordTail::kNvtx: {
      if (count < info.min_count || count > info.max_count) return 0;
      uint16_t payload = 0;
      std::memcpy(&payload, p + offsetof(NvtxRecord, payload_bytes), sizeof payload);
      if (payload > kMaxNvtxPayloadBytes) return 0;
      return align_record(info.fixed_bytes + count + payload);
    }
    case RecordTail::kByAux: return gpu_activity_bytes(aux);
    case RecordTail::kBacktrace:
      if (count > info.max_count || aux + count == 0) return 0;
      return backtrace_record_bytes(aux, count);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Session object: SessionHeader, then the slot_count RingHeaders side by side, then, from the next
// page, the slot_count rings of ring_bytes of record data each. The headers are together so that the
// pages every producer and the recorder must find backed (SIGBUS otherwise) are few: the launcher
// makes them ready with one call instead of one per slot, and each process maps a page or two of them
// rather than one page and one page table per slot.
// ---------------------------------------------------------------------------------------------

// Slot life cycle. Only the transitions below happen; each is a single atomic store or CAS.
//   kFree    -> kClaiming  producer CAS (it now owns the identity fields)
//   kClaiming-> kActive    producer store-release after writing identity and zeroing counters
//   kActive  -> kRetired   producer store-release when its thread exits (after its last push)
//   kRetired -> kFree      recorder, after draining to head and resetting head/tail/dropped
//   kActive  -> kFree      recorder, after the owning process is dead and the ring is drained
//   kClaiming-> kFree      recorder, when the claiming process died before finishing its claim
enum class SlotState : uint32_t { kFree = 0, kClaiming = 1, kActive = 2, kRetired = 3 };

struct alignas(64) RingHeader {
  // --- identity: written by the producer while kClaiming, read by the recorder after kActive ---
  std::atomic<uint32_t> state;     // SlotState
  uint32_t pid;
  uint32_t tid;
  uint32_t ppid;
  uint64_t process_start_ticks;    // field 22 of /proc/<pid>/stat: tells a live pid from a reused one
  uint64_t claim_serial;           // increases with every claim of this slot (session-wide counter)
  uint8_t identity_pad[32];

  // --- producer-owned: the next byte position to write (monotonic, never wraps) ---
  alignas(64) std::atomic<uint64_t> head;
  // Records the producer could not store. Only the producer writes it (plain load+store, no RMW).
  std::atomic<uint64_t> dropped_records;
  // Of dropped_records, those dropped because ring memory could not be backed (/dev/shm full).
  std::atomic<uint64_t> dropped_no_memory;
  // The thread's outermost recorded call still in progress, for `cutrace status --calls`: one word,
  // so that a reader never sees half of it (call_in_progress() packs it), 0 while there is none.
  // Beside `head`, whose line every recorded call writes anyway.
  std::atomic<uint64_t> call_in_progress;
  uint8_t producer_pad[32];

  // --- consumer-owned: the next byte position to read ---
  alignas(64) std::atomic<uint64_t> tail;
  uint8_t consumer_pad[56];
};
static_assert(sizeof(RingHeader) == 192);
static_assert(offsetof(RingHeader, head) == 64 && offsetof(RingHeader, tail) == 128);
static_assert(offsetof(RingHeader, call_in_progress) == 88);

// RingHeader::call_in_progress: the low 48 bits of the call's start in the session's clock in the
// top bits, the api id plus one below (kCallInProgressUnknownApi for an id that does not fit): a
// shift and an OR of a constant on the hot path. A reader takes the elapsed time as (its own clock's
// low 48 bits - the start's) modulo 2^48: right for a call up to 2^48 ticks long (26 hours of a
// 3 GHz TSC, 78 hours of nanoseconds).
inline constexpr uint32_t kCallInProgressApiBits = 16;
inline constexpr uint64_t kCallInProgressBeginMask = (uint64_t(1) << (64 - kCallInProgressApiBits)) - 1;
inline constexpr uint32_t kCallInProgressUnknownApi = 0xffff;
inline constexpr uint64_t call_in_progress(uint32_t api_id, uint64_t begin) {
  const uint64_t api = api_id + 1 < kCallInProgressUnknownApi ? api_id + 1 : kCallInProgressUnknownApi;
  return begin << kCallInProgressApiBits | api;
}
inline constexpr uint32_t call_in_progress_api(uint64_t word) { return uint32_t(word & kCallInProgressUnknownApi); }
inline constexpr uint64_t call_in_progress_begin(uint64_t word) { return word >> kCallInProgressApiBits; }

struct alignas(64) SessionHeader {
  // --- immutable after the launcher creates the session ---
  uint64_t magic;                  // kSessionMagic
  uint32_t abi_version;            // kAbiVersion
  uint32_t header_bytes;           // sizeof(SessionHeader)
  uint64_t total_bytes;            // size of the whole object; every offset is checked against it
  uint64_t slots_offset;           // start of RingHeader 0: sizeof(SessionHeader)
  uint64_t data_offset;            // start of ring 0's data: the page after the last RingHeader
  uint32_t slot_count;
  uint32_t ring_bytes;             // data bytes per ring; a power of two, >= 4 * kMaxRecordBytes
  uint32_t clock_kind;             // ClockKind
  uint32_t on_full;                // OnFull
  DomainSet trace_domains;         // domain_bit() of every domain `-t` selected

  // --- read on every intercepted call: its own cache line ---
  // The domains recorded now: trace_domains while capturing, 0 while not. A wrapper tests its own
  // domain's bit, so a domain not selected costs the same one load as capture being off.
  alignas(64) std::atomic<DomainSet> capture_domains;
  // OS runtime calls (-t osrt) shorter than this are not recorded; in the session clock's units (TSC
  // ticks or ns), so that the wrapper compares its two timestamps without converting. Written before
  // the program runs: by the launcher for a nanosecond clock, by the recorder once it has calibrated
  // the TSC (osrt_threshold_ns says what was asked).
  uint64_t osrt_threshold;
  // The smallest backtrace threshold of the CUDA classes (backtrace_threshold[0..3]), in the same
  // units: a call at least this long looks up its own class's threshold, out of line. kBacktraceOff
  // when no CUDA backtraces were asked for, so the test costs one comparison.
  uint64_t backtrace_min_threshold;
  uint8_t capture_pad[40];

  // --- rarely written, shared by all producers ---
  alignas(64) uint32_t launcher_pid;  // immutable after the launcher creates the session
  uint32_t launcher_reserved;
  std::atomic<uint64_t> next_claim_serial;
  std::atomic<uint64_t> lost_no_slot;       // records lost because every slot was taken
  std::atomic<uint32_t> processes_attached; // processes whose shim mapped this session
  std::atomic<uint32_t> recorder_pid;       // set by the recorder once it runs
  std::atomic<uint32_t> shutdown_requested; // set by the launcher: drain everything and finish
  // An idle recorder naps on this word (a futex). Whoever needs it to look now, rather than at the end
  // of its nap, bumps the word and wakes it (wake_recorder): a thread that claimed a ring, the
  // launcher asking for shutdown. So a recorder with no ring in use can nap long.
  std::atomic<uint32_t> recorder_wake;
  // Set by the launcher before shutdown_requested with --wait primary: processes the command started
  // that were still running, whose later calls the trace cannot have.
  std::atomic<uint32_t> processes_cut_off;
  // Set by a process whose capture range ended under --capture-range-end stop-shutdown or
  // repeat-shutdown: the launcher ends the program (--kill) and the session.
  std::atomic<uint32_t> capture_shutdown;
  // -s cpu where perf events are forbidden: each thread that claims a ring samples itself this many
  // times per second of its CPU time, with a timer signal (kTimerSampleSignal); 0: no such sampling.
  uint32_t timer_sampling_hz;
  uint64_t osrt_threshold_ns;  // --osrt-threshold, as the launcher was given it

  // Backtraces of slow calls, per backtrace class (ApiClass, then kBacktraceClassOsrt): the threshold
  // in the session clock's units (the launcher's nanoseconds, converted by the recorder for a TSC
  // clock, as osrt_threshold), and as asked; kBacktraceOff: never.
  alignas(64) uint64_t backtrace_threshold[kBacktraceClasses];
  uint64_t backtrace_threshold_ns[kBacktraceClasses];
  uint32_t backtrace_depth_cuda;  // frames kept of a CUDA call's stack, at most kMaxBacktraceFrames
  uint32_t backtrace_depth_osrt;  // of an OS runtime call's (--osrt-backtrace-depth)
  // Unused (once: processes that could not load libunwind.so.8; the shim now carries its own unwinder),
  // kept so that the fields after it stay where they are.
  uint32_t reserved_was_backtrace_unavailable;
  // Python frames kept with a stack taken in a CPython thread (--python-backtrace), at most
  // kMaxPythonFrames; 0: none.
  uint32_t backtrace_depth_python;
  // --python-sampling: samples per second of the Python stacks of every thread of a CPython process
  // (a sampler thread in the process, which takes the GIL to read them); 0: none.
  uint32_t python_sampling_hz;
  // Timer samples not taken because the signal came while the thread was inside cutrace (writing a
  // record, taking a stack): counted, not lost silently.
  std::atomic<uint64_t> timer_samples_skipped;
  // kGpuActivity* bits: GPU activity through CUPTI (-t cuda), and device memory usage with it
  // (--cuda-memory-usage true).
  uint32_t gpu_activity;
  // The recorder's kApiTableHash (api_table.h), written before the program starts: a shim of another
  // build, whose api ids would name other functions, stays out of the session and counts itself in
  // foreign_shims, which the recorder warns about. 0: not known (a session made without a recorder).
  uint32_t api_table_hash;
  std::atomic<uint32_t> foreign_shims;
  // The verdict of the last CUPTI trial (preload/cupti_trial.h), for the session's other processes:
  // a hash of the driver and CUPTI tried, with 1 (passes) or 2 (fails) in its low two bits; 0: none.
  std::atomic<uint32_t> cupti_trial;

  // The session's recording window on CLOCK_MONOTONIC, in ns, as the launcher opened it after -y and
  // closed it after -d: GPU work that CUPTI reports later is kept only where it overlaps the window.
  // 0 and 0: open from the start and never closed; opened UINT64_MAX: not open yet. Once closed, capture never opens again in the
  // session, so each process lets go of CUPTI at its next call that gives the device work.
  alignas(64) std::atomic<uint64_t> capture_opened_ns;
  std::atomic<uint64_t> capture_closed_ns;
  uint8_t window_pad[48];
};
static_assert(sizeof(SessionHeader) == 384);
inline constexpr uint32_t kGpuActivityOn = 1;
inline constexpr uint32_t kGpuActivityMemoryUsage = 2;
// --cuda-graph-trace node: every node of a graph launch as its own record (kernels, copies, sets)
// instead of one kGraph record per launch.
inline constexpr uint32_t kGpuActivityGraphNodes = 4;
// The signal of the timer sampler: a real-time one, which programs rarely use (SIGPROF is a profiler's).
inline int timer_sample_signal() { return SIGRTMAX - 4; }
static_assert(offsetof(SessionHeader, capture_domains) == 64);
static_assert(offsetof(SessionHeader, osrt_threshold) == 72);
static_assert(offsetof(SessionHeader, backtrace_min_threshold) == 80);
// Read by the end-to-end tests' check for sessions left behind (tests/e2e/profile/conftest.py).
static_assert(offsetof(SessionHeader, launcher_pid) == 128 && offsetof(SessionHeader, recorder_pid) == 156);

// Ends the recorder's nap on SessionHeader::recorder_wake. A system call: for slow paths only. Leaves
// errno alone, as it runs inside the program's calls. Not FUTEX_PRIVATE_FLAG: the recorder is another
// process mapping the same object.
inline void wake_recorder(SessionHeader* session) {
  const int saved_errno = errno;
  session->recorder_wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session->recorder_wake), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  errno = saved_errno;
}

// 16 MiB absorbs about 25 ms of a thread calling at 14 M calls/s while the recorder is kept off the
// CPU (on two busy cores it can wait for a whole scheduler slice); rings are touched only as far as a
// thread writes, so a thread that calls little costs little.
inline constexpr uint32_t kDefaultRingBytes = 16u << 20;
// A smaller ring than the default, which the ring benchmark measures beside it (what a session's rings
// are halved to in a /dev/shm of a few hundred MiB: session::plan_rings).
inline constexpr uint32_t kSmallestDefaultRingBytes = 4u << 20;
inline constexpr uint32_t kDefaultSlotCount = 256;
inline constexpr uint32_t kMinRingBytes = 4 * kMaxRecordBytes;

inline constexpr bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

// Where ring 0's data starts: past the headers, rounded up to a page, so that rings are page-aligned
// and the headers' pages hold nothing else.
inline constexpr uint64_t kSessionPageBytes = 4096;
inline constexpr uint64_t session_data_offset(uint32_t slot_count) {
  return (sizeof(SessionHeader) + uint64_t(slot_count) * sizeof(RingHeader) + kSessionPageBytes - 1) /
         kSessionPageBytes * kSessionPageBytes;
}
inline constexpr uint64_t session_bytes(uint32_t slot_count, uint32_t ring_bytes) {
  return session_data_offset(slot_count) + uint64_t(slot_count) * ring_bytes;
}

// Checks a mapped header against the object's real size; both sides call it before touching a slot.
inline bool session_layout_valid(const SessionHeader* h, uint64_t mapped_bytes) {
  if (mapped_bytes < sizeof(SessionHeader)) return false;
  if (h->magic != kSessionMagic || h->abi_version != kAbiVersion) return false;
  if (h->header_bytes != sizeof(SessionHeader) || h->total_bytes != mapped_bytes) return false;
  if (!is_power_of_two(h->ring_bytes) || h->ring_bytes < kMinRingBytes) return false;
  if (h->slots_offset != sizeof(SessionHeader)) return false;
  if (h->slot_count == 0 || h->data_offset != session_data_offset(h->slot_count) ||
      session_bytes(h->slot_count, h->ring_bytes) != mapped_bytes)
    return false;
  return h->clock_kind == uint32_t(ClockKind::kMonotonicNs) || h->clock_kind == uint32_t(ClockKind::kTsc);
}

// For a header that has passed session_layout_valid(); the recorder, which trusts nothing producers
// can write, computes the same from its own copy of the geometry.
inline RingHeader* slot_header(SessionHeader* s, uint32_t i) {
  return reinterpret_cast<RingHeader*>(reinterpret_cast<uint8_t*>(s) + s->slots_offset + uint64_t(i) * sizeof(RingHeader));
}
inline uint8_t* slot_data(SessionHeader* s, uint32_t i) {
  return reinterpret_cast<uint8_t*>(s) + s->data_offset + uint64_t(i) * s->ring_bytes;
}

static_assert(std::is_standard_layout_v<SessionHeader> && std::is_standard_layout_v<RingHeader>);

}  // namespace cutrace::abi
