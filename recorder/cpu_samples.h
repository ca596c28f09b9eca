// Reads the CPU samples of -s cpu from the kernel's perf event buffers (one per CPU, opened by the
// launcher on the program, tools/launcher/cpu_sampling.h). The buffers are the kernel's and the program's
// doing: every record is bounds-checked before it is read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cutrace/abi.h"

namespace cutrace::recorder {

struct CpuSample {
  uint32_t pid = 0, tid = 0, cpu = 0;
  uint64_t time_ns = 0;        // CLOCK_MONOTONIC
  const uint64_t* frames = nullptr;  // the instruction, then return addresses; valid during the callback
  uint32_t frame_count = 0;
  // Not a sample but a context switch (--cpuctxsw): abi::ContextSwitch; no frames.
  uint32_t context_switch = 0;
};

class CpuSampleReader {
 public:
  CpuSampleReader() = default;
  ~CpuSampleReader();
  CpuSampleReader(const CpuSampleReader&) = delete;
  CpuSampleReader& operator=(const CpuSampleReader&) = delete;

  // Maps each perf event's buffer; takes the descriptors over. False (and `error`) when one cannot be.
  bool attach(const std::vector<int>& fds, std::string* error);
  // Hands every sample and context switch the buffers hold to `sink`, oldest first per CPU, and frees
  // their room.
  uint64_t drain(const std::function<void(const CpuSample&)>& sink);
  uint64_t lost() const { return lost_; }          // samples the kernel could not store (buffer full)
  uint64_t malformed() const { return malformed_; }  // records that failed their checks

 private:
  struct Buffer {
    int fd = -1;
    uint8_t* base = nullptr;
    size_t mapped = 0;
  };
  struct ThreadSwitches {
    uint64_t last_in = 0, last_out = 0;
  };
  void note_switch(uint32_t tid, uint64_t time, abi::ContextSwitch change);
  bool on_cpu(uint32_t tid) const;

  std::vector<Buffer> buffers_;
  std::unordered_map<uint32_t, ThreadSwitches> threads_;  // the threads with switches, until they exit
  std::vector<uint8_t> record_;
  std::vector<uint64_t> frames_;
  uint64_t lost_ = 0;
  uint64_t malformed_ = 0;
};

}  // namespace cutrace::recorder
