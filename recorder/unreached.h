// Processes of the session that could not reach its shared memory: each announces itself by creating
// and removing a name in /dev/shm (abi::kUnreachedMarker), and this watch hears of it through inotify,
// which reports a name even after it is gone. Names come from any process that can write to /dev/shm,
// so they are parsed strictly and only ever counted and quoted as numbers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cutrace::recorder {

struct UnreachedProcess {
  uint32_t pid = 0;
  uint32_t uid = 0;
  int error = 0;        // the errno of its shm_open
  std::string command;  // /proc/<pid>/comm when it was heard of; empty if it had gone
};

class UnreachedWatch {
 public:
  UnreachedWatch() = default;
  UnreachedWatch(const UnreachedWatch&) = delete;
  UnreachedWatch& operator=(const UnreachedWatch&) = delete;
  ~UnreachedWatch();

  // Watches the directory that holds `session_name` (/dev/shm for "/cutrace-..."). False, with a
  // sentence in `error`, if inotify cannot watch it; the session is then recorded as before.
  bool start(const std::string& session_name, std::string* error, const std::string& directory = "/dev/shm");
  // Reads what has been announced since the last call; never blocks.
  void collect();

  const std::vector<UnreachedProcess>& processes() const { return processes_; }
  // The kernel's event queue overflowed: announcements may have been lost, so the count is a floor.
  bool overflowed() const { return overflowed_; }

  // One sentence per (uid, cause), for the trace's warnings; empty when every process was reached.
  std::vector<std::string> warnings() const;

 private:
  void note(const char* name);
  int fd_ = -1;
  std::string prefix_;  // "<session name without '/'><kUnreachedMarker>"
  std::vector<UnreachedProcess> processes_;
  std::map<uint32_t, size_t> index_by_pid_;
  bool overflowed_ = false;
};

}  // namespace cutrace::recorder
