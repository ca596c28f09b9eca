// How the simulated libraries tell a profiler (the simulated CUPTI, cupti/) what happened: API calls
// entered and left, device operations completed, synchronisations and allocations. A profiler
// installs one Sink; until it does, and whenever it removes it, every hook costs one relaxed atomic
// load and changes nothing about the device or its timing.
//
// Correlation ids, the rule the tracer relies on (also in simcuda.h and cupti/cupti.cpp):
//   - Every runtime or driver API call the sink sees gets its own id, from one process-wide counter
//     starting at 1, so ids increase in the order calls are entered. A driver call made inside a
//     runtime call (the runtime reaches the driver through cuGetProcAddress) gets its own id. A call
//     of a domain made inside a call of the same domain (an entry point implemented with another one)
//     is not a separate call and gets none.
//   - A device operation is correlated with the calls on the issuing thread's stack when it was
//     submitted: `runtime` = the enclosing runtime call's id (0 if none), `driver` = the enclosing
//     driver call's id (0 if none). Kernels, memsets, syncs and allocations carry the outermost one
//     (runtime if any, else driver); a memcpy carries driver (or runtime when the runtime copied
//     without the driver, a 2D copy) as correlationId and runtime as runtimeCorrelationId.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "config.h"
#include "sync.h"

namespace simcuda::activity {

// Bumped whenever a struct below changes; a sink built for another version is refused.
inline constexpr uint32_t kVersion = 3;

// The values of CUpti_CallbackDomain.
enum class Domain : uint8_t { kDriver = 1, kRuntime = 2 };

// Memory as a copy or memset sees it; the profiler maps it to CUpti_ActivityMemoryKind.
enum class Memory : uint8_t { kUnknown, kPageable, kPinned, kDevice, kManaged, kArray };

// kGraph: the end of a graph launch (core/graphs.h), reported after its last node.
enum class OpType : uint8_t { kKernel, kMemcpy, kMemset, kFree, kGraph };

// What the issuing API layer knows about a device operation, filled at submission only while a
// sink is installed and carried by the timeline to its completion.
struct OpInfo {
  OpType type = OpType::kKernel;
  uint32_t runtime_correlation = 0;
  uint32_t driver_correlation = 0;
  // Kernels: the mangled name (kernels are never freed, so the pointer stays valid), launch shape.
  const char* name = nullptr;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t dynamic_shared = 0;
  // Copies and memsets (and frees: the address of the allocation).
  Memory src = Memory::kUnknown;
  Memory dst = Memory::kUnknown;  // also the memory a memset sets
  uint64_t bytes = 0;
  uint32_t value = 0;
  uint64_t address = 0;
  // Operations of a graph launch: the graph's id and the node's (0 outside graphs). kGraph: the
  // graph's id and its nodes' summed time (the launch began that long before this operation).
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint64_t graph_nodes_ns = 0;
};

struct DeviceOp {
  const OpInfo* info;
  uint64_t start_ns;  // CLOCK_MONOTONIC, as every time here
  uint64_t end_ns;
  int device;
  uint64_t stream;  // the timeline's StreamId
};

struct ApiCall {
  Domain domain;
  uint32_t cbid;  // CUPTI_RUNTIME_TRACE_CBID_* or CUPTI_DRIVER_TRACE_CBID_*
  uint32_t correlation;
  uint64_t start_ns;
  uint64_t end_ns;
  int64_t result;  // cudaError_t or CUresult
};

// The values of CUpti_ActivitySynchronizationType.
enum class SyncType : uint8_t { kEvent = 1, kStreamWaitEvent = 2, kStream = 3, kContext = 4 };

struct SyncEvent {
  SyncType type;
  int device;
  uint64_t stream;  // 0 when the call names none
  uint64_t event;   // 0 when the call names none
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t correlation;
  int64_t result;
};

struct MemoryEvent {
  bool allocation;  // else a release
  Memory kind;
  int device;
  uint64_t address;
  uint64_t bytes;
  uint64_t time_ns;
  uint32_t correlation;
};

// Every callback runs on the thread where the event happened (device operations on the device
// thread, with no timeline lock held) and must not call CUDA.
struct Sink {
  uint32_t version;
  void (*api_enter)(Domain domain, uint32_t cbid, uint32_t correlation);
  void (*api_exit)(const ApiCall& call);
  void (*device_op)(const DeviceOp& op);
  void (*sync)(const SyncEvent& sync);
  void (*memory)(const MemoryEvent& memory);
};

SIMCUDA_API extern std::atomic<const Sink*> g_sink;

// Installs (or with nullptr removes) the sink; false if its version is not kVersion.
SIMCUDA_API bool set_sink(const Sink* sink);

// The hooks' fast path: is anyone listening.
inline bool active() { return g_sink.load(std::memory_order_relaxed) != nullptr; }

struct Correlation {
  uint32_t runtime = 0;
  uint32_t driver = 0;
  uint32_t outermost() const { return runtime != 0 ? runtime : driver; }
};
// The API calls the calling thread is inside.
SIMCUDA_API Correlation current();

struct Call {
  Domain domain;
  uint32_t cbid;
  uint32_t correlation;  // 0: not traced (no sink, or nested in a call of its domain)
  uint64_t start_ns;
};
SIMCUDA_API Call api_enter(Domain domain, uint32_t cbid);
SIMCUDA_API void api_exit(const Call& call, int64_t result);

// Runs an API function's body as one traced call.
template <class F>
inline auto traced(Domain domain, uint32_t cbid, F&& body) {
  if (!active()) return body();
  Call c = api_enter(domain, cbid);
  auto r = body();
  if (c.correlation != 0) api_exit(c, int64_t(r));
  return r;
}

// The OpInfo for an operation about to be submitted, with the caller's correlation filled in.
SIMCUDA_API std::shared_ptr<OpInfo> new_op_info(OpType type);

// Reports an explicit synchronisation call's wait (only where the wait happens, so that a runtime
// call waiting through the driver reports once).
template <class F>
inline auto timed_sync(SyncType type, int device, uint64_t stream, uint64_t event, F&& wait) {
  if (!active()) return wait();
  uint64_t start = now_ns();
  auto r = wait();
  if (const Sink* s = g_sink.load(std::memory_order_acquire)) {
    s->sync(SyncEvent{type, device, stream, event, start, now_ns(), current().outermost(), int64_t(r)});
  }
  return r;
}

// The timeline's report of a completed operation that carries an OpInfo.
SIMCUDA_API void report_op(const OpInfo& info, uint64_t start_ns, uint64_t end_ns, int device,
                           uint64_t stream);

// How a profiler names the memory behind a pointer that a copy or memset touches (memory.cpp).
SIMCUDA_API Memory memory_of(const void* p);

SIMCUDA_API void report_memory(bool allocation, Memory kind, int device, uint64_t address,
                               uint64_t bytes);

}  // namespace simcuda::activity
