// Tells live producer processes from dead ones, so the recorder can drain and free the rings a process
// left behind when it exited without retiring them (SIGKILL, _exit, a crash).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cutrace/proc_stat.h"

namespace cutrace::recorder {

// Linux never hands out a pid above PID_MAX_LIMIT (2^22 on 64-bit); anything else in a slot is garbage.
inline constexpr uint32_t kPidMaxLimit = 4u << 20;
inline bool pid_plausible(uint32_t pid) { return pid > 0 && pid <= kPidMaxLimit; }

using ProcStat = proc::Stat;

// Reads /proc/<pid>/stat. Returns false when the process does not exist (or cannot be parsed).
inline bool read_proc_stat(uint32_t pid, ProcStat* out) { return proc::read_stat(pid, out); }

// Returns the first mapped file of /proc/<pid>/maps whose name contains `needle`, or "".
std::string find_mapped_file(uint32_t pid, const char* needle);

class ProcessMonitor {
 public:
  // `use_pidfd` = false forces the kill(pid, 0) + /proc fallback (also chosen automatically when the
  // kernel lacks pidfd_open, before Linux 5.3).
  explicit ProcessMonitor(bool use_pidfd = true) : use_pidfd_(use_pidfd) {}
  ProcessMonitor(const ProcessMonitor&) = delete;
  ProcessMonitor& operator=(const ProcessMonitor&) = delete;
  ~ProcessMonitor();

  // Returns the id of the process instance (pid, start_ticks), registering it on first sight (which
  // also looks for its CUDA runtime once). An implausible pid, a pid that no longer exists or one
  // whose start time differs (the pid was reused) is registered as dead at once.
  uint32_t track(uint32_t pid, uint64_t start_ticks, uint64_t now_ns);
  bool dead(uint32_t id) const { return processes_[id].dead; }
  // Re-checks every process still believed alive; cheap enough to call every few milliseconds (one
  // poll() over all pidfds). Also looks for the CUDA runtime a live process has mapped, a little at a
  // time so the scan never competes with draining.
  void refresh(uint64_t now_ns);

  size_t count() const { return processes_.size(); }
  // Processes not known to be dead as of the latest refresh (or track).
  size_t alive() const;
  bool using_pidfd() const { return use_pidfd_; }
  // libcudart paths seen in the maps of traced processes, without duplicates, in order of discovery.
  const std::vector<std::string>& cuda_runtime_libraries() const { return cuda_runtimes_; }

 private:
  struct Process {
    uint32_t pid;
    uint64_t start_ticks;
    int pidfd;
    bool dead;
    uint8_t maps_scans_left;
    uint64_t next_maps_scan_ns;
  };
  bool alive_by_proc(const Process& p) const;
  void mark_dead(Process& p);
  void scan_maps(Process& p, uint64_t now_ns);

  bool use_pidfd_;
  std::vector<Process> processes_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> ids_;
  std::vector<std::string> cuda_runtimes_;
  size_t next_scan_ = 0;
};

// One process to wait for that may never claim a ring (the command the launcher started, which may
// still be held before its exec): by pidfd, or by its /proc start time where there is none.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  ~ProcessWatch();

  // False when `pid` names no live process. The caller must know that `pid` cannot have been reused
  // yet (it is an unreaped child of a process still alive), as nothing here can tell.
  bool open(uint32_t pid, bool use_pidfd = true);
  // Whether the process has not exited; false for one never opened. A zombie counts as exited.
  bool alive();
  uint32_t pid() const { return pid_; }

 private:
  uint32_t pid_ = 0;
  uint64_t start_ticks_ = 0;
  int pidfd_ = -1;
  bool alive_ = false;
};

}  // namespace cutrace::recorder
