// Starting child processes the way a shell would, and passing signals on to the program.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace cutrace::launcher {

// True for a signal a process sent with kill(), sigqueue() or tgkill() (si_code <= 0: SI_USER,
// SI_QUEUE, SI_TKILL, ...), false for one the kernel raised, such as a terminal's Ctrl+C: that one
// already reached every process of the foreground group, the program included, and passing it on would
// deliver it twice.
bool sent_by_process(int si_code);

// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT that some process sends to the launcher are passed
// on to the current target (see set_forward_target); signals the launcher was told to ignore stay
// ignored. SIGPIPE is ignored (a closed stderr must not kill the launcher before it returns the
// program's exit code) and SIGCHLD set to its default (an inherited SIG_IGN would make the kernel reap
// children before they can be waited for). Children get back exactly the dispositions and signal mask
// the launcher started with. One instance at a time.
class SignalForwarding {
 public:
  SignalForwarding();
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  // The last forwarded-kind signal that arrived while there was no target, or 0 if none did since the
  // last call.
  static int take_untargeted_signal();
};

// The process that forwarded signals go to; 0 for none. Async-signal-safe.
void set_forward_target(pid_t pid);

// In a forked child: restores the dispositions and mask the launcher started with. Async-signal-safe.
void restore_signals_in_child();

struct SpawnOptions {
  std::string path;                               // what execve runs
  std::vector<std::string> argv;                  // argv[0] included
  const std::vector<std::string>* env = nullptr;  // nullptr: the launcher's own environment
  bool hold = false;                              // wait for release() before exec
  bool own_process_group = false;
  bool shell_fallback = false;              // ENOEXEC: run the file with /bin/sh, as execvp does
  bool forward_signals = false;             // make it the forwarding target from the moment it exists
  std::vector<std::pair<int, int>> fd_map;  // (launcher fd, child fd) installed before exec
  bool close_other_fds = false;             // close every fd but 0-2 and the fd_map targets
};

// A child process. Destroying one that was neither waited for nor detached kills it with SIGKILL (its
// whole group when it has its own) and reaps it.
class Child {
 public:
  Child() = default;
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool spawn(const SpawnOptions& options, std::string* error);
  // Lets a held child exec. Returns false if it is already gone.
  bool release();
  // Blocks until the child has exec'd (0) or failed to (the errno of execve). A child that died before
  // exec also gives 0; wait() tells what happened to it.
  int exec_result();
  // Waits for the child to exit and reaps it; returns the wait status. Stops forwarding signals to it
  // before the pid can be reused.
  int wait();
  // Reaps the child if it has exited; returns true and the status then.
  bool try_wait(int* status);
  // Sends `sig` to the child, or to its whole group when it has its own.
  void signal(int sig) const;
  void kill_and_reap();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }

 private:
  pid_t pid_ = -1;
  bool own_group_ = false;
  bool reaped_ = false;
  int go_fd_ = -1;    // write end: one byte releases a held child
  int exec_fd_ = -1;  // read end: EOF on exec, or the errno of a failed exec
};

// Exit code a shell would report for a wait status: the exit status, or 128+N for signal N.
int exit_code_of(int wait_status);
// "exited with code 3" / "was killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

// Opens /dev/null on any of fds 0-2 that is closed, close-on-exec, so the launcher's own descriptors
// never take those numbers while the program still finds them closed, as it would without cutrace.
// The destructor closes what it opened.
class StdFdPlaceholders {
 public:
  StdFdPlaceholders();
  ~StdFdPlaceholders();
  StdFdPlaceholders(const StdFdPlaceholders&) = delete;
  StdFdPlaceholders& operator=(const StdFdPlaceholders&) = delete;
  bool was_closed(int fd) const { return fd >= 0 && fd < 3 && opened_[fd]; }

 private:
  bool opened_[3] = {false, false, false};
};

}  // namespace cutrace::launcher
