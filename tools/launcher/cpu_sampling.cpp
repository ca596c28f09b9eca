#include "launcher/cpu_sampling.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace cutrace::launcher {
namespace {

std::string paranoid_level() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  std::string level;
  return in >> level ? level : "unknown";
}

}  // namespace

CpuSamplingEvents::~CpuSamplingEvents() { close_all(); }

void CpuSamplingEvents::close_all() {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

void open_cpu_sampling(pid_t pid, uint32_t frequency, bool context_switches, CpuSamplingEvents* events) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  // The CPU-time clock of the task, which every kernel has (a guest often has no hardware counters).
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  if (frequency) {
    attr.freq = 1;
    attr.sample_freq = frequency;
  } else {
    attr.sample_period = uint64_t(1) << 62;  // switches only: a sample every 146 years of CPU time
  }
  // Switch records carry the thread, time and CPU too (sample_id_all).
  attr.context_switch = context_switches;
  // The command's exec and each thread's end, which no switch record marks: the exec happens on a CPU
  // (the events start there) and an ending thread's last switch comes after its events are gone.
  attr.comm = context_switches;
  attr.comm_exec = context_switches;
  attr.task = context_switches;
  attr.sample_id_all = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  attr.inherit = 1;
  attr.disabled = 1;
  attr.enable_on_exec = 1;
  // The trace's own clock: samples fall between the calls they interrupted.
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  int first_error = 0;
  for (long cpu = 0; cpu < cpus; ++cpu) {
    const int fd = int(syscall(SYS_perf_event_open, &attr, pid, int(cpu), -1, PERF_FLAG_FD_CLOEXEC));
    if (fd >= 0) {
      events->fds.push_back(fd);
    } else if (errno != ENODEV && !first_error) {  // ENODEV: an offline CPU, which runs nothing
      first_error = errno;
    }
  }
  if (first_error || events->fds.empty()) {
    events->close_all();
    const int e = first_error ? first_error : ENODEV;
    events->unavailable = std::string("perf_event_open: ") + std::strerror(e) + "; kernel.perf_event_paranoid is " +
                          paranoid_level() +
                          (e == EACCES || e == EPERM
                               ? ", or a container forbids perf events (it needs perf_event_open allowed and "
                                 "paranoid 2 or lower)"
                               : e == EINVAL ? ", or the frequency is above kernel.perf_event_max_sample_rate" : "");
  }
}

}  // namespace cutrace::launcher
