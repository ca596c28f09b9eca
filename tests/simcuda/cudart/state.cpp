// Per-thread runtime state and the encoding of stream and event handles.
#include <vector>

#include "core/handles.h"
#include "runtime.h"

namespace simcuda::rt {
namespace {

// The fields every call may touch are plain and initial-exec, so reading them costs no guard and no
// __tls_get_addr call: cheap calls stay cheap, which the overhead benchmark relies on. (The few
// bytes fit the static TLS surplus glibc keeps for libraries that are dlopen'ed.)
thread_local int t_device __attribute__((tls_model("initial-exec"))) = 0;
thread_local cudaError_t t_last_error __attribute__((tls_model("initial-exec"))) = cudaSuccess;

struct ThreadState {
  std::vector<CallConfiguration> configurations;
};

thread_local ThreadState t_state;

}  // namespace

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) t_last_error = e;
  return e;
}

cudaError_t take_last_error(bool reset) {
  cudaError_t e = t_last_error;
  if (reset) t_last_error = cudaSuccess;
  return e;
}

void set_thread_device(int device) { t_device = device; }

cudaError_t check_device(int device) {
  if (config().device_count == 0) return cudaErrorNoDevice;
  note_runtime_initialized();
  if (device < 0 || device >= config().device_count) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

cudaError_t current_device(int* device) {
  if (config().device_count == 0) return cudaErrorNoDevice;
  note_runtime_initialized();
  *device = t_device;
  return cudaSuccess;
}

cudaError_t resolve_stream(cudaStream_t stream, DefaultStream flavour, StreamId* out) {
  int device;
  if (cudaError_t e = current_device(&device); e != cudaSuccess) return e;
  if (stream == nullptr) {
    stream = flavour == DefaultStream::kLegacy ? cudaStreamLegacy : cudaStreamPerThread;
  }
  if (stream == cudaStreamLegacy) {
    *out = timeline().legacy_stream(device);
    return cudaSuccess;
  }
  if (stream == cudaStreamPerThread) {
    // A device reset destroys it; the thread then gets a new one, as with the real runtime.
    return from_status(per_thread_stream(device, out));
  }
  // Validity is checked by whatever uses the id, under the device lock.
  if (!handles::decode_stream(stream, out)) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

cudaStream_t stream_handle(StreamId id) {
  return reinterpret_cast<cudaStream_t>(handles::stream(id));
}

cudaEvent_t event_handle(EventId id) {
  return reinterpret_cast<cudaEvent_t>(handles::event(id));
}

bool decode_event(cudaEvent_t event, EventId* out) { return handles::decode_event(event, out); }

cudaError_t from_status(Status s, cudaError_t invalid_handle) {
  switch (s) {
    case Status::kOk: return cudaSuccess;
    case Status::kInvalidValue: return cudaErrorInvalidValue;
    case Status::kInvalidDevice: return cudaErrorInvalidDevice;
    case Status::kInvalidHandle: return invalid_handle;
    case Status::kOutOfMemory: return cudaErrorMemoryAllocation;
    case Status::kNotReady: return cudaErrorNotReady;
    case Status::kAlreadyRegistered: return cudaErrorHostMemoryAlreadyRegistered;
    case Status::kNotRegistered: return cudaErrorHostMemoryNotRegistered;
  }
  return cudaErrorUnknown;
}

void push_call_configuration(const CallConfiguration& c) { t_state.configurations.push_back(c); }

bool pop_call_configuration(CallConfiguration* out) {
  if (t_state.configurations.empty()) return false;
  *out = t_state.configurations.back();
  t_state.configurations.pop_back();
  return true;
}

}  // namespace simcuda::rt
