#include "report/sqlite_export.h"

#include <sqlite3.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reader/decode.h"
#include "report/call_links.h"
#include "report/nvtx_ranges.h"
#include "report/report_support.h"
#include "report/reports.h"
#include "report/symbolizer.h"

namespace cutrace::report {
namespace {

using reader::ApiCall;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

// ENUM_NSYS_EVENT_CLASS values of the nsys schema ("SQLite Schema Event Values").
constexpr int kClassCudaRuntime = 0, kClassCudaDriver = 1, kClassOsRuntime = 27, kClassCudnn = 28, kClassCublas = 29;
// ENUM_NSYS_EVENT_TYPE values of NVTX_EVENTS.
constexpr int kNvtxMark = 34, kNvtxPushPop = 59, kNvtxStartEnd = 60, kNvtxDomainCreate = 75;

// The tables, as the nsys schema reference declares them where cutrace has the data (columns it cannot
// fill are kept, NULL or 0 as nsys exports a missing value), then cutrace's own.
constexpr const char* kSchema = R"sql(
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE ProcessStreams (globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, contentId INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL,
  nameEnum INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,
  stopTime INTEGER NOT NULL);
CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUBLAS_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, nameId INTEGER NOT NULL);
CREATE TABLE CUDNN_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, nameId INTEGER NOT NULL);
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, callchainId INTEGER);
CREATE TABLE CUDA_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL,
  unresolved INTEGER, originalIP INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE OSRT_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL,
  kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER,
  unwindMethod INTEGER, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
  gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER,
  dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL,
  bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
  correlationId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER,
  localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER,
  importedMemoryPoolProcessId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE CUTRACE_API_CALLS (start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER NOT NULL,
  nameId INTEGER NOT NULL, domain TEXT NOT NULL, depth INTEGER NOT NULL, returnValue INTEGER NOT NULL,
  result TEXT, correlationId INTEGER, callchainId INTEGER);
CREATE TABLE CUTRACE_API_ARGUMENTS (callId INTEGER NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL,
  value TEXT NOT NULL, number INTEGER);
CREATE TABLE CUTRACE_PYTHON_CALLCHAINS (id INTEGER NOT NULL, stackDepth INTEGER NOT NULL, function TEXT NOT NULL,
  file TEXT NOT NULL, line INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE CUTRACE_PROCESSES (globalPid INTEGER NOT NULL, pid INTEGER NOT NULL, ppid INTEGER NOT NULL,
  command TEXT, executable TEXT, cudaRuntimeVersion INTEGER, cudaRuntimePath TEXT, gpuActivity TEXT,
  pythonFrames TEXT);
CREATE TABLE CUTRACE_THREADS (globalTid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,
  name TEXT, priority INTEGER, recordsWritten INTEGER, recordsDropped INTEGER, recordsMalformed INTEGER);
CREATE TABLE CUTRACE_SUMMARY (name TEXT NOT NULL, value TEXT);
)sql";

struct EnumRow {
  int id;
  const char* name;
  const char* label;
};
constexpr EnumRow kEventClasses[] = {
    {kClassCudaRuntime, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"},
    {kClassCudaDriver, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"},
    {kClassOsRuntime, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OS runtime"},
    {kClassCudnn, "TRACE_PROCESS_EVENT_CUDNN", "cuDNN"},
    {kClassCublas, "TRACE_PROCESS_EVENT_CUBLAS", "cuBLAS"},
};
constexpr EnumRow kEventTypes[] = {
    {kNvtxMark, "NvtxMark", "NVTX mark"},
    {kNvtxPushPop, "NvtxPushPopRange", "NVTX push/pop range"},
    {kNvtxStartEnd, "NvtxStartEndRange", "NVTX start/end range"},
    {kNvtxDomainCreate, "NvtxDomainCreate", "NVTX domain"},
};
// CUpti_ActivityMemcpyKind's values, as nsys's ENUM_CUDA_MEMCPY_OPER names them.
constexpr EnumRow kMemcpyKinds[] = {
    {0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"},       {1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"},
    {2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"},   {3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"},
    {4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"},    {5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"},
    {6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"},  {7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"},
    {8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"}, {9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"},
    {10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"},
};
// CUpti_ActivityMemoryKind's values.
constexpr EnumRow kMemoryKinds[] = {
    {0, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"},  {1, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"},
    {2, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"},    {3, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"},
    {4, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"},      {5, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"},
    {6, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"},
    {7, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"},
};
// CUpti_ActivitySynchronizationType's values.
constexpr EnumRow kSyncTypes[] = {
    {0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"},
    {1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"},
    {2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"},
    {3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"},
    {4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"},
};
// CUpti_ActivityMemoryOperationType's values.
constexpr EnumRow kMemoryOperations[] = {
    {0, "CUDA_DEV_MEM_EVENT_OPR_UNKNOWN", "Unknown"},
    {1, "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", "Allocation"},
    {2, "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION", "Deallocation"},
};

// nsys's serialised GlobalId: hardware id and VM id (0 here) above the pid and the tid, 24 bits each.
int64_t global_tid(uint32_t pid, uint32_t tid) { return int64_t(uint64_t(pid & 0xffffff) << 24 | (tid & 0xffffff)); }
int64_t global_pid(uint32_t pid) { return int64_t(uint64_t(pid & 0xffffff) << 24); }

// One prepared INSERT, bound column by column (1-based) and stepped.
class Insert {
 public:
  Insert(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) == SQLITE_OK; }
  ~Insert() { sqlite3_finalize(stmt_); }
  Insert(const Insert&) = delete;
  Insert& operator=(const Insert&) = delete;
  bool ok() const { return ok_; }
  Insert& i(int column, int64_t v) {
    sqlite3_bind_int64(stmt_, column, v);
    return *this;
  }
  Insert& u(int column, uint64_t v) { return i(column, int64_t(v)); }
  Insert& d(int column, double v) {
    sqlite3_bind_double(stmt_, column, v);
    return *this;
  }
  Insert& t(int column, std::string_view v) {
    // SQLITE_STATIC: every row is run() right after its values are bound, while they still live.
    sqlite3_bind_text64(stmt_, column, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8);
    return *this;
  }
  Insert& null(int column) {
    sqlite3_bind_null(stmt_, column);
    return *this;
  }
  // Runs it; false when SQLite refused (a full disk), which ends the export.
  bool run() {
    const int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return rc == SQLITE_DONE;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
};

class SqliteWriter {
 public:
  SqliteWriter(TraceReader& reader, sqlite3* db, const ExportOptions& options)
      : reader_(reader),
        db_(db),
        options_(options),
        strings_(db, "INSERT INTO StringIds VALUES (?,?)"),
        runtime_(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)"),
        cublas_(db, "INSERT INTO CUBLAS_EVENTS VALUES (?,?,?,?,?)"),
        cudnn_(db, "INSERT INTO CUDNN_EVENTS VALUES (?,?,?,?,?)"),
        osrt_(db, "INSERT INTO OSRT_API VALUES (?,?,?,?,?,?,?,?)"),
        cuda_chain_(db, "INSERT INTO CUDA_CALLCHAINS VALUES (?,?,?,?,?,?)"),
        osrt_chain_(db, "INSERT INTO OSRT_CALLCHAINS VALUES (?,?,?,NULL,NULL,?,NULL,?,NULL,?)"),
        python_chain_(db, "INSERT INTO CUTRACE_PYTHON_CALLCHAINS VALUES (?,?,?,?,?)"),
        calls_(db, "INSERT INTO CUTRACE_API_CALLS VALUES (?,?,?,?,?,?,?,?,?,?)"),
        arguments_(db, "INSERT INTO CUTRACE_API_ARGUMENTS VALUES (?,?,?,?,?)"),
        kernel_(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,NULL,?,?,?,?,?,?,NULL,NULL,?,?,?,?,?,?,?,?,?,"
                    "0,0,0,NULL,NULL,NULL)"),
        memcpy_(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,NULL,?,?,?,?,?,NULL,?,?,NULL,NULL,NULL,NULL,"
                    "NULL,NULL,NULL)"),
        memset_(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,NULL,?,?,?,?,?,NULL,?)"),
        sync_(db, "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,?,NULL,?,?,?,?,?)"),
        memory_(db, "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (?,?,?,?,?,0,?,?,?,NULL,?,NULL,NULL,NULL,NULL,NULL,"
                    "NULL)"),
        nvtx_(db, "INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?,?,?,?,?,NULL,NULL)"),
        set_correlation_(db, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = ? WHERE rowid = ?"),
        set_call_correlation_(db, "UPDATE CUTRACE_API_CALLS SET correlationId = ? WHERE rowid = ?"),
        links_(LinkDecided{this}),
        ranges_([this](const NvtxRange& r) { add_range(r); }) {}

  bool prepared() const {
    for (const Insert* s : {&strings_, &runtime_, &cublas_, &cudnn_, &osrt_, &cuda_chain_, &osrt_chain_, &python_chain_,
                            &calls_, &arguments_, &kernel_, &memcpy_, &memset_, &sync_, &memory_, &nvtx_,
                            &set_correlation_, &set_call_correlation_})
      if (!s->ok()) return false;
    return true;
  }

  bool add(const Event& ev) {
    if (!origin_known_) {
      origin_ = reader_.file_header().created_monotonic_ns;
      linked_ = trace_has_gpu_activity(reader_);
      origin_known_ = true;
    }
    switch (ev.kind) {
      case EventKind::kApiCall: return add_call(ev);
      case EventKind::kGpuActivity: return add_gpu(ev);
      case EventKind::kNvtx:
        if (ev.nvtx.type == abi::NvtxEvent::kMark) return add_mark(ev);
        ranges_.add(reader_, ev);
        return ok_;
      default: return true;
    }
  }

  // After the last event: the calls still waiting for a link, the tables of threads, processes and
  // the session, the enums.
  bool finish() {
    links_.release_all();
    if (!ok_) return false;
    return write_enums() && write_threads_and_processes() && write_session();
  }

  uint64_t calls() const { return calls_written_; }
  uint64_t gpu_rows() const { return gpu_written_; }
  uint64_t nvtx_rows() const { return nvtx_written_; }
  std::vector<std::string> notes() const { return symbolizer_.notes(); }

 private:
  // A call waiting for its CorrID (call_links.h), by its rowids in the runtime table (0: not there) and
  // in CUTRACE_API_CALLS.
  struct Pending {
    uint64_t begin, duration, order, runtime_row, call_row;
    uint32_t api, correlation;
  };
  struct LinkDecided {
    SqliteWriter* writer;
    void operator()(const Pending& p) const { writer->set_correlation(p); }
  };

  int64_t string_id(std::string_view text) {
    auto [it, added] = string_ids_.try_emplace(std::string(text), int64_t(string_ids_.size()));
    if (added) ok_ = strings_.i(1, it->second).t(2, text).run() && ok_;
    return it->second;
  }

  int64_t time(uint64_t ns) const { return int64_t(ns > origin_ ? ns - origin_ : 0); }

  bool overlaps(uint64_t begin, uint64_t end) const {
    return uint64_t(time(end)) >= options_.window_begin_ns && uint64_t(time(begin)) < options_.window_end_ns;
  }

  bool add_call(const Event& ev) {
    const ApiCall& c = ev.call;
    if (!is_shown_call(c, options_.show_internal) || !overlaps(c.begin_ns, c.end_ns)) return true;
    const reader::Thread& th = *ev.thread;
    const int64_t gtid = global_tid(th.pid, th.tid);
    const int64_t name = string_id(c.api->display_name);
    // The reader's numbering of calls, unless the trace has CUPTI's ids for its calls (then 0 until the
    // call's link gives it CUPTI's, as cuda_api_trace shows it).
    const bool linked = linked_;
    const uint32_t correlation = linked ? 0 : c.correlation;
    const int64_t chain = c.frame_count || c.python_frame_count ? add_callchain(ev) : 0;
    ++calls_written_;
    calls_.i(1, time(c.begin_ns)).i(2, time(c.end_ns)).i(3, gtid).i(4, name).t(5, reader::domain_name(c.api->domain))
        .i(6, c.depth).i(7, int64_t(c.result)).i(9, correlation);
    if (const std::string_view result = reader::result_name(*c.api, c.result); !result.empty()) calls_.t(8, result);
    if (chain) calls_.i(10, chain);
    ok_ = calls_.run() && ok_;
    const uint64_t call_row = uint64_t(sqlite3_last_insert_rowid(db_));
    for (uint32_t i = 0; i < c.arg_count; ++i) {
      // The value as the reports print it, and the recorded slot itself (an enum's number, a pointer).
      const reader::ArgValue v = reader::decode_call_arg(reader_, th, c, i);
      ok_ = arguments_.i(1, int64_t(call_row)).i(2, i).t(3, reader::arg_name(*c.api, i)).t(4, v.to_string())
                .i(5, int64_t(c.args[i])).run() && ok_;
    }
    // The nsys tables hold what nsys counts in them: the calls its reports would show.
    if (is_counted_call(c, kCudaFamily, options_.show_internal)) {
      const bool runtime = c.api->domain == abi::ApiDomain::kCudaRuntime;
      runtime_.i(1, time(c.begin_ns)).i(2, time(c.end_ns)).i(3, runtime ? kClassCudaRuntime : kClassCudaDriver)
          .i(4, gtid).i(5, correlation).i(6, name).i(7, int64_t(c.result));
      if (chain && c.frame_count) runtime_.i(8, chain);
      ok_ = runtime_.run() && ok_;
      // A call that gives the device no work keeps CorrID 0, as in cuda_api_trace.
      if (linked && c.api->api_class != abi::ApiClass::kOther)
        links_.add(uint64_t(th.pid) << 32 | th.tid, Pending{c.begin_ns, c.duration_ns(), ++pending_,
                                                            uint64_t(sqlite3_last_insert_rowid(db_)), call_row, c.api_id, 0});
    } else if (linked && c.api->api_class != abi::ApiClass::kOther &&
               (abi::domain_bit(c.api->domain) & abi::kCudaDomains)) {
      // A CUDA call made inside another has a link of its own too (CUPTI sees every call): for the full table.
      links_.add(uint64_t(th.pid) << 32 | th.tid,
                 Pending{c.begin_ns, c.duration_ns(), ++pending_, 0, call_row, c.api_id, 0});
    }
    if (is_counted_call(c, kCublasFamily, options_.show_internal))
      ok_ = cublas_.i(1, time(c.begin_ns)).i(2, time(c.end_ns)).i(3, kClassCublas).i(4, gtid).i(5, name).run() && ok_;
    if (is_counted_call(c, kCudnnFamily, options_.show_internal))
      ok_ = cudnn_.i(1, time(c.begin_ns)).i(2, time(c.end_ns)).i(3, kClassCudnn).i(4, gtid).i(5, name).run() && ok_;
    if (is_counted_call(c, kOsrtFamily, options_.show_internal)) {
      osrt_.i(1, time(c.begin_ns)).i(2, time(c.end_ns)).i(3, kClassOsRuntime).i(4, gtid).i(5, name)
          .i(6, int64_t(c.result)).i(7, c.depth);
      if (chain && c.frame_count) osrt_.i(8, chain);
      ok_ = osrt_.run() && ok_;
    }
    return ok_;
  }

  void set_correlation(const Pending& p) {
    if (p.correlation == 0) return;
    if (p.runtime_row) ok_ = set_correlation_.i(1, p.correlation).i(2, int64_t(p.runtime_row)).run() && ok_;
    ok_ = set_call_correlation_.i(1, p.correlation).i(2, int64_t(p.call_row)).run() && ok_;
  }

  // The call's stack: its native frames named from the binaries in CUDA_CALLCHAINS or OSRT_CALLCHAINS (by
  // its domain), its Python frames in CUTRACE_PYTHON_CALLCHAINS, under one id.
  int64_t add_callchain(const Event& ev) {
    const ApiCall& c = ev.call;
    const reader::Process& process = reader_.processes()[ev.thread->process];
    const int64_t id = ++callchains_;
    const bool osrt = c.api->domain == abi::ApiDomain::kOsRuntime;
    for (uint32_t depth = 0; depth < c.frame_count; ++depth) {
      const ResolvedAddress& where = symbolizer_.resolve(process, c.frames[depth], c.begin_ns);
      const bool named = !where.frames.empty() && !where.frames.back().function.empty();
      const int64_t symbol = string_id(named ? where.frames.back().function : raw_frame(where));
      const int64_t module = string_id(where.module);
      Insert& chain = osrt ? osrt_chain_ : cuda_chain_;
      ok_ = chain.i(1, id).i(2, symbol).i(3, module).i(4, !named).u(5, c.frames[depth]).i(6, depth).run() && ok_;
    }
    for (uint32_t depth = 0; depth < c.python_frame_count; ++depth) {
      const abi::PythonFrame& f = c.python_frames[depth];
      auto it = process.python_functions.find(f.function);
      const std::string function = it == process.python_functions.end() ? "python function " + reader::hex(f.function)
                                                                          : it->second.name;
      const std::string file = it == process.python_functions.end() ? std::string() : it->second.file;
      ok_ = python_chain_.i(1, id).i(2, depth).t(3, function).t(4, file).u(5, abi::python_frame_line(f)).run() && ok_;
    }
    return id;
  }

  bool add_gpu(const Event& ev) {
    const reader::GpuActivityEvent& g = ev.gpu;
    if (g.kind == abi::GpuActivity::kApiLink) {
      links_.link(uint64_t(ev.thread->pid) << 32 | g.tid, g.start_ns, g.api_id, g.correlation);
      return ok_;
    }
    if (g.kind == abi::GpuActivity::kDropped || !overlaps(g.start_ns, g.end_ns)) return true;
    const int64_t gpid = global_pid(ev.thread->pid);
    const int64_t device = g.device == UINT32_MAX ? 0 : g.device;
    const int64_t stream = g.stream == UINT32_MAX ? 0 : g.stream;
    ++gpu_written_;
    switch (g.kind) {
      case abi::GpuActivity::kKernel: {
        const std::string demangled = g.name ? g.name->demangled : std::string("[unnamed kernel]");
        kernel_.i(1, time(g.start_ns)).i(2, time(g.end_ns)).i(3, device).i(4, g.context).i(5, stream)
            .i(6, g.correlation).i(7, gpid).i(8, string_id(demangled)).i(9, string_id(base_kernel_name(demangled)));
        if (g.name) kernel_.i(10, string_id(g.name->mangled));
        kernel_.i(11, g.registers_per_thread).i(12, g.grid[0]).i(13, g.grid[1]).i(14, g.grid[2]).i(15, g.block[0])
            .i(16, g.block[1]).i(17, g.block[2]).i(18, g.static_shared_bytes).i(19, g.dynamic_shared_bytes);
        return ok_ = kernel_.run() && ok_;
      }
      case abi::GpuActivity::kMemcpy:
        return ok_ = memcpy_.i(1, time(g.start_ns)).i(2, time(g.end_ns)).i(3, device).i(4, g.context).i(5, stream)
                         .i(6, g.runtime_correlation ? g.runtime_correlation : g.correlation).i(7, gpid).u(8, g.bytes)
                         .i(9, g.copy_kind).i(10, g.src_kind).i(11, g.dst_kind).run() && ok_;
      case abi::GpuActivity::kMemset:
        return ok_ = memset_.i(1, time(g.start_ns)).i(2, time(g.end_ns)).i(3, device).i(4, g.context).i(5, stream)
                         .i(6, g.correlation).i(7, gpid).i(8, g.value).u(9, g.bytes).i(10, g.memory_kind).run() && ok_;
      case abi::GpuActivity::kSync:
        return ok_ = sync_.i(1, time(g.start_ns)).i(2, time(g.end_ns)).i(3, device).i(4, g.context).i(5, stream)
                         .i(6, g.correlation).i(7, gpid).i(8, g.sync_type)
                         .i(9, g.event == UINT32_MAX ? -1 : int64_t(g.event)).run() && ok_;
      case abi::GpuActivity::kMemory:
        return ok_ = memory_.i(1, time(g.start_ns)).i(2, gpid).i(3, device).i(4, g.context).u(5, g.address)
                         .u(6, g.bytes).i(7, g.memory_kind).i(8, g.operation).i(9, g.correlation).run() && ok_;
      case abi::GpuActivity::kApiLink:
      case abi::GpuActivity::kDropped:
        return true;
    }
    return true;
  }

  bool add_mark(const Event& ev) {
    const reader::NvtxEvent& n = ev.nvtx;
    if (!overlaps(n.time_ns, n.time_ns)) return true;
    const int64_t gtid = global_tid(ev.thread->pid, ev.thread->tid);
    nvtx_.i(1, time(n.time_ns)).null(2).i(3, kNvtxMark).null(4);
    if (n.category) nvtx_.i(5, n.category);
    if (n.color) nvtx_.i(6, int64_t(*n.color));
    nvtx_.t(7, n.text).i(8, gtid).null(9).i(10, n.domain);
    bind_payload(n.payload_type, n.payload);
    ++nvtx_written_;
    return ok_ = nvtx_.run() && ok_;
  }

  void bind_payload(abi::NvtxPayload type, uint64_t bits) {
    switch (type) {
      case abi::NvtxPayload::kNone: break;
      case abi::NvtxPayload::kUnsigned64: nvtx_.i(11, int64_t(bits)); break;
      case abi::NvtxPayload::kSigned64: nvtx_.i(12, int64_t(bits)); break;
      case abi::NvtxPayload::kDouble: {
        double v;
        std::memcpy(&v, &bits, sizeof v);
        nvtx_.d(13, v);
        break;
      }
      case abi::NvtxPayload::kUnsigned32: nvtx_.i(14, int64_t(uint32_t(bits))); break;
      case abi::NvtxPayload::kSigned32: nvtx_.i(15, int32_t(uint32_t(bits))); break;
      case abi::NvtxPayload::kFloat: {
        float v;
        const uint32_t low = uint32_t(bits);
        std::memcpy(&v, &low, sizeof v);
        nvtx_.d(16, v);
        break;
      }
    }
  }

  void add_range(const NvtxRange& r) {
    if (!ok_ || !overlaps(r.start_ns, r.end_ns)) return;
    nvtx_.i(1, time(r.start_ns)).i(2, time(r.end_ns)).i(3, r.push_pop ? kNvtxPushPop : kNvtxStartEnd);
    if (!r.push_pop) nvtx_.u(4, r.id);
    nvtx_.t(7, r.message).i(8, global_tid(r.thread->pid, r.thread->tid));
    if (r.end_thread) nvtx_.i(9, global_tid(r.end_thread->pid, r.end_thread->tid));
    nvtx_.i(10, r.domain);
    ++nvtx_written_;
    ok_ = nvtx_.run() && ok_;
  }

  bool write_enum(const char* table, const EnumRow* rows, size_t count) {
    Insert insert(db_, (std::string("INSERT INTO ") + table + " VALUES (?,?,?)").c_str());
    for (size_t i = 0; i < count; ++i) ok_ = insert.ok() && insert.i(1, rows[i].id).t(2, rows[i].name).t(3, rows[i].label).run() && ok_;
    return ok_;
  }

  bool write_enums() {
    return write_enum("ENUM_NSYS_EVENT_CLASS", kEventClasses, std::size(kEventClasses)) &&
           write_enum("ENUM_NSYS_EVENT_TYPE", kEventTypes, std::size(kEventTypes)) &&
           write_enum("ENUM_CUDA_MEMCPY_OPER", kMemcpyKinds, std::size(kMemcpyKinds)) &&
           write_enum("ENUM_CUDA_MEM_KIND", kMemoryKinds, std::size(kMemoryKinds)) &&
           write_enum("ENUM_CUPTI_SYNC_TYPE", kSyncTypes, std::size(kSyncTypes)) &&
           write_enum("ENUM_CUDA_DEV_MEM_EVENT_OPER", kMemoryOperations, std::size(kMemoryOperations));
  }

  bool write_threads_and_processes() {
    Insert names(db_, "INSERT INTO ThreadNames VALUES (?,?,?)");
    Insert threads(db_, "INSERT INTO CUTRACE_THREADS VALUES (?,?,?,?,?,?,?,?)");
    Insert processes(db_, "INSERT INTO CUTRACE_PROCESSES VALUES (?,?,?,?,?,?,?,?,?)");
    Insert streams(db_, "INSERT INTO ProcessStreams VALUES (?,?,?)");
    if (!names.ok() || !threads.ok() || !processes.ok() || !streams.ok()) return ok_ = false;
    for (uint32_t i = 0; reader_.thread(i) != nullptr; ++i) {
      const reader::Thread& th = *reader_.thread(i);
      const int64_t gtid = global_tid(th.pid, th.tid);
      if (!th.name.empty()) {
        names.i(1, string_id(th.name)).i(3, gtid);
        if (th.priority >= 0) names.i(2, th.priority);
        ok_ = names.run() && ok_;
      }
      threads.i(1, gtid).i(2, th.pid).i(3, th.tid).t(4, th.name);
      if (th.priority >= 0) threads.i(5, th.priority);
      if (th.has_stats) threads.u(6, th.records_written).u(7, th.records_dropped).u(8, th.records_malformed);
      ok_ = threads.run() && ok_;
    }
    for (const reader::Process& p : reader_.processes()) {
      // A domain's name, as nsys gives it: a row of its own that range rows join by domainId.
      for (const auto& [domain, name] : p.nvtx_domains) {
        nvtx_.i(1, 0).i(3, kNvtxDomainCreate).t(7, name).i(8, global_pid(p.pid)).i(10, domain);
        ok_ = nvtx_.run() && ok_;
      }
      processes.i(1, global_pid(p.pid)).i(2, p.pid).i(3, p.ppid).t(4, p.command).t(5, p.exe);
      if (p.cuda_runtime_version) processes.i(6, p.cuda_runtime_version).t(7, p.cuda_runtime_path);
      if (p.gpu_status_code >= 0) processes.t(8, p.gpu_status);
      if (p.python_frames_code >= 0) processes.t(9, p.python_frames_status);
      ok_ = processes.run() && ok_;
    }
    return ok_;
  }

  bool write_session() {
    const format::FileHeader& h = reader_.file_header();
    Insert start(db_, "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?,?,?)");
    char utc[64] = "", local[64] = "";
    const time_t seconds = time_t(h.created_realtime_ns / 1000000000);
    struct tm tm_utc, tm_local;
    if (gmtime_r(&seconds, &tm_utc)) std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%S", &tm_utc);
    if (localtime_r(&seconds, &tm_local)) std::strftime(local, sizeof local, "%Y-%m-%dT%H:%M:%S", &tm_local);
    ok_ = start.ok() && start.u(1, h.created_realtime_ns).t(2, utc).t(3, local).run() && ok_;

    Insert capture(db_, "INSERT INTO META_DATA_CAPTURE VALUES (?,?)");
    for (const auto& [name, value] : reader_.metadata()) ok_ = capture.ok() && capture.t(1, name).t(2, value).run() && ok_;
    Insert summary(db_, "INSERT INTO CUTRACE_SUMMARY VALUES (?,?)");
    for (const auto& [name, value] : reader_.summary()) ok_ = summary.ok() && summary.t(1, name).t(2, value).run() && ok_;
    const reader::Status& status = reader_.status();
    ok_ = summary.t(1, "trace.state").t(2, status.describe()).run() && ok_;

    Insert env(db_, "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0,'',?,?,?)");
    int name_enum = 0;
    for (const char* key : {"host", "rank", "command", "cwd"})
      if (const std::string* value = reader_.metadata_value(key))
        ok_ = env.ok() && env.t(1, key).i(2, name_enum++).t(3, *value).run() && ok_;

    // The session: from the file's creation to the last end the recorder saw.
    uint64_t stop = 0;
    if (const std::string* end = reader_.metadata_value("end.monotonic_ns")) stop = std::strtoull(end->c_str(), nullptr, 10);
    Insert details(db_, "INSERT INTO ANALYSIS_DETAILS VALUES (0,?,0,?)");
    ok_ = details.ok() && details.i(1, time(stop)).i(2, time(stop)).run() && ok_;

    Insert meta(db_, "INSERT INTO META_DATA_EXPORT VALUES (?,?)");
    for (const auto& [name, value] : {std::pair<const char*, std::string>{"EXPORT_SCHEMA_VERSION", kNsysSchemaVersion},
                                      {"EXPORT_PRODUCT", "cutrace"},
                                      {"EXPORT_PRODUCT_VERSION", CUTRACE_VERSION_STRING},
                                      {"EXPORT_TRACE_FORMAT_VERSION", std::to_string(h.format_version)},
                                      {"EXPORT_TIME_ORIGIN", "ns since the session start (TARGET_INFO_SESSION_START_TIME)"}})
      ok_ = meta.ok() && meta.t(1, name).t(2, value).run() && ok_;
    return ok_;
  }

  TraceReader& reader_;
  sqlite3* db_;
  ExportOptions options_;
  uint64_t origin_ = 0;
  bool origin_known_ = false;
  bool linked_ = false;  // the trace has GPU activity's API links (CorrIDs from CUPTI)
  bool ok_ = true;
  std::unordered_map<std::string, int64_t> string_ids_;
  Insert strings_, runtime_, cublas_, cudnn_, osrt_, cuda_chain_, osrt_chain_, python_chain_, calls_, arguments_;
  Insert kernel_, memcpy_, memset_, sync_, memory_, nvtx_, set_correlation_, set_call_correlation_;
  CallLinks<Pending, LinkDecided> links_;
  NvtxRangeTracker ranges_;
  Symbolizer symbolizer_;
  int64_t callchains_ = 0;
  uint64_t pending_ = 0;
  uint64_t calls_written_ = 0, gpu_written_ = 0, nvtx_written_ = 0;
};

std::string sqlite_error(sqlite3* db, const std::string& path, const char* what) {
  return std::string("cannot ") + what + " " + path + " (" + (db ? sqlite3_errmsg(db) : "out of memory") + ")";
}

}  // namespace

ExportResult write_sqlite(TraceReader& reader, const std::string& path, const ExportOptions& options, std::string& error) {
  ExportResult result;
  sqlite3* raw = nullptr;
  // NOMUTEX: one thread uses the connection, and the serialised mode's locks cost a tenth of the time.
  if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    error = sqlite_error(raw, path, "create the database");
    sqlite3_close(raw);
    return result;
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  // The file is a temporary one, moved into place only when complete: no journal is needed, and one
  // transaction holds every row.
  char* message = nullptr;
  const std::string setup =
      std::string("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
                  "PRAGMA cache_size=-65536; BEGIN;") + kSchema;
  if (sqlite3_exec(db.get(), setup.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    error = "cannot write " + path + " (" + (message ? message : "?") + ")";
    sqlite3_free(message);
    return result;
  }
  SqliteWriter writer(reader, db.get(), options);
  bool ok = writer.prepared();
  Event ev;
  while (ok && reader.next(ev)) ok = writer.add(ev);
  ok = ok && writer.finish();
  if (!ok || sqlite3_exec(db.get(), "COMMIT;", nullptr, nullptr, &message) != SQLITE_OK) {
    error = "cannot write " + path + " (" + (message ? message : sqlite3_errmsg(db.get())) + ")";
    sqlite3_free(message);
    return result;
  }
  result.written = reader::thousands(writer.calls()) + (writer.calls() == 1 ? " call, " : " calls, ") +
                   reader::thousands(writer.gpu_rows()) + (writer.gpu_rows() == 1 ? " GPU operation, " : " GPU operations, ") +
                   reader::thousands(writer.nvtx_rows()) + (writer.nvtx_rows() == 1 ? " NVTX event" : " NVTX events");
  result.notes = writer.notes();
  return result;
}

}  // namespace cutrace::report
