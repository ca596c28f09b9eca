#include "recorder/process_monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cutrace::recorder {

namespace {

constexpr uint64_t kMapsScanIntervalNs = 1000000000ull;
constexpr uint8_t kMapsScans = 5;

int pidfd_open(uint32_t pid) {
#ifdef SYS_pidfd_open
  // The new descriptor is close-on-exec by default.
  return int(syscall(SYS_pidfd_open, pid_t(pid), 0u));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

std::string find_mapped_file(uint32_t pid, const char* needle) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/maps", pid);
  FILE* f = std::fopen(path, "re");
  if (!f) return {};
  std::string found;
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t n;
  while ((n = getline(&line, &capacity, f)) > 0) {
    if (!std::strstr(line, needle)) continue;
    const char* name = std::strchr(line, '/');
    if (!name) continue;
    found.assign(name, line + n - name);
    while (!found.empty() && found.back() == '\n') found.pop_back();
    break;
  }
  std::free(line);
  std::fclose(f);
  return found;
}

ProcessMonitor::~ProcessMonitor() {
  for (Process& p : processes_)
    if (p.pidfd >= 0) ::close(p.pidfd);
}

namespace {

// A zombie has pushed its last record (and a dead process exits no more); only its parent's wait()
// is missing.
bool still_running(const ProcStat& st) { return st.state != 'Z' && st.state != 'X' && st.state != 'x'; }

}  // namespace

bool ProcessMonitor::alive_by_proc(const Process& p) const {
  ProcStat st;
  if (!read_proc_stat(p.pid, &st) || !still_running(st)) return false;
  // A producer that could not read its own start time leaves 0; then only existence can be checked.
  return p.start_ticks == 0 || st.start_ticks == p.start_ticks;
}

void ProcessMonitor::mark_dead(Process& p) {
  if (p.pidfd >= 0) ::close(p.pidfd);
  p.pidfd = -1;
  p.dead = true;
}

uint32_t ProcessMonitor::track(uint32_t pid, uint64_t start_ticks, uint64_t now_ns) {
  auto [it, inserted] = ids_.try_emplace({pid, start_ticks}, uint32_t(processes_.size()));
  if (!inserted) return it->second;
  Process p{pid, start_ticks, -1, false, kMapsScans, now_ns};
  if (!pid_plausible(pid)) {
    p.dead = true;
    p.maps_scans_left = 0;
  } else {
    if (use_pidfd_) {
      p.pidfd = pidfd_open(pid);
      if (p.pidfd < 0 && errno == ENOSYS) use_pidfd_ = false;
      // ESRCH (already gone) is caught by the /proc check below; EINVAL (not a process leader) and
      // EMFILE leave this one process on the fallback.
    }
    // The pidfd was opened before this check, so a start time that still matches now proves the pidfd
    // refers to this process and not to a later one that reused the pid.
    if (!alive_by_proc(p))
      mark_dead(p);
    else
      scan_maps(p, now_ns);  // a short-lived process may be gone by the next refresh
  }
  processes_.push_back(p);
  return it->second;
}

void ProcessMonitor::refresh(uint64_t now_ns) {
  std::vector<pollfd> fds;
  std::vector<uint32_t> owners;
  for (uint32_t i = 0; i < processes_.size(); ++i) {
    Process& p = processes_[i];
    if (p.dead) continue;
    if (p.pidfd >= 0) {
      fds.push_back({p.pidfd, POLLIN, 0});
      owners.push_back(i);
    } else if ((::kill(pid_t(p.pid), 0) != 0 && errno == ESRCH) || !alive_by_proc(p)) {
      mark_dead(p);
    }
  }
  // A pidfd becomes readable once the whole thread group has exited.
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) mark_dead(processes_[owners[k]]);
  }

  // At most one maps scan per refresh: a large process has thousands of mappings.
  for (size_t k = 0; k < processes_.size(); ++k) {
    Process& p = processes_[(next_scan_ + k) % processes_.size()];
    if (p.dead || p.maps_scans_left == 0 || now_ns < p.next_maps_scan_ns) continue;
    next_scan_ = (next_scan_ + k + 1) % processes_.size();
    scan_maps(p, now_ns);
    break;
  }
}

size_t ProcessMonitor::alive() const {
  size_t n = 0;
  for (const Process& p : processes_) n += !p.dead;
  return n;
}

void ProcessMonitor::scan_maps(Process& p, uint64_t now_ns) {
  std::string path = find_mapped_file(p.pid, "libcudart.so");
  if (path.empty()) {
    --p.maps_scans_left;
    p.next_maps_scan_ns = now_ns + kMapsScanIntervalNs;
    return;
  }
  p.maps_scans_left = 0;
  for (const std::string& known : cuda_runtimes_)
    if (known == path) return;
  cuda_runtimes_.push_back(std::move(path));
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool ProcessWatch::open(uint32_t pid, bool use_pidfd) {
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
  pid_ = pid;
  alive_ = false;
  if (!pid_plausible(pid)) return false;
  if (use_pidfd) pidfd_ = pidfd_open(pid);
  // Read after the pidfd is open: both then name the same process, and the start time keeps the
  // fallback from taking a later process under the same pid for it.
  ProcStat st;
  if (!read_proc_stat(pid, &st) || !still_running(st)) {
    if (pidfd_ >= 0) ::close(pidfd_);
    pidfd_ = -1;
    return false;
  }
  start_ticks_ = st.start_ticks;
  alive_ = true;
  return true;
}

bool ProcessWatch::alive() {
  if (!alive_) return false;
  if (pidfd_ >= 0) {
    // Readable once the whole thread group has exited.
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) alive_ = false;
  } else {
    ProcStat st;
    alive_ = read_proc_stat(pid_, &st) && still_running(st) && st.start_ticks == start_ticks_;
  }
  if (!alive_ && pidfd_ >= 0) {
    ::close(pidfd_);
    pidfd_ = -1;
  }
  return alive_;
}

}  // namespace cutrace::recorder
