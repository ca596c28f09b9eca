#include "recorder/cpu_samples.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cutrace/abi.h"

namespace cutrace::recorder {
namespace {

// 128 pages per CPU: at 8000 samples per second of 64 frames each, a full second of one busy thread.
constexpr size_t kDataPages = 128;

// perf_event_header + ip + pid, tid + time + cpu, res + nr: the fixed part of a sample with the
// sample_type the launcher asks for (IP | TID | TIME | CPU | CALLCHAIN, in that order).
struct SampleFixed {
  perf_event_header header;
  uint64_t ip;
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu, res;
  uint64_t nr;
};

// The sample_id trailer of every other record (sample_id_all): TID | TIME | CPU of sample_type.
struct SampleId {
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu, res;
};

}  // namespace

void CpuSampleReader::note_switch(uint32_t tid, uint64_t time, abi::ContextSwitch change) {
  ThreadSwitches& t = threads_[tid];
  uint64_t& last = change == abi::ContextSwitch::kIn ? t.last_in : t.last_out;
  last = std::max(last, time);
}

bool CpuSampleReader::on_cpu(uint32_t tid) const {
  // Each CPU's buffer is read in turn, so a thread's switches can arrive out of order; but a thread's
  // latest switch in was on the CPU it runs on now, whose buffer holds it before this record.
  const auto t = threads_.find(tid);
  return t != threads_.end() && t->second.last_in > t->second.last_out;
}

CpuSampleReader::~CpuSampleReader() {
  for (Buffer& b : buffers_) {
    if (b.base) munmap(b.base, b.mapped);
    if (b.fd >= 0) close(b.fd);
  }
}

bool CpuSampleReader::attach(const std::vector<int>& fds, std::string* error) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  for (int fd : fds) {
    Buffer b;
    b.fd = fd;
    b.mapped = page * (1 + kDataPages);
    void* p = mmap(nullptr, b.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      *error = std::string("cannot map a CPU sampling buffer: ") + std::strerror(errno);
      close(fd);
      return false;
    }
    b.base = static_cast<uint8_t*>(p);
    buffers_.push_back(b);
  }
  return true;
}

uint64_t CpuSampleReader::drain(const std::function<void(const CpuSample&)>& sink) {
  uint64_t delivered = 0;
  for (Buffer& b : buffers_) {
    auto* meta = reinterpret_cast<perf_event_mmap_page*>(b.base);
    const size_t page = b.mapped / (1 + kDataPages);
    const uint64_t offset = meta->data_offset ? meta->data_offset : page;
    const uint64_t size = meta->data_size ? meta->data_size : page * kDataPages;
    if (offset + size > b.mapped || size == 0 || (size & (size - 1)) != 0) {
      ++malformed_;
      continue;
    }
    const uint8_t* data = b.base + offset;
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    // Copies [from, from + n) of the ring out, across its end.
    auto copy = [&](uint64_t from, void* out, size_t n) {
      const uint64_t at = from & (size - 1);
      const size_t first = size_t(std::min<uint64_t>(n, size - at));
      std::memcpy(out, data + at, first);
      std::memcpy(static_cast<uint8_t*>(out) + first, data, n - first);
    };
    while (head - tail >= sizeof(perf_event_header)) {
      perf_event_header h;
      copy(tail, &h, sizeof h);
      if (h.size < sizeof h || h.size > head - tail) {  // the kernel's writes are whole records
        ++malformed_;
        tail = head;
        break;
      }
      record_.resize(h.size);
      copy(tail, record_.data(), h.size);
      tail += h.size;
      if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
        uint64_t lost;
        std::memcpy(&lost, record_.data() + sizeof h + 8, sizeof lost);
        lost_ += lost;
        continue;
      }
      if (h.type == PERF_RECORD_SWITCH || h.type == PERF_RECORD_COMM || h.type == PERF_RECORD_EXIT) {
        // The sample_id trailer (sample_id_all) of the sample_type asked for, at the record's end: pid,
        // tid, time, cpu, res.
        SampleId id;
        if (h.size < sizeof h + sizeof id) {
          ++malformed_;
          continue;
        }
        std::memcpy(&id, record_.data() + h.size - sizeof id, sizeof id);
        abi::ContextSwitch change;
        if (h.type == PERF_RECORD_SWITCH) {
          change = !(h.misc & PERF_RECORD_MISC_SWITCH_OUT)          ? abi::ContextSwitch::kIn
                   : (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? abi::ContextSwitch::kPreempted
                                                                    : abi::ContextSwitch::kOut;
        } else if (h.type == PERF_RECORD_COMM) {
          // The events start at the command's exec, on the CPU it is running on, so its first switch
          // would be a switch out: the exec's record is its switch in. Renames of threads are not.
          if (!(h.misc & PERF_RECORD_MISC_COMM_EXEC) || on_cpu(id.tid)) continue;
          change = abi::ContextSwitch::kIn;
        } else {
          // The switch out of an ending thread comes after its events are gone; its exit is that switch.
          change = abi::ContextSwitch::kOut;
        }
        note_switch(id.tid, id.time, change);
        if (h.type == PERF_RECORD_EXIT) threads_.erase(id.tid);
        CpuSample switched;
        switched.pid = id.pid;
        switched.tid = id.tid;
        switched.cpu = id.cpu;
        switched.time_ns = id.time;
        switched.context_switch = uint32_t(change);
        sink(switched);
        ++delivered;
        continue;
      }
      if (h.type != PERF_RECORD_SAMPLE) continue;
      SampleFixed s;
      if (h.size < sizeof s) {
        ++malformed_;
        continue;
      }
      std::memcpy(&s, record_.data(), sizeof s);
      if (s.nr > (h.size - sizeof s) / 8) {
        ++malformed_;
        continue;
      }
      // The call chain starts with a context marker and the interrupted instruction; markers
      // (PERF_CONTEXT_*) are the top 4095 values.
      frames_.clear();
      frames_.push_back(s.ip);
      const uint8_t* chain = record_.data() + sizeof s;
      for (uint64_t k = 0; k < s.nr && frames_.size() < abi::kMaxSampleFrames; ++k) {
        uint64_t address;
        std::memcpy(&address, chain + 8 * k, sizeof address);
        if (address >= uint64_t(PERF_CONTEXT_MAX)) continue;
        if (frames_.size() == 1 && address == s.ip) continue;
        frames_.push_back(address);
      }
      CpuSample sample;
      sample.pid = s.pid;
      sample.tid = s.tid;
      sample.cpu = s.cpu;
      sample.time_ns = s.time;
      sample.frames = frames_.data();
      sample.frame_count = uint32_t(frames_.size());
      sink(sample);
      ++delivered;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  return delivered;
}

}  // namespace cutrace::recorder
