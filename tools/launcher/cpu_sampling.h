// -s cpu: the perf events that sample the command. Opened by the launcher on the held program, one per
// CPU (the kernel hands out an mmap-able buffer for an inherited task event only per CPU), inherited by
// every thread and process it starts and enabled by its exec, so the first instruction of the command is
// sampled and nothing of the launcher's. The recorder reads them (recorder/cpu_samples.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cutrace::launcher {

struct CpuSamplingEvents {
  std::vector<int> fds;  // one per online CPU; empty when sampling is unavailable
  std::string unavailable;  // why, in one sentence's worth, when fds is empty
  ~CpuSamplingEvents();
  CpuSamplingEvents() = default;
  CpuSamplingEvents(const CpuSamplingEvents&) = delete;
  CpuSamplingEvents& operator=(const CpuSamplingEvents&) = delete;
  void close_all();
};

// Samples of `pid` (held before its exec) at `frequency` Hz of CPU time per thread, user space only (what
// an unprivileged user may sample under kernel.perf_event_paranoid 2), with the instruction and the
// frame-pointer call chain.
// With `context_switches`, the same events also report each switch of a sampled thread out of its CPU and
// back; with `frequency` 0 they take no samples, only switches.
void open_cpu_sampling(pid_t pid, uint32_t frequency, bool context_switches, CpuSamplingEvents* events);

}  // namespace cutrace::launcher
