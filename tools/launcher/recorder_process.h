// The launcher's side of the recorder contract: start `cutrace-recorder`, wait until it is ready, and
// after the program has ended collect its summary (stopping it if it does not finish in time).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/options.h"
#include "launcher/process.h"

namespace cutrace::launcher {

// The counts of the line
// `summary events=N processes=N threads=N dropped=N dropped_no_memory=N malformed=N lost=N bytes=N`.
struct RecorderSummary {
  bool present = false;
  uint64_t events = 0, processes = 0, threads = 0, dropped = 0, dropped_no_memory = 0, malformed = 0, lost = 0,
           bytes = 0;
  // The longest the recorder went without reading the rings (stopped, without CPU, or behind), in
  // ms; reported only when long (recorder::kLongStallNs), 0 otherwise.
  uint64_t stalled_ms = 0;
  // "warning TEXT" lines before the summary line: why the trace may lack what the user expected
  // (Recorder::warnings()), one sentence each without its final period.
  std::vector<std::string> warnings;
};

// Finds the summary line, and the warning lines before it, in what the recorder wrote to its ready fd.
// Unknown keys and lines are skipped, so a newer recorder may add counts.
RecorderSummary parse_recorder_summary(std::string_view text);

struct RecorderFinish {
  int wait_status = 0;
  bool stopped = false;    // the launcher sent SIGTERM
  bool timed_out = false;  // ... because the stop timeout ran out (not because the launcher was signalled)
  bool killed = false;     // the launcher had to send SIGKILL
  RecorderSummary summary;
};

class RecorderProcess {
 public:
  // The fd number the recorder finds its ready pipe on.
  static constexpr int kReadyFd = 3;
  // The fd number the recorder finds the launcher's claim on the output on (see reader::TraceClaim).
  static constexpr int kClaimFd = 4;
  // The fd numbers of the perf events it reads CPU samples from (-s cpu): kPerfFdBase and up.
  static constexpr int kPerfFdBase = 5;

  RecorderProcess() = default;
  ~RecorderProcess();
  RecorderProcess(const RecorderProcess&) = delete;
  RecorderProcess& operator=(const RecorderProcess&) = delete;

  // Runs `path` with `args` (argv[0] excluded) and `env` in its own process group, with stdin and stdout (and
  // stderr when `null_stderr`) on `dev_null`, its ready pipe on kReadyFd, `claim_fd` (when >= 0) on
  // kClaimFd, `perf_fds` from kPerfFdBase on and no other descriptor of the launcher's, and waits until it writes "ready\n". On failure
  // the recorder is gone and `error` says why.
  bool start(const std::string& path, const std::vector<std::string>& args, const std::vector<std::string>& env,
             int dev_null, bool null_stderr, int claim_fd, const std::vector<int>& perf_fds,
             std::chrono::milliseconds start_timeout, UsageError* error);

  // Waits for the recorder to exit after the program has ended (the caller has set
  // shutdown_requested). After `stop_timeout`, or as soon as the launcher is sent a signal with no
  // program to forward it to, it gets SIGTERM, which also makes it finish cleanly; if it is still
  // there `kill_grace` later, SIGKILL.
  RecorderFinish finish(std::chrono::milliseconds stop_timeout, std::chrono::milliseconds kill_grace);

  pid_t pid() const { return child_.pid(); }

 private:
  // Waits up to `timeout` for output and appends it to received_. Returns false once the pipe is at EOF.
  bool read_some(std::chrono::milliseconds timeout);
  void close_pipe();

  Child child_;
  int ready_fd_ = -1;
  std::string received_;
};

}  // namespace cutrace::launcher
