// Helpers shared by the launcher's tests: scratch directories, files, and running `cutrace profile`
// as a separate process with chosen environment, descriptors and working directory.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cutrace::launcher::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cutrace-launcher-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  chmod(path.c_str(), mode);
}

inline bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The value of `key=` in a `key=value` per line text, or "" when absent.
inline std::string value_of(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Polls until `path` exists; a safety net for tests that wait on another process, not a measurement.
inline bool wait_for_file(const std::string& path, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

struct Launch {
  std::vector<std::string> args;                         // after "cutrace"
  std::vector<std::pair<std::string, std::string>> env;  // set in the launcher's environment
  std::vector<std::string> unset;                        // removed from the environment
  std::string cwd;
  std::string stdout_path, stderr_path;  // empty: /dev/null
  std::string tty;                       // non-empty: new session with this terminal as stdin
};

// Starts `cutrace` with only fds 0-2 open; returns its pid.
inline pid_t start(const Launch& l) {
  std::vector<std::string> argv_s = {CUTRACE_EXE};
  argv_s.insert(argv_s.end(), l.args.begin(), l.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: a plain environment for the launcher, as a shell would give it.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const auto& name : l.unset) unsetenv(name.c_str());
  for (const auto& [k, v] : l.env) setenv(k.c_str(), v.c_str(), 1);
  if (!l.cwd.empty() && chdir(l.cwd.c_str()) != 0) _exit(120);
  int in = -1;
  if (!l.tty.empty()) {
    setsid();
    in = open(l.tty.c_str(), O_RDWR);  // a session leader's first terminal becomes its controlling one
    if (in < 0 || ioctl(in, TIOCSCTTY, 0) != 0) _exit(121);
  } else {
    in = open("/dev/null", O_RDONLY);
  }
  int out = l.stdout_path.empty() ? open("/dev/null", O_WRONLY)
                                  : open(l.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = l.stderr_path.empty() ? open("/dev/null", O_WRONLY)
                                  : open(l.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0 || err < 0) _exit(122);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  close_range(3, ~0U, 0);
  execv(argv[0], argv.data());
  _exit(123);
}

// Waits for `pid`; a process still running after `limit` is killed and the test fails.
inline int wait_exit(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "process " << pid << " did not exit in time";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);  // the launcher itself died of a signal
  return -1;
}

}  // namespace cutrace::launcher::testing
