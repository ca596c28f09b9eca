#include "launcher/recorder_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

namespace cutrace::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kPollSliceMs = 50;

UsageError failure(const std::string& message) {
  return UsageError{kExitSetupFailed, "cutrace profile: " + message + "."};
}

bool has_line(std::string_view text, std::string_view wanted) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) return false;  // an unfinished line is not a line yet
    if (text.substr(start, end - start) == wanted) return true;
    start = end + 1;
  }
  return false;
}

std::string seconds_text(milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

}  // namespace

RecorderSummary parse_recorder_summary(std::string_view text) {
  RecorderSummary summary;
  std::vector<std::string> warnings;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string_view line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? text.size() : end + 1;
    if (line.starts_with("warning ")) {
      warnings.emplace_back(line.substr(8));
      continue;
    }
    if (!line.starts_with("summary ")) continue;
    summary = RecorderSummary{};
    summary.present = true;
    summary.warnings = std::move(warnings);
    warnings.clear();
    line.remove_prefix(8);
    while (!line.empty()) {
      size_t space = line.find(' ');
      std::string_view token = line.substr(0, space);
      line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
      size_t eq = token.find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
      uint64_t number = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (ec != std::errc() || ptr != value.data() + value.size()) continue;
      if (key == "events")
        summary.events = number;
      else if (key == "processes")
        summary.processes = number;
      else if (key == "threads")
        summary.threads = number;
      else if (key == "dropped")
        summary.dropped = number;
      else if (key == "stalled_ms")
        summary.stalled_ms = number;
      else if (key == "dropped_no_memory")
        summary.dropped_no_memory = number;
      else if (key == "malformed")
        summary.malformed = number;
      else if (key == "lost")
        summary.lost = number;
      else if (key == "bytes")
        summary.bytes = number;
    }
  }
  return summary;
}

RecorderProcess::~RecorderProcess() {
  close_pipe();
  // A recorder still running here belongs to a launch that failed; Child's destructor kills its group.
}

void RecorderProcess::close_pipe() {
  if (ready_fd_ >= 0) close(ready_fd_);
  ready_fd_ = -1;
}

bool RecorderProcess::read_some(milliseconds timeout) {
  if (ready_fd_ < 0) return false;
  pollfd pfd{ready_fd_, POLLIN, 0};
  // Short slices: a signal that lands just before poll() starts does not interrupt it, and the caller
  // must still notice that signal promptly.
  int r = poll(&pfd, 1, int(std::clamp<int64_t>(timeout.count(), 0, kPollSliceMs)));
  if (r <= 0) return true;  // timeout, or EINTR: the caller looks at the clock and at signals
  char buf[512];
  ssize_t n = read(ready_fd_, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) {
    close_pipe();
    return false;
  }
  received_.append(buf, size_t(n));
  return true;
}

bool RecorderProcess::start(const std::string& path, const std::vector<std::string>& args,
                            const std::vector<std::string>& env, int dev_null, bool null_stderr, int claim_fd,
                            const std::vector<int>& perf_fds, milliseconds start_timeout, UsageError* error) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *error = failure(std::string("cannot create a pipe for the recorder: ") + std::strerror(errno));
    return false;
  }
  SpawnOptions o;
  o.path = path;
  o.argv.push_back(path);
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = &env;
  // Its own group keeps a terminal's Ctrl+C and Ctrl+Z away from it: the recorder must outlive the
  // program to finish the trace.
  o.own_process_group = true;
  o.fd_map = {{dev_null, 0}, {dev_null, 1}, {pipe_fds[1], kReadyFd}};
  if (null_stderr) o.fd_map.push_back({dev_null, 2});
  if (claim_fd >= 0) o.fd_map.push_back({claim_fd, kClaimFd});
  for (size_t i = 0; i < perf_fds.size(); ++i) o.fd_map.push_back({perf_fds[i], kPerfFdBase + int(i)});
  o.close_other_fds = true;
  std::string why;
  const bool spawned = child_.spawn(o, &why);
  close(pipe_fds[1]);
  ready_fd_ = pipe_fds[0];
  if (!spawned) {
    close_pipe();
    *error = failure("cannot start the recorder: " + why);
    return false;
  }
  if (int exec_errno = child_.exec_result()) {
    child_.wait();
    close_pipe();
    *error = failure("cannot run the recorder " + path + " (" + std::strerror(exec_errno) +
                     "); reinstall cutrace or point CUTRACE_RECORDER at a working one");
    return false;
  }

  const auto deadline = Clock::now() + start_timeout;
  while (!has_line(received_, "ready")) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      child_.kill_and_reap();
      close_pipe();
      *error = failure("the recorder " + path + " did not become ready within " + seconds_text(start_timeout) +
                       "; see its messages above, if any, or raise CUTRACE_RECORDER_START_TIMEOUT");
      return false;
    }
    if (!read_some(left)) {
      const int status = child_.wait();
      *error = failure("the recorder " + path + " " + describe_wait_status(status) +
                       " before it was ready; see its messages above, if any");
      return false;
    }
  }
  return true;
}

RecorderFinish RecorderProcess::finish(milliseconds stop_timeout, milliseconds kill_grace) {
  RecorderFinish result;
  auto deadline = Clock::now() + stop_timeout;
  auto stop = [&] {
    child_.signal(SIGTERM);
    result.stopped = true;
    deadline = Clock::now() + kill_grace;
  };
  while (child_.running()) {
    if (ready_fd_ < 0) {
      int status = 0;
      if (child_.try_wait(&status)) {
        result.wait_status = status;
        break;
      }
    }
    if (SignalForwarding::take_untargeted_signal() != 0 && !result.stopped) stop();
    if (Clock::now() >= deadline) {
      if (!result.stopped) {
        result.timed_out = true;
        stop();
      } else {
        child_.signal(SIGKILL);
        result.killed = true;
        result.wait_status = child_.wait();
        break;
      }
    }
    const auto left = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    if (ready_fd_ >= 0) {
      read_some(left + milliseconds(1));
    } else {
      // The pipe closes when the recorder exits; the moment after, only reaping is left.
      // Short naps: this wait is on the path of every run's exit.
      std::this_thread::sleep_for(std::min<std::chrono::microseconds>(left + milliseconds(1), std::chrono::microseconds(200)));
    }
  }
  close_pipe();
  result.summary = parse_recorder_summary(received_);
  return result;
}

}  // namespace cutrace::launcher
