#include "recorder/unreached.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cutrace/abi.h"

namespace cutrace::recorder {

namespace {

// Only so many are remembered one by one (a name costs a few bytes, but the names are untrusted);
// every one is still counted.
constexpr size_t kMaxRemembered = 4096;

bool parse_decimal(const char*& text, char stop, unsigned long long limit, unsigned long long* value) {
  if (*text < '0' || *text > '9') return false;
  unsigned long long v = 0;
  while (*text >= '0' && *text <= '9') {
    v = v * 10 + unsigned(*text - '0');
    if (v > limit) return false;
    ++text;
  }
  if (*text != stop) return false;
  if (stop) ++text;
  *value = v;
  return true;
}

std::string command_of(uint32_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace

UnreachedWatch::~UnreachedWatch() {
  if (fd_ >= 0) close(fd_);
}

bool UnreachedWatch::start(const std::string& session_name, std::string* error, const std::string& directory) {
  const std::string base = session_name.starts_with('/') ? session_name.substr(1) : session_name;
  prefix_ = base + abi::kUnreachedMarker;
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    *error = std::string("cannot watch for processes that fail to open the session (inotify: ") +
             std::strerror(errno) + ")";
    return false;
  }
  if (inotify_add_watch(fd_, directory.c_str(), IN_CREATE | IN_ONLYDIR) < 0) {
    *error = "cannot watch " + directory + " for processes that fail to open the session (inotify: " +
             std::strerror(errno) + ")";
    close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

void UnreachedWatch::collect() {
  if (fd_ < 0) return;
  alignas(inotify_event) char buffer[16 * (sizeof(inotify_event) + NAME_MAX + 1)];
  for (;;) {
    const ssize_t n = read(fd_, buffer, sizeof buffer);
    if (n <= 0) return;  // EAGAIN: nothing more for now
    for (ssize_t at = 0; at + ssize_t(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += ssize_t(sizeof(inotify_event) + event->len);
      if (at > n) break;
      if (event->mask & IN_Q_OVERFLOW) overflowed_ = true;
      // The kernel pads the name with NULs; len counts them.
      if (event->len && event->name[event->len - 1] == '\0') note(event->name);
    }
  }
}

void UnreachedWatch::note(const char* name) {
  if (std::strncmp(name, prefix_.c_str(), prefix_.size()) != 0) return;
  const char* text = name + prefix_.size();
  unsigned long long pid, uid, error;
  if (!parse_decimal(text, '.', UINT32_MAX, &pid) || !parse_decimal(text, '.', UINT32_MAX, &uid) ||
      !parse_decimal(text, '\0', 4095, &error))
    return;
  if (index_by_pid_.count(uint32_t(pid)) || processes_.size() >= kMaxRemembered) return;
  index_by_pid_[uint32_t(pid)] = processes_.size();
  processes_.push_back({uint32_t(pid), uint32_t(uid), int(error), command_of(uint32_t(pid))});
}

std::vector<std::string> UnreachedWatch::warnings() const {
  std::map<std::pair<uint32_t, int>, std::vector<const UnreachedProcess*>> by_cause;
  for (const UnreachedProcess& p : processes_) by_cause[{p.uid, p.error}].push_back(&p);
  std::vector<std::string> out;
  for (const auto& [cause, processes] : by_cause) {
    const auto [uid, error] = cause;
    std::string who;
    if (processes.size() == 1) {
      const UnreachedProcess& p = *processes.front();
      who = "process " + std::to_string(p.pid) + (p.command.empty() ? "" : " (" + p.command + ")");
    } else {
      std::string pids;
      for (size_t i = 0; i < processes.size() && i < 8; ++i) pids += (i ? ", " : "") + std::to_string(processes[i]->pid);
      if (processes.size() > 8) pids += ", ...";
      who = std::to_string(processes.size()) + " processes (" + pids + ")";
    }
    const bool one = processes.size() == 1;
    std::string text = who + " ran as uid " + std::to_string(uid) +
                       " and could not open the session's shared memory (" + std::strerror(error) + "), so " +
                       (one ? "its" : "their") + " calls were not recorded";
    if (error == EACCES || error == EPERM)
      text += ": " + std::string(one ? "it" : "they") + " had changed user after losing the descriptor of the session "
              "that cutrace hands down (CUTRACE_SESSION_FD), as a program that closes inherited descriptors "
              "before switching user does; keep that descriptor open, or run cutrace as the user the program "
              "switches to";
    out.push_back(std::move(text));
  }
  if (overflowed_)
    out.push_back("/dev/shm changed faster than the recorder could follow, so processes that could not open the "
                  "session may have gone unnoticed");
  return out;
}

}  // namespace cutrace::recorder
