#include "launcher/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <iterator>

namespace cutrace::launcher {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kManaged[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD};

// Signal-handler state: plain globals, because a handler can reach nothing else.
struct sigaction g_saved[std::size(kManaged)];
bool g_installed = false;
std::atomic<pid_t> g_target{0};
std::atomic<int> g_untargeted{0};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

void on_forwarded_signal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  pid_t target = g_target.load(std::memory_order_relaxed);
  if (target > 0) {
    if (sent_by_process(info->si_code)) kill(target, sig);
  } else {
    g_untargeted.store(sig, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

// Closes every descriptor from `first` up, except those in keep[0..count) (sorted ascending).
void close_fds_except(int first, const int* keep, int count) {
  auto close_span = [](unsigned lo, unsigned hi) {
    if (lo > hi) return;
    if (close_range(lo, hi, 0) == 0) return;
    // Kernels before 5.9 lack close_range: walk the table up to the descriptor limit instead.
    long limit = sysconf(_SC_OPEN_MAX);
    unsigned last = std::min<unsigned long>(hi, limit > 0 ? (unsigned long)limit - 1 : 65535);
    for (unsigned fd = lo; fd <= last; ++fd) close(int(fd));
  };
  unsigned lo = unsigned(first);
  for (int i = 0; i < count; ++i) {
    if (keep[i] < first) continue;
    if (unsigned(keep[i]) > lo) close_span(lo, unsigned(keep[i]) - 1);
    lo = std::max(lo, unsigned(keep[i]) + 1);
  }
  close_span(lo, UINT_MAX);
}

[[noreturn]] void report_exec_failure(int fd, int error) {
  ssize_t ignored = write(fd, &error, sizeof error);
  (void)ignored;
  _exit(error == ENOENT ? 127 : 126);
}

struct ExecPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  char* const* shell_argv;  // nullptr: no ENOEXEC fallback
};

// Runs in the forked child. The launcher is single-threaded, so the child may use anything, but it
// keeps to system calls and memory prepared before the fork.
// `relocated` and `keep` have room for every fd_map entry (keep: one more); allocated by the parent, as
// a forked child of a threaded program must not allocate.
[[noreturn]] void run_child(const SpawnOptions& o, const ExecPlan& plan, const sigset_t& mask, int go_read,
                            int go_write, int exec_read, int exec_write, int* relocated, int* keep) {
  restore_signals_in_child();
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  if (o.own_process_group) setpgid(0, 0);
  close(exec_read);
  if (o.hold) {
    // The launcher's copy of the write end is the only one left, so a launcher that dies before the
    // release gives EOF here and the program never starts.
    close(go_write);
    char byte = 0;
    ssize_t n;
    do n = read(go_read, &byte, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);
    close(go_read);
  }

  // Every source is first copied above all targets, so installing one target can never overwrite a
  // source still to be installed, however the numbers happened to fall.
  int min_fd = 10;
  for (const auto& [from, to] : o.fd_map) min_fd = std::max(min_fd, to + 1);
  int err_fd = fcntl(exec_write, F_DUPFD_CLOEXEC, min_fd);
  if (err_fd < 0) err_fd = exec_write;
  for (size_t i = 0; i < o.fd_map.size(); ++i) {
    relocated[i] = fcntl(o.fd_map[i].first, F_DUPFD_CLOEXEC, min_fd);
    if (relocated[i] < 0) report_exec_failure(err_fd, errno);
  }
  for (size_t i = 0; i < o.fd_map.size(); ++i) {
    if (dup2(relocated[i], o.fd_map[i].second) < 0) report_exec_failure(err_fd, errno);
  }
  if (o.close_other_fds) {
    // Every mapped descriptor is kept, however many (a recorder gets one perf event per CPU).
    int count = 0;
    keep[count++] = err_fd;
    for (const auto& [from, to] : o.fd_map) keep[count++] = to;
    std::sort(keep, keep + count);
    close_fds_except(3, keep, count);
  }

  execve(plan.path, plan.argv, plan.envp);
  if (errno == ENOEXEC && plan.shell_argv) execve("/bin/sh", plan.shell_argv, plan.envp);
  report_exec_failure(err_fd, errno);
}

char* mutable_c_str(const std::string& s) { return const_cast<char*>(s.c_str()); }

}  // namespace

bool sent_by_process(int si_code) { return si_code <= 0; }

SignalForwarding::SignalForwarding() {
  for (size_t i = 0; i < std::size(kManaged); ++i) sigaction(kManaged[i], nullptr, &g_saved[i]);
  g_target.store(0, std::memory_order_relaxed);
  g_untargeted.store(0, std::memory_order_relaxed);
  g_installed = true;

  struct sigaction forward = {};
  forward.sa_sigaction = on_forwarded_signal;
  // No SA_RESTART: a blocking wait returns EINTR, so the launcher notices signals that arrive while
  // it waits for the recorder.
  forward.sa_flags = SA_SIGINFO;
  sigemptyset(&forward.sa_mask);
  for (int sig : kForwarded) sigaddset(&forward.sa_mask, sig);
  for (size_t i = 0; i < std::size(kManaged); ++i) {
    const int sig = kManaged[i];
    if (sig == SIGPIPE) {
      struct sigaction ignore = {};
      ignore.sa_handler = SIG_IGN;
      sigaction(sig, &ignore, nullptr);
    } else if (sig == SIGCHLD) {
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      sigaction(sig, &dfl, nullptr);
    } else if (g_saved[i].sa_handler != SIG_IGN || (g_saved[i].sa_flags & SA_SIGINFO)) {
      // A signal the launcher was started ignoring (nohup, `cmd &` in a script) is ignored by the
      // program too, so there is nothing to forward.
      sigaction(sig, &forward, nullptr);
    }
  }
}

SignalForwarding::~SignalForwarding() {
  for (size_t i = 0; i < std::size(kManaged); ++i) sigaction(kManaged[i], &g_saved[i], nullptr);
  g_installed = false;
  g_target.store(0, std::memory_order_relaxed);
}

int SignalForwarding::take_untargeted_signal() { return g_untargeted.exchange(0, std::memory_order_relaxed); }

void set_forward_target(pid_t pid) { g_target.store(pid, std::memory_order_relaxed); }

void restore_signals_in_child() {
  if (!g_installed) return;
  for (size_t i = 0; i < std::size(kManaged); ++i) sigaction(kManaged[i], &g_saved[i], nullptr);
}

Child::~Child() {
  if (running()) kill_and_reap();
  if (go_fd_ >= 0) close(go_fd_);
  if (exec_fd_ >= 0) close(exec_fd_);
}

bool Child::spawn(const SpawnOptions& o, std::string* error) {
  // Everything the child needs is built before fork, so the child only makes system calls.
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(mutable_c_str(a));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (o.env) {
    for (const auto& e : *o.env) envp.push_back(mutable_c_str(e));
    envp.push_back(nullptr);
  }
  // What execvp does with a file that has no #! line and is not a binary: hand it to the shell.
  std::vector<char*> shell_argv;
  if (o.shell_fallback) {
    static char sh[] = "sh";
    shell_argv.push_back(sh);
    shell_argv.push_back(mutable_c_str(o.path));
    for (size_t i = 1; i < o.argv.size(); ++i) shell_argv.push_back(mutable_c_str(o.argv[i]));
    shell_argv.push_back(nullptr);
  }
  const ExecPlan plan{o.path.c_str(), argv.data(), o.env ? envp.data() : environ,
                      o.shell_fallback ? shell_argv.data() : nullptr};
  std::vector<int> relocated(o.fd_map.size(), -1);
  std::vector<int> keep(o.fd_map.size() + 1, -1);

  int go[2] = {-1, -1};
  int exec_pipe[2] = {-1, -1};
  if ((o.hold && pipe2(go, O_CLOEXEC) != 0) || pipe2(exec_pipe, O_CLOEXEC) != 0) {
    *error = std::string("cannot create a pipe: ") + std::strerror(errno);
    for (int fd : go)
      if (fd >= 0) close(fd);
    return false;
  }

  // All signals stay blocked across fork until the pid is published, so a signal for the program
  // never falls between its birth and the moment the launcher knows where to send it.
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid_t pid = fork();
  if (pid == 0) run_child(o, plan, old, go[0], go[1], exec_pipe[0], exec_pipe[1], relocated.data(), keep.data());
  const int fork_errno = errno;
  if (pid > 0) {
    // Also done by the child; doing it on both sides closes the window in which a signal to the group
    // would miss a child that has not run yet.
    if (o.own_process_group) setpgid(pid, pid);
    if (o.forward_signals) set_forward_target(pid);
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);

  close(exec_pipe[1]);
  if (o.hold) close(go[0]);
  if (pid < 0) {
    close(exec_pipe[0]);
    if (o.hold) close(go[1]);
    *error = std::string("cannot start a process: ") + std::strerror(fork_errno);
    return false;
  }
  pid_ = pid;
  own_group_ = o.own_process_group;
  reaped_ = false;
  go_fd_ = o.hold ? go[1] : -1;
  exec_fd_ = exec_pipe[0];
  return true;
}

bool Child::release() {
  if (go_fd_ < 0) return false;
  const char byte = 1;
  ssize_t n;
  do n = write(go_fd_, &byte, 1);
  while (n < 0 && errno == EINTR);
  close(go_fd_);
  go_fd_ = -1;
  return n == 1;
}

int Child::exec_result() {
  if (exec_fd_ < 0) return 0;
  int error = 0;
  size_t got = 0;
  while (got < sizeof error) {
    ssize_t n = read(exec_fd_, reinterpret_cast<char*>(&error) + got, sizeof error - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(exec_fd_);
  exec_fd_ = -1;
  return got == sizeof error ? error : 0;
}

int Child::wait() {
  if (!running()) return 0;
  // Wait without reaping first: while the child is a zombie its pid cannot be reused, so the signal
  // handler can never send a forwarded signal to an unrelated process that inherited the number.
  siginfo_t info;
  while (waitid(P_PID, id_t(pid_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  if (g_target.load(std::memory_order_relaxed) == pid_) set_forward_target(0);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

bool Child::try_wait(int* status) {
  if (!running()) return false;
  int s = 0;
  pid_t r = waitpid(pid_, &s, WNOHANG);
  if (r != pid_) return false;
  if (g_target.load(std::memory_order_relaxed) == pid_) set_forward_target(0);
  reaped_ = true;
  *status = s;
  return true;
}

void Child::signal(int sig) const {
  if (!running()) return;
  kill(own_group_ ? -pid_ : pid_, sig);
}

void Child::kill_and_reap() {
  if (!running()) return;
  signal(SIGKILL);
  wait();
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    std::string text = "was killed by signal " + std::to_string(sig);
    if (const char* abbrev = sigabbrev_np(sig)) text += std::string(" (SIG") + abbrev + ")";
    return text;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

StdFdPlaceholders::StdFdPlaceholders() {
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int opened = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (opened < 0) continue;
    if (opened != fd) {
      dup3(opened, fd, O_CLOEXEC);
      close(opened);
    }
    opened_[fd] = true;
  }
}

StdFdPlaceholders::~StdFdPlaceholders() {
  for (int fd = 0; fd < 3; ++fd)
    if (opened_[fd]) close(fd);
}

}  // namespace cutrace::launcher
