// The trace reader's GPU records: devices, and each GPU activity record decoded into an event.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "reader/decode.h"
#include "reader/trace_claim.h"
#include "reader/trace_reader.h"
#include "reader/trace_reader_internal.h"

namespace cutrace::reader {

using namespace detail;

std::string gpu_uuid_text(const uint8_t (&uuid)[16]) {
  static const char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[uuid[i] >> 4];
    text += kHex[uuid[i] & 15];
  }
  return text;
}

void TraceReader::apply_gpu_device(Thread& t, const uint8_t* rec) {
  GpuDevice d;
  d.record = load<abi::GpuDeviceRecord>(rec);
  d.name.assign(reinterpret_cast<const char*>(rec + sizeof(abi::GpuDeviceRecord)), d.record.name_bytes);
  // CUPTI describes a device once; a second description of the same id (a CUPTI restarted in the
  // process) is the newer word on it.
  std::vector<GpuDevice>& devices = processes_[t.process].gpu_devices;
  for (GpuDevice& known : devices)
    if (known.record.device == d.record.device) {
      known = std::move(d);
      return;
    }
  devices.push_back(std::move(d));
}

void TraceReader::deliver_gpu_activity(Event& ev, const uint8_t* r, uint32_t aux) {
  ev.kind = EventKind::kGpuActivity;
  GpuActivityEvent& g = ev.gpu;
  g = GpuActivityEvent{};
  g.kind = abi::GpuActivity(aux);
  switch (g.kind) {
    case abi::GpuActivity::kApiLink: {
      auto a = load<abi::GpuApiLinkRecord>(r);
      g.start_ns = a.start, g.end_ns = a.end, g.correlation = a.correlation;
      g.tid = a.tid, g.api_id = a.api_id, g.result = a.result;
      return;
    }
    case abi::GpuActivity::kDropped: {
      auto d = load<abi::GpuDroppedRecord>(r);
      g.start_ns = g.end_ns = d.time;
      g.dropped = d.dropped;
      return;
    }
    default: break;
  }
  auto h = load<abi::GpuActivityHeader>(r);
  g.start_ns = h.start, g.end_ns = std::max(h.start, h.end), g.correlation = h.correlation;
  g.device = h.device, g.context = h.context, g.stream = h.stream;
  switch (g.kind) {
    case abi::GpuActivity::kKernel: {
      auto k = load<abi::GpuKernelRecord>(r);
      const Process& proc = processes_[ev.thread->process];
      if (auto it = proc.gpu_kernel_names.find(k.name); k.name && it != proc.gpu_kernel_names.end()) g.name = &it->second;
      std::copy(std::begin(k.grid), std::end(k.grid), g.grid);
      std::copy(std::begin(k.block), std::end(k.block), g.block);
      g.static_shared_bytes = k.static_shared_bytes, g.dynamic_shared_bytes = k.dynamic_shared_bytes;
      g.registers_per_thread = k.registers_per_thread;
      g.graph_id = k.graph_id, g.graph_node_id = k.graph_node_id;
      break;
    }
    case abi::GpuActivity::kMemcpy: {
      auto m = load<abi::GpuMemcpyRecord>(r);
      g.bytes = m.bytes, g.runtime_correlation = m.runtime_correlation;
      g.copy_kind = m.copy_kind, g.src_kind = m.src_kind, g.dst_kind = m.dst_kind, g.flags = m.flags;
      g.graph_id = m.graph_id, g.graph_node_id = m.graph_node_id;
      break;
    }
    case abi::GpuActivity::kMemset: {
      auto m = load<abi::GpuMemsetRecord>(r);
      g.bytes = m.bytes, g.value = m.value, g.memory_kind = m.memory_kind, g.flags = uint8_t(m.flags);
      g.graph_id = m.graph_id, g.graph_node_id = m.graph_node_id;
      break;
    }
    case abi::GpuActivity::kGraph: {
      g.graph_id = load<abi::GpuGraphRecord>(r).graph_id;
      break;
    }
    case abi::GpuActivity::kSync: {
      auto s = load<abi::GpuSyncRecord>(r);
      g.sync_type = s.type, g.event = s.event;
      break;
    }
    case abi::GpuActivity::kMemory: {
      auto m = load<abi::GpuMemoryRecord>(r);
      g.address = m.address, g.bytes = m.bytes, g.operation = m.operation, g.memory_kind = m.memory_kind;
      break;
    }
    default: break;
  }
}

}  // namespace cutrace::reader
