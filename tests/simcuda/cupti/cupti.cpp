// The simulated CUPTI: the Activity API over the simulated device's hooks (core/activity.h), with
// CUDA 13's record structs, so that a collector written against the real CUPTI runs unchanged here.
//
// Correlation ids (the tracer relies on these rules; core/activity.h and simcuda.h say the same):
//   - Every runtime and every driver API call gets its own correlationId from one process-wide
//     counter, increasing in the order the calls are entered. A driver call the runtime makes
//     inside a runtime call gets an id of its own. (An entry point implemented with another of its
//     own domain is one call.)
//   - CONCURRENT_KERNEL / KERNEL: correlationId = the outermost traced call that launched it: the
//     runtime call's id when launched through the runtime, else the driver call's.
//   - MEMCPY: correlationId = the driver call's id (the runtime call's when the runtime copied
//     without the driver, as for 2D copies); runtimeCorrelationId = the enclosing runtime call's id,
//     0 when the driver was called directly.
//   - MEMSET, SYNCHRONIZATION, MEMORY2: the outermost call's id.
//   - GRAPH_TRACE: the outermost call's id of the graph launch, as its nodes'. While GRAPH_TRACE is
//     enabled, the kernels, copies and sets of graph launches get no records of their own: one
//     CUpti_ActivityGraphTrace2 per launch stands for them (from its first node's start to its last
//     node's end). Otherwise their records carry graphId and graphNodeId.
//   - EXTERNAL_CORRELATION: one record per API call (runtime and driver) entered while an id is
//     pushed on the calling thread, for each kind pushed, written before that call's API record.
//   - DEVICE: no correlation id; one CUpti_ActivityDevice5 per device (SIMCUDA_DEVICE_COUNT), from
//     core/device.h's description, written when the kind is enabled.
//
// Records go into the client's buffers (cuptiActivityRegisterCallbacks) packed back to back, each
// sizeof its struct (a multiple of 8). API records are written when the call returns, on its thread;
// device operations when the device completes them, on the device thread, before the operation
// counts as complete (so a synchronising call that returns has its operations' records written);
// allocation records when the allocation or release happens. All records here are complete when
// written, so cuptiActivityFlushAll(0) delivers every non-empty buffer, as the header promises for
// buffers whose records are all complete, and CUPTI_ACTIVITY_FLAG_FLUSH_FORCED delivers the same.
// A buffer that cannot take the next record (or holds maxNumRecords) is completed by the worker
// thread, which also wakes every cuptiActivityFlushPeriod ms; as the header says of the periodic
// flush, it delivers only such full buffers.
//
// Timestamps: the device's times are CLOCK_MONOTONIC; each is written as base + (t - monotonic now),
// base being the registered timestamp callback's value, or CLOCK_REALTIME (real CUPTI's default
// clock) without one. That offset is measured at most every 100 ms (see offset_now), not per
// record, so that the records of one stream never overlap through measurement noise.
//
// Thread ids: CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT gives pthread_self() truncated to 32 bits, as the
// real library on Linux; CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM gives gettid().
//
// Callbacks: cuptiSubscribe succeeds once; the subscriber's callback is called, as the real one's,
// on the calling thread at API_ENTER and API_EXIT of each runtime and driver call whose callback id it
// enabled (cuptiEnableCallback, cuptiEnableDomain, cuptiEnableAllDomains), with the call's
// correlationId (the same as its API record's would be, whether or not RUNTIME/DRIVER records are
// enabled: the tracers that link GPU work through callbacks alone rely on it), its function's name and,
// at exit, a pointer to its result. No parameters or symbol names are given. cuptiFinalize and
// cuptiUnsubscribe disable them all. Knobs (simcuda.h): SIMCUDA_CUPTI_ERROR,
// SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS.
#include <cupti.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>

#include "core/activity.h"
#include "core/config.h"
#include "core/device.h"
#include "core/sync.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

using namespace simcuda;

namespace {

struct CbidName {
  uint32_t cbid;
  const char* name;
};
#include "cupti_cbid_names.inc"

// ---- knobs ----

struct Knobs {
  CUptiResult error = CUPTI_SUCCESS;  // SIMCUDA_CUPTI_ERROR: 999 (no driver) or 39 (another tool)
  uint64_t device_records = 0;        // SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS, 0 = unlimited
  uint64_t subscribe_delay_ms = 0;    // SIMCUDA_CUPTI_SUBSCRIBE_DELAY_MS
};

const Knobs& knobs() {
  static const Knobs k = [] {
    Knobs k;
    if (const char* v = std::getenv("SIMCUDA_CUPTI_ERROR"); v != nullptr && *v != '\0') {
      k.error = CUptiResult(std::strtol(v, nullptr, 10));
    }
    if (const char* v = std::getenv("SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS"); v != nullptr && *v != '\0') {
      k.device_records = std::strtoull(v, nullptr, 10);
    }
    if (const char* v = std::getenv("SIMCUDA_CUPTI_SUBSCRIBE_DELAY_MS"); v != nullptr && *v != '\0') {
      k.subscribe_delay_ms = std::strtoull(v, nullptr, 10);
    }
    return k;
  }();
  return k;
}

// What a call fails with when SIMCUDA_CUPTI_ERROR=999 stands for a machine without a driver.
CUptiResult no_driver() {
  return knobs().error == CUPTI_ERROR_UNKNOWN ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
}

// ---- clocks ----

uint64_t clock_ns(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

std::atomic<CUpti_TimestampCallbackFunc> g_timestamp{nullptr};

uint64_t cupti_now() {
  CUpti_TimestampCallbackFunc f = g_timestamp.load(std::memory_order_acquire);
  return f != nullptr ? f() : clock_ns(CLOCK_REALTIME);
}

// The offset from CLOCK_MONOTONIC to CUPTI's clock. Measured (with the monotonic clock read on both
// sides of the CUPTI clock) when first needed, when the timestamp callback changes, and again once
// it is 100 ms old so that steps of the realtime clock are followed; between measurements every
// record uses the same offset, so records keep the device's exact order and spacing. An offset
// within the measurement's own uncertainty is 0: a CLOCK_MONOTONIC callback gives exact device
// times, not times off by the few ns two clock reads take.
constexpr uint64_t kOffsetLifetimeNs = 100000000;
std::atomic<int64_t> g_offset{0};
std::atomic<uint64_t> g_offset_taken{0};  // monotonic time of the measurement, 0 = none

int64_t measure_offset() {
  uint64_t before = now_ns();
  uint64_t cupti = cupti_now();
  uint64_t after = now_ns();
  int64_t offset = int64_t(cupti) - int64_t(before + (after - before) / 2);
  if (uint64_t(offset < 0 ? -offset : offset) <= after - before) offset = 0;
  return offset;
}

int64_t offset_now() {
  uint64_t now = now_ns();
  uint64_t taken = g_offset_taken.load(std::memory_order_acquire);
  if (taken != 0 && now - taken < kOffsetLifetimeNs) return g_offset.load(std::memory_order_relaxed);
  static Mutex mu;
  Lock lock(mu);
  if (g_offset_taken.load(std::memory_order_acquire) == taken) {
    g_offset.store(measure_offset(), std::memory_order_relaxed);
    g_offset_taken.store(now_ns(), std::memory_order_release);
  }
  return g_offset.load(std::memory_order_relaxed);
}

// Converts device/host CLOCK_MONOTONIC times to CUPTI's clock as of the moment of writing.
struct Clock {
  int64_t offset = offset_now();
  uint64_t operator()(uint64_t monotonic) const { return uint64_t(int64_t(monotonic) + offset); }
};

// ---- buffers ----

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t max_records = 0;
  size_t records = 0;
};

struct State {
  Mutex mu;
  CondVar cv;  // a buffer became full, the period changed
  Mutex deliver_mu;  // keeps deliveries in order between the worker and flushing threads
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  Buffer current;
  std::deque<Buffer> full;
  uint64_t dropped = 0;
  uint64_t device_records = 0;  // written since the last flush, for SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS
  uint32_t period_ms = 0;
  bool worker_started = false;
  bool subscribed = false;
  int64_t grid_id = 0;
};

State& state() {
  static State* s = new State;  // never destroyed: the device thread may write at exit
  return *s;
}

std::atomic<uint64_t> g_enabled{0};  // bit per CUpti_ActivityKind

// cuptiActivitySetAttribute's values, by attribute (size 0: never set, reads as a zero size_t).
struct ActivityAttribute {
  size_t size = 0;
  uint64_t value = 0;
};
constexpr unsigned kActivityAttributes = 16;
ActivityAttribute g_activity_attributes[kActivityAttributes];
std::atomic<CUpti_ActivityThreadIdType> g_thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};

bool enabled(CUpti_ActivityKind kind) {
  return (g_enabled.load(std::memory_order_relaxed) >> unsigned(kind)) & 1;
}

// cuptiActivityEnableRuntimeApi and cuptiActivityEnableDriverApi: for each callback id, whether its
// API records are wanted whatever the kind says (kWanted), unwanted (kUnwanted), or as the kind says
// (kFollowKind, as zero-initialised). Enabling or disabling the kind afterwards resets them, as documented.
enum : int8_t { kFollowKind = 0, kWanted = 1, kUnwanted = 2 };
constexpr uint32_t kApiSlots = 2048;
std::atomic<int8_t> g_runtime_api_override[kApiSlots];
std::atomic<int8_t> g_driver_api_override[kApiSlots];
std::atomic<uint32_t> g_api_overrides_on{0};  // how many overrides ask for records

std::atomic<int8_t>* api_overrides(CUpti_ActivityKind kind) {
  return kind == CUPTI_ACTIVITY_KIND_RUNTIME ? g_runtime_api_override
         : kind == CUPTI_ACTIVITY_KIND_DRIVER ? g_driver_api_override
                                              : nullptr;
}

bool api_record_wanted(CUpti_ActivityKind kind, uint32_t cbid) {
  int8_t o = cbid < kApiSlots ? api_overrides(kind)[cbid].load(std::memory_order_relaxed) : int8_t(kFollowKind);
  return o == kFollowKind ? enabled(kind) : o == kWanted;
}

uint32_t thread_id() {
  if (g_thread_id_type.load(std::memory_order_relaxed) == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return uint32_t(syscall(SYS_gettid));
  }
  return uint32_t(uintptr_t(pthread_self()));
}

void* worker_main(void*);

void start_worker_locked(State& s) {
  if (s.worker_started) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  if (pthread_create(&t, nullptr, worker_main, nullptr) == 0) {
    pthread_detach(t);
    s.worker_started = true;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void retire_current_locked(State& s) {
  if (s.current.data == nullptr) return;
  s.full.push_back(s.current);
  s.current = Buffer{};
  s.cv.notify_all();
}

// Appends one record; `device` records count against SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS.
void write(const void* record, size_t size, bool device = false) {
  State& s = state();
  Lock lock(s.mu);
  if (device && knobs().device_records != 0) {
    if (s.device_records >= knobs().device_records) {
      ++s.dropped;
      return;
    }
    ++s.device_records;
  }
  Buffer& b = s.current;
  if (b.data != nullptr &&
      (b.used + size > b.size || (b.max_records != 0 && b.records >= b.max_records))) {
    retire_current_locked(s);
  }
  if (b.data == nullptr) {
    // The request callback runs with CUPTI's lock held; like the real one it must not call CUPTI.
    if (s.request == nullptr) {
      ++s.dropped;
      return;
    }
    uint8_t* data = nullptr;
    size_t bytes = 0, max_records = 0;
    s.request(&data, &bytes, &max_records);
    start_worker_locked(s);
    if (data == nullptr || bytes < size) {
      // A buffer too small to hold anything goes back to its owner empty.
      if (data != nullptr) s.full.push_back(Buffer{data, bytes, 0, 0, 0});
      ++s.dropped;
      return;
    }
    b = Buffer{data, bytes, 0, max_records, 0};
  }
  std::memcpy(b.data + b.used, record, size);
  b.used += size;
  ++b.records;
}

// Hands every full buffer (and with `all`, the one being filled) to the client, in order.
void deliver(bool all) {
  State& s = state();
  Lock order(s.deliver_mu);
  std::deque<Buffer> out;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    Lock lock(s.mu);
    if (all && s.current.data != nullptr && s.current.used > 0) retire_current_locked(s);
    out.swap(s.full);
    complete = s.complete;
    s.device_records = 0;
  }
  for (const Buffer& b : out) {
    if (complete != nullptr) complete(nullptr, 0, b.data, b.size, b.used);
  }
}

void* worker_main(void*) {
  pthread_setname_np(pthread_self(), "cupti-worker");
  State& s = state();
  for (;;) {
    {
      Lock lock(s.mu);
      if (s.full.empty()) {
        if (s.period_ms == 0) {
          s.cv.wait(s.mu);
        } else {
          s.cv.wait_until(s.mu, now_ns() + uint64_t(s.period_ms) * 1000000ull);
        }
      }
    }
    deliver(false);
  }
  return nullptr;
}

// ---- callbacks ----

constexpr uint32_t kCallbackIds = 4096;
std::atomic<CUpti_CallbackFunc> g_callback{nullptr};
void* g_callback_data = nullptr;
// Per domain (runtime, driver), a bit per callback id; g_callbacks_enabled counts the bits set, so
// that calls pay one load when none is.
std::atomic<uint64_t> g_callback_bits[2][kCallbackIds / 64];
std::atomic<uint32_t> g_callbacks_enabled{0};

int callback_domain(CUpti_CallbackDomain domain) {
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 0 : domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : -1;
}

bool callback_enabled(activity::Domain domain, uint32_t cbid) {
  if (g_callbacks_enabled.load(std::memory_order_relaxed) == 0 || cbid >= kCallbackIds) return false;
  const int d = domain == activity::Domain::kRuntime ? 0 : 1;
  return (g_callback_bits[d][cbid / 64].load(std::memory_order_relaxed) >> (cbid % 64)) & 1;
}

void set_callback(int domain, uint32_t cbid, bool on) {
  const uint64_t bit = uint64_t(1) << (cbid % 64);
  const uint64_t before = on ? g_callback_bits[domain][cbid / 64].fetch_or(bit) : g_callback_bits[domain][cbid / 64].fetch_and(~bit);
  if (on && !(before & bit)) g_callbacks_enabled.fetch_add(1);
  if (!on && (before & bit)) g_callbacks_enabled.fetch_sub(1);
}

void clear_callbacks() {
  for (auto& domain : g_callback_bits)
    for (auto& word : domain) word.store(0);
  g_callbacks_enabled.store(0);
}

void install_sink_locked();
void reset_api_overrides_locked(std::atomic<int8_t>* overrides);

// One uint64_t per call in progress on the thread, for the subscriber's correlationData.
thread_local uint64_t t_correlation_data[64];
thread_local uint32_t t_callback_depth = 0;

void call_back(activity::Domain domain, uint32_t cbid, uint32_t correlation, CUpti_ApiCallbackSite site,
               void* result) {
  CUpti_CallbackFunc callback = g_callback.load(std::memory_order_acquire);
  if (!callback) return;
  CUpti_CallbackData data{};
  data.callbackSite = site;
  const char* name = nullptr;
  cuptiGetCallbackName(domain == activity::Domain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                       cbid, &name);
  data.functionName = name;
  data.functionReturnValue = result;
  if (site == CUPTI_API_EXIT && t_callback_depth) --t_callback_depth;
  data.correlationData = &t_correlation_data[std::min<uint32_t>(t_callback_depth, 63)];
  if (site == CUPTI_API_ENTER) {
    *data.correlationData = 0;
    ++t_callback_depth;
  }
  data.correlationId = correlation;
  callback(g_callback_data,
           domain == activity::Domain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
           CUpti_CallbackId(cbid), &data);
}

// ---- the sink ----

uint32_t context_id(int device) { return uint32_t(device) + 1; }

struct ExternalStacks {
  std::deque<uint64_t> ids[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
};
thread_local ExternalStacks t_external;

void on_api_enter(activity::Domain domain, uint32_t cbid, uint32_t correlation) {
  if (callback_enabled(domain, cbid)) call_back(domain, cbid, correlation, CUPTI_API_ENTER, nullptr);
  if (!enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) return;
  for (int k = 0; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; ++k) {
    if (t_external.ids[k].empty()) continue;
    CUpti_ActivityExternalCorrelation r{};
    r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    r.externalKind = CUpti_ExternalCorrelationKind(k);
    r.externalId = t_external.ids[k].back();
    r.correlationId = correlation;
    write(&r, sizeof r);
  }
}

void on_api_exit(const activity::ApiCall& call) {
  if (callback_enabled(call.domain, call.cbid)) {
    int result = int(call.result);  // a cudaError_t or a CUresult, as the real callback points to
    call_back(call.domain, call.cbid, call.correlation, CUPTI_API_EXIT, &result);
  }
  CUpti_ActivityKind kind =
      call.domain == activity::Domain::kRuntime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  if (!api_record_wanted(kind, call.cbid)) return;
  Clock clock;
  CUpti_ActivityAPI r{};
  r.kind = kind;
  r.cbid = call.cbid;
  r.start = clock(call.start_ns);
  r.end = clock(call.end_ns);
  r.processId = uint32_t(getpid());
  r.threadId = thread_id();
  r.correlationId = call.correlation;
  r.returnValue = uint32_t(call.result);
  write(&r, sizeof r);
}

uint8_t memory_kind(activity::Memory m) {
  switch (m) {
    case activity::Memory::kPageable: return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    case activity::Memory::kPinned: return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    case activity::Memory::kDevice: return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    case activity::Memory::kManaged: return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
    case activity::Memory::kArray: return CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
    case activity::Memory::kUnknown: break;
  }
  return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
}

bool on_device(activity::Memory m) {
  return m == activity::Memory::kDevice || m == activity::Memory::kManaged;
}

uint8_t copy_kind(activity::Memory src, activity::Memory dst) {
  constexpr activity::Memory kArray = activity::Memory::kArray;
  if (src == kArray) {
    return dst == kArray ? CUPTI_ACTIVITY_MEMCPY_KIND_ATOA
           : on_device(dst) ? CUPTI_ACTIVITY_MEMCPY_KIND_ATOD
                            : CUPTI_ACTIVITY_MEMCPY_KIND_ATOH;
  }
  if (dst == kArray) return on_device(src) ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOA : CUPTI_ACTIVITY_MEMCPY_KIND_HTOA;
  if (on_device(src)) return on_device(dst) ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  return on_device(dst) ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD : CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
}

void on_device_op(const activity::DeviceOp& op) {
  const activity::OpInfo& info = *op.info;
  Clock clock;
  if (info.graph_node_id != 0 && enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) return;
  switch (info.type) {
    case activity::OpType::kGraph: {
      if (!enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) return;
      CUpti_ActivityGraphTrace2 r{};
      r.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
      r.correlationId = info.runtime_correlation != 0 ? info.runtime_correlation : info.driver_correlation;
      r.start = clock(op.start_ns - info.graph_nodes_ns);
      r.end = clock(op.end_ns);
      r.deviceId = r.endDeviceId = uint32_t(op.device);
      r.contextId = r.endContextId = context_id(op.device);
      r.streamId = uint32_t(op.stream);
      r.graphId = info.graph_id;
      write(&r, sizeof r, true);
      return;
    }
    case activity::OpType::kKernel: {
      CUpti_ActivityKind kind = enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                : enabled(CUPTI_ACTIVITY_KIND_KERNEL)       ? CUPTI_ACTIVITY_KIND_KERNEL
                                                                            : CUPTI_ACTIVITY_KIND_INVALID;
      if (kind == CUPTI_ACTIVITY_KIND_INVALID) return;
      CUpti_ActivityKernel10 r{};
      r.kind = kind;
      r.start = clock(op.start_ns);
      r.end = clock(op.end_ns);
      r.completed = r.end;
      r.queued = CUPTI_TIMESTAMP_UNKNOWN;
      r.submitted = CUPTI_TIMESTAMP_UNKNOWN;
      r.deviceId = uint32_t(op.device);
      r.contextId = context_id(op.device);
      r.streamId = uint32_t(op.stream);
      r.gridX = int32_t(info.grid[0]);
      r.gridY = int32_t(info.grid[1]);
      r.gridZ = int32_t(info.grid[2]);
      r.blockX = int32_t(info.block[0]);
      r.blockY = int32_t(info.block[1]);
      r.blockZ = int32_t(info.block[2]);
      r.dynamicSharedMemory = int32_t(info.dynamic_shared);
      r.correlationId = info.runtime_correlation != 0 ? info.runtime_correlation : info.driver_correlation;
      r.name = info.name;
      r.graphId = info.graph_id;
      r.graphNodeId = info.graph_node_id;
      {
        Lock lock(state().mu);
        r.gridId = ++state().grid_id;
      }
      write(&r, sizeof r, true);
      return;
    }
    case activity::OpType::kMemcpy: {
      if (!enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
      CUpti_ActivityMemcpy6 r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      r.copyKind = copy_kind(info.src, info.dst);
      r.srcKind = memory_kind(info.src);
      r.dstKind = memory_kind(info.dst);
      r.bytes = info.bytes;
      r.start = clock(op.start_ns);
      r.end = clock(op.end_ns);
      r.deviceId = uint32_t(op.device);
      r.contextId = context_id(op.device);
      r.streamId = uint32_t(op.stream);
      r.correlationId = info.driver_correlation != 0 ? info.driver_correlation : info.runtime_correlation;
      r.runtimeCorrelationId = info.runtime_correlation;
      r.copyCount = 1;
      r.graphId = info.graph_id;
      r.graphNodeId = info.graph_node_id;
      write(&r, sizeof r, true);
      return;
    }
    case activity::OpType::kMemset: {
      if (!enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
      CUpti_ActivityMemset4 r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      r.value = info.value;
      r.bytes = info.bytes;
      r.start = clock(op.start_ns);
      r.end = clock(op.end_ns);
      r.deviceId = uint32_t(op.device);
      r.contextId = context_id(op.device);
      r.streamId = uint32_t(op.stream);
      r.correlationId = info.runtime_correlation != 0 ? info.runtime_correlation : info.driver_correlation;
      r.memoryKind = memory_kind(info.dst);
      r.graphId = info.graph_id;
      r.graphNodeId = info.graph_node_id;
      write(&r, sizeof r, true);
      return;
    }
    case activity::OpType::kFree: {
      if (!enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
      CUpti_ActivityMemory4 r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
      r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
      r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      r.correlationId = info.runtime_correlation != 0 ? info.runtime_correlation : info.driver_correlation;
      r.address = info.address;
      r.bytes = info.bytes;
      r.timestamp = clock(op.end_ns);
      r.processId = uint32_t(getpid());
      r.deviceId = uint32_t(op.device);
      r.contextId = context_id(op.device);
      r.streamId = uint32_t(op.stream);
      r.isAsync = 1;
      write(&r, sizeof r);
      return;
    }
  }
}

void on_sync(const activity::SyncEvent& e) {
  if (!enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return;
  Clock clock;
  CUpti_ActivitySynchronization2 r{};
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.type = CUpti_ActivitySynchronizationType(e.type);
  r.start = clock(e.start_ns);
  r.end = clock(e.end_ns);
  r.correlationId = e.correlation;
  r.contextId = context_id(e.device);
  r.streamId = e.stream != 0 ? uint32_t(e.stream) : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  r.cudaEventId = e.event != 0 ? uint32_t(e.event) : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  r.returnValue = uint32_t(e.result);
  write(&r, sizeof r);
}

void on_memory(const activity::MemoryEvent& e) {
  if (!enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  Clock clock;
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = e.allocation ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                       : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  r.memoryKind = CUpti_ActivityMemoryKind(memory_kind(e.kind));
  r.correlationId = e.correlation;
  r.address = e.address;
  r.bytes = e.bytes;
  r.timestamp = clock(e.time_ns);
  r.processId = uint32_t(getpid());
  r.deviceId = uint32_t(e.device);
  r.contextId = context_id(e.device);
  write(&r, sizeof r);
}

constexpr activity::Sink kSink{activity::kVersion, on_api_enter, on_api_exit, on_device_op, on_sync, on_memory};

constexpr CUpti_ActivityKind kSupported[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_DEVICE,
};

// One CUpti_ActivityDevice5 per device, from the description the runtime and the driver report
// (core/device.h), written when the kind is turned on: the device records come once, as the real
// CUPTI's do. Their names live as long as the library.
void write_device_records() {
  static char names[kMaxDeviceCount][64];
  auto attribute = [](CUdevice_attribute a, int device) { return uint32_t(device_attribute(int(a), device)); };
  for (int device = 0; device < config().device_count && device < kMaxDeviceCount; ++device) {
    CUpti_ActivityDevice5 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    r.flags = attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, device) ? CUPTI_ACTIVITY_FLAG_DEVICE_CONCURRENT_KERNELS
                                                                        : CUPTI_ACTIVITY_FLAG_NONE;
    // kHz times bytes a transfer is kB/s; double data rate moves two transfers a clock.
    r.globalMemoryBandwidth = 2ull * attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device) *
                              (attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device) / 8);
    r.globalMemorySize = config().device_memory_bytes;
    r.constantMemorySize = attribute(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, device);
    r.l2CacheSize = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
    r.numThreadsPerWarp = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, device);
    r.coreClockRate = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device);
    r.numMemcpyEngines = attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, device);
    r.numMultiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    r.maxIPC = 4;  // four schedulers a multiprocessor, one instruction each a cycle
    r.maxWarpsPerMultiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device) /
                                  r.numThreadsPerWarp;
    r.maxBlocksPerMultiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, device);
    r.maxSharedMemoryPerMultiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device);
    r.maxRegistersPerMultiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, device);
    r.maxRegistersPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, device);
    r.maxSharedMemoryPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
    r.maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
    r.maxBlockDimX = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, device);
    r.maxBlockDimY = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, device);
    r.maxBlockDimZ = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, device);
    r.maxGridDimX = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, device);
    r.maxGridDimY = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, device);
    r.maxGridDimZ = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, device);
    r.computeCapabilityMajor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    r.computeCapabilityMinor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    r.id = uint32_t(device);
    r.eccEnabled = attribute(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, device);
    device_uuid(device, r.uuid.bytes);
    device_name(device, names[device], sizeof names[device]);
    r.name = names[device];
    r.isCudaVisible = 1;
    r.numaId = attribute(CU_DEVICE_ATTRIBUTE_NUMA_ID, device);
    write(&r, sizeof r);
  }
}

CUptiResult set_enabled(CUpti_ActivityKind kind, bool on) {
  if (unsigned(kind) == 0 || unsigned(kind) >= unsigned(CUPTI_ACTIVITY_KIND_COUNT)) return CUPTI_ERROR_INVALID_KIND;
  if (std::find(std::begin(kSupported), std::end(kSupported), kind) == std::end(kSupported)) {
    return CUPTI_ERROR_NOT_COMPATIBLE;
  }
  State& s = state();
  bool describe_devices = false;
  {
    Lock lock(s.mu);
    uint64_t bit = uint64_t(1) << unsigned(kind);
    describe_devices = kind == CUPTI_ACTIVITY_KIND_DEVICE && on && !(g_enabled.load() & bit);
    uint64_t mask = on ? g_enabled.load() | bit : g_enabled.load() & ~bit;
    g_enabled.store(mask);
    if (std::atomic<int8_t>* overrides = api_overrides(kind)) reset_api_overrides_locked(overrides);
    install_sink_locked();
  }
  if (describe_devices) write_device_records();  // write() takes the lock
  return CUPTI_SUCCESS;
}

void reset_api_overrides_locked(std::atomic<int8_t>* overrides) {
  for (uint32_t i = 0; i < kApiSlots; ++i) {
    if (overrides[i].exchange(kFollowKind, std::memory_order_relaxed) == kWanted) g_api_overrides_on.fetch_sub(1);
  }
}

CUptiResult set_api_override(CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint8_t enable) {
  if (cbid >= kApiSlots) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = state();
  Lock lock(s.mu);
  int8_t before = api_overrides(kind)[cbid].exchange(enable ? kWanted : kUnwanted, std::memory_order_relaxed);
  if (before == kWanted && !enable) g_api_overrides_on.fetch_sub(1);
  if (before != kWanted && enable) g_api_overrides_on.fetch_add(1);
  install_sink_locked();
  return CUPTI_SUCCESS;
}

// The device's hooks stay at their one-load cost unless a kind or a callback is enabled.
void install_sink_locked() {
  activity::set_sink(g_enabled.load() != 0 || g_callbacks_enabled.load() != 0 || g_api_overrides_on.load() != 0
                         ? &kSink
                         : nullptr);
}

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: return sizeof(CUpti_ActivityGraphTrace2);
    case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
    default: return 0;
  }
}

int g_subscriber_token;

struct ResultName {
  CUptiResult code;
  const char* name;
};

#define R(x) {x, #x}
constexpr ResultName kResults[] = {
    R(CUPTI_SUCCESS), R(CUPTI_ERROR_INVALID_PARAMETER), R(CUPTI_ERROR_INVALID_DEVICE),
    R(CUPTI_ERROR_INVALID_CONTEXT), R(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID), R(CUPTI_ERROR_INVALID_EVENT_ID),
    R(CUPTI_ERROR_INVALID_EVENT_NAME), R(CUPTI_ERROR_INVALID_OPERATION), R(CUPTI_ERROR_OUT_OF_MEMORY),
    R(CUPTI_ERROR_HARDWARE), R(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT), R(CUPTI_ERROR_API_NOT_IMPLEMENTED),
    R(CUPTI_ERROR_MAX_LIMIT_REACHED), R(CUPTI_ERROR_NOT_READY), R(CUPTI_ERROR_NOT_COMPATIBLE),
    R(CUPTI_ERROR_NOT_INITIALIZED), R(CUPTI_ERROR_INVALID_METRIC_ID), R(CUPTI_ERROR_INVALID_METRIC_NAME),
    R(CUPTI_ERROR_QUEUE_EMPTY), R(CUPTI_ERROR_INVALID_HANDLE), R(CUPTI_ERROR_INVALID_STREAM),
    R(CUPTI_ERROR_INVALID_KIND), R(CUPTI_ERROR_INVALID_EVENT_VALUE), R(CUPTI_ERROR_DISABLED),
    R(CUPTI_ERROR_INVALID_MODULE), R(CUPTI_ERROR_INVALID_METRIC_VALUE), R(CUPTI_ERROR_HARDWARE_BUSY),
    R(CUPTI_ERROR_NOT_SUPPORTED), R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED),
    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE),
    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES),
    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS), R(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED),
    R(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED), R(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE),
    R(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES), R(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED),
    R(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE), R(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED),
    R(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), R(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES),
    R(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED), R(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED),
    R(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED), R(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED),
    R(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED), R(CUPTI_ERROR_INVALID_CHIP_NAME), R(CUPTI_ERROR_UNKNOWN),
};
#undef R

}  // namespace

// ---- exports ----

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (const ResultName& r : kResults) {
    if (r.code == result) {
      *str = r.name;
      return CUPTI_SUCCESS;
    }
  }
  *str = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = cupti_now();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                                   CUpti_CallbackFunc callback, void* userdata) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (const uint64_t ms = knobs().subscribe_delay_ms) {
    timespec pause{time_t(ms / 1000), long(ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) != 0) {
    }
  }
  if (CUptiResult e = no_driver(); e) return e;
  if (knobs().error == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  State& s = state();
  Lock lock(s.mu);
  if (s.subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  s.subscribed = true;
  g_callback_data = userdata;
  g_callback.store(callback, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token);
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  State& s = state();
  Lock lock(s.mu);
  if (!s.subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s.subscribed = false;
  g_callback.store(nullptr, std::memory_order_release);
  clear_callbacks();
  install_sink_locked();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                        CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = state();
  Lock lock(s.mu);
  const int d = callback_domain(domain);
  const char* name = nullptr;
  if (!s.subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token) || d < 0 ||
      cbid >= kCallbackIds || cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS)
    return CUPTI_ERROR_INVALID_PARAMETER;
  set_callback(d, cbid, enable != 0);
  install_sink_locked();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                      CUpti_CallbackDomain domain) {
  State& s = state();
  Lock lock(s.mu);
  const int d = callback_domain(domain);
  if (!s.subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token) || d < 0)
    return CUPTI_ERROR_INVALID_PARAMETER;
  for (uint32_t cbid = 1; cbid < kCallbackIds; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS) set_callback(d, cbid, enable != 0);
  }
  install_sink_locked();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                                         const char** name) {
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  auto find = [&](const auto& table) {
    for (const CbidName& n : table) {
      // The enums' INVALID (0) and SIZE entries name no function.
      if (n.cbid == cbid && cbid != 0 && std::strcmp(n.name, "SIZE") != 0) {
        *name = n.name;
        return CUPTI_SUCCESS;
      }
    }
    return CUPTI_ERROR_INVALID_PARAMETER;
  };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return find(kRUNTIMENames);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return find(kDRIVERNames);
  return CUPTI_ERROR_INVALID_PARAMETER;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  if (CUptiResult e = no_driver(); e) return e;
  if (f == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  g_timestamp.store(f, std::memory_order_release);
  g_offset_taken.store(0, std::memory_order_release);
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (CUptiResult e = no_driver(); e) return e;
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  g_thread_id_type.store(type);
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (type == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = g_thread_id_type.load();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                                   CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = state();
  Lock lock(s.mu);
  s.request = request;
  s.complete = complete;
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (CUptiResult e = no_driver(); e) return e;
  return set_enabled(kind, true);
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  return set_enabled(kind, false);
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (CUptiResult e = no_driver(); e) return e;
  return set_api_override(CUPTI_ACTIVITY_KIND_RUNTIME, cbid, enable);
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (CUptiResult e = no_driver(); e) return e;
  return set_api_override(CUPTI_ACTIVITY_KIND_DRIVER, cbid, enable);
}

// CUDA event records (CUPTI_ACTIVITY_KIND_CUDA_EVENT) are not among the kinds simulated, so their
// device timestamps have nothing to change; the setting is accepted as a real CUPTI accepts it.
SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t) {
  if (CUptiResult e = no_driver(); e) return e;
  return CUPTI_SUCCESS;
}

// The device buffer and semaphore pool settings: kept so that they read back; the simulation has
// no device buffers whose size they would change.
SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size,
                                                             void* value) {
  if (size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (unsigned(attr) >= kActivityAttributes) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*size == 0 || *size > sizeof(uint64_t)) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = state();
  Lock lock(s.mu);
  uint64_t v = 0;
  std::memcpy(&v, value, *size);
  g_activity_attributes[attr] = {*size, v};
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* size,
                                                             void* value) {
  if (size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (unsigned(attr) >= kActivityAttributes) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = state();
  Lock lock(s.mu);
  const ActivityAttribute& a = g_activity_attributes[attr];
  size_t own = a.size != 0 ? a.size : sizeof(size_t);
  if (*size < own) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  std::memcpy(value, &a.value, own);
  *size = own;
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  if (CUptiResult e = no_driver(); e) return e;
  if ((flag & ~uint32_t(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) != 0) return CUPTI_ERROR_INVALID_PARAMETER;
  {
    State& s = state();
    Lock lock(s.mu);
    if (s.complete == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  }
  // Every record here is complete when written (see the top): both flushes hand over every buffer.
  deliver(true);
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time) {
  if (CUptiResult e = no_driver(); e) return e;
  State& s = state();
  Lock lock(s.mu);
  s.period_ms = time;
  start_worker_locked(s);
  s.cv.notify_all();
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                               CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t offset = 0;
  if (*record != nullptr) {
    auto* current = reinterpret_cast<uint8_t*>(*record);
    if (current < buffer || current >= buffer + validBufferSizeBytes) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t size = record_size((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    offset = size_t(current - buffer) + size;
  }
  if (offset + sizeof(CUpti_Activity) > validBufferSizeBytes) {
    *record = nullptr;
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  size_t size = record_size(next->kind);
  if (size == 0 || offset + size > validBufferSizeBytes) {
    *record = nullptr;
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  *record = next;
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = state();
  Lock lock(s.mu);
  // Reset on read, as the header says; one count for the whole process.
  *dropped = size_t(s.dropped);
  s.dropped = 0;
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                           uint64_t id) {
  if (unsigned(kind) == 0 || unsigned(kind) >= unsigned(CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  t_external.ids[kind].push_back(id);
  return CUPTI_SUCCESS;
}

SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                          uint64_t* lastId) {
  if (unsigned(kind) == 0 || unsigned(kind) >= unsigned(CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::deque<uint64_t>& ids = t_external.ids[kind];
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

// Ends the session: nothing is recorded any more and every buffer goes back to the client; the next
// call starts afresh.
SIMCUDA_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) {
  {
    State& s = state();
    Lock lock(s.mu);
    g_enabled.store(0);
    reset_api_overrides_locked(g_runtime_api_override);
    reset_api_overrides_locked(g_driver_api_override);
    clear_callbacks();
    g_callback.store(nullptr, std::memory_order_release);
    activity::set_sink(nullptr);
  }
  deliver(true);
  State& s = state();
  Lock lock(s.mu);
  s.request = nullptr;
  s.complete = nullptr;
  s.subscribed = false;
  s.period_ms = 0;
  g_timestamp.store(nullptr);
  g_offset_taken.store(0, std::memory_order_release);
  g_thread_id_type.store(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  return CUPTI_SUCCESS;
}
