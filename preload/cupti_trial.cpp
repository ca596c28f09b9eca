#include "cupti_trial.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime.h"

extern char** environ;

namespace cutrace::preload {
namespace {

constexpr const char* kTrialFileName = "cutrace-cupti-trial";
// CUTRACE_CUPTI_TRIAL=0 loads CUPTI untried: no trial process, and no protection from a CUPTI that
// crashes (where a trial's start-up, a driver initialised once more, costs too much).
constexpr const char* kTrialEnvVar = "CUTRACE_CUPTI_TRIAL";
// Long enough for a driver to initialise eight GPUs, short of the 10 s a program's first CUDA call
// waits for CUPTI at most.
constexpr uint64_t kTrialLimitMs = 8000;
constexpr uint32_t kVerdictMask = 3, kPasses = 1, kFails = 2;

// The session's memo of a verdict: the pair's hash with the verdict in its low bits.
uint32_t pair_key(const char* driver_path, const char* cupti_path) {
  uint32_t h = 2166136261u;
  for (const char* s : {driver_path, "\n", cupti_path}) {
    for (; *s; ++s) h = (h ^ uint8_t(*s)) * 16777619u;
  }
  return (h & ~kVerdictMask) | 4;  // never 0, which means no verdict
}

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Beside the recorder of the session (the build tree's bin/, an installation's libexec/cutrace), or
// beside the shim's own directory in either layout.
std::string find_trial() {
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/%u/exe", g_session->recorder_pid.load(std::memory_order_relaxed));
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n > 0) {
    target[n] = '\0';
    const std::string candidate = directory_of(target) + "/" + kTrialFileName;
    if (executable(candidate)) return candidate;
  }
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&cupti_trial_passes), &self) && self.dli_fname) {
    const std::string parent = directory_of(directory_of(self.dli_fname));
    for (const char* dir : {"/bin/", "/libexec/cutrace/"}) {
      const std::string candidate = parent + dir + kTrialFileName;
      if (executable(candidate)) return candidate;
    }
  }
  return {};
}

// The program's environment without cutrace: no shim preloaded and no session to join, so that the
// trial is not traced.
std::vector<std::string> trial_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind(std::string(abi::kSessionEnvVar) + "=", 0) == 0) continue;
    if (entry.rfind("LD_PRELOAD=", 0) == 0) {
      std::string kept;
      size_t start = 11;
      while (start <= entry.size()) {
        size_t end = entry.find_first_of(" :", start);
        if (end == std::string::npos) end = entry.size();
        const std::string item = entry.substr(start, end - start);
        const std::string base = item.substr(item.rfind('/') == std::string::npos ? 0 : item.rfind('/') + 1);
        if (!item.empty() && base.rfind("libcutrace", 0) != 0) kept += (kept.empty() ? "" : " ") + item;
        start = end + 1;
      }
      if (!kept.empty()) out.push_back("LD_PRELOAD=" + kept);
      continue;
    }
    out.push_back(entry);
  }
  return out;
}

// What runs in the trial's processes while they share the program's memory, on stacks of their own:
// no sanitizer's bookkeeping, which knows neither the stacks nor the processes.
#define CUTRACE_BORROWED __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined, noinline))

struct Exec {
  const char* path;
  char* const* argv;
  char* const* envp;
  char* trial_stack_top;  // the trial's own stack, for the few instructions before its exec
  uint64_t deadline_ms;
};

// The trial itself: execs at once. It shares the program's memory until then: system calls only.
CUTRACE_BORROWED int exec_trial(void* arg) {
  const Exec* e = static_cast<const Exec*>(arg);
  syscall(SYS_execve, e->path, e->argv, e->envp);
  syscall(SYS_exit, 127);
  return 127;
}

// Exit codes of the intermediate process, which hands the trial's end back: 0-126 the trial's exit
// code, 127 its exec failing, 128 + N the signal N that ended it, kHung when it was killed at the
// deadline.
constexpr int kHung = 255, kNotStarted = 254;
// cutrace-cupti-trial's own exit codes for a bad command line and for no verdict.
constexpr int kTrialUsage = 2, kTrialNoVerdict = 3;

CUTRACE_BORROWED uint64_t raw_now_ms() {
  timespec t{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000 + uint64_t(t.tv_nsec) / 1000000;
}

// The trial's parent. A child's exit signal is SIGCHLD again once it execs, so the trial cannot be
// the program's own child without the program being signalled when it ends; this intermediate, which
// never execs, is its parent instead and ends with no signal at all. Every signal stays blocked here
// (the trial's SIGCHLD among them): the program's handlers must never run in a borrowed thread.
// System calls only, as for the trial.
CUTRACE_BORROWED int supervise_trial(void* arg) {
  const Exec* e = static_cast<const Exec*>(arg);
  // This process's own copy of the descriptors: the trial writes nothing into the program's output
  // (a CUPTI may print), and holds none of its files, pipes or sockets open.
  const long null_fd = syscall(SYS_open, "/dev/null", O_RDWR);
  if (null_fd >= 0) {
    for (int fd = 0; fd < 3; ++fd) syscall(SYS_dup2, null_fd, fd);
  }
  syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  const long pid = clone(exec_trial, e->trial_stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<Exec*>(e));
  if (pid <= 0) syscall(SYS_exit, kNotStarted);
  int status = 0;
  for (;;) {
    if (syscall(SYS_wait4, pid, &status, WNOHANG, nullptr) == pid) break;
    if (raw_now_ms() >= e->deadline_ms) {
      syscall(SYS_kill, pid, SIGKILL);
      syscall(SYS_wait4, pid, &status, 0, nullptr);
      syscall(SYS_exit, kHung);
    }
    timespec pause{0, 2000000};
    syscall(SYS_nanosleep, &pause, nullptr);
  }
  // 0-125 as the trial gave them; 126 for any higher code, which 128 + N must not be taken for.
  syscall(SYS_exit, WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status) > 125 ? 126 : WEXITSTATUS(status));
  return 0;
}

enum class Ending { kNotRun, kReturned, kNoVerdict, kCrashed, kExited, kHung };

// Runs the trial; `detail` is the signal for kCrashed, the exit code for kExited.
Ending run_trial(const std::string& trial, const char* driver_path, const char* cupti_path, int* detail) {
  std::vector<std::string> environment = trial_environment();
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string args[] = {trial, driver_path, cupti_path};
  char* argv[] = {args[0].data(), args[1].data(), args[2].data(), nullptr};
  constexpr size_t kStack = 64 << 10;
  auto* stacks = static_cast<char*>(
      mmap(nullptr, 2 * kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0));
  if (stacks == MAP_FAILED) return Ending::kNotRun;
  Exec exec{trial.c_str(), argv, envp.data(), stacks + 2 * kStack, raw_now_ms() + kTrialLimitMs};
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  // No exit signal: the program gets no SIGCHLD and its wait() never sees this child. This thread
  // waits here until the intermediate has ended, the trial with it.
  const pid_t pid = clone(supervise_trial, stacks + kStack, CLONE_VM | CLONE_VFORK, &exec);
  int status = 0;
  const bool reaped = pid > 0 && syscall(SYS_wait4, pid, &status, __WALL, nullptr) == pid;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  munmap(stacks, 2 * kStack);
  if (!reaped || !WIFEXITED(status)) return Ending::kNotRun;
  const int code = WEXITSTATUS(status);
  if (code == kHung) return Ending::kHung;
  if (code == kNotStarted || code == 127) return Ending::kNotRun;
  if (code == 0) return Ending::kReturned;
  if (code == kTrialUsage || code == kTrialNoVerdict) return Ending::kNoVerdict;
  // A signal, or any other exit: what would have ended the program (a sanitizer's report of a stack
  // overflow, a CUPTI that calls exit).
  *detail = code > 128 ? code - 128 : code;
  return code > 128 ? Ending::kCrashed : Ending::kExited;
}

}  // namespace

bool cupti_trial_passes(const char* driver_path, const char* cupti_path, char* why, size_t why_size) {
  if (const char* knob = getenv(kTrialEnvVar); knob && std::strcmp(knob, "0") == 0) return true;
  const uint32_t key = pair_key(driver_path, cupti_path);
  const uint32_t memo = g_session->cupti_trial.load(std::memory_order_acquire);
  if ((memo & ~kVerdictMask) == (key & ~kVerdictMask)) {
    if ((memo & kVerdictMask) == kPasses) return true;
    std::snprintf(why, why_size, "it crashed or hung beside this driver (%s) when another process of the session "
                  "tried it", driver_path);
    return false;
  }
  const std::string trial = find_trial();
  if (trial.empty()) return true;
  const int saved_errno = errno;
  int detail = 0;
  const Ending ending = run_trial(trial, driver_path, cupti_path, &detail);
  errno = saved_errno;
  switch (ending) {
    case Ending::kReturned:
      g_session->cupti_trial.store(key | kPasses, std::memory_order_release);
      return true;
    case Ending::kNotRun:
    case Ending::kNoVerdict:
      return true;
    case Ending::kHung:
      std::snprintf(why, why_size, "it hung for %llu s when tried beside this driver (%s) in a separate process",
                    static_cast<unsigned long long>(kTrialLimitMs / 1000), driver_path);
      break;
    case Ending::kCrashed:
      std::snprintf(why, why_size, "it crashed (signal %d) when tried beside this driver (%s) in a separate process",
                    detail, driver_path);
      break;
    case Ending::kExited:
      std::snprintf(why, why_size, "it ended its process (exit code %d) when tried beside this driver (%s) in a "
                    "separate process", detail, driver_path);
      break;
  }
  g_session->cupti_trial.store(key | kFails, std::memory_order_release);
  return false;
}

}  // namespace cutrace::preload
