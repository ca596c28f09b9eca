// A stand-in for cutrace-recorder that follows the launcher's side of the recorder contract, so the
// launcher's tests need neither the real recorder nor the preload library. It writes a valid (empty)
// trace with the real TraceWriter and reports what it saw of its own start-up, one `key=value` per
// line, to the file named by FAKE_RECORDER_LOG.
//
// FAKE_RECORDER_MODE picks a behaviour:
//   (unset)     follow the contract
//   fail        print a message and exit 3 before reporting ready
//   silent      never report ready
//   crash       report ready, write part of a trace, then die of SIGKILL while the program runs
//   stubborn    ignore shutdown_requested and SIGTERM (only SIGKILL ends it)
//   term-only   ignore shutdown_requested but finish cleanly on SIGTERM; once shutdown_requested is
//               set, create the file FAKE_RECORDER_SHUTDOWN_SEEN names
//   warn        follow the contract, and report a warning before the summary line, as the real
//               recorder does when a process loaded a CUDA library none of whose calls was recorded
//   hold-check  before reporting ready, wait 300 ms and log whether FAKE_RECORDER_MARKER exists (the
//               program creates it, so it must not exist yet)
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "reader/trace_claim.h"
#include "recorder/trace_writer.h"
#include "cutrace/session.h"

namespace {

std::atomic<bool> g_terminated{false};
void on_term(int) { g_terminated.store(true); }

std::string open_fds() {
  std::string list;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return "?";
  const int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
    list += (list.empty() ? "" : ",") + std::string(e->d_name);
  }
  closedir(dir);
  return list;
}

std::string link_of(const char* path) {
  char buf[4096];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "?";
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode_env = std::getenv("FAKE_RECORDER_MODE");
  const std::string mode = mode_env ? mode_env : "";
  std::string session_name, output, part;
  int ready_fd = -1, claim_fd = -1;
  long command_pid = 0;
  bool force = false;
  cutrace::trace::KeyValues meta;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fake recorder: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--session")
      session_name = next();
    else if (a == "--output")
      output = next();
    else if (a == "--part")
      part = next();
    else if (a == "--ready-fd")
      ready_fd = std::atoi(next().c_str());
    else if (a == "--claim-fd")
      claim_fd = std::atoi(next().c_str());
    else if (a == "--command-pid")
      command_pid = std::atol(next().c_str());
    else if (a == "--force")
      force = true;
    else if (a == "--meta") {
      std::string kv = next();
      size_t eq = kv.find('=');
      meta.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    } else {
      std::fprintf(stderr, "fake recorder: unknown argument %s\n", a.c_str());
      return 2;
    }
  }

  std::string log = "session=" + session_name + "\noutput=" + output + "\nforce=" + (force ? "1" : "0") +
                    "\nready_fd=" + std::to_string(ready_fd) + "\npart=" + part +
                    "\nclaim_fd=" + std::to_string(claim_fd) + "\ncommand_pid=" + std::to_string(command_pid) + "\n";
  // Asked from a descriptor of its own, as another run would ask: the launcher's claim must be alive
  // in this process too.
  log += std::string("claim_held=") + (cutrace::reader::claim_is_held(output) ? "1" : "0") + "\n";
  for (const auto& [k, v] : meta) log += "meta " + k + "=" + v + "\n";
  const char* preload = std::getenv("LD_PRELOAD");
  log += std::string("ld_preload=") + (preload ? preload : "(unset)") + "\n";
  const char* outer_session = std::getenv("CUTRACE_SESSION");
  log += std::string("cutrace_session=") + (outer_session ? outer_session : "(unset)") + "\n";
  log += std::string("own_group=") + (getpgrp() != getpgid(getppid()) ? "1" : "0") + "\n";
  log += "fds=" + open_fds() + "\n";
  log += "stdin=" + link_of("/proc/self/fd/0") + "\n";
  log += "stdout=" + link_of("/proc/self/fd/1") + "\n";
  auto write_log = [&] {
    if (const char* path = std::getenv("FAKE_RECORDER_LOG")) {
      if (FILE* f = std::fopen(path, "w")) {
        std::fputs(log.c_str(), f);
        std::fclose(f);
      }
    }
  };
  write_log();

  if (mode == "fail") {
    std::fprintf(stderr, "fake recorder: refusing to start as asked\n");
    return 3;
  }

  cutrace::session::Session session;
  std::string error;
  if (!session.open(session_name, &error)) {
    std::fprintf(stderr, "fake recorder: %s\n", error.c_str());
    return 1;
  }
  session.header()->recorder_pid.store(uint32_t(getpid()));

  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, mode == "stubborn" ? SIG_IGN : on_term);

  if (part.empty()) part = output + ".part";
  cutrace::trace::TraceWriter writer;
  if (!writer.open(part) || !writer.write_metadata(meta) || !writer.write_api_table(nullptr, 0) ||
      !writer.flush_events()) {
    std::fprintf(stderr, "fake recorder: %s\n", writer.error().c_str());
    return 1;
  }

  const pid_t launcher = getppid();
  if (mode == "silent") {
    while (getppid() == launcher) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
  }
  if (mode == "hold-check") {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const char* marker = std::getenv("FAKE_RECORDER_MARKER");
    log += std::string("program_started_before_ready=") + (marker && access(marker, F_OK) == 0 ? "1" : "0") + "\n";
    write_log();
  }

  const char ready[] = "ready\n";
  if (write(ready_fd, ready, sizeof ready - 1) != ssize_t(sizeof ready - 1)) return 1;

  if (mode == "crash") {
    writer.close();
    raise(SIGKILL);
  }

  const bool honour_shutdown = mode != "stubborn" && mode != "term-only";
  const char* shutdown_marker = std::getenv("FAKE_RECORDER_SHUTDOWN_SEEN");
  bool shutdown_seen = false;
  while (!g_terminated.load() && getppid() == launcher) {
    if (session.header()->shutdown_requested.load(std::memory_order_acquire)) {
      if (honour_shutdown) break;
      if (!shutdown_seen && shutdown_marker) {
        if (FILE* f = std::fopen(shutdown_marker, "w")) std::fclose(f);
      }
      shutdown_seen = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  log += std::string("finished_by=") +
         (g_terminated.load()     ? "sigterm"
          : getppid() != launcher ? "orphaned"
                                  : "shutdown") +
         "\n";
  write_log();
  if (!writer.finish({{"fake", "1"}}, {})) {
    std::fprintf(stderr, "fake recorder: %s\n", writer.error().c_str());
    return 1;
  }
  if (rename(part.c_str(), output.c_str()) != 0) {
    std::perror("fake recorder: rename");
    return 1;
  }
  // The real recorder words this count as a warning; here it is passed on as a number to check.
  if (const uint32_t cut_off = session.header()->processes_cut_off.load()) {
    const std::string warning = "warning processes_cut_off=" + std::to_string(cut_off) + "\n";
    if (write(ready_fd, warning.data(), warning.size()) != ssize_t(warning.size())) return 1;
  }
  if (mode == "warn") {
    const std::string warning =
        "warning process 4242 (./gemm): libcublas.so.13 was loaded but none of its calls was recorded\n";
    if (write(ready_fd, warning.data(), warning.size()) != ssize_t(warning.size())) return 1;
  }
  const std::string summary = "summary events=42 processes=1 threads=2 dropped=0 malformed=0 lost=0 bytes=" +
                              std::to_string(writer.bytes_written()) + "\n";
  if (write(ready_fd, summary.data(), summary.size()) != ssize_t(summary.size())) return 1;
  return 0;
}
