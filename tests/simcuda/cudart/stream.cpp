// Streams, events and host functions.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/device.h"
#include "runtime.h"

using namespace simcuda;
using rt::DefaultStream;

namespace simcuda::rt {
namespace {

// Priorities the device supports: 0 (least) to -5 (greatest); others are clamped, as documented.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

cudaError_t create_stream(cudaStream_t* stream, unsigned flags, int priority) {
  if (stream == nullptr) return cudaErrorInvalidValue;
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  StreamId id;
  if (Status s = timeline().create_stream(device, flags, priority, false, &id); s != Status::kOk) {
    return from_status(s);
  }
  *stream = stream_handle(id);
  return cudaSuccess;
}

cudaError_t stream_info(cudaStream_t stream, DefaultStream flavour, StreamInfo* info,
                        StreamId* id = nullptr) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (id != nullptr) *id = sid;
  return from_status(timeline().stream_info(sid, info));
}

// The device of a stream, for a profiler's records; only asked while one listens.
int device_of(StreamId sid) {
  StreamInfo info;
  if (!activity::active() || timeline().stream_info(sid, &info) != Status::kOk) return 0;
  return info.device;
}

cudaError_t synchronize_stream(cudaStream_t stream, DefaultStream flavour) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (const DriverApi* d = driver()) {
    int device;
    if (cudaError_t e = current_device(&device); e) return e;
    if (cudaError_t e = bind_context(*d, device); e) return e;
    return from_driver(d->stream_synchronize[flavour_index(flavour)](stream));
  }
  return activity::timed_sync(activity::SyncType::kStream, device_of(sid), sid, 0,
                              [&] { return from_status(timeline().synchronize_stream(sid)); });
}

cudaError_t query_stream(cudaStream_t stream, DefaultStream flavour) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  return from_status(timeline().query_stream(sid));
}

cudaError_t create_event(cudaEvent_t* event, unsigned flags) {
  constexpr unsigned kValid = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kValid) != 0 ||
      ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0)) {
    return cudaErrorInvalidValue;
  }
  int device;
  if (cudaError_t e = current_device(&device); e) return e;
  EventId id;
  if (Status s = timeline().create_event(device, flags, &id); s != Status::kOk) {
    return from_status(s);
  }
  *event = event_handle(id);
  return cudaSuccess;
}

cudaError_t event_id(cudaEvent_t event, EventId* id) {
  return decode_event(event, id) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t wait_event(cudaStream_t stream, cudaEvent_t event, unsigned flags,
                       DefaultStream flavour) {
  if ((flags & ~unsigned(cudaEventWaitExternal)) != 0) return cudaErrorInvalidValue;
  StreamId sid;
  EventId eid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (cudaError_t e = event_id(event, &eid); e) return e;
  // An event recorded in a capture: the stream joins that capture (or, in it already, depends on
  // what came before, as every captured node does).
  if (graphs().join_capture(sid, eid)) return cudaSuccess;
  return activity::timed_sync(activity::SyncType::kStreamWaitEvent, device_of(sid), sid, eid,
                              [&] { return from_status(timeline().stream_wait_event(sid, eid)); });
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream, unsigned flags,
                         DefaultStream flavour) {
  if ((flags & ~unsigned(cudaEventRecordExternal)) != 0) return cudaErrorInvalidValue;
  StreamId sid;
  EventId eid;
  if (cudaError_t e = event_id(event, &eid); e) return e;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  // In a capture the event marks the capture, for another stream to join it; nothing runs.
  if (graphs().capture_event(sid, eid)) return cudaSuccess;
  return from_status(timeline().record_event(eid, sid));
}

// Host functions run on the device thread once the stream reaches them; later work in the stream
// is not complete before they return.
cudaError_t add_host_work(cudaStream_t stream, DefaultStream flavour, std::function<void()> fn) {
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  return from_status(timeline().submit(sid, Work{OpKind::kHostFunc, 0, std::move(fn), {}}));
}

cudaError_t launch_host_func(cudaStream_t stream, cudaHostFn_t fn, void* user_data,
                             DefaultStream flavour) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  StreamId sid;
  if (cudaError_t e = resolve_stream(stream, flavour, &sid); e) return e;
  if (graphs().capture(sid, host_node(fn, user_data))) return cudaSuccess;
  return add_host_work(stream, flavour, [fn, user_data] { fn(user_data); });
}

cudaError_t add_callback(cudaStream_t stream, cudaStreamCallback_t callback, void* user_data,
                         unsigned flags, DefaultStream flavour) {
  if (callback == nullptr || flags != 0) return cudaErrorInvalidValue;
  return add_host_work(stream, flavour, [stream, callback, user_data] {
    callback(stream, cudaSuccess, user_data);
  });
}

// cudaStreamSetAttribute's values, by stream. Stream ids are never reused, so a destroyed stream's
// entry only waits for the process's end.
struct StreamAttributes {
  Mutex mu;
  std::unordered_map<StreamId, std::unordered_map<int, cudaLaunchAttributeValue>> values;
};

StreamAttributes& stream_attributes() {
  static StreamAttributes* a = new StreamAttributes;
  return *a;
}

// The attributes a stream keeps; the others are a launch's, not a stream's.
bool stream_attribute(cudaLaunchAttributeID attr) {
  return attr == cudaLaunchAttributeAccessPolicyWindow || attr == cudaLaunchAttributeSynchronizationPolicy ||
         attr == cudaLaunchAttributeMemSyncDomainMap || attr == cudaLaunchAttributeMemSyncDomain;
}

cudaError_t set_stream_attribute(cudaStream_t stream, cudaLaunchAttributeID attr, const cudaLaunchAttributeValue* value,
                                 DefaultStream flavour) {
  if (value == nullptr) return cudaErrorInvalidValue;
  StreamInfo info;
  StreamId id;
  if (cudaError_t e = stream_info(stream, flavour, &info, &id); e) return e;
  if (!stream_attribute(attr)) return cudaErrorInvalidValue;
  if (attr == cudaLaunchAttributeAccessPolicyWindow) {
    const cudaAccessPolicyWindow& w = value->accessPolicyWindow;
    const int max_window = device_attribute(int(cudaDevAttrMaxAccessPolicyWindowSize), info.device);
    if (w.num_bytes > size_t(max_window) || w.hitRatio < 0 || w.hitRatio > 1) return cudaErrorInvalidValue;
  }
  StreamAttributes& a = stream_attributes();
  Lock lock(a.mu);
  a.values[id][int(attr)] = *value;
  return cudaSuccess;
}

// An attribute never set reads as its default: no access policy window, the automatic
// synchronisation policy, domain 0; the priority is the stream's own.
cudaError_t get_stream_attribute(cudaStream_t stream, cudaLaunchAttributeID attr, cudaLaunchAttributeValue* out,
                                 DefaultStream flavour) {
  if (out == nullptr) return cudaErrorInvalidValue;
  StreamInfo info;
  StreamId id;
  if (cudaError_t e = stream_info(stream, flavour, &info, &id); e) return e;
  std::memset(out, 0, sizeof *out);
  if (attr == cudaLaunchAttributePriority) {
    out->priority = info.priority;
    return cudaSuccess;
  }
  if (!stream_attribute(attr)) return cudaErrorInvalidValue;
  StreamAttributes& a = stream_attributes();
  Lock lock(a.mu);
  auto stream_values = a.values.find(id);
  if (stream_values != a.values.end()) {
    auto v = stream_values->second.find(int(attr));
    if (v != stream_values->second.end()) {
      *out = v->second;
      return cudaSuccess;
    }
  }
  if (attr == cudaLaunchAttributeSynchronizationPolicy) out->syncPolicy = cudaSyncPolicyAuto;
  return cudaSuccess;
}

}  // namespace
}  // namespace simcuda::rt

using rt::kLegacy;
using rt::kPerThread;

// ---- streams ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamCreate_v3020), [&]() -> cudaError_t {
    return rt::record(rt::create_stream(pStream, cudaStreamDefault, 0));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream,
                                                               unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamCreateWithFlags_v5000), [&]() -> cudaError_t {
    return rt::record(rt::create_stream(pStream, flags, 0));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t* pStream,
                                                                  unsigned int flags,
                                                                  int priority) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamCreateWithPriority_v5050), [&]() -> cudaError_t {
    return rt::record(rt::create_stream(pStream, flags, priority));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamDestroy_v5050), [&]() -> cudaError_t {
    StreamId id;
    // The default streams are not the application's to destroy.
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
      return rt::record(cudaErrorInvalidResourceHandle);
    }
    if (cudaError_t e = rt::resolve_stream(stream, kLegacy, &id); e) return rt::record(e);
    graphs().forget_stream(id);
    return rt::record(rt::from_status(timeline().destroy_stream(id)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamSynchronize_v3020), [&]() -> cudaError_t {
    return rt::record(rt::synchronize_stream(stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamSynchronize_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::synchronize_stream(stream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamQuery_v3020), [&]() -> cudaError_t {
    return rt::record(rt::query_stream(stream, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamQuery_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::query_stream(stream, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                                         unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamWaitEvent_v3020), [&]() -> cudaError_t {
    return rt::record(rt::wait_event(stream, event, flags, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream,
                                                              cudaEvent_t event,
                                                              unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamWaitEvent_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::wait_event(stream, event, flags, kPerThread));
  });
}

#define SIMCUDA_STREAM_GETTER(name, cbid, type, flavour, expr)                        \
  SIMCUDA_EXPORT cudaError_t CUDARTAPI name(cudaStream_t hStream, type* out) {        \
    return rt::traced(SIMCUDA_RUNTIME_CBID(cbid), [&]() -> cudaError_t {              \
      if (out == nullptr) return rt::record(cudaErrorInvalidValue);                   \
      StreamInfo info;                                                                \
      StreamId id;                                                                    \
      if (cudaError_t e = rt::stream_info(hStream, flavour, &info, &id); e) {         \
        return rt::record(e);                                                         \
      }                                                                               \
      *out = static_cast<type>(expr);                                                 \
      return cudaSuccess;                                                             \
    });                                                                               \
  }

SIMCUDA_STREAM_GETTER(cudaStreamGetFlags, cudaStreamGetFlags_v5050, unsigned int, kLegacy, info.flags)
SIMCUDA_STREAM_GETTER(cudaStreamGetFlags_ptsz, cudaStreamGetFlags_ptsz_v7000, unsigned int, kPerThread, info.flags)
SIMCUDA_STREAM_GETTER(cudaStreamGetPriority, cudaStreamGetPriority_v5050, int, kLegacy, info.priority)
SIMCUDA_STREAM_GETTER(cudaStreamGetPriority_ptsz, cudaStreamGetPriority_ptsz_v7000, int, kPerThread, info.priority)
SIMCUDA_STREAM_GETTER(cudaStreamGetDevice, cudaStreamGetDevice_v12080, int, kLegacy, info.device)
SIMCUDA_STREAM_GETTER(cudaStreamGetDevice_ptsz, cudaStreamGetDevice_ptsz_v12080, int, kPerThread, info.device)
SIMCUDA_STREAM_GETTER(cudaStreamGetId, cudaStreamGetId_v12000, unsigned long long, kLegacy, id)
SIMCUDA_STREAM_GETTER(cudaStreamGetId_ptsz, cudaStreamGetId_ptsz_v12000, unsigned long long, kPerThread, id)

#undef SIMCUDA_STREAM_GETTER

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                            const cudaLaunchAttributeValue* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamSetAttribute_v11000), [&]() -> cudaError_t {
    return rt::record(rt::set_stream_attribute(hStream, attr, value, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                                 const cudaLaunchAttributeValue* value) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamSetAttribute_ptsz_v11000), [&]() -> cudaError_t {
    return rt::record(rt::set_stream_attribute(hStream, attr, value, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                            cudaLaunchAttributeValue* value_out) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamGetAttribute_v11000), [&]() -> cudaError_t {
    return rt::record(rt::get_stream_attribute(hStream, attr, value_out, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                                 cudaLaunchAttributeValue* value_out) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamGetAttribute_ptsz_v11000), [&]() -> cudaError_t {
    return rt::record(rt::get_stream_attribute(hStream, attr, value_out, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream,
                                                           cudaStreamCallback_t callback,
                                                           void* userData, unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamAddCallback_v5000), [&]() -> cudaError_t {
    return rt::record(rt::add_callback(stream, callback, userData, flags, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamAddCallback_ptsz(cudaStream_t stream,
                                                                cudaStreamCallback_t callback,
                                                                void* userData,
                                                                unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaStreamAddCallback_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::add_callback(stream, callback, userData, flags, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                                                        void* userData) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchHostFunc_v10000), [&]() -> cudaError_t {
    return rt::record(rt::launch_host_func(stream, fn, userData, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn,
                                                             void* userData) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaLaunchHostFunc_ptsz_v10000), [&]() -> cudaError_t {
    return rt::record(rt::launch_host_func(stream, fn, userData, kPerThread));
  });
}

// ---- events ----

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event,
                                                              unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventCreateWithFlags_v3020), [&]() -> cudaError_t {
    return rt::record(rt::create_event(event, flags));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventCreate_v3020), [&]() -> cudaError_t {
    return rt::record(rt::create_event(event, cudaEventDefault));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventDestroy_v3020), [&]() -> cudaError_t {
    EventId id;
    if (cudaError_t e = rt::event_id(event, &id); e) return rt::record(e);
    return rt::record(rt::from_status(timeline().destroy_event(id)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventRecord_v3020), [&]() -> cudaError_t {
    return rt::record(rt::record_event(event, stream, 0, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventRecord_ptsz_v7000), [&]() -> cudaError_t {
    return rt::record(rt::record_event(event, stream, 0, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event,
                                                              cudaStream_t stream,
                                                              unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventRecordWithFlags_v11010), [&]() -> cudaError_t {
    return rt::record(rt::record_event(event, stream, flags, kLegacy));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecordWithFlags_ptsz(cudaEvent_t event,
                                                                   cudaStream_t stream,
                                                                   unsigned int flags) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventRecordWithFlags_ptsz_v11010), [&]() -> cudaError_t {
    return rt::record(rt::record_event(event, stream, flags, kPerThread));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventQuery_v3020), [&]() -> cudaError_t {
    EventId id;
    if (cudaError_t e = rt::event_id(event, &id); e) return rt::record(e);
    return rt::record(rt::from_status(timeline().query_event(id)));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventSynchronize_v3020), [&]() -> cudaError_t {
    EventId id;
    if (cudaError_t e = rt::event_id(event, &id); e) return rt::record(e);
    EventInfo info{};
    if (activity::active()) timeline().event_info(id, &info);
    return rt::record(activity::timed_sync(activity::SyncType::kEvent, info.device, 0, id, [&] {
      return rt::from_status(timeline().synchronize_event(id));
    }));
  });
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                                          cudaEvent_t end) {
  return rt::traced(SIMCUDA_RUNTIME_CBID(cudaEventElapsedTime_v12080), [&]() -> cudaError_t {
    if (ms == nullptr) return rt::record(cudaErrorInvalidValue);
    EventId a, b;
    if (cudaError_t e = rt::event_id(start, &a); e) return rt::record(e);
    if (cudaError_t e = rt::event_id(end, &b); e) return rt::record(e);
    int64_t ns;
    if (Status s = timeline().elapsed_ns(a, b, &ns); s != Status::kOk) {
      return rt::record(rt::from_status(s));
    }
    *ms = float(double(ns) / 1e6);
    return cudaSuccess;
  });
}
