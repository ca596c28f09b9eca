#include "gpu_activity.h"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "api_lookup.h"
#include "capture.h"
#include "cupti_trial.h"
#include "cutrace/api_table.h"
#include "interpose.h"
#include "loaded_objects.h"

namespace cutrace::preload {
namespace {

// CUPTI's functions, found with dlsym in the library the shim loaded (the shim never links CUPTI: a
// program without it must still run).
struct Cupti {
  decltype(&cuptiSubscribe) subscribe;
  decltype(&cuptiGetResultString) result_string;
  decltype(&cuptiGetCallbackName) callback_name;
  decltype(&cuptiEnableCallback) enable_callback;
  decltype(&cuptiEnableDomain) enable_domain;
  decltype(&cuptiFinalize) finalize;
  decltype(&cuptiActivityRegisterTimestampCallback) timestamp_callback;
  decltype(&cuptiSetThreadIdType) thread_id_type;
  decltype(&cuptiActivityRegisterCallbacks) buffer_callbacks;
  decltype(&cuptiActivityEnable) enable;
  decltype(&cuptiActivityDisable) disable;
  decltype(&cuptiActivityFlushAll) flush_all;
  decltype(&cuptiActivityGetNextRecord) next_record;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records;
};

Cupti g_cupti{};
std::atomic<bool> g_started{false};   // this process tried (a forked child tries afresh: forget_gpu_activity)
std::atomic<bool> g_running{false};   // CUPTI delivers activity to this process's trace
pid_t g_running_pid = 0;              // the process that started it (a vfork child shares this memory)
// Forced flushes asked of the flusher thread (flush_gpu_activity_before_exit) and done by it: futex words.
std::atomic<uint32_t> g_flushes_asked{0}, g_flushes_done{0};
uintptr_t g_cupti_start = 0, g_cupti_end = 0;  // the loaded CUPTI's address range
CUpti_SubscriberHandle g_subscriber = nullptr;
char g_source[1400];  // the status that said where GPU activity came from
// Capture is over for good (tear_down_gpu_activity): the next API call's exit callback finalises CUPTI.
std::atomic<bool> g_teardown_asked{false};
std::atomic<bool> g_finalized{false};
// Held around CUPTI's flushes and its finalisation, which must not overlap: a flush racing
// cuptiFinalize crashed Kineto (pytorch/kineto #686). Flushes are rare (every 250 ms, a range's end).
std::atomic_flag g_cupti_lock = ATOMIC_FLAG_INIT;

// The kinds the shim enabled, a bit per CUpti_ActivityKind below 64: only their records go into the trace.
CUpti_ActivityKind g_own_kinds[8];
uint32_t g_own_kind_count = 0;
std::atomic<uint64_t> g_own_kind_bits{0};
// The program's own activity client (torch.profiler's Kineto, a tool of its own). CUPTI hands completed
// buffers to one client, the callbacks registered last; the shim stays that client and hands on to the
// program's callbacks a copy of each record of a kind the program enabled (forward_to_program), so
// that both have every record they asked for. Changed under g_cupti_lock, read by CUPTI's worker.
std::atomic<CUpti_BuffersCallbackRequestFunc> g_program_request{nullptr};
std::atomic<CUpti_BuffersCallbackCompleteFunc> g_program_complete{nullptr};
std::atomic<uint64_t> g_program_kinds{0};  // bit per CUpti_ActivityKind below 64 that the program enabled

bool kind_bit(CUpti_ActivityKind kind, uint64_t* bit) {
  if (uint32_t(kind) >= 64) return false;
  *bit = uint64_t(1) << uint32_t(kind);
  return true;
}

bool kind_in(uint64_t bits, CUpti_ActivityKind kind) {
  uint64_t bit = 0;
  return kind_bit(kind, &bit) && (bits & bit);
}

struct CuptiLocked {
  CuptiLocked() {
    while (g_cupti_lock.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~CuptiLocked() { g_cupti_lock.clear(std::memory_order_release); }
};

// How far the starter thread got (a futex word), and how long the thread whose call asked for GPU
// activity waits for each step.
constexpr uint32_t kStarting = 1, kLoaderFree = 2, kStartDone = 3;
std::atomic<uint32_t> g_start_phase{0};
constexpr uint64_t kLoaderWaitMs = 250, kStartWaitMs = 10000;
// Names the CUPTI library to load instead of the one that matches the process's CUDA runtime.
constexpr const char* kCuptiPathEnvVar = "CUTRACE_CUPTI_PATH";

// Activity buffers: CUPTI asks for one whenever it fills one. A bounded pool, so that a program
// producing records faster than the trace takes them makes CUPTI drop (and count) rather than grow
// without end; a buffer handed back is reused, not freed. 4 MiB each: CUPTI's documentation
// recommends 1 to 10 MB.
constexpr size_t kBufferBytes = 4u << 20;
constexpr uint32_t kMaxBuffers = 32;
std::atomic<uint32_t> g_buffers_made{0};
std::atomic_flag g_pool_lock = ATOMIC_FLAG_INIT;
uint8_t* g_pool[kMaxBuffers];  // buffers handed back, ready for reuse
uint32_t g_pool_size = 0;

uint8_t* take_pooled() {
  while (g_pool_lock.test_and_set(std::memory_order_acquire)) {
  }
  uint8_t* buffer = g_pool_size ? g_pool[--g_pool_size] : nullptr;
  g_pool_lock.clear(std::memory_order_release);
  return buffer;
}

void give_back(uint8_t* buffer) {
  while (g_pool_lock.test_and_set(std::memory_order_acquire)) {
  }
  g_pool[g_pool_size++] = buffer;  // never more than made, at most kMaxBuffers
  g_pool_lock.clear(std::memory_order_release);
}

// CUPTI's clock: the trace's, so that GPU intervals and API calls need no alignment.
uint64_t CUPTIAPI trace_clock() { return monotonic_ns(); }

void CUPTIAPI request_buffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = take_pooled();
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
  if (*buffer) return;
  if (g_buffers_made.fetch_add(1, std::memory_order_relaxed) >= kMaxBuffers) {
    g_buffers_made.fetch_sub(1, std::memory_order_relaxed);
    return;  // CUPTI drops the records it cannot place, and counts them
  }
  void* p = nullptr;
  if (posix_memalign(&p, 8, kBufferBytes) != 0) {
    g_buffers_made.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  *buffer = static_cast<uint8_t*>(p);
  *size = kBufferBytes;
}

// --- names ---------------------------------------------------------------------------------------

SentNames<16384> g_sent_names;  // kernel name ids named in this process

// CUPTI callback id -> the api id of the trace that it names, or -1 when the call is not one that
// gives the device work, waits for it or allocates (such calls need no link). -2: not looked up yet.
constexpr uint32_t kCbidSlots = 4096;
std::atomic<int32_t> g_runtime_api[kCbidSlots];
std::atomic<int32_t> g_driver_api[kCbidSlots];

int32_t api_of_callback(CUpti_CallbackDomain domain, uint32_t cbid) {
  std::atomic<int32_t>* slot = nullptr;
  if (cbid < kCbidSlots) slot = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? &g_runtime_api[cbid] : &g_driver_api[cbid];
  if (slot) {
    const int32_t known = slot->load(std::memory_order_relaxed);
    if (known != -2) return known;
  }
  int32_t api = -1;
  const char* name = nullptr;
  if (g_cupti.callback_name(domain, cbid, &name) == CUPTI_SUCCESS && name) {
    // CUPTI names a runtime function with the version it came in ("cudaLaunchKernel_v7000"), a driver
    // function by its export ("cuMemcpyHtoD_v2"): the export first, then the name less the version.
    int32_t id = find_api(name);
    if (id < 0) {
      char plain[256];
      const size_t n = strnlen(name, sizeof plain - 1);
      std::memcpy(plain, name, n);
      plain[n] = '\0';
      char* v = strrchr(plain, '_');
      if (v && v[1] == 'v' && strspn(v + 2, "0123456789") == strlen(v + 2) && v[2]) {
        *v = '\0';
        id = find_api(plain);
      }
    }
    if (id >= 0 && kApiTable[id].api_class != abi::ApiClass::kOther) api = id;
  }
  if (slot) slot->store(api, std::memory_order_relaxed);
  return api;
}

// --- conversion ----------------------------------------------------------------------------------

template <typename Record>
void write(ThreadState& ts, const Record& r) {
  WritingRecord writing(ts);
  if (uint8_t* p = ts.producer.reserve(sizeof r)) {
    std::memcpy(p, &r, sizeof r);
    ts.producer.commit(sizeof r);
  }
}

abi::GpuActivityHeader header_of(abi::GpuActivity kind, uint32_t bytes, uint64_t start, uint64_t end,
                                 uint32_t correlation, uint32_t device, uint32_t context, uint32_t stream) {
  abi::GpuActivityHeader h{};
  h.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(bytes), uint32_t(kind)};
  h.start = start;
  h.end = end;
  h.correlation = correlation;
  h.device = device;
  h.context = context;
  h.stream = stream;
  return h;
}

void convert(ThreadState& ts, const CUpti_Activity* record) {
  // With -c, only what overlaps one of the process's capture ranges is kept (each case tests its own
  // interval): the device work of the calls recorded there; an API link or an allocation is an instant
  // within its call.
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (!capture_overlaps(k->start, k->end)) return;
      abi::GpuKernelRecord r{};
      r.h = header_of(abi::GpuActivity::kKernel, sizeof r, k->start, k->end, k->correlationId, k->deviceId,
                      k->contextId, k->streamId);
      if (k->name) {
        r.name = name_hash(k->name, strlen(k->name));
        if (g_sent_names.first_sending(r.name)) emit_string(ts, abi::StringKind::kGpuKernelName, r.name, k->name, strlen(k->name));
      }
      r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
      r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
      r.static_shared_bytes = uint32_t(k->staticSharedMemory);
      r.dynamic_shared_bytes = uint32_t(k->dynamicSharedMemory);
      r.registers_per_thread = k->registersPerThread;
      r.graph_id = k->graphId;
      r.graph_node_id = k->graphNodeId;
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!capture_overlaps(m->start, m->end)) return;
      abi::GpuMemcpyRecord r{};
      r.h = header_of(abi::GpuActivity::kMemcpy, sizeof r, m->start, m->end, m->correlationId, m->deviceId,
                      m->contextId, m->streamId);
      r.bytes = m->bytes;
      r.runtime_correlation = m->runtimeCorrelationId;
      r.copy_kind = m->copyKind;
      r.src_kind = m->srcKind;
      r.dst_kind = m->dstKind;
      r.flags = m->flags;
      r.graph_id = m->graphId;
      r.graph_node_id = m->graphNodeId;
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!capture_overlaps(m->start, m->end)) return;
      abi::GpuMemsetRecord r{};
      r.h = header_of(abi::GpuActivity::kMemset, sizeof r, m->start, m->end, m->correlationId, m->deviceId,
                      m->contextId, m->streamId);
      r.bytes = m->bytes;
      r.value = m->value;
      r.memory_kind = m->memoryKind;
      r.flags = m->flags;
      r.graph_id = m->graphId;
      r.graph_node_id = m->graphNodeId;
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record);
      if (!capture_overlaps(g->start, g->end)) return;
      abi::GpuGraphRecord r{};
      r.h = header_of(abi::GpuActivity::kGraph, sizeof r, g->start, g->end, g->correlationId, g->deviceId,
                      g->contextId, g->streamId);
      r.graph_id = g->graphId;
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      if (!capture_overlaps(s->start, s->end)) return;
      abi::GpuSyncRecord r{};
      r.h = header_of(abi::GpuActivity::kSync, sizeof r, s->start, s->end, s->correlationId, UINT32_MAX,
                      s->contextId, s->streamId);
      r.type = uint32_t(s->type);
      r.event = s->cudaEventId;
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      if (!capture_overlaps(m->timestamp, m->timestamp)) return;
      abi::GpuMemoryRecord r{};
      r.h = header_of(abi::GpuActivity::kMemory, sizeof r, m->timestamp, m->timestamp, m->correlationId,
                      m->deviceId, m->contextId, m->streamId);
      r.address = m->address;
      r.bytes = m->bytes;
      r.operation = uint32_t(m->memoryOperationType);
      r.memory_kind = uint32_t(m->memoryKind);
      write(ts, r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      // Read as CUpti_ActivityDevice5: CUPTI 13.2's Device6 only appends fields (numTpcs) to it. A
      // description of the hardware, kept whatever the capture ranges say.
      const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(record);
      const size_t name_bytes = d->name ? strnlen(d->name, abi::kMaxGpuDeviceNameBytes) : 0;
      WritingRecord writing(ts);
      const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::GpuDeviceRecord) + name_bytes));
      uint8_t* p = ts.producer.reserve(bytes);
      if (!p) break;
      abi::GpuDeviceRecord r{};
      r.header = {uint16_t(abi::RecordKind::kGpuDevice), uint16_t(bytes), 0};
      r.global_memory_bytes = d->globalMemorySize;
      r.memory_bandwidth = d->globalMemoryBandwidth;
      r.device = d->id;
      r.compute_major = d->computeCapabilityMajor;
      r.compute_minor = d->computeCapabilityMinor;
      r.sm_count = d->numMultiprocessors;
      r.core_clock_khz = d->coreClockRate;
      r.l2_cache_bytes = d->l2CacheSize;
      r.constant_memory_bytes = d->constantMemorySize;
      r.threads_per_warp = d->numThreadsPerWarp;
      r.memcpy_engines = d->numMemcpyEngines;
      r.max_ipc = d->maxIPC;
      r.max_warps_per_sm = d->maxWarpsPerMultiprocessor;
      r.max_blocks_per_sm = d->maxBlocksPerMultiprocessor;
      r.max_shared_per_sm = d->maxSharedMemoryPerMultiprocessor;
      r.max_registers_per_sm = d->maxRegistersPerMultiprocessor;
      r.max_registers_per_block = d->maxRegistersPerBlock;
      r.max_shared_per_block = d->maxSharedMemoryPerBlock;
      r.max_threads_per_block = d->maxThreadsPerBlock;
      r.max_block_dim[0] = d->maxBlockDimX, r.max_block_dim[1] = d->maxBlockDimY, r.max_block_dim[2] = d->maxBlockDimZ;
      r.max_grid_dim[0] = d->maxGridDimX, r.max_grid_dim[1] = d->maxGridDimY, r.max_grid_dim[2] = d->maxGridDimZ;
      r.ecc_enabled = d->eccEnabled;
      r.flags = uint32_t(d->flags);
      r.name_bytes = uint32_t(name_bytes);
      static_assert(sizeof r.uuid == sizeof d->uuid.bytes);
      std::memcpy(r.uuid, d->uuid.bytes, sizeof r.uuid);
      std::memset(p, 0, bytes);
      std::memcpy(p, &r, sizeof r);
      if (name_bytes) std::memcpy(p + sizeof r, d->name, name_bytes);
      ts.producer.commit(bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      if (!capture_overlaps(a->start, a->end)) return;
      const int32_t api = api_of_callback(
          record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
          a->cbid);
      if (api < 0) break;
      abi::GpuApiLinkRecord r{};
      r.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof r), uint32_t(abi::GpuActivity::kApiLink)};
      r.start = a->start;
      r.end = a->end;
      r.correlation = a->correlationId;
      r.tid = a->threadId;
      r.api_id = uint32_t(api);
      r.result = a->returnValue;
      write(ts, r);
      break;
    }
    default:
      break;
  }
}

// Set while one of the shim's flushes runs on this thread (a program thread at a range's end or at
// exit): buffers completed then are the flush's, not CUPTI's worker's.
thread_local bool t_flushing = false;
thread_local bool t_cupti_worker = false;

// Copies the records of `buffer` of the kinds the program enabled into buffers its own request callback
// gives, in CUPTI's order and byte for byte (a record's size is the distance to the next one, so
// no record layout is assumed), and hands each to its completion callback when full and at the end:
// what CUPTI would have given it without cutrace. Records that its request callback finds no room for
// are lost to it, as CUPTI drops them when a client's callback gives no buffer.
void forward_to_program(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid) {
  const uint64_t kinds = g_program_kinds.load(std::memory_order_acquire);
  const auto request = g_program_request.load(std::memory_order_acquire);
  const auto complete = g_program_complete.load(std::memory_order_acquire);
  if (!kinds || !request || !complete || !buffer) return;
  uint8_t* out = nullptr;
  size_t out_size = 0, out_used = 0, out_records = 0, out_max_records = 0;
  auto hand_over = [&] {
    if (out) complete(context, stream, out, out_size, out_used);
    out = nullptr;
    out_used = out_records = 0;
  };
  CUpti_Activity* record = nullptr;
  bool more = g_cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS;
  while (more) {
    CUpti_Activity* next = record;
    more = g_cupti.next_record(buffer, valid, &next) == CUPTI_SUCCESS;
    const auto* from = reinterpret_cast<const uint8_t*>(record);
    const size_t size = size_t((more ? reinterpret_cast<const uint8_t*>(next) : buffer + valid) - from);
    if (kind_in(kinds, record->kind)) {
      if (out && (out_used + size > out_size || (out_max_records && out_records == out_max_records))) hand_over();
      if (!out) {
        request(&out, &out_size, &out_max_records);
        if (out && out_size < size) hand_over();
      }
      if (out) {
        std::memcpy(out + out_used, from, size);
        out_used += size;
        ++out_records;
      }
    }
    record = next;
  }
  hand_over();
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  const int saved_errno = errno;
  ThreadState& ts = t_thread;
  // CUPTI's worker thread, or a thread that flushed: its records go into its own ring.
  if (!ts.producer.header && !ts.in_tracer) prepare_thread(ts);
  if (!t_flushing && !t_cupti_worker) {
    // CUPTI's own thread: whatever CUDA calls it makes are CUPTI's, never the program's.
    t_cupti_worker = true;
    ts.in_tracer++;
  }
  if (ts.producer.header) {
    ts.in_tracer++;
    CUpti_Activity* record = nullptr;
    const uint64_t own = g_own_kind_bits.load(std::memory_order_relaxed);
    while (buffer && g_cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS)
      if (kind_in(own, record->kind)) convert(ts, record);
    size_t dropped = 0;
    if (g_cupti.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped) {
      abi::GpuDroppedRecord r{};
      r.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof r), uint32_t(abi::GpuActivity::kDropped)};
      r.time = monotonic_ns();
      r.dropped = dropped;
      write(ts, r);
    }
    ts.in_tracer--;
  }
  forward_to_program(context, stream, buffer, valid);
  if (buffer) give_back(buffer);
  errno = saved_errno;
}

// --- loading -------------------------------------------------------------------------------------

void report(ThreadState& ts, uint32_t code, const char* text);

// Ends CUPTI's session (cuptiFinalize) from an API call's exit callback, as CUPTI's documentation asks
// of a tool that detaches: its kernel instrumentation, worker threads and callbacks cost the program
// nothing from then on, and its subscriber slot is free for the program's own profiler. What CUPTI
// still holds it delivers as it finalises, into this thread's ring.
void finalize_cupti(ThreadState& ts) {
  if (g_finalized.load(std::memory_order_relaxed) || g_finalized.exchange(true)) return;
  // A flush under way on another thread holds the lock: a later call's callback finalises instead,
  // rather than this one wait inside CUPTI's callback for a flush that may wait on CUPTI in turn.
  if (g_cupti_lock.test_and_set(std::memory_order_acquire)) {
    g_finalized.store(false, std::memory_order_relaxed);
    return;
  }
  struct Unlock {
    ~Unlock() { g_cupti_lock.clear(std::memory_order_release); }
  } unlock;
  const int saved_errno = errno;
  g_running.store(false, std::memory_order_release);
  // The flusher wakes, finds CUPTI stopped, and ends.
  g_flushes_asked.fetch_add(1, std::memory_order_acq_rel);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flushes_asked), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  const bool was_flushing = t_flushing;
  t_flushing = true;
  ts.in_tracer++;
  if (!ts.producer.header) prepare_thread(ts);
  // The range's end flushed what CUPTI held then; cuptiFinalize hands over the rest, as NVIDIA's
  // cupti_finalize sample relies on, with no flush of ours inside CUPTI's callback.
  const CUptiResult finalized = g_cupti.finalize();
  if (ts.producer.header) {
    // The process's last word on where its GPU activity came from, and until when.
    char text[1600];
    std::snprintf(text, sizeof text, "%s, until capture ended for good (CUPTI %s then)", g_source,
                  finalized == CUPTI_SUCCESS ? "was finalised" : "could not be finalised");
    report(ts, 0, text);
  }
  ts.in_tracer--;
  t_flushing = was_flushing;
  errno = saved_errno;
}

// Which callbacks are enabled, a bit per (domain, id): the shim's own (the calls that give the device
// work) and the program's. CUPTI up to 13.2 takes one subscriber, which the shim holds, so the
// program's own (Kineto's, for its launches and contexts) is the shim's under another handle: CUPTI
// calls on_callback for what either enabled, which hands the program the callbacks it enabled, with
// its own userdata, and does the shim's work only for the shim's.
struct CallbackSet {
  std::atomic<uint64_t> words[CUPTI_CB_DOMAIN_SIZE][kCbidSlots / 64];
  bool has(CUpti_CallbackDomain domain, uint32_t cbid) const {
    return uint32_t(domain) < CUPTI_CB_DOMAIN_SIZE && cbid < kCbidSlots &&
           (words[domain][cbid / 64].load(std::memory_order_relaxed) >> (cbid % 64) & 1);
  }
  void set(CUpti_CallbackDomain domain, uint32_t cbid, bool on) {
    if (uint32_t(domain) >= CUPTI_CB_DOMAIN_SIZE || cbid >= kCbidSlots) return;
    const uint64_t bit = uint64_t(1) << (cbid % 64);
    if (on)
      words[domain][cbid / 64].fetch_or(bit, std::memory_order_relaxed);
    else
      words[domain][cbid / 64].fetch_and(~bit, std::memory_order_relaxed);
  }
};
CallbackSet g_own_callbacks, g_program_callbacks;
std::atomic<CUpti_CallbackFunc> g_program_callback{nullptr};
void* g_program_userdata = nullptr;
char g_program_subscriber;  // its address is the handle the program gets
// The program's callback gets a correlationData slot of its own, apart from the shim's, per domain.
thread_local uint64_t t_program_correlation[CUPTI_CB_DOMAIN_SIZE];

void hand_to_program(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const CUpti_CallbackFunc callback = g_program_callback.load(std::memory_order_acquire);
  if (!callback || !g_program_callbacks.has(domain, cbid) || t_thread.in_tracer) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    CUpti_CallbackData own = *static_cast<const CUpti_CallbackData*>(data);
    own.correlationData = &t_program_correlation[domain];
    callback(g_program_userdata, domain, cbid, &own);
  } else {
    callback(g_program_userdata, domain, cbid, data);
  }
}

// The link from a call that gives the device work to that work: CUPTI's correlation id of the call,
// which its kernels, copies and sets carry, written into the calling thread's ring with the call's
// interval as CUPTI saw it (inside the shim's own interval of the call). Only the callback ids that
// give the device work are enabled (enable_work_callbacks), so other calls pay nothing, and CUPTI
// keeps no API records: the shim has every call already.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  hand_to_program(domain, cbid, data);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  // Not one of the shim's: only the program asked for it (or the teardown below enabled every call).
  const bool own = g_own_callbacks.has(domain, cbid);
  if (call->callbackSite == CUPTI_API_ENTER) {
    if (!own) return;
    if (call->correlationData) *call->correlationData = monotonic_ns();
    return;
  }
  ThreadState& ts = t_thread;
  // Capture is over for good: in this process after its last range, or in the whole session after -d.
  // This is an API exit callback, where CUPTI may be finalised; no link to write. Not while CUPTI is
  // still starting on the starter thread (the callbacks are enabled before the kinds), which would go
  // on calling a finalised CUPTI: a later call's callback finalises it.
  if (CUTRACE_UNLIKELY(g_teardown_asked.load(std::memory_order_relaxed) ||
                       (g_session && g_session->capture_closed_ns.load(std::memory_order_relaxed)))) {
    // Not where the program profiles with CUPTI itself: the session is its too.
    const bool programs_too = g_program_callback.load(std::memory_order_relaxed) ||
                              g_program_kinds.load(std::memory_order_relaxed);
    if (g_running.load(std::memory_order_acquire) && !programs_too) finalize_cupti(ts);
    return;
  }
  if (!own || ts.in_tracer || !ts.producer.header || !call->correlationData) return;
  const int saved_errno = errno;
  const uint64_t start = *call->correlationData, end = monotonic_ns();
  const int32_t api = api_of_callback(domain, cbid);
  if (api >= 0 && capture_overlaps(start, end)) {
    abi::GpuApiLinkRecord r{};
    r.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof r), uint32_t(abi::GpuActivity::kApiLink)};
    r.start = start;
    r.end = end;
    r.correlation = call->correlationId;
    r.tid = ts.producer.header->tid;
    r.api_id = uint32_t(api);
    r.result = call->functionReturnValue ? uint32_t(*static_cast<const int*>(call->functionReturnValue)) : 0;
    write(ts, r);
  }
  errno = saved_errno;
}

// Whether a call gives the device work that CUPTI records as a kernel, a copy or a set: every launch
// (kernels, cooperative, graphs, host functions), every copy and every set, in the runtime and the
// driver, whichever way the program or a library (cuBLAS, cuDNN) reaches them.
bool gives_device_work(const char* name) {
  return strstr(name, "Launch") || strstr(name, "Memcpy") || strstr(name, "Memset");
}

// Enables the callbacks of the calls that give the device work, in both domains; how many.
uint32_t enable_work_callbacks(CUpti_SubscriberHandle subscriber) {
  uint32_t enabled = 0;
  // Every id CUPTI can name, past the SIZE of the headers built against too: a newer CUPTI names the
  // calls a newer runtime added (cudaLaunchHostFunc_v2 in 13.2).
  static_assert(CUPTI_RUNTIME_TRACE_CBID_SIZE < kCbidSlots && CUPTI_DRIVER_TRACE_CBID_SIZE < kCbidSlots);
  for (const CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
    for (uint32_t cbid = 1; cbid < kCbidSlots; ++cbid) {
      const char* name = nullptr;
      if (g_cupti.callback_name(domain, cbid, &name) != CUPTI_SUCCESS || !name || !gives_device_work(name)) continue;
      if (api_of_callback(domain, cbid) < 0) continue;  // a call the trace has no name for
      if (g_cupti.enable_callback(1, subscriber, domain, cbid) != CUPTI_SUCCESS) continue;
      g_own_callbacks.set(domain, cbid, true);
      ++enabled;
    }
  return enabled;
}

// dlopen(path); notes the loaded library's address range, and puts the file the loader took in `found`
// for the trace's record of it (a soname alone says little).
void* open_cupti(const char* path, bool loaded_only, char* found, size_t capacity) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | (loaded_only ? RTLD_NOLOAD : 0));
  if (!handle) return nullptr;
  link_map* map = nullptr;
  const bool named = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map;
  std::snprintf(found, capacity, "%s", named && map->l_name && *map->l_name ? map->l_name : path);
  if (!named) return handle;
  elf::for_each_object([&](const elf::Object& each) {
    if (each.bias != uintptr_t(map->l_addr) || each.index == 0) return false;
    elf::mapped_span(each, &g_cupti_start, &g_cupti_end);
    return true;
  });
  return handle;
}

// The CUPTI of the process's CUDA runtime major version: one already loaded (PyTorch loads its own),
// one beside the runtime (CUDA wheels put it there, or in cuda_cupti/lib next to cuda_runtime/lib),
// one in the toolkit beside it (extras/CUPTI/lib64), one on the library path, the default toolkit's.
void* find_cupti(int major, const char* runtime_path, char* found, size_t capacity) {
  char soname[32];
  std::snprintf(soname, sizeof soname, "libcupti.so.%d", major);
  auto attempt = [&](const char* path, bool loaded_only) { return open_cupti(path, loaded_only, found, capacity); };
  if (void* h = attempt(soname, true)) return h;
  if (runtime_path && *runtime_path) {
    char dir[1024];
    std::snprintf(dir, sizeof dir, "%s", runtime_path);
    if (char* slash = strrchr(dir, '/')) *slash = '\0';
    const char* const relative[] = {"", "/../../cuda_cupti/lib", "/../extras/CUPTI/lib64", "/../../extras/CUPTI/lib64"};
    for (const char* r : relative) {
      char path[1200];
      std::snprintf(path, sizeof path, "%s%s/%s", dir, r, soname);
      if (access(path, R_OK) == 0)
        if (void* h = attempt(path, false)) return h;
    }
  }
  if (void* h = attempt(soname, false)) return h;
  const char* const toolkits[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64"};
  for (const char* dir : toolkits) {
    char path[256];
    std::snprintf(path, sizeof path, "%s/%s", dir, soname);
    if (access(path, R_OK) == 0)
      if (void* h = attempt(path, false)) return h;
  }
  return nullptr;
}

void report(ThreadState& ts, uint32_t code, const char* text) {
  emit_string(ts, abi::StringKind::kGpuActivityStatus, code, text, strlen(text));
}

const char* result_text(CUptiResult r) {
  const char* text = nullptr;
  if (g_cupti.result_string && g_cupti.result_string(r, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI_ERROR";
}

// A reason in the user's terms for the ways CUPTI is known to fail.
void report_failure(ThreadState& ts, const char* what, CUptiResult r) {
  char text[2048];
  const char* why = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                        ? "another profiler in the process (torch.profiler, Kineto, nsys) already holds CUPTI"
                    : r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED
                        ? "CUPTI cannot reach a CUDA driver (none installed, or not one this CUPTI works with)"
                    : r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? "this user may not profile the GPU"
                                                               : "CUPTI refused it";
  std::snprintf(text, sizeof text, "%s failed with %s (%d): %s", what, result_text(r), int(r), why);
  report(ts, uint32_t(r), text);
}

// Every 250 ms, completed buffers go to the trace, so that a program killed later loses at most what
// CUPTI held since. Runs on the starter thread once CUPTI runs.
void flush_until_stopped() {
  uint32_t done = 0;
  while (g_running.load(std::memory_order_relaxed)) {
    // Woken early by a forced flush asked for.
    timespec pause{0, 250000000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flushes_asked), FUTEX_WAIT_PRIVATE, done, &pause, nullptr, 0);
    if (!g_running.load(std::memory_order_relaxed)) break;
    const uint32_t asked = g_flushes_asked.load(std::memory_order_acquire);
    {
      CuptiLocked lock;
      if (!g_running.load(std::memory_order_acquire)) break;  // finalised meanwhile
      g_cupti.flush_all(asked != done ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    }
    if (asked != done) {
      done = asked;
      g_flushes_done.store(done, std::memory_order_release);
    }
  }
}

void flush_at_exit() { flush_gpu_activity(); }

}  // namespace

namespace {

// Loads CUPTI and enables the kinds; says in the trace what came of it. Runs on the starter thread.
void start_cupti(ThreadState& ts) {
  for (auto* table : {g_runtime_api, g_driver_api})
    for (uint32_t i = 0; i < kCbidSlots; ++i) table[i].store(-2, std::memory_order_relaxed);

  // The runtime the process uses says which CUPTI major version to load; a program without one (the
  // driver API, the static runtime) goes by the driver's.
  int major = 0;
  char runtime_path[1024] = "";
  int32_t ids[kMaxMajorVersions];
  const size_t count = find_apis("cudaRuntimeGetVersion", ids, kMaxMajorVersions);
  for (size_t k = 0; k < count && !major; ++k) {
    auto get_version = real_function<int (*)(int*)>(uint32_t(ids[k]));
    int version = 0;
    Dl_info where{};
    if (!get_version || get_version(&version) != 0 || version < 1000) continue;
    major = version / 1000;
    if (dladdr(reinterpret_cast<void*>(get_version), &where) && where.dli_fname)
      std::snprintf(runtime_path, sizeof runtime_path, "%s", where.dli_fname);
  }
  if (!major) {
    auto driver_version = real_function<int (*)(int*)>(uint32_t(find_api("cuDriverGetVersion")));
    int version = 0;
    major = driver_version && driver_version(&version) == 0 && version >= 1000 ? version / 1000 : 13;
  }
  char path[1200] = "";
  void* handle = nullptr;
  if (const char* chosen = getenv(kCuptiPathEnvVar); chosen && *chosen) {
    handle = open_cupti(chosen, false, path, sizeof path);
    if (!handle) {
      char text[1400];
      std::snprintf(text, sizeof text, "%s=%s cannot be loaded (%s), so the trace has no GPU activity", kCuptiPathEnvVar,
                    chosen, dlerror());
      report(ts, uint32_t(CUPTI_ERROR_NOT_INITIALIZED), text);
      return;
    }
  } else {
    handle = find_cupti(major, runtime_path, path, sizeof path);
  }
  if (!handle) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "no libcupti.so.%d was found (beside the CUDA runtime, on the library path or in /usr/local/cuda), so "
                  "the trace has no GPU activity; install CUPTI or put its directory on LD_LIBRARY_PATH",
                  major);
    report(ts, uint32_t(CUPTI_ERROR_NOT_INITIALIZED), text);
    return;
  }
  // The driver CUPTI will find is the one the program loaded: CUPTI asks for libcuda.so.1, which the
  // loaded driver's soname answers.
  Dl_info driver{};
  auto driver_init = real_function<void*>(uint32_t(find_api("cuInit")));
  if (driver_init && dladdr(driver_init, &driver) && driver.dli_fname) {
    char why[1024];
    if (!cupti_trial_passes(driver.dli_fname, path, why, sizeof why)) {
      char text[2400];
      std::snprintf(text, sizeof text, "%s was not started, so the trace has no GPU activity: %s", path, why);
      report(ts, uint32_t(CUPTI_ERROR_NOT_COMPATIBLE), text);
      return;
    }
  }
  bool all = true;
  bool graph_level = false;
  auto bind = [&](auto& slot, const char* name) {
    void* f = real_dlsym()(handle, name);
    all &= f != nullptr;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(f);
  };
  bind(g_cupti.subscribe, "cuptiSubscribe");
  bind(g_cupti.result_string, "cuptiGetResultString");
  bind(g_cupti.callback_name, "cuptiGetCallbackName");
  bind(g_cupti.enable_callback, "cuptiEnableCallback");
  bind(g_cupti.enable_domain, "cuptiEnableDomain");
  bind(g_cupti.finalize, "cuptiFinalize");
  bind(g_cupti.timestamp_callback, "cuptiActivityRegisterTimestampCallback");
  bind(g_cupti.thread_id_type, "cuptiSetThreadIdType");
  bind(g_cupti.buffer_callbacks, "cuptiActivityRegisterCallbacks");
  bind(g_cupti.enable, "cuptiActivityEnable");
  bind(g_cupti.disable, "cuptiActivityDisable");
  bind(g_cupti.flush_all, "cuptiActivityFlushAll");
  bind(g_cupti.next_record, "cuptiActivityGetNextRecord");
  bind(g_cupti.dropped_records, "cuptiActivityGetNumDroppedRecords");
  CUptiResult r = CUPTI_SUCCESS;
  const char* step = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!all) {
    char text[1400];
    std::snprintf(text, sizeof text, "%s lacks functions of the CUPTI Activity API, so the trace has no GPU activity",
                  path);
    report(ts, uint32_t(CUPTI_ERROR_NOT_SUPPORTED), text);
  } else if ((r = g_cupti.subscribe(&subscriber, on_callback, nullptr)) != CUPTI_SUCCESS) {
    // Holding the one subscriber slot keeps a second profiler from taking over CUPTI's buffers unseen.
    step = "cuptiSubscribe";
  } else if ((r = g_cupti.timestamp_callback(trace_clock)) != CUPTI_SUCCESS) {
    step = "cuptiActivityRegisterTimestampCallback";
  } else if ((r = g_cupti.thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) != CUPTI_SUCCESS) {
    step = "cuptiSetThreadIdType";
  } else if ((r = g_cupti.buffer_callbacks(request_buffer, buffer_completed)) != CUPTI_SUCCESS) {
    step = "cuptiActivityRegisterCallbacks";
  } else {
    // Allocations and frees (MEMORY2) only for --cuda-memory-usage, as nsys collects them: they are
    // the most numerous records of a PyTorch step, and only the memory counter uses them.
    const bool memory = (g_session->gpu_activity & abi::kGpuActivityMemoryUsage) != 0;
    // No RUNTIME or DRIVER records (a second record of every call, which made every call of the program
    // hundreds of ns dearer) and no SYNCHRONIZATION (on a real GPU its cost lands on every call, and
    // stays): calls are linked to their device work through the callbacks of the calls that give it.
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2};
    const size_t enabled = memory ? std::size(kinds) : std::size(kinds) - 1;
    g_subscriber = subscriber;
    if (enable_work_callbacks(subscriber) == 0) {
      r = CUPTI_ERROR_NOT_SUPPORTED;
      step = "cuptiEnableCallback";
    }
    for (size_t k = 0; k < enabled && !step; ++k) {
      if ((r = g_cupti.enable(kinds[k])) == CUPTI_SUCCESS) {
        g_own_kinds[g_own_kind_count++] = kinds[k];
        continue;
      }
      step = "cuptiActivityEnable";
      for (size_t undo = 0; undo < enabled; ++undo) g_cupti.disable(kinds[undo]);
      break;
    }
    // --cuda-graph-trace graph (nsys's default): a graph launch is one record, and CUPTI leaves out
    // the records of its nodes. A CUPTI that cannot trace graphs whole still gives the nodes one by
    // one, which the status says rather than failing.
    if (!step && (g_session->gpu_activity & abi::kGpuActivityGraphNodes) == 0) {
      graph_level = g_cupti.enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) == CUPTI_SUCCESS;
      if (graph_level) g_own_kinds[g_own_kind_count++] = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
    }
    // The devices' descriptions (TARGET_INFO_GPU): CUPTI gives one record per device once the kind is
    // on. A CUPTI that refuses it costs the trace that table only.
    if (!step && g_cupti.enable(CUPTI_ACTIVITY_KIND_DEVICE) == CUPTI_SUCCESS)
      g_own_kinds[g_own_kind_count++] = CUPTI_ACTIVITY_KIND_DEVICE;
  }
  if (all && step) {
    char what[1400];
    std::snprintf(what, sizeof what, "%s (%s)", step, path);
    report_failure(ts, what, r);
  } else if (all) {
    uint64_t own = 0, bit = 0;
    for (uint32_t k = 0; k < g_own_kind_count; ++k)
      if (kind_bit(g_own_kinds[k], &bit)) own |= bit;
    g_own_kind_bits.store(own, std::memory_order_relaxed);
    const bool nodes_asked = (g_session->gpu_activity & abi::kGpuActivityGraphNodes) != 0;
    std::snprintf(g_source, sizeof g_source, "GPU activity from %s%s", path,
                  nodes_asked  ? ", CUDA graphs node by node"
                  : graph_level ? ", CUDA graphs as whole launches"
                                : ", CUDA graphs node by node (this CUPTI cannot trace a graph launch whole)");
    report(ts, 0, g_source);
    g_running_pid = getpid();
    g_running.store(true, std::memory_order_release);
    atexit(flush_at_exit);
  }
}

// The starter thread: loads and starts CUPTI away from the thread whose first CUDA call asked for it,
// which may hold the loader's lock (a library constructor that calls CUDA) or locks of its own; then,
// where CUPTI runs, it stays as the flusher.
void* starter(void*) {
  prctl(PR_SET_NAME, "cutrace-gpu", 0, 0, 0);
  ThreadState& ts = t_thread;
  prepare_thread(ts);
  ts.in_tracer++;  // what CUPTI calls while it starts and flushes here is CUPTI's, not the program's
  t_flushing = true;
  // A look at a loaded object takes the loader's lock: returning says no constructor holds it, so
  // the dlopen of CUPTI that follows will not wait for the thread that asked.
  dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  g_start_phase.store(kLoaderFree, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_start_phase), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  start_cupti(ts);
  g_start_phase.store(kStartDone, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_start_phase), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  if (g_running.load(std::memory_order_acquire)) flush_until_stopped();
  return nullptr;
}

// Waits until the start phase reaches `phase`, for at most `limit_ms`. Whether it did.
bool wait_for_phase(uint32_t phase, uint64_t limit_ms) {
  const uint64_t deadline = monotonic_ns() + limit_ms * 1000000ull;
  for (;;) {
    const uint32_t now_phase = g_start_phase.load(std::memory_order_acquire);
    if (now_phase >= phase) return true;
    const uint64_t t = monotonic_ns();
    if (t >= deadline) return false;
    const uint64_t left = deadline - t;
    timespec pause{time_t(left / 1000000000ull), long(left % 1000000000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_start_phase), FUTEX_WAIT_PRIVATE, now_phase, &pause, nullptr, 0);
  }
}

}  // namespace

void on_driver_initialized() {
  if (!g_session || !(g_session->gpu_activity & abi::kGpuActivityOn)) return;
  // Capture ended for good (-d) before this process initialised the driver: CUPTI would be loaded and
  // started only to be finalised at the program's first launch, and none of its work would be kept.
  if (g_session->capture_closed_ns.load(std::memory_order_relaxed)) return;
  if (g_started.load(std::memory_order_relaxed) || g_started.exchange(true)) return;
  const int saved_errno = errno;
  ThreadState& ts = t_thread;
  g_start_phase.store(kStarting, std::memory_order_relaxed);
  // The thread's creation (its stack's mmap) and the wait are the tracer's, not the program's calls.
  ts.in_tracer++;
  const bool started = start_tracer_thread(starter);
  // The program's CUDA work should find CUPTI running, so this call waits for the start: briefly for
  // the loader (a caller inside a library's constructor holds its lock, and CUPTI then starts once
  // the constructor returns), then a bounded time for CUPTI itself, so that a CUPTI that hangs only
  // costs the program that wait.
  const bool hung = started && wait_for_phase(kLoaderFree, kLoaderWaitMs) && !wait_for_phase(kStartDone, kStartWaitMs);
  ts.in_tracer--;
  // Said from this thread, whose ring is there; should CUPTI finish starting later, what it says then
  // is the process's last word on GPU activity.
  if (!started && (ts.producer.header || prepare_thread(ts)))
    report(ts, uint32_t(CUPTI_ERROR_UNKNOWN), "the thread that starts CUPTI could not be created, so the trace has no GPU activity");
  if (hung && ts.producer.header)
    report(ts, uint32_t(CUPTI_ERROR_UNKNOWN), "CUPTI had not started 10 s after the driver was initialised, so the "
                                              "program went on without it and the trace has no GPU activity");
  errno = saved_errno;
}

void flush_gpu_activity() {
  if (!g_running.load(std::memory_order_acquire)) return;
  const int saved_errno = errno;
  ThreadState& ts = t_thread;
  // The buffers completed now are written into this thread's ring; CUPTI's calls meanwhile are its own.
  if (!ts.producer.header && !ts.in_tracer) prepare_thread(ts);
  const bool was_flushing = t_flushing;
  t_flushing = true;
  ts.in_tracer++;
  {
    CuptiLocked lock;
    if (g_running.load(std::memory_order_acquire)) g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  ts.in_tracer--;
  t_flushing = was_flushing;
  errno = saved_errno;
}

void tear_down_gpu_activity() {
  if (!g_running.load(std::memory_order_acquire) || getpid() != g_running_pid) return;
  if (g_teardown_asked.load(std::memory_order_relaxed) || g_teardown_asked.exchange(true)) return;
  // cuptiFinalize belongs in an API call's exit callback (CUPTI's documentation on detaching; a
  // flush racing it from another thread crashed Kineto): every call's callbacks are turned on, and
  // the next call of any thread finalises CUPTI from there.
  ThreadState& ts = t_thread;
  const int saved_errno = errno;
  ts.in_tracer++;
  g_cupti.enable_domain(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  g_cupti.enable_domain(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  ts.in_tracer--;
  errno = saved_errno;
}

bool in_shims_cupti(uintptr_t address) { return address >= g_cupti_start && address < g_cupti_end; }

namespace testing {

bool bind_cupti(void* cupti, int (*enable_callback)(uint32_t, void*, int, uint32_t)) {
  for (auto* table : {g_runtime_api, g_driver_api})
    for (uint32_t i = 0; i < kCbidSlots; ++i) table[i].store(-2, std::memory_order_relaxed);
  g_cupti.callback_name = reinterpret_cast<decltype(g_cupti.callback_name)>(dlsym(cupti, "cuptiGetCallbackName"));
  g_cupti.next_record = reinterpret_cast<decltype(g_cupti.next_record)>(dlsym(cupti, "cuptiActivityGetNextRecord"));
  g_cupti.dropped_records =
      reinterpret_cast<decltype(g_cupti.dropped_records)>(dlsym(cupti, "cuptiActivityGetNumDroppedRecords"));
  g_cupti.enable_callback = enable_callback ? reinterpret_cast<decltype(g_cupti.enable_callback)>(enable_callback)
                                            : reinterpret_cast<decltype(g_cupti.enable_callback)>(dlsym(cupti, "cuptiEnableCallback"));
  // As CUPTI's start leaves them: the shim's kinds on, and its callbacks (every API call's, of which the
  // link is made only for those that give the device work).
  uint64_t own = 0, bit = 0;
  for (const CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
                                        CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_DEVICE})
    if (kind_bit(kind, &bit)) own |= bit;
  g_own_kind_bits.store(own, std::memory_order_relaxed);
  for (const CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
    for (uint32_t cbid = 0; cbid < kCbidSlots; ++cbid) g_own_callbacks.set(domain, cbid, true);
  return g_cupti.callback_name && g_cupti.next_record && g_cupti.dropped_records && g_cupti.enable_callback;
}

void callback(int domain, uint32_t cbid, const void* callback_data) {
  on_callback(nullptr, CUpti_CallbackDomain(domain), CUpti_CallbackId(cbid), callback_data);
}

uint8_t* request_activity_buffer(size_t* size) {
  uint8_t* buffer = nullptr;
  size_t max_records = 0;
  request_buffer(&buffer, size, &max_records);
  return buffer;
}

void buffer_completed(uint8_t* buffer, size_t valid_bytes) {
  const bool was_flushing = t_flushing;
  t_flushing = true;  // as one of the shim's flushes: the records go into this thread's ring
  ::cutrace::preload::buffer_completed(nullptr, 0, buffer, 0, valid_bytes);
  t_flushing = was_flushing;
}

uint32_t enable_work_callbacks() { return ::cutrace::preload::enable_work_callbacks(nullptr); }

}  // namespace testing

void flush_gpu_activity_before_exit(uint32_t limit_ms) {
  if (!g_running.load(std::memory_order_acquire) || getpid() != g_running_pid) return;
  const int saved_errno = errno;
  const uint32_t ticket = g_flushes_asked.fetch_add(1, std::memory_order_acq_rel) + 1;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flushes_asked), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  for (uint32_t waited = 0; waited < limit_ms; ++waited) {
    if (int32_t(g_flushes_done.load(std::memory_order_acquire) - ticket) >= 0) break;
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  errno = saved_errno;
}

void forget_gpu_activity() {
  // The parent's CUPTI worker and flusher threads are not in the child. Where the parent had started
  // no CUPTI (g_started as inherited), the child may start its own on its first CUDA use.
  g_running.store(false, std::memory_order_relaxed);
  g_sent_names.forget();
}

}  // namespace cutrace::preload

// --- the program's own CUPTI activity client ------------------------------------------------------
//
// CUPTI gives its completed activity buffers to one client, the one that registered its callbacks
// last: a program that profiles itself (torch.profiler, Kineto) would take every later record from the
// trace, or the trace from it. The shim interposes the program's calls that register callbacks, enable
// and disable kinds, flush and finalise, and stays CUPTI's client: the program's kinds are enabled
// beside its own, and each completed buffer goes to the trace (the shim's kinds) and, copied, to the
// program's callbacks (the program's kinds; forward_to_program). Enabling or disabling a kind the shim
// also records first flushes, so that the program gets exactly the records made while it had the kind
// on, as without cutrace. The shim's own calls reach CUPTI through g_cupti, never these symbols.
namespace cutrace::preload {
namespace {

// The CUPTI functions the shim stands in front of. A program that looks them up through a handle of
// its own (dlopen of libcupti, dlsym) gets the shim's instead, as a linked program does: else its
// activity callbacks would take every buffer from the trace, silently, and its subscriber be refused.
enum class CuptiEntry : uint32_t {
  kActivityRegisterCallbacks,
  kActivityEnable,
  kActivityDisable,
  kActivityFlushAll,
  kSubscribe,
  kUnsubscribe,
  kEnableCallback,
  kEnableDomain,
  kEnableAllDomains,
  kGetCallbackState,
  kFinalize,
  kCount
};

// What each lookup through a handle found: the function the shim's stands in front of for a program
// whose CUPTI is loaded with RTLD_LOCAL, where RTLD_NEXT finds none.
std::atomic<void*> g_found_through_handle[uint32_t(CuptiEntry::kCount)];

// The definition the shim's function stands in front of: the one the program's own lookup found, else
// the next one in the global scope. Kept once found; a lookup that finds none yet is tried again.
template <class F>
F next_cupti(CuptiEntry entry, const char* name) {
  static std::atomic<void*> cache[uint32_t(CuptiEntry::kCount)];
  void* fn = cache[uint32_t(entry)].load(std::memory_order_acquire);
  if (fn) return reinterpret_cast<F>(fn);
  fn = g_found_through_handle[uint32_t(entry)].load(std::memory_order_acquire);
  const int saved_errno = errno;
  if (!fn) fn = real_dlsym()(RTLD_NEXT, name);
  if (fn) cache[uint32_t(entry)].store(fn, std::memory_order_release);
  errno = saved_errno;
  return reinterpret_cast<F>(fn);
}

// Runs `body` as one of the shim's own flushes: the records go into this thread's ring, and CUPTI's
// calls meanwhile are CUPTI's.
template <class Body>
void as_tracer(Body body) {
  ThreadState& ts = t_thread;
  if (!ts.producer.header && !ts.in_tracer) prepare_thread(ts);
  const bool was_flushing = t_flushing;
  t_flushing = true;
  ts.in_tracer++;
  body();
  ts.in_tracer--;
  t_flushing = was_flushing;
}

// Whether the shim's CUPTI session is this process's: else the program's calls go straight to CUPTI.
bool shared() { return g_running.load(std::memory_order_acquire) && getpid() == g_running_pid; }

}  // namespace
}  // namespace cutrace::preload

using namespace cutrace::preload;

extern "C" CUTRACE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                                     CUpti_BuffersCallbackCompleteFunc complete) {
  const auto real = next_cupti<decltype(&cuptiActivityRegisterCallbacks)>(CuptiEntry::kActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  if (!shared()) return real ? real(request, complete) : CUPTI_ERROR_NOT_INITIALIZED;
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  CuptiLocked lock;
  g_program_request.store(request, std::memory_order_release);
  g_program_complete.store(complete, std::memory_order_release);
  return CUPTI_SUCCESS;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  const auto real = next_cupti<decltype(&cuptiActivityEnable)>(CuptiEntry::kActivityEnable, "cuptiActivityEnable");
  if (!shared()) return real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  uint64_t bit = 0;
  if (!kind_bit(kind, &bit)) return g_cupti.enable(kind);  // no kind CUPTI has; CUPTI says so
  CuptiLocked lock;
  CUptiResult r = CUPTI_SUCCESS;
  as_tracer([&] {
    if (g_own_kind_bits.load(std::memory_order_relaxed) & bit) {
      // Records made so far were made for the trace alone.
      if (!(g_program_kinds.load(std::memory_order_relaxed) & bit)) g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    } else {
      r = g_cupti.enable(kind);
    }
  });
  if (r == CUPTI_SUCCESS) g_program_kinds.fetch_or(bit, std::memory_order_acq_rel);
  errno = saved_errno;
  return r;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  const auto real = next_cupti<decltype(&cuptiActivityDisable)>(CuptiEntry::kActivityDisable, "cuptiActivityDisable");
  if (!shared()) return real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  uint64_t bit = 0;
  if (!kind_bit(kind, &bit)) return g_cupti.disable(kind);
  CuptiLocked lock;
  CUptiResult r = CUPTI_SUCCESS;
  as_tracer([&] {
    if (g_own_kind_bits.load(std::memory_order_relaxed) & bit) {
      // The records made while the program had the kind on are its own too: they reach it first.
      if (g_program_kinds.load(std::memory_order_relaxed) & bit) g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    } else {
      r = g_cupti.disable(kind);
    }
  });
  if (r == CUPTI_SUCCESS) g_program_kinds.fetch_and(~bit, std::memory_order_acq_rel);
  errno = saved_errno;
  return r;
}

// The program's flush delivers through the shim's callbacks on the program's thread: marked as one of
// the shim's flushes, so that the thread is not taken for CUPTI's own.
extern "C" CUTRACE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  const auto real = next_cupti<decltype(&cuptiActivityFlushAll)>(CuptiEntry::kActivityFlushAll, "cuptiActivityFlushAll");
  if (!shared()) return real ? real(flag) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  CuptiLocked lock;
  CUptiResult r = CUPTI_SUCCESS;
  as_tracer([&] { r = g_cupti.flush_all(flag); });
  errno = saved_errno;
  return r;
}

// The program's callback subscriber: see CallbackSet. A second one is refused, as CUPTI refuses it.
extern "C" CUTRACE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                                     void* userdata) {
  const auto real = next_cupti<decltype(&cuptiSubscribe)>(CuptiEntry::kSubscribe, "cuptiSubscribe");
  if (!shared()) return real ? real(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
  if (!subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
  CuptiLocked lock;
  if (g_program_callback.load(std::memory_order_relaxed)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_program_userdata = userdata;
  g_program_callback.store(callback, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_program_subscriber);
  return CUPTI_SUCCESS;
}

namespace cutrace::preload {
namespace {

bool is_programs(CUpti_SubscriberHandle subscriber) {
  return subscriber == reinterpret_cast<CUpti_SubscriberHandle>(&g_program_subscriber);
}

// One callback of the program's on or off: in CUPTI too, unless the shim needs it on. With g_cupti_lock.
CUptiResult set_program_callback(bool on, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  CUptiResult r = CUPTI_SUCCESS;
  if (!g_own_callbacks.has(domain, cbid)) as_tracer([&] { r = g_cupti.enable_callback(on, g_subscriber, domain, cbid); });
  if (r == CUPTI_SUCCESS) g_program_callbacks.set(domain, cbid, on);
  return r;
}

// Every callback of a domain that CUPTI names (the ids of the API domains; up to 4096 of the others).
CUptiResult set_program_domain(bool on, CUpti_CallbackDomain domain) {
  if (uint32_t(domain) >= CUPTI_CB_DOMAIN_SIZE || domain == CUPTI_CB_DOMAIN_INVALID) return CUPTI_ERROR_INVALID_PARAMETER;
  const bool api = domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API;
  if (!api) {
    // The shim enables no callback of these: the domain as a whole, in CUPTI and for the program.
    CUptiResult r = CUPTI_SUCCESS;
    as_tracer([&] { r = g_cupti.enable_domain(on, g_subscriber, domain); });
    if (r == CUPTI_SUCCESS)
      for (uint32_t cbid = 0; cbid < kCbidSlots; ++cbid) g_program_callbacks.set(domain, cbid, on);
    return r;
  }
  for (uint32_t cbid = 1; cbid < kCbidSlots; ++cbid) {
    const char* name = nullptr;
    if (g_cupti.callback_name(domain, cbid, &name) != CUPTI_SUCCESS || !name) continue;
    if (CUptiResult r = set_program_callback(on, domain, cbid); r != CUPTI_SUCCESS) return r;
  }
  return CUPTI_SUCCESS;
}

// The program's subscriber goes: its callbacks that the shim does not need go off.
void drop_program_subscriber() {
  for (uint32_t domain = 1; domain < CUPTI_CB_DOMAIN_SIZE; ++domain)
    for (uint32_t word = 0; word < kCbidSlots / 64; ++word) {
      const uint64_t bits = g_program_callbacks.words[domain][word].load(std::memory_order_relaxed);
      for (uint32_t b = 0; b < 64; ++b)
        if (bits >> b & 1) set_program_callback(false, CUpti_CallbackDomain(domain), word * 64 + b);
    }
  g_program_callback.store(nullptr, std::memory_order_release);
  g_program_userdata = nullptr;
}

}  // namespace
}  // namespace cutrace::preload

extern "C" CUTRACE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  const auto real = next_cupti<decltype(&cuptiUnsubscribe)>(CuptiEntry::kUnsubscribe, "cuptiUnsubscribe");
  if (!is_programs(subscriber)) return real ? real(subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  CuptiLocked lock;
  if (!g_program_callback.load(std::memory_order_relaxed)) return CUPTI_ERROR_INVALID_PARAMETER;
  drop_program_subscriber();
  errno = saved_errno;
  return CUPTI_SUCCESS;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                          CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const auto real = next_cupti<decltype(&cuptiEnableCallback)>(CuptiEntry::kEnableCallback, "cuptiEnableCallback");
  if (!is_programs(subscriber)) return real ? real(enable, subscriber, domain, cbid) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  CuptiLocked lock;
  const CUptiResult r = set_program_callback(enable != 0, domain, cbid);
  errno = saved_errno;
  return r;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                        CUpti_CallbackDomain domain) {
  const auto real = next_cupti<decltype(&cuptiEnableDomain)>(CuptiEntry::kEnableDomain, "cuptiEnableDomain");
  if (!is_programs(subscriber)) return real ? real(enable, subscriber, domain) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  CuptiLocked lock;
  const CUptiResult r = set_program_domain(enable != 0, domain);
  errno = saved_errno;
  return r;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  const auto real = next_cupti<decltype(&cuptiEnableAllDomains)>(CuptiEntry::kEnableAllDomains, "cuptiEnableAllDomains");
  if (!is_programs(subscriber)) return real ? real(enable, subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  CuptiLocked lock;
  CUptiResult r = CUPTI_SUCCESS;
  for (uint32_t domain = 1; domain < CUPTI_CB_DOMAIN_SIZE && r == CUPTI_SUCCESS; ++domain)
    r = set_program_domain(enable != 0, CUpti_CallbackDomain(domain));
  errno = saved_errno;
  return r;
}

extern "C" CUTRACE_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const auto real = next_cupti<decltype(&cuptiGetCallbackState)>(CuptiEntry::kGetCallbackState, "cuptiGetCallbackState");
  if (!is_programs(subscriber)) return real ? real(enable, subscriber, domain, cbid) : CUPTI_ERROR_NOT_INITIALIZED;
  if (!enable || uint32_t(domain) >= CUPTI_CB_DOMAIN_SIZE || cbid >= kCbidSlots) return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = g_program_callbacks.has(domain, cbid) ? 1 : 0;
  return CUPTI_SUCCESS;
}

// The program's finalisation would end the trace's GPU activity too: its records are flushed to it, its
// kinds and callbacks that the shim does not need go off, and CUPTI stays, as the shim needs it.
extern "C" CUTRACE_EXPORT CUptiResult cuptiFinalize() {
  const auto real = next_cupti<decltype(&cuptiFinalize)>(CuptiEntry::kFinalize, "cuptiFinalize");
  if (!shared()) return real ? real() : CUPTI_ERROR_NOT_INITIALIZED;
  const int saved_errno = errno;
  {
    CuptiLocked lock;
    as_tracer([] {
      g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      const uint64_t program_only = g_program_kinds.load(std::memory_order_relaxed) &
                                    ~g_own_kind_bits.load(std::memory_order_relaxed);
      for (uint32_t kind = 0; kind < 64; ++kind)
        if (program_only & (uint64_t(1) << kind)) g_cupti.disable(CUpti_ActivityKind(kind));
    });
    g_program_kinds.store(0, std::memory_order_release);
    g_program_request.store(nullptr, std::memory_order_release);
    g_program_complete.store(nullptr, std::memory_order_release);
    drop_program_subscriber();
  }
  errno = saved_errno;
  return CUPTI_SUCCESS;
}

void* cutrace::preload::route_programs_cupti_lookup(const char* name, void* found) {
  struct Interposer {
    const char* name;
    CuptiEntry entry;
    void* function;
  };
  static const Interposer kInterposers[] = {
      {"cuptiActivityRegisterCallbacks", CuptiEntry::kActivityRegisterCallbacks,
       reinterpret_cast<void*>(&cuptiActivityRegisterCallbacks)},
      {"cuptiActivityEnable", CuptiEntry::kActivityEnable, reinterpret_cast<void*>(&cuptiActivityEnable)},
      {"cuptiActivityDisable", CuptiEntry::kActivityDisable, reinterpret_cast<void*>(&cuptiActivityDisable)},
      {"cuptiActivityFlushAll", CuptiEntry::kActivityFlushAll, reinterpret_cast<void*>(&cuptiActivityFlushAll)},
      {"cuptiSubscribe", CuptiEntry::kSubscribe, reinterpret_cast<void*>(&cuptiSubscribe)},
      {"cuptiUnsubscribe", CuptiEntry::kUnsubscribe, reinterpret_cast<void*>(&cuptiUnsubscribe)},
      {"cuptiEnableCallback", CuptiEntry::kEnableCallback, reinterpret_cast<void*>(&cuptiEnableCallback)},
      {"cuptiEnableDomain", CuptiEntry::kEnableDomain, reinterpret_cast<void*>(&cuptiEnableDomain)},
      {"cuptiEnableAllDomains", CuptiEntry::kEnableAllDomains, reinterpret_cast<void*>(&cuptiEnableAllDomains)},
      {"cuptiGetCallbackState", CuptiEntry::kGetCallbackState, reinterpret_cast<void*>(&cuptiGetCallbackState)},
      {"cuptiFinalize", CuptiEntry::kFinalize, reinterpret_cast<void*>(&cuptiFinalize)},
  };
  if (!found || !name || std::strncmp(name, "cupti", 5) != 0) return found;
  for (const Interposer& interposer : kInterposers) {
    if (std::strcmp(name, interposer.name) != 0) continue;
    // The first CUPTI found stays the one stood in front of: a process has one CUPTI at work.
    void* expected = nullptr;
    g_found_through_handle[uint32_t(interposer.entry)].compare_exchange_strong(expected, found, std::memory_order_acq_rel);
    return interposer.function;
  }
  return found;
}
