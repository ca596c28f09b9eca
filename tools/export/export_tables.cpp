#include "export/export_tables.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "reader/decode.h"
#include "model/call_links.h"
#include "model/mpi_calls.h"
#include "model/nvtx_ranges.h"
#include "model/calls.h"
#include "model/symbolizer.h"
#include "model/time_ranges.h"

namespace cutrace::exporting {

namespace {

constexpr ColumnType I = ColumnType::kInt64, R = ColumnType::kDouble, T = ColumnType::kText;
constexpr bool kNotNull = true, kNull = false;

}  // namespace

const std::vector<TableDef>& export_tables() {
  static const std::vector<TableDef> kTables = {
      {TableId::kStringIds, "StringIds", {{"id", I, kNotNull}, {"value", T, kNotNull}}, "id"},
      {TableId::kThreadNames, "ThreadNames", {{"nameId", I, kNotNull}, {"priority", I, kNull}, {"globalTid", I, kNull}},
       nullptr},
      {TableId::kProcessStreams, "ProcessStreams",
       {{"globalPid", I, kNotNull}, {"filenameId", I, kNotNull}, {"contentId", I, kNotNull}}, nullptr},
      {TableId::kSessionStartTime, "TARGET_INFO_SESSION_START_TIME",
       {{"utcEpochNs", I, kNull}, {"utcTime", T, kNull}, {"localTime", T, kNull}}, nullptr},
      {TableId::kSystemEnv, "TARGET_INFO_SYSTEM_ENV",
       {{"globalVid", I, kNull}, {"devStateName", T, kNotNull}, {"name", T, kNotNull}, {"nameEnum", I, kNotNull},
        {"value", T, kNotNull}},
       nullptr},
      // The GPUs, as CUPTI described them to the traced processes (one row per device UUID). CUPTI's
      // device record has no PCI location, chip name, LUID or PerfWorks id, nor the opt-in shared
      // memory or the multiprocessor version: those stay NULL. nsys 2026.4 adds numaNodeId, after the
      // schema version these tables follow.
      {TableId::kTargetInfoGpu, "TARGET_INFO_GPU",
       {{"vmId", I, kNotNull}, {"id", I, kNotNull}, {"name", T, kNull}, {"busLocation", T, kNull},
        {"isDiscrete", I, kNull}, {"l2CacheSize", I, kNull}, {"totalMemory", I, kNull}, {"memoryBandwidth", I, kNull},
        {"clockRate", I, kNull}, {"smCount", I, kNull}, {"pwGpuId", I, kNull}, {"uuid", T, kNull}, {"luid", I, kNull},
        {"chipName", T, kNull}, {"cuDevice", I, kNull}, {"ctxswDevPath", T, kNull}, {"ctrlDevPath", T, kNull},
        {"revision", I, kNull}, {"nodeMask", I, kNull}, {"constantMemory", I, kNull}, {"maxIPC", I, kNull},
        {"maxRegistersPerBlock", I, kNull}, {"maxShmemPerBlock", I, kNull}, {"maxShmemPerBlockOptin", I, kNull},
        {"maxShmemPerSm", I, kNull}, {"maxRegistersPerSm", I, kNull}, {"threadsPerWarp", I, kNull},
        {"asyncEngines", I, kNull}, {"maxWarpsPerSm", I, kNull}, {"maxBlocksPerSm", I, kNull},
        {"maxThreadsPerBlock", I, kNull}, {"maxBlockDimX", I, kNull}, {"maxBlockDimY", I, kNull},
        {"maxBlockDimZ", I, kNull}, {"maxGridDimX", I, kNull}, {"maxGridDimY", I, kNull}, {"maxGridDimZ", I, kNull},
        {"computeMajor", I, kNull}, {"computeMinor", I, kNull}, {"smMajor", I, kNull}, {"smMinor", I, kNull}},
       nullptr},
      // Each process's CUDA devices (CUDA_VISIBLE_DEVICES numbers them per process): which GPU row each is.
      {TableId::kTargetInfoCudaDevice, "TARGET_INFO_CUDA_DEVICE",
       {{"gpuId", I, kNull}, {"cudaId", I, kNotNull}, {"pid", I, kNotNull}, {"uuid", T, kNull},
        {"numMultiprocessors", I, kNull}},
       nullptr},
      {TableId::kAnalysisDetails, "ANALYSIS_DETAILS",
       {{"globalVid", I, kNotNull}, {"duration", I, kNotNull}, {"startTime", I, kNotNull}, {"stopTime", I, kNotNull}},
       nullptr},
      {TableId::kMetaDataCapture, "META_DATA_CAPTURE", {{"name", T, kNotNull}, {"value", T, kNull}}, nullptr},
      {TableId::kMetaDataExport, "META_DATA_EXPORT", {{"name", T, kNotNull}, {"value", T, kNull}}, nullptr},
      {TableId::kEnumEventClass, "ENUM_NSYS_EVENT_CLASS", {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}},
       "id"},
      {TableId::kEnumEventType, "ENUM_NSYS_EVENT_TYPE", {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}},
       "id"},
      {TableId::kEnumMemcpyOper, "ENUM_CUDA_MEMCPY_OPER", {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}},
       "id"},
      {TableId::kEnumMemKind, "ENUM_CUDA_MEM_KIND", {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}}, "id"},
      {TableId::kEnumSyncType, "ENUM_CUPTI_SYNC_TYPE", {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}},
       "id"},
      {TableId::kEnumDevMemEventOper, "ENUM_CUDA_DEV_MEM_EVENT_OPER",
       {{"id", I, kNotNull}, {"name", T, kNull}, {"label", T, kNull}}, "id"},
      {TableId::kRuntime, "CUPTI_ACTIVITY_KIND_RUNTIME",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"eventClass", I, kNotNull}, {"globalTid", I, kNull},
        {"correlationId", I, kNull}, {"nameId", I, kNotNull}, {"returnValue", I, kNotNull}, {"callchainId", I, kNull}},
       nullptr},
      {TableId::kCublasEvents, "CUBLAS_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"eventClass", I, kNotNull}, {"globalTid", I, kNull},
        {"nameId", I, kNotNull}},
       nullptr},
      {TableId::kCudnnEvents, "CUDNN_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"eventClass", I, kNotNull}, {"globalTid", I, kNull},
        {"nameId", I, kNotNull}},
       nullptr},
      // nsys declares callchainId NOT NULL; a call without a stack has none, so it is NULL here.
      {TableId::kOsrtApi, "OSRT_API",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"eventClass", I, kNotNull}, {"globalTid", I, kNull},
        {"nameId", I, kNotNull}, {"returnValue", I, kNotNull}, {"nestingLevel", I, kNull}, {"callchainId", I, kNull}},
       nullptr},
      // MPI calls (-t mpi) in nsys's tables, one per kind of call; commHandle is cutrace's id of the
      // communicator in its process, sizes are bytes, ranks are MPI_COMM_WORLD's (-1 MPI_ANY_SOURCE,
      // -2 MPI_PROC_NULL, -3 MPI_ROOT, -4 not known). MPI_RANKS: each process's rank in its job.
      {TableId::kMpiP2pEvents, "MPI_P2P_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"globalTid", I, kNotNull}, {"textId", I, kNotNull},
        {"commHandle", I, kNull}, {"tag", I, kNull}, {"remoteRank", I, kNull}, {"size", I, kNull}},
       nullptr},
      {TableId::kMpiCollectivesEvents, "MPI_COLLECTIVES_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"globalTid", I, kNotNull}, {"textId", I, kNotNull},
        {"commHandle", I, kNull}, {"rootRank", I, kNull}, {"size", I, kNull}, {"collSendSize", I, kNull},
        {"collRecvSize", I, kNull}},
       nullptr},
      {TableId::kMpiStartWaitEvents, "MPI_START_WAIT_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"globalTid", I, kNotNull}, {"textId", I, kNotNull}},
       nullptr},
      {TableId::kMpiOtherEvents, "MPI_OTHER_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"globalTid", I, kNotNull}, {"textId", I, kNotNull}},
       nullptr},
      {TableId::kMpiRanks, "MPI_RANKS", {{"rank", I, kNotNull}, {"globalTid", I, kNotNull}}, nullptr},
      {TableId::kCudaCallchains, "CUDA_CALLCHAINS",
       {{"id", I, kNotNull}, {"symbol", I, kNotNull}, {"module", I, kNotNull}, {"unresolved", I, kNull},
        {"originalIP", I, kNull}, {"stackDepth", I, kNotNull}},
       "id, stackDepth"},
      {TableId::kOsrtCallchains, "OSRT_CALLCHAINS",
       {{"id", I, kNotNull}, {"symbol", I, kNotNull}, {"module", I, kNotNull}, {"kernelMode", I, kNull},
        {"thumbCode", I, kNull}, {"unresolved", I, kNull}, {"specialEntry", I, kNull}, {"originalIP", I, kNull},
        {"unwindMethod", I, kNull}, {"stackDepth", I, kNotNull}},
       "id, stackDepth"},
      {TableId::kKernel, "CUPTI_ACTIVITY_KIND_KERNEL",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"greenContextId", I, kNull}, {"streamId", I, kNotNull}, {"correlationId", I, kNull}, {"globalPid", I, kNull},
        {"demangledName", I, kNotNull}, {"shortName", I, kNotNull}, {"mangledName", I, kNull}, {"launchType", I, kNull},
        {"cacheConfig", I, kNull}, {"registersPerThread", I, kNotNull}, {"gridX", I, kNotNull}, {"gridY", I, kNotNull},
        {"gridZ", I, kNotNull}, {"blockX", I, kNotNull}, {"blockY", I, kNotNull}, {"blockZ", I, kNotNull},
        {"staticSharedMemory", I, kNotNull}, {"dynamicSharedMemory", I, kNotNull}, {"localMemoryPerThread", I, kNotNull},
        {"localMemoryTotal", I, kNotNull}, {"gridId", I, kNotNull}, {"sharedMemoryExecuted", I, kNull},
        {"graphNodeId", I, kNull}, {"sharedMemoryLimitConfig", I, kNull}, {"graphId", I, kNull}},
       nullptr},
      {TableId::kMemcpy, "CUPTI_ACTIVITY_KIND_MEMCPY",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"greenContextId", I, kNull}, {"streamId", I, kNotNull}, {"correlationId", I, kNull}, {"globalPid", I, kNull},
        {"bytes", I, kNotNull}, {"copyKind", I, kNotNull}, {"deprecatedSrcId", I, kNull}, {"srcKind", I, kNull},
        {"dstKind", I, kNull}, {"srcDeviceId", I, kNull}, {"srcContextId", I, kNull}, {"dstDeviceId", I, kNull},
        {"dstContextId", I, kNull}, {"migrationCause", I, kNull}, {"graphNodeId", I, kNull},
        {"virtualAddress", I, kNull}},
       nullptr},
      {TableId::kMemset, "CUPTI_ACTIVITY_KIND_MEMSET",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"greenContextId", I, kNull}, {"streamId", I, kNotNull}, {"correlationId", I, kNull}, {"globalPid", I, kNull},
        {"value", I, kNotNull}, {"bytes", I, kNotNull}, {"graphNodeId", I, kNull}, {"memKind", I, kNull}},
       nullptr},
      {TableId::kSynchronization, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"greenContextId", I, kNull}, {"streamId", I, kNotNull}, {"correlationId", I, kNull}, {"globalPid", I, kNull},
        {"syncType", I, kNotNull}, {"eventId", I, kNotNull}},
       nullptr},
      // A graph launch as a whole (--cuda-graph-trace graph). graphExecId stays empty: CUPTI's record does
      // not say which instantiation ran.
      {TableId::kGraphTrace, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
       {{"start", I, kNotNull}, {"end", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"greenContextId", I, kNull}, {"streamId", I, kNotNull}, {"correlationId", I, kNull}, {"globalPid", I, kNull},
        {"graphId", I, kNotNull}, {"graphExecId", I, kNull}},
       nullptr},
      {TableId::kGpuMemoryUsage, "CUDA_GPU_MEMORY_USAGE_EVENTS",
       {{"start", I, kNotNull}, {"globalPid", I, kNotNull}, {"deviceId", I, kNotNull}, {"contextId", I, kNotNull},
        {"address", I, kNotNull}, {"pc", I, kNotNull}, {"bytes", I, kNotNull}, {"memKind", I, kNotNull},
        {"memoryOperationType", I, kNotNull}, {"name", T, kNull}, {"correlationId", I, kNull},
        {"localMemoryPoolAddress", I, kNull}, {"localMemoryPoolReleaseThreshold", I, kNull},
        {"localMemoryPoolSize", I, kNull}, {"localMemoryPoolUtilizedSize", I, kNull},
        {"importedMemoryPoolAddress", I, kNull}, {"importedMemoryPoolProcessId", I, kNull}},
       nullptr},
      {TableId::kNvtxEvents, "NVTX_EVENTS",
       {{"start", I, kNotNull}, {"end", I, kNull}, {"eventType", I, kNotNull}, {"rangeId", I, kNull},
        {"category", I, kNull}, {"color", I, kNull}, {"text", T, kNull}, {"globalTid", I, kNull},
        {"endGlobalTid", I, kNull}, {"textId", I, kNull}, {"domainId", I, kNull}, {"uint64Value", I, kNull},
        {"int64Value", I, kNull}, {"doubleValue", R, kNull}, {"uint32Value", I, kNull}, {"int32Value", I, kNull},
        {"floatValue", R, kNull}, {"jsonTextId", I, kNull}, {"jsonText", T, kNull}},
       nullptr},
      // CPU samples (-s cpu): COMPOSITE_EVENTS.id is the id of the sample's stack in SAMPLING_CALLCHAINS.
      // The thread's state and its cycle count are not sampled: 0, as nsys exports a missing value.
      {TableId::kCompositeEvents, "COMPOSITE_EVENTS",
       {{"id", I, kNotNull}, {"start", I, kNotNull}, {"cpu", I, kNotNull}, {"threadState", I, kNotNull},
        {"globalTid", I, kNotNull}, {"cpuCycles", I, kNotNull}},
       "id"},
      {TableId::kSamplingCallchains, "SAMPLING_CALLCHAINS",
       {{"id", I, kNotNull}, {"symbol", I, kNotNull}, {"module", I, kNotNull}, {"kernelMode", I, kNull},
        {"thumbCode", I, kNull}, {"unresolved", I, kNull}, {"specialEntry", I, kNull}, {"originalIP", I, kNull},
        {"unwindMethod", I, kNull}, {"stackDepth", I, kNotNull}},
       "id, stackDepth"},
      // Context switches (--cpuctxsw): a thread leaving its CPU (isSchedIn 0) or getting it back (1);
      // `preempted` (cutrace's) tells a thread that was still runnable from one that blocked.
      {TableId::kSchedEvents, "SCHED_EVENTS",
       {{"id", I, kNotNull}, {"start", I, kNotNull}, {"cpu", I, kNotNull}, {"isSchedIn", I, kNotNull},
        {"globalTid", I, kNotNull}, {"preempted", I, kNull}},
       "id"},
      {TableId::kApiCalls, "CUTRACE_API_CALLS",
       {{"callId", I, kNotNull}, {"start", I, kNotNull}, {"end", I, kNotNull}, {"globalTid", I, kNotNull},
        {"nameId", I, kNotNull}, {"domain", T, kNotNull}, {"depth", I, kNotNull}, {"returnValue", I, kNotNull},
        {"result", T, kNull}, {"correlationId", I, kNull}, {"callchainId", I, kNull}},
       nullptr},
      {TableId::kApiArguments, "CUTRACE_API_ARGUMENTS",
       {{"callId", I, kNotNull}, {"position", I, kNotNull}, {"name", T, kNotNull}, {"value", T, kNotNull},
        {"number", I, kNull}},
       nullptr},
      {TableId::kPythonCallchains, "CUTRACE_PYTHON_CALLCHAINS",
       {{"id", I, kNotNull}, {"stackDepth", I, kNotNull}, {"function", T, kNotNull}, {"file", T, kNotNull},
        {"line", I, kNotNull}},
       "id, stackDepth"},
      // Python samples (--python-sampling): the stack of each is in CUTRACE_PYTHON_CALLCHAINS, by id.
      {TableId::kPythonSamples, "CUTRACE_PYTHON_SAMPLES",
       {{"id", I, kNotNull}, {"start", I, kNotNull}, {"globalTid", I, kNotNull}},
       "id"},
      {TableId::kProcesses, "CUTRACE_PROCESSES",
       {{"globalPid", I, kNotNull}, {"pid", I, kNotNull}, {"ppid", I, kNotNull}, {"command", T, kNull},
        {"executable", T, kNull}, {"cudaRuntimeVersion", I, kNull}, {"cudaRuntimePath", T, kNull},
        {"gpuActivity", T, kNull}, {"pythonFrames", T, kNull}, {"rank", I, kNull}, {"localRank", I, kNull},
        {"worldSize", I, kNull}},
       nullptr},
      {TableId::kThreads, "CUTRACE_THREADS",
       {{"globalTid", I, kNotNull}, {"pid", I, kNotNull}, {"tid", I, kNotNull}, {"name", T, kNull},
        {"priority", I, kNull}, {"recordsWritten", I, kNull}, {"recordsDropped", I, kNull},
        {"recordsMalformed", I, kNull}},
       nullptr},
      {TableId::kSummary, "CUTRACE_SUMMARY", {{"name", T, kNotNull}, {"value", T, kNull}}, nullptr},
  };
  return kTables;
}

namespace {

using model::CallLinks;
using model::ExportOptions;
using model::MpiFields;
using model::MpiKind;
using model::NvtxRange;
using model::NvtxRangeTracker;
using model::ResolvedAddress;
using model::Symbolizer;
using model::any_keeps;
using model::base_kernel_name;
using model::is_counted_call;
using model::is_shown_call;
using model::kCublasFamily;
using model::kCudaFamily;
using model::kCudnnFamily;
using model::kMpiFamily;
using model::kOsrtFamily;
using model::mpi_kind;
using model::raw_frame;
using model::trace_has_gpu_activity;
using reader::ApiCall;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

// ENUM_NSYS_EVENT_CLASS values of the nsys schema ("SQLite Schema Event Values").
constexpr int kClassCudaRuntime = 0, kClassCudaDriver = 1, kClassOsRuntime = 27, kClassCudnn = 28, kClassCublas = 29;
// ENUM_NSYS_EVENT_TYPE values of NVTX_EVENTS.
constexpr int kNvtxCategory = 33, kNvtxMark = 34, kNvtxPushPop = 59, kNvtxStartEnd = 60, kNvtxDomainCreate = 75;

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
    {kNvtxCategory, "NvtxCategory", "NVTX category"},
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

Value opt(bool has, int64_t v) { return has ? int_value(v) : null_value(); }

}  // namespace

class TableProducer {
 public:
  TableProducer(TraceReader& reader, const ExportOptions& options, RowSink& sink)
      : reader_(reader),
        options_(options),
        sink_(sink),
        links_(LinkDecided{this}),
        ranges_([this](const NvtxRange& r) { add_range(r); }) {}

  bool add(const Event& ev) {
    // After the metadata the trace opens with, which holds the wall-clock anchor.
    if (!started_ && ev.kind != EventKind::kMetadata && ev.kind != EventKind::kApiTable) start();
    switch (ev.kind) {
      case EventKind::kApiCall: add_call(ev); break;
      case EventKind::kGpuActivity: add_gpu(ev); break;
      case EventKind::kCpuSample: add_cpu_sample(ev); break;
      case EventKind::kPythonSample: add_python_sample(ev); break;
      case EventKind::kContextSwitch: add_context_switch(ev); break;
      case EventKind::kNvtx:
        if (ev.nvtx.type == abi::NvtxEvent::kMark) add_mark(ev);
        else ranges_.add(reader_, ev);
        break;
      default: break;
    }
    return ok_;
  }

  // After the last event: the calls still waiting for a link, the tables of threads, processes and
  // the session, the enums.
  bool finish() {
    if (!started_) start();
    links_.release_all();
    write_enums();
    write_threads_and_processes();
    write_gpus();
    write_session();
    return ok_;
  }

  bool ok() const { return ok_; }

  TableCounts counts() const {
    TableCounts c = counts_;
    c.notes = symbolizer_.notes();
    return c;
  }

 private:
  void start() {
    origin_ = reader_.file_header().created_monotonic_ns;
    shift_ = options_.ts_shift_ns + (options_.ts_normalize ? int64_t(session_epoch_ns()) : 0);
    linked_ = trace_has_gpu_activity(reader_);
    started_ = true;
  }

  // A call waiting for its CorrID (call_links.h): the values of its rows in CUTRACE_API_CALLS and, where
  // cuda_api_sum counts it, CUPTI_ACTIVITY_KIND_RUNTIME.
  struct Pending {
    uint64_t begin, duration, order;
    uint32_t api, correlation;
    int64_t call_id, start, end, gtid, name, result, chain;
    int32_t depth;
    uint8_t event_class;  // kClassCuda*, or 0xff when the call is not in the runtime table
    std::string_view domain, result_name;  // static strings
  };
  struct LinkDecided {
    TableProducer* producer;
    void operator()(const Pending& p) const { producer->emit_call(p); }
  };

  void emit(TableId table, std::initializer_list<Value> values) {
    // A row of the wrong width is this file's mistake; the export stops rather than misfile columns.
    if (values.size() != table_def(table).columns.size()) ok_ = false;
    if (ok_) ok_ = sink_.row(table, values.begin());
  }

  int64_t string_id(std::string_view text) {
    auto [it, added] = string_ids_.try_emplace(std::string(text), int64_t(string_ids_.size()));
    if (added) emit(TableId::kStringIds, {int_value(it->second), text_value(text)});
    return it->second;
  }

  // A time as the tables give it: from the session's start, moved by --ts-normalize and --ts-shift.
  int64_t time(uint64_t ns) const { return since_start(ns) + shift_; }
  int64_t since_start(uint64_t ns) const { return int64_t(ns > origin_ ? ns - origin_ : 0); }

  // --from/--to count from the session's start; nsys's --times, the times as exported.
  bool overlaps(uint64_t begin, uint64_t end) const {
    return uint64_t(since_start(end)) >= options_.window_begin_ns &&
           uint64_t(since_start(begin)) < options_.window_end_ns && any_keeps(options_.times, time(begin), time(end));
  }

  void emit_call(const Pending& p) {
    emit(TableId::kApiCalls,
         {int_value(p.call_id), int_value(p.start), int_value(p.end), int_value(p.gtid), int_value(p.name),
          text_value(p.domain), int_value(p.depth), int_value(p.result),
          p.result_name.empty() ? null_value() : text_value(p.result_name), int_value(p.correlation),
          opt(p.chain != 0, p.chain)});
    if (p.event_class != 0xff)
      emit(TableId::kRuntime, {int_value(p.start), int_value(p.end), int_value(p.event_class), int_value(p.gtid),
                               int_value(p.correlation), int_value(p.name), int_value(p.result), opt(p.chain != 0, p.chain)});
  }

  void add_call(const Event& ev) {
    const ApiCall& c = ev.call;
    if (!is_shown_call(c, options_.show_internal) || !overlaps(c.begin_ns, c.end_ns)) return;
    const reader::Thread& th = *ev.thread;
    ++counts_.calls;
    const bool runtime_row = is_counted_call(c, kCudaFamily, options_.show_internal);
    Pending p{c.begin_ns, c.duration_ns(), ++order_, c.api_id, 0, ++call_ids_, time(c.begin_ns), time(c.end_ns),
              global_tid(th.pid, th.tid), string_id(c.api->display_name), int64_t(c.result),
              c.frame_count || c.python_frame_count ? add_callchain(ev) : 0, c.depth,
              uint8_t(!runtime_row ? 0xff : c.api->domain == abi::ApiDomain::kCudaRuntime ? kClassCudaRuntime
                                                                                           : kClassCudaDriver),
              reader::domain_name(c.api->domain),
              c.not_returned() ? std::string_view(reader::kNotReturned) : reader::result_name(*c.api, c.result)};
    // The value as the reports print it, and the recorded slot itself (an enum's number, a pointer).
    for (uint32_t i = 0; i < c.arg_count; ++i) {
      const std::string text = reader::decode_call_arg(reader_, th, c, i).to_string();
      const std::string name = reader::arg_name(*c.api, i);
      emit(TableId::kApiArguments,
           {int_value(p.call_id), int_value(i), text_value(name), text_value(text), int_value(int64_t(c.args[i]))});
    }
    // With GPU activity a call that gives the device work waits for CUPTI's id; the others keep 0, as
    // in cuda_api_trace. Without it, the reader's numbering.
    if (!linked_) {
      p.correlation = c.correlation;
      emit_call(p);
    } else if (c.api->api_class != abi::ApiClass::kOther && (abi::domain_bit(c.api->domain) & abi::kCudaDomains)) {
      links_.add(uint64_t(th.pid) << 32 | th.tid, p);
    } else {
      emit_call(p);
    }
    const Value start = int_value(p.start), end = int_value(p.end), gtid = int_value(p.gtid), name = int_value(p.name);
    if (is_counted_call(c, kCublasFamily, options_.show_internal))
      emit(TableId::kCublasEvents, {start, end, int_value(kClassCublas), gtid, name});
    if (is_counted_call(c, kCudnnFamily, options_.show_internal))
      emit(TableId::kCudnnEvents, {start, end, int_value(kClassCudnn), gtid, name});
    if (is_counted_call(c, kOsrtFamily, options_.show_internal))
      emit(TableId::kOsrtApi, {start, end, int_value(kClassOsRuntime), gtid, name, int_value(p.result),
                               int_value(c.depth), opt(c.frame_count != 0, p.chain)});
    if (is_counted_call(c, kMpiFamily, options_.show_internal)) add_mpi_call(ev, start, end, gtid, name);
  }

  void add_mpi_call(const Event& ev, const Value& start, const Value& end, const Value& gtid, const Value& name) {
    using F = MpiFields;
    const MpiFields::Values v = mpi_fields_.read(ev.call);
    auto field = [&](F::Field f) { return v.has(f) ? int_value(int64_t(v.value[f])) : null_value(); };
    switch (mpi_kind(ev.call.api->display_name)) {
      case MpiKind::kPointToPoint:
        emit(TableId::kMpiP2pEvents, {start, end, gtid, name, field(F::kComm), field(F::kTag), field(F::kPeer),
                                      v.has(F::kSize) ? field(F::kSize) : field(F::kSendSize)});
        break;
      case MpiKind::kCollective:
        emit(TableId::kMpiCollectivesEvents, {start, end, gtid, name, field(F::kComm), field(F::kRoot), field(F::kSize),
                                              field(F::kSendSize), field(F::kRecvSize)});
        break;
      case MpiKind::kStartWait: emit(TableId::kMpiStartWaitEvents, {start, end, gtid, name}); break;
      case MpiKind::kOther: emit(TableId::kMpiOtherEvents, {start, end, gtid, name}); break;
    }
    const reader::Process& process = reader_.process_of(*ev.thread);
    if (process.rank >= 0 && mpi_threads_.insert(ev.thread->index).second)
      emit(TableId::kMpiRanks, {int_value(process.rank), gtid});
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
      const Value symbol = int_value(string_id(named ? where.frames.back().function : raw_frame(where)));
      const Value module = int_value(string_id(where.module));
      const Value address = int_value(int64_t(c.frames[depth]));
      if (osrt)
        emit(TableId::kOsrtCallchains, {int_value(id), symbol, module, null_value(), null_value(), int_value(!named),
                                        null_value(), address, null_value(), int_value(depth)});
      else
        emit(TableId::kCudaCallchains, {int_value(id), symbol, module, int_value(!named), address, int_value(depth)});
    }
    add_python_frames(process, id, c.python_frames, c.python_frame_count);
    return id;
  }

  // Python frames, innermost first, as rows of CUTRACE_PYTHON_CALLCHAINS under `id`.
  void add_python_frames(const reader::Process& process, int64_t id, const abi::PythonFrame* frames, uint32_t count) {
    for (uint32_t depth = 0; depth < count; ++depth) {
      const abi::PythonFrame& f = frames[depth];
      auto it = process.python_functions.find(f.function);
      const bool known = it != process.python_functions.end();
      const std::string function = known ? it->second.name : "python function " + reader::hex(f.function);
      emit(TableId::kPythonCallchains, {int_value(id), int_value(depth), text_value(function),
                                        text_value(known ? std::string_view(it->second.file) : std::string_view()),
                                        int_value(int64_t(abi::python_frame_line(f)))});
    }
  }

  // A CPU sample: frame 0 is the instruction it interrupted (named exactly), then return addresses.
  void add_cpu_sample(const Event& ev) {
    const reader::CpuSampleEvent& sample = ev.sample;
    if (!overlaps(sample.time_ns, sample.time_ns)) return;
    const reader::Process& process = reader_.processes()[ev.thread->process];
    const int64_t id = ++callchains_;
    ++counts_.samples;
    emit(TableId::kCompositeEvents, {int_value(id), int_value(time(sample.time_ns)), int_value(sample.cpu), int_value(0),
                                     int_value(global_tid(ev.thread->pid, ev.thread->tid)), int_value(0)});
    for (uint32_t depth = 0; depth < sample.frame_count; ++depth) {
      const ResolvedAddress& where = symbolizer_.resolve(process, sample.frames[depth], sample.time_ns, depth == 0);
      const bool named = !where.frames.empty() && !where.frames.back().function.empty();
      emit(TableId::kSamplingCallchains,
           {int_value(id), int_value(string_id(named ? where.frames.back().function : raw_frame(where))),
            int_value(string_id(where.module)), int_value(0), null_value(), int_value(!named), null_value(),
            int_value(int64_t(sample.frames[depth])), null_value(), int_value(depth)});
    }
  }

  void add_python_sample(const Event& ev) {
    const reader::PythonSampleEvent& sample = ev.python_sample;
    if (!overlaps(sample.time_ns, sample.time_ns)) return;
    const int64_t id = ++callchains_;
    ++counts_.samples;
    emit(TableId::kPythonSamples,
         {int_value(id), int_value(time(sample.time_ns)), int_value(global_tid(ev.thread->pid, ev.thread->tid))});
    add_python_frames(reader_.processes()[ev.thread->process], id, sample.frames, sample.frame_count);
  }

  void add_context_switch(const Event& ev) {
    const reader::ContextSwitchEvent& c = ev.context_switch;
    if (!overlaps(c.time_ns, c.time_ns)) return;
    const bool in = c.change == abi::ContextSwitch::kIn;
    emit(TableId::kSchedEvents, {int_value(++sched_events_), int_value(time(c.time_ns)), int_value(c.cpu), int_value(in),
                                 int_value(global_tid(ev.thread->pid, ev.thread->tid)),
                                 in ? null_value() : int_value(c.change == abi::ContextSwitch::kPreempted)});
  }

  void add_gpu(const Event& ev) {
    const reader::GpuActivityEvent& g = ev.gpu;
    if (g.kind == abi::GpuActivity::kApiLink) {
      links_.link(uint64_t(ev.thread->pid) << 32 | g.tid, g.start_ns, g.api_id, g.correlation);
      return;
    }
    if (g.kind == abi::GpuActivity::kDropped || !overlaps(g.start_ns, g.end_ns)) return;
    const Value gpid = int_value(global_pid(ev.thread->pid));
    const Value device = int_value(g.device == UINT32_MAX ? 0 : g.device);
    const Value stream = int_value(g.stream == UINT32_MAX ? 0 : g.stream);
    const Value start = int_value(time(g.start_ns)), end = int_value(time(g.end_ns)), context = int_value(g.context);
    const Value n = null_value(), zero = int_value(0);
    // Node work of a graph launch carries its graph and node (--cuda-graph-trace node); other work none.
    const Value graph = g.graph_id ? int_value(g.graph_id) : n;
    const Value graph_node = g.graph_node_id ? int_value(int64_t(g.graph_node_id)) : n;
    ++counts_.gpu;
    switch (g.kind) {
      case abi::GpuActivity::kKernel: {
        const std::string demangled = g.name ? g.name->demangled : std::string("[unnamed kernel]");
        const Value mangled = g.name ? int_value(string_id(g.name->mangled)) : n;
        emit(TableId::kKernel,
             {start, end, device, context, n, stream, int_value(g.correlation), gpid, int_value(string_id(demangled)),
              int_value(string_id(base_kernel_name(demangled))), mangled, n, n, int_value(g.registers_per_thread),
              int_value(g.grid[0]), int_value(g.grid[1]), int_value(g.grid[2]), int_value(g.block[0]),
              int_value(g.block[1]), int_value(g.block[2]), int_value(g.static_shared_bytes),
              int_value(g.dynamic_shared_bytes), zero, zero, zero, n, graph_node, n, graph});
        return;
      }
      case abi::GpuActivity::kMemcpy:
        emit(TableId::kMemcpy, {start, end, device, context, n, stream,
                                int_value(g.runtime_correlation ? g.runtime_correlation : g.correlation), gpid,
                                int_value(int64_t(g.bytes)), int_value(g.copy_kind), n, int_value(g.src_kind),
                                int_value(g.dst_kind), n, n, n, n, n, graph_node, n});
        return;
      case abi::GpuActivity::kMemset:
        emit(TableId::kMemset, {start, end, device, context, n, stream, int_value(g.correlation), gpid,
                                int_value(g.value), int_value(int64_t(g.bytes)), graph_node, int_value(g.memory_kind)});
        return;
      case abi::GpuActivity::kGraph:
        emit(TableId::kGraphTrace,
             {start, end, device, context, n, stream, int_value(g.correlation), gpid, int_value(g.graph_id), n});
        return;
      case abi::GpuActivity::kSync:
        emit(TableId::kSynchronization, {start, end, device, context, n, stream, int_value(g.correlation), gpid,
                                         int_value(g.sync_type), int_value(g.event == UINT32_MAX ? -1 : int64_t(g.event))});
        return;
      case abi::GpuActivity::kMemory:
        emit(TableId::kGpuMemoryUsage, {start, gpid, device, context, int_value(int64_t(g.address)), zero,
                                        int_value(int64_t(g.bytes)), int_value(g.memory_kind), int_value(g.operation), n,
                                        int_value(g.correlation), n, n, n, n, n, n});
        return;
      case abi::GpuActivity::kApiLink:
      case abi::GpuActivity::kDropped:
        return;
    }
  }

  // The payload columns of NVTX_EVENTS (uint64Value .. floatValue), the one the type names set.
  static void payload(abi::NvtxPayload type, uint64_t bits, Value (&cells)[6]) {
    switch (type) {
      case abi::NvtxPayload::kNone:
      case abi::NvtxPayload::kExtension: break;  // decoded into jsonText
      case abi::NvtxPayload::kUnsigned64: cells[0] = int_value(int64_t(bits)); break;
      case abi::NvtxPayload::kSigned64: cells[1] = int_value(int64_t(bits)); break;
      case abi::NvtxPayload::kDouble: {
        double v;
        std::memcpy(&v, &bits, sizeof v);
        cells[2] = real_value(v);
        break;
      }
      case abi::NvtxPayload::kUnsigned32: cells[3] = int_value(int64_t(uint32_t(bits))); break;
      case abi::NvtxPayload::kSigned32: cells[4] = int_value(int32_t(uint32_t(bits))); break;
      case abi::NvtxPayload::kFloat: {
        float v;
        const uint32_t low = uint32_t(bits);
        std::memcpy(&v, &low, sizeof v);
        cells[5] = real_value(v);
        break;
      }
    }
  }

  // jsonText: an extended payload's fields by its schema, {"Message size [bytes]": 1048576, ...}.
  Value payload_json(const reader::Thread& t, uint32_t domain, abi::NvtxPayload type, uint64_t schema,
                     std::string_view bytes, uint8_t cut) {
    if (type != abi::NvtxPayload::kExtension) return null_value();
    payload_json_ = reader::nvtx_payload_json(
        reader::decode_nvtx_payload(reader_.process_of(t).nvtx_payload_types, domain, schema, bytes, cut));
    return text_value(payload_json_);  // a view: the text lives in payload_json_ until the next row
  }
  std::string payload_json_;

  void add_mark(const Event& ev) {
    const reader::NvtxEvent& m = ev.nvtx;
    if (!overlaps(m.time_ns, m.time_ns)) return;
    Value cells[6];
    payload(m.payload_type, m.payload, cells);
    const Value n = null_value();
    ++counts_.nvtx;
    emit(TableId::kNvtxEvents,
         {int_value(time(m.time_ns)), n, int_value(kNvtxMark), n, opt(m.category != 0, m.category),
          opt(m.color.has_value(), int64_t(m.color.value_or(0))), text_value(m.text),
          int_value(global_tid(ev.thread->pid, ev.thread->tid)), n, n, int_value(m.domain), cells[0], cells[1], cells[2],
          cells[3], cells[4], cells[5], n, payload_json(*ev.thread, m.domain, m.payload_type, m.payload, m.payload_bytes,
                                                    m.payload_cut)});
  }

  void add_range(const NvtxRange& r) {
    if (!overlaps(r.start_ns, r.end_ns)) return;
    Value cells[6];
    payload(r.payload_type, r.payload, cells);
    const Value n = null_value();
    ++counts_.nvtx;
    emit(TableId::kNvtxEvents,
         {int_value(time(r.start_ns)), int_value(time(r.end_ns)), int_value(r.push_pop ? kNvtxPushPop : kNvtxStartEnd),
          opt(!r.push_pop, int64_t(r.id)), opt(r.category != 0, r.category),
          opt(r.color.has_value(), int64_t(r.color.value_or(0))), text_value(r.message),
          int_value(global_tid(r.thread->pid, r.thread->tid)),
          r.end_thread ? int_value(global_tid(r.end_thread->pid, r.end_thread->tid)) : n, n, int_value(r.domain),
          cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], n,
          payload_json(*r.thread, r.domain, r.payload_type, r.payload, r.payload_bytes, r.payload_cut)});
  }

  template <size_t N>
  void write_enum(TableId table, const EnumRow (&rows)[N]) {
    for (const EnumRow& e : rows) emit(table, {int_value(e.id), text_value(e.name), text_value(e.label)});
  }

  void write_enums() {
    write_enum(TableId::kEnumEventClass, kEventClasses);
    write_enum(TableId::kEnumEventType, kEventTypes);
    write_enum(TableId::kEnumMemcpyOper, kMemcpyKinds);
    write_enum(TableId::kEnumMemKind, kMemoryKinds);
    write_enum(TableId::kEnumSyncType, kSyncTypes);
    write_enum(TableId::kEnumDevMemEventOper, kMemoryOperations);
  }

  void write_threads_and_processes() {
    const Value n = null_value();
    for (uint32_t i = 0; reader_.thread(i) != nullptr; ++i) {
      const reader::Thread& th = *reader_.thread(i);
      const Value gtid = int_value(global_tid(th.pid, th.tid));
      const Value priority = opt(th.priority >= 0, th.priority);
      if (!th.name.empty()) emit(TableId::kThreadNames, {int_value(string_id(th.name)), priority, gtid});
      emit(TableId::kThreads, {gtid, int_value(th.pid), int_value(th.tid), text_value(th.name), priority,
                               opt(th.has_stats, int64_t(th.records_written)), opt(th.has_stats, int64_t(th.records_dropped)),
                               opt(th.has_stats, int64_t(th.records_malformed))});
    }
    for (const reader::Process& p : reader_.processes()) {
      // A domain's name, as nsys gives it: a row of its own that range rows join by domainId.
      for (const auto& [domain, name] : p.nvtx_domains)
        emit(TableId::kNvtxEvents, {int_value(0), n, int_value(kNvtxDomainCreate), n, n, n, text_value(name),
                                    int_value(global_pid(p.pid)), n, n, int_value(domain), n, n, n, n, n, n, n, n});
      // A category's name, as nsys gives it: a row of type 33 with the category and its domain, which
      // NVIDIA's "Resolve NVTX Category Name" example joins marks and ranges to by (category, domainId).
      // The naming call's time is not recorded: 0, as for a domain. Sorted, for the same rows every export.
      std::vector<std::pair<uint64_t, const std::string*>> categories;
      for (const auto& [key, name] : p.nvtx_categories) categories.emplace_back(key, &name);
      std::sort(categories.begin(), categories.end());
      for (const auto& [key, name] : categories)
        emit(TableId::kNvtxEvents, {int_value(0), n, int_value(kNvtxCategory), n, int_value(int64_t(key & 0xffffffffu)),
                                    n, text_value(*name), int_value(global_pid(p.pid)), n, n,
                                    int_value(int64_t(key >> 32)), n, n, n, n, n, n, n, n});
      const bool runtime = p.cuda_runtime_version != 0;
      emit(TableId::kProcesses,
           {int_value(global_pid(p.pid)), int_value(p.pid), int_value(p.ppid), text_value(p.command), text_value(p.exe),
            opt(runtime, p.cuda_runtime_version), runtime ? text_value(p.cuda_runtime_path) : n,
            p.gpu_status_code >= 0 ? text_value(p.gpu_status) : n,
            p.python_frames_code >= 0 ? text_value(p.python_frames_status) : n, opt(p.rank >= 0, p.rank),
            opt(p.local_rank >= 0, p.local_rank), opt(p.world_size >= 0, p.world_size)});
    }
  }

  // Each GPU once, by its UUID. Its id is its CUDA ordinal in the process that saw the most GPUs (the
  // first such), which CUDA_VISIBLE_DEVICES narrowed least; a GPU only other processes saw takes its
  // ordinal there when no other GPU has it, else the smallest free id. TARGET_INFO_CUDA_DEVICE then
  // maps each process's ordinals to these ids.
  void write_gpus() {
    std::vector<const reader::Process*> by_devices;
    for (const reader::Process& p : reader_.processes()) by_devices.push_back(&p);
    std::stable_sort(by_devices.begin(), by_devices.end(), [](const reader::Process* a, const reader::Process* b) {
      return a->gpu_devices.size() > b->gpu_devices.size();
    });
    std::unordered_map<std::string, int64_t> id_of;  // by UUID
    std::set<int64_t> taken;
    std::vector<std::pair<int64_t, const reader::GpuDevice*>> gpus;
    for (const reader::Process* p : by_devices)
      for (const reader::GpuDevice& d : p->gpu_devices) {
        const std::string uuid = reader::gpu_uuid_text(d.record.uuid);
        if (id_of.count(uuid)) continue;
        int64_t id = int64_t(d.record.device);
        if (taken.count(id))
          for (id = 0; taken.count(id);) ++id;
        taken.insert(id);
        id_of.emplace(uuid, id);
        gpus.emplace_back(id, &d);
      }
    std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const Value n = null_value();
    for (const auto& [id, device] : gpus) {
      const reader::GpuDevice& d = *device;
      const std::string uuid = reader::gpu_uuid_text(d.record.uuid);
      const abi::GpuDeviceRecord& r = d.record;
      auto u = [](uint64_t v) { return int_value(int64_t(v)); };
      // CUPTI gives the bandwidth in kB/s and the clock in kHz; nsys's columns are B/s and Hz.
      emit(TableId::kTargetInfoGpu,
           {int_value(0), int_value(id), text_value(d.name), n, n, u(r.l2_cache_bytes), u(r.global_memory_bytes),
            u(r.memory_bandwidth * 1000), u(uint64_t(r.core_clock_khz) * 1000), u(r.sm_count), n, text_value(uuid), n,
            n, u(r.device), n, n, n, n, u(r.constant_memory_bytes), u(r.max_ipc), u(r.max_registers_per_block),
            u(r.max_shared_per_block), n, u(r.max_shared_per_sm), u(r.max_registers_per_sm), u(r.threads_per_warp),
            u(r.memcpy_engines), u(r.max_warps_per_sm), u(r.max_blocks_per_sm), u(r.max_threads_per_block),
            u(r.max_block_dim[0]), u(r.max_block_dim[1]), u(r.max_block_dim[2]), u(r.max_grid_dim[0]),
            u(r.max_grid_dim[1]), u(r.max_grid_dim[2]), u(r.compute_major), u(r.compute_minor), n, n});
    }
    for (const reader::Process& p : reader_.processes())
      for (const reader::GpuDevice& d : p.gpu_devices) {
        const std::string uuid = reader::gpu_uuid_text(d.record.uuid);
        emit(TableId::kTargetInfoCudaDevice, {int_value(id_of.at(uuid)), int_value(int64_t(d.record.device)),
                                               int_value(p.pid), text_value(uuid), int_value(int64_t(d.record.sm_count))});
      }
  }

  // The wall-clock time of a CLOCK_MONOTONIC time, by the recorder's start anchor (a paired reading,
  // docs/jobs.md); none in a trace without one. The file header's own two readings are not paired.
  std::optional<uint64_t> wall_clock_of(uint64_t monotonic_ns) const {
    const std::string* real = reader_.metadata_value("start.realtime_ns");
    const std::string* mono = reader_.metadata_value("start.monotonic_ns");
    if (!real || !mono) return std::nullopt;
    char* end = nullptr;
    const uint64_t r = std::strtoull(real->c_str(), &end, 10);
    if (end == real->c_str() || *end) return std::nullopt;
    const uint64_t m = std::strtoull(mono->c_str(), &end, 10);
    if (end == mono->c_str() || *end || r == 0 || m == 0) return std::nullopt;
    return monotonic_ns + (r - m);  // unsigned wrap-around gives the right sum when r < m
  }

  // The wall-clock time of the session's start, ns since the epoch.
  uint64_t session_epoch_ns() const {
    const format::FileHeader& h = reader_.file_header();
    return wall_clock_of(h.created_monotonic_ns).value_or(h.created_realtime_ns);
  }

  void write_session() {
    const uint64_t epoch = session_epoch_ns();
    char utc[64] = "", local[64] = "";
    const time_t seconds = time_t(epoch / 1000000000);
    struct tm tm_utc, tm_local;
    if (gmtime_r(&seconds, &tm_utc)) std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%S", &tm_utc);
    if (localtime_r(&seconds, &tm_local)) std::strftime(local, sizeof local, "%Y-%m-%dT%H:%M:%S", &tm_local);
    emit(TableId::kSessionStartTime, {int_value(int64_t(epoch)), text_value(utc), text_value(local)});

    for (const auto& [name, value] : reader_.metadata()) emit(TableId::kMetaDataCapture, {text_value(name), text_value(value)});
    for (const auto& [name, value] : reader_.summary()) emit(TableId::kSummary, {text_value(name), text_value(value)});
    const std::string state = reader_.status().describe();
    emit(TableId::kSummary, {text_value("trace.state"), text_value(state)});

    int64_t name_enum = 0;
    for (const auto& [name, key] : {std::pair<const char*, const char*>{"host", "host"}, {"rank", "job.rank"},
                                    {"command", "command"}, {"cwd", "cwd"}})
      if (const std::string* value = reader_.metadata_value(key))
        emit(TableId::kSystemEnv, {int_value(0), text_value(""), text_value(name), int_value(name_enum++), text_value(*value)});

    // The session: from the file's creation to the last end the recorder saw.
    uint64_t stop = 0;
    if (const std::string* end = reader_.metadata_value("end.monotonic_ns")) stop = std::strtoull(end->c_str(), nullptr, 10);
    emit(TableId::kAnalysisDetails, {int_value(0), int_value(since_start(stop)), int_value(time(origin_)), int_value(time(stop))});

    const std::string format_version = std::to_string(reader_.file_header().format_version);
    for (const auto& [name, value] :
         {std::pair<const char*, std::string_view>{"EXPORT_SCHEMA_VERSION", kNsysSchemaVersion},
          {"EXPORT_PRODUCT", "cutrace"},
          {"EXPORT_PRODUCT_VERSION", CUTRACE_VERSION_STRING},
          {"EXPORT_TRACE_FORMAT_VERSION", format_version},
          {"EXPORT_TIME_ORIGIN", "ns since the session start (TARGET_INFO_SESSION_START_TIME)"}})
      emit(TableId::kMetaDataExport, {text_value(name), text_value(value)});
  }

  TraceReader& reader_;
  ExportOptions options_;
  RowSink& sink_;
  uint64_t origin_ = 0;
  int64_t shift_ = 0;
  bool started_ = false;
  bool linked_ = false;  // the trace has GPU activity's API links (CorrIDs from CUPTI)
  bool ok_ = true;
  std::unordered_map<std::string, int64_t> string_ids_;
  CallLinks<Pending, LinkDecided> links_;
  NvtxRangeTracker ranges_;
  MpiFields mpi_fields_;
  std::unordered_set<uint32_t> mpi_threads_;  // threads whose MPI_RANKS row is written
  Symbolizer symbolizer_;
  int64_t callchains_ = 0, call_ids_ = 0, sched_events_ = 0;
  uint64_t order_ = 0;
  TableCounts counts_;
};

TableStream::TableStream(TraceReader& reader, const ExportOptions& options, RowSink& sink)
    : reader_(reader), producer_(std::make_unique<TableProducer>(reader, options, sink)) {}
TableStream::~TableStream() = default;

bool TableStream::step() {
  if (done_) return false;
  Event ev;
  if (reader_.next(ev)) {
    if (producer_->add(ev)) return true;
    done_ = true;
    return false;
  }
  done_ = true;
  producer_->finish();
  return false;
}

bool TableStream::ok() const { return producer_->ok(); }
TableCounts TableStream::counts() const { return producer_->counts(); }

bool produce_tables(TraceReader& reader, const ExportOptions& options, RowSink& sink, TableCounts* counts) {
  TableStream stream(reader, options, sink);
  while (stream.step()) {
  }
  if (counts) *counts = stream.counts();
  return stream.ok();
}

}  // namespace cutrace::exporting
