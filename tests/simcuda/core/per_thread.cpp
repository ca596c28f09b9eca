#include <atomic>
#include <vector>

#include "handles.h"

namespace simcuda {
namespace {

struct PerThreadStreams {
  std::vector<StreamId> by_device;  // 0 until first used

  ~PerThreadStreams() {
    // The stream goes with its thread; work already queued on it still completes.
    for (StreamId id : by_device) {
      if (id != 0) timeline().destroy_stream(id);
    }
  }
};

thread_local PerThreadStreams t_streams;
thread_local int t_runtime_context_device = -1;

}  // namespace

Status per_thread_stream(int device, StreamId* out) {
  std::vector<StreamId>& streams = t_streams.by_device;
  if (device < 0) return Status::kInvalidDevice;
  if (streams.size() <= size_t(device)) streams.resize(device + 1, 0);
  StreamId& id = streams[device];
  if (id == 0 || timeline().stream_info(id, nullptr) != Status::kOk) {
    if (Status s = timeline().create_stream(device, 0, 0, /*per_thread=*/true, &id);
        s != Status::kOk) {
      id = 0;
      return s;
    }
  }
  *out = id;
  return Status::kOk;
}

void note_runtime_context(int device) { t_runtime_context_device = device; }
int runtime_context_device() { return t_runtime_context_device; }

namespace {
std::atomic<bool> g_runtime_initialized{false};
}  // namespace

void note_runtime_initialized() {
  // Read first: every runtime call passes here, and a store each time would bounce the line between cores.
  if (!g_runtime_initialized.load(std::memory_order_relaxed))
    g_runtime_initialized.store(true, std::memory_order_release);
}
bool runtime_initialized() { return g_runtime_initialized.load(std::memory_order_acquire); }

}  // namespace simcuda
