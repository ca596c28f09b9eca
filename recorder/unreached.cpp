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
#include "recorder/warnings.h"

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
    std::vector<NamedProcess> named;
    for (const UnreachedProcess* p : processes) named.push_back({p->pid, p->command});
    // A permission error is what a user switch without the inherited descriptor gives: say the remedy.
    const Warning w = error == EACCES || error == EPERM ? Warning::kUnreachedAfterUserSwitch : Warning::kUnreached;
    out.push_back(warning_text(w, processes.size(),
                               {{"who", processes_name(named)}, {"uid", std::to_string(uid)}, {"cause", std::strerror(error)}}));
  }
  if (overflowed_) out.push_back(warning_text(Warning::kUnreachedOverflow, 0));
  return out;
}

}  // namespace cutrace::recorder
