#include "launcher/descendants.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "cutrace/proc_stat.h"
#include "launcher/process.h"

namespace cutrace::launcher {
namespace {

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (!dir) return out;
  while (const dirent* task = readdir(dir)) {
    if (task->d_name[0] == '.') continue;
    std::ifstream children(tasks + "/" + task->d_name + "/children");
    pid_t child;
    while (children >> child) out.push_back(child);
  }
  closedir(dir);
  return out;
}

bool is_zombie(pid_t pid) {
  proc::Stat st;
  return !proc::read_stat(uint32_t(pid), &st) || st.state == 'Z' || st.state == 'X';  // gone counts as dead
}

}  // namespace

bool become_subreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

std::vector<pid_t> live_descendants(pid_t excluded) {
  std::vector<pid_t> found, pending = children_of(getpid());
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    if (pid == excluded) continue;
    if (!is_zombie(pid)) found.push_back(pid);
    for (pid_t child : children_of(pid)) pending.push_back(child);
  }
  return found;
}

void wait_for_descendants(pid_t excluded) {
  for (;;) {
    // Adopted orphans that exited are reaped here; the recorder (excluded) is left for its own wait.
    for (;;) {
      siginfo_t info{};
      if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
      if (info.si_pid == excluded) break;
      waitpid(info.si_pid, nullptr, 0);
    }
    const std::vector<pid_t> left = live_descendants(excluded);
    if (left.empty()) return;
    if (int sig = SignalForwarding::take_untargeted_signal())
      for (pid_t pid : left) kill(pid, sig);
    // Polling: nothing tells a subreaper that a grandchild exited. 5 ms is unnoticeable at exit and
    // costs nothing while the processes run.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace cutrace::launcher
