// The sessions of this user on this host, seen from another shell: `cutrace sessions list` and
// `cutrace status [--session NAME] [--calls]`. A session is found by its shared-memory object, which
// lives as long as its `cutrace profile` does; nothing else has to be running or listening, so a
// program that hangs, and a launcher stuck waiting for it, can still be looked into.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cutrace::launcher {

// One traced thread's outermost recorded call, as the shim publishes it in its ring's header.
struct CallInProgress {
  uint32_t pid = 0, tid = 0;
  std::string thread_name;  // /proc/<pid>/task/<tid>/comm
  std::string api;          // empty: the thread is in no recorded call
  bool tracer_thread = false;  // one of the shim's own threads, not the program's
  uint64_t elapsed_ns = 0;
};

struct SessionView {
  std::string name;       // "profile-<launcher pid>", what --session takes
  std::string shm_name;   // the object in /dev/shm
  uint32_t launcher_pid = 0;
  uint32_t recorder_pid = 0;
  std::string command;    // the launcher's command line
  uint64_t age_ns = 0;    // since the launcher started
  std::string state;      // "starting", "recording", "not recording", "finishing"
  uint32_t processes = 0;  // traced processes alive
  uint32_t threads = 0;    // their threads with a ring, the shim's own left out
  std::vector<CallInProgress> calls;  // filled when asked (with_calls)
};

// Every session of this user whose launcher is alive, by launcher pid. Objects of other users, of
// another layout or of a launcher that is gone are passed over.
std::vector<SessionView> find_sessions(bool with_calls);

int sessions_main(int argc, char** argv);
int status_main(int argc, char** argv);

}  // namespace cutrace::launcher
