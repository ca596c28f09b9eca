// Child processes in the three ways a tracer must follow: fork without exec (as Python
// multiprocessing does), fork + exec of this program, and a command run through system(), that is
// /bin/sh -c. Every process makes the same burst of calls: `calls` times cudaGetDevice, then
// cudaMalloc, cudaMemsetAsync, cudaStreamSynchronize(0) and cudaFree.
//
// usage: sim_fork [calls=10]
//        sim_fork --child <calls> <role>     (how the program runs itself)
// stdout, in this order (each process waits for the previous one):
//   "parent pid <pid>", the parent's first burst as "parent calls <function> <n>" lines,
//   "fork_child pid <pid>" and its "fork_child calls ..." lines, "fork_child exit 7",
//   "exec_child pid <pid>" and its calls, "exec_child exit 0",
//   "system_child pid <pid>" and its calls, "system_child exit 0",
//   the parent's second burst as "parent_after calls ..." lines.
// The fork child makes one more cudaGetDevice before its burst, with errno set to ENOENT, and fails
// unless errno is still ENOENT after it.
// exit: 0 when every process succeeded, 1 otherwise. The fork child leaves with _exit(7), without
// running exit handlers, as multiprocessing children do.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "app_util.h"

namespace {

constexpr const char kUsage[] = "sim_fork [calls=10]";
constexpr int kForkChildExit = 7;

bool burst(long n, const char* role) {
  CallCounter calls;
  bool ok = true;
  for (long i = 0; ok && i < n; ++i) {
    int device = -1;
    ok = counted(calls, "cudaGetDevice", cudaGetDevice(&device));
  }
  void* p = nullptr;
  ok = ok && counted(calls, "cudaMalloc", cudaMalloc(&p, 4096)) &&
       counted(calls, "cudaMemsetAsync", cudaMemsetAsync(p, 1, 4096, nullptr)) &&
       counted(calls, "cudaStreamSynchronize", cudaStreamSynchronize(nullptr)) &&
       counted(calls, "cudaFree", cudaFree(p));
  std::string prefix = std::string(role) + " ";
  calls.print(prefix.c_str());
  std::fflush(stdout);
  return ok;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Runs this program again as `--child n role` and returns its exit code.
int run_exec_child(const char* self, long n) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::string count = std::to_string(n);
    execl(self, self, "--child", count.c_str(), "exec_child", static_cast<char*>(nullptr));
    std::fprintf(stderr, "error: cannot exec %s: %s\n", self, std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return exit_code_of(status);
}

int run_system_child(const char* self, long n) {
  std::fflush(stdout);
  std::string command = "'" + std::string(self) + "' --child " + std::to_string(n) + " system_child";
  int status = std::system(command.c_str());
  return status < 0 ? -1 : exit_code_of(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) {
    long n = parse_count(argv[2], "calls", kUsage);
    std::printf("%s pid %d\n", argv[3], int(getpid()));
    return burst(n, argv[3]) ? 0 : 1;
  }
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long n = argc > 1 ? parse_count(argv[1], "calls", kUsage) : 10;
  // The path this program was started with must name it again for exec; /proc/self/exe does.
  const char* self = "/proc/self/exe";
  char resolved[4096];
  ssize_t len = readlink(self, resolved, sizeof resolved - 1);
  if (len > 0) {
    resolved[len] = '\0';
    self = resolved;
  }

  std::printf("parent pid %d\n", int(getpid()));
  bool ok = burst(n, "parent");

  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "error: fork failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    std::printf("fork_child pid %d\n", int(getpid()));
    // The child's first intercepted call claims a ring of its own, which makes system calls;
    // errno must come through them as the program left it.
    errno = ENOENT;
    int device = -1;
    const bool errno_kept = cudaGetDevice(&device) == cudaSuccess && errno == ENOENT;
    bool child_ok = errno_kept && burst(n, "fork_child");
    std::fflush(stdout);
    _exit(child_ok ? kForkChildExit : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int fork_exit = exit_code_of(status);
  std::printf("fork_child exit %d\n", fork_exit);

  int exec_exit = run_exec_child(self, n);
  std::printf("exec_child exit %d\n", exec_exit);
  int system_exit = run_system_child(self, n);
  std::printf("system_child exit %d\n", system_exit);

  ok = burst(n, "parent_after") && ok;
  return ok && fork_exit == kForkChildExit && exec_exit == 0 && system_exit == 0 ? 0 : 1;
}
