#include "activity.h"

namespace simcuda::activity {
namespace {

std::atomic<uint32_t> g_next_correlation{0};

// The traced calls the thread is inside, by domain; 0 when none.
thread_local uint32_t t_runtime = 0;
thread_local uint32_t t_driver = 0;

uint32_t& slot(Domain d) { return d == Domain::kRuntime ? t_runtime : t_driver; }

}  // namespace

std::atomic<const Sink*> g_sink{nullptr};

bool set_sink(const Sink* sink) {
  if (sink != nullptr && sink->version != kVersion) return false;
  g_sink.store(sink, std::memory_order_release);
  return true;
}

Correlation current() { return Correlation{t_runtime, t_driver}; }

Call api_enter(Domain domain, uint32_t cbid) {
  Call c{domain, cbid, 0, 0};
  uint32_t& mine = slot(domain);
  if (mine != 0) return c;
  const Sink* s = g_sink.load(std::memory_order_acquire);
  if (s == nullptr) return c;
  c.correlation = g_next_correlation.fetch_add(1, std::memory_order_relaxed) + 1;
  mine = c.correlation;
  if (s->api_enter != nullptr) s->api_enter(domain, cbid, c.correlation);
  c.start_ns = now_ns();
  return c;
}

void api_exit(const Call& call, int64_t result) {
  uint64_t end = now_ns();
  slot(call.domain) = 0;
  if (const Sink* s = g_sink.load(std::memory_order_acquire)) {
    s->api_exit(ApiCall{call.domain, call.cbid, call.correlation, call.start_ns, end, result});
  }
}

std::shared_ptr<OpInfo> new_op_info(OpType type) {
  auto info = std::make_shared<OpInfo>();
  info->type = type;
  info->runtime_correlation = t_runtime;
  info->driver_correlation = t_driver;
  return info;
}

void report_op(const OpInfo& info, uint64_t start_ns, uint64_t end_ns, int device, uint64_t stream) {
  if (const Sink* s = g_sink.load(std::memory_order_acquire)) {
    s->device_op(DeviceOp{&info, start_ns, end_ns, device, stream});
  }
}

void report_memory(bool allocation, Memory kind, int device, uint64_t address, uint64_t bytes) {
  if (const Sink* s = g_sink.load(std::memory_order_acquire)) {
    s->memory(MemoryEvent{allocation, kind, device, address, bytes, now_ns(), current().outermost()});
  }
}

}  // namespace simcuda::activity
