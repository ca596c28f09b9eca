#include "common/cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reader/decode.h"

namespace cutrace::cli {

bool is_own_option(const Arg& arg) {
  return arg.kind == Arg::Kind::kOption && !(arg.spec->arity == Arity::kNone && arg.has_attached);
}

int take_trace(const Arg& arg, const char* command, const std::string& hint, std::vector<std::string>& traces) {
  if (arg.kind != Arg::Kind::kOperand) {
    std::fprintf(stderr, "cutrace %s: unknown option '%s'; %s.\n", command, arg.word.c_str(), hint.c_str());
    return kExitUsage;
  }
  traces.push_back(arg.word);
  return kNextArgument;
}

int take_trace(const Arg& arg, const char* command, const std::string& hint, std::string& trace) {
  std::vector<std::string> taken;
  const int status = take_trace(arg, command, hint, taken);
  if (status != kNextArgument) return status;
  if (!trace.empty()) {
    std::fprintf(stderr, "cutrace %s: more than one trace given ('%s' and '%s'); give one trace file.\n", command,
                 trace.c_str(), taken[0].c_str());
    return kExitUsage;
  }
  trace = std::move(taken[0]);
  return kNextArgument;
}

Output::~Output() {
  if (file_ && file_ != stdout) std::fclose(file_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

bool Output::open(const std::string& path, bool overwrite, const char* force_option, std::string& error) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    return true;
  }
  path_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      error = path + " is a directory; give a file name for the output.";
      return false;
    }
    if (!overwrite) {
      error = path + " already exists; pass " + force_option + " to overwrite it or choose another name with -o.";
      return false;
    }
  }
  temp_ = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(temp_.data());
  if (fd < 0) {
    int e = errno;
    temp_.clear();
    error = "cannot create " + path + " (" + std::strerror(e) + "); check that its directory exists and is writable.";
    return false;
  }
  // mkstemp creates mode 0600; a report is an ordinary file, so give it the mode a plain create would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  file_ = ::fdopen(fd, "w");
  if (!file_) {
    ::close(fd);
    error = "cannot write " + path + " (out of memory).";
    return false;
  }
  return true;
}

bool Output::commit(std::string& error) {
  if (!file_) return false;
  if (file_ == stdout) {
    if (std::fflush(stdout) != 0) {
      error = std::string("cannot write the output (") + std::strerror(errno) + ").";
      return false;
    }
    return true;
  }
  const bool write_failed = std::ferror(file_) != 0;
  const int close_result = std::fclose(file_);
  const int e = errno;
  file_ = nullptr;
  if (write_failed || close_result != 0) {
    error = "cannot write " + path_ + " (" + std::strerror(write_failed ? EIO : e) + "); check the free space.";
    return false;
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    error = "cannot create " + path_ + " (" + std::strerror(errno) + ").";
    return false;
  }
  temp_.clear();
  return true;
}

bool open_trace(reader::TraceReader& reader, const std::string& path, const char* command) {
  if (reader.open(path)) return true;
  std::fprintf(stderr, "cutrace %s: %s\n", command, reader.error().c_str());
  return false;
}

LossCounts loss_counts(const reader::TraceReader& reader) {
  LossCounts loss;
  // The end summary has the producers' final counts; without it only the per-thread counts some
  // chunks carried are known.
  loss.known = !reader.summary().empty();
  for (const auto& t : reader.threads()) {
    loss.dropped += t.records_dropped;
    loss.malformed += t.records_malformed;
  }
  // The recorder's own totals also count what it could not attribute to a thread (a damaged span of
  // a ring), so they win over the per-thread sums when present.
  auto total = [&](const char* key, uint64_t& out) {
    if (const std::string* v = reader.summary_value(key)) out = std::strtoull(v->c_str(), nullptr, 10);
  };
  total("dropped", loss.dropped);
  total("dropped_no_memory", loss.dropped_no_memory);
  loss.dropped_no_memory = std::min(loss.dropped_no_memory, loss.dropped);
  total("malformed", loss.malformed);
  total("lost_no_slot", loss.lost_no_slot);
  return loss;
}

int warn_status(const reader::TraceReader& reader, const char* command) {
  const reader::Status& s = reader.status();
  if (s.complete() && !s.trailing_bytes) return kExitOk;
  std::string text = reader.path() + ": " + s.describe();
  if (reader.summary().empty()) text += "; drop counts are unknown because the trace has no end summary";
  if (!s.in_progress_by.empty())
    text += "; read the finished trace when that run has ended";
  else if (!s.complete())
    text += "; record again for a whole trace";
  std::fprintf(stderr, "cutrace %s: warning: %s.\n", command, text.c_str());
  return s.complete() ? kExitOk : kExitPartialTrace;
}

std::string loss_sentence(const LossCounts& loss) {
  std::string out;
  auto add = [&](uint64_t n, const char* what) {
    if (!n) return;
    if (!out.empty()) out += ", ";
    out += reader::thousands(n) + what;
  };
  const uint64_t ring_full = loss.dropped - loss.dropped_no_memory;
  add(ring_full, ring_full == 1 ? " record dropped (ring full)" : " records dropped (ring full)");
  add(loss.dropped_no_memory, loss.dropped_no_memory == 1 ? " record dropped (no room in /dev/shm)"
                                                          : " records dropped (no room in /dev/shm)");
  add(loss.malformed, loss.malformed == 1 ? " record malformed" : " records malformed");
  add(loss.lost_no_slot, loss.lost_no_slot == 1 ? " record lost (no free ring)" : " records lost (no free ring)");
  return out;
}

std::vector<std::string> trace_warnings(const reader::TraceReader& reader) {
  std::vector<std::string> out;
  for (size_t i = 0;; ++i) {
    const std::string* w = reader.summary_value("warning." + std::to_string(i));
    if (!w) return out;
    out.push_back(*w);
  }
}

void mention_trace_warnings(const reader::TraceReader& reader, const char* command) {
  if (const char* said = std::getenv(kTraceWarningsSaidEnvVar); said && *said) return;
  const size_t n = trace_warnings(reader).size();
  if (n)
    std::fprintf(stderr, "cutrace %s: note: the recording of %s gave %zu %s; cutrace info shows %s.\n", command,
                 reader.path().c_str(), n, n == 1 ? "warning" : "warnings", n == 1 ? "it" : "them");
}

}  // namespace cutrace::cli
