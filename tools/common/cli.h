// What the trace-reading subcommands share: nsys-style option matching, output files that are never
// overwritten by accident, and the warnings that keep an incomplete or lossy trace from passing silently.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"
#include "reader/trace_reader.h"

namespace cutrace::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the trace or the output could not be used
inline constexpr int kExitUsage = 2;
// The trace is cut off or damaged: everything intact in it was shown, and a warning said what is missing.
inline constexpr int kExitPartialTrace = 3;
// Nothing to show (every report SKIPPED, or no NVTX range to filter by), which a script should be able
// to tell from a table.
inline constexpr int kExitNoData = 4;

// What a trace-reading command does with a word its own options did not take: an operand is a trace,
// anything else (an unknown option, or `--quiet=x`) is refused in one sentence on stderr naming
// `command` and ending with `hint` (how to get help). Returns kNextArgument to go on, or the exit code.
inline constexpr int kNextArgument = -1;
int take_trace(const Arg& arg, const char* command, const std::string& hint, std::vector<std::string>& traces);
// The same for a command that reads one trace: a second one is refused.
int take_trace(const Arg& arg, const char* command, const std::string& hint, std::string& trace);
// True when `arg` is one of the command's options as it may be spelled: a flag takes no `=value`.
bool is_own_option(const Arg& arg);

// Where a report goes: stdout for "" or "-", else a new file. Writes go to a temporary file beside the
// target that is renamed over it by commit(), so a failed or interrupted run never leaves half a file
// under the real name.
class Output {
 public:
  Output() = default;
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output();

  // Returns false with `error` set to one sentence; an existing file is refused unless `overwrite`.
  // `force_option` is how the command spells overwriting ("-f true"), for that sentence.
  bool open(const std::string& path, bool overwrite, const char* force_option, std::string& error);
  FILE* file() const { return file_; }
  bool is_stdout() const { return path_.empty(); }
  const std::string& path() const { return path_; }
  // The file written until commit() moves it into place (empty for stdout).
  const std::string& temp_path() const { return temp_; }
  // Flushes and, for a file, moves it into place. Returns false with `error` set when writing failed.
  bool commit(std::string& error);

 private:
  FILE* file_ = nullptr;
  std::string path_, temp_;
};

// Opens a trace for a subcommand, printing the reader's one-sentence error on failure.
bool open_trace(reader::TraceReader& reader, const std::string& path, const char* command);

// Drop, malformed and no-slot counts of a trace read to its end; `known` is false without a kEnd chunk.
struct LossCounts {
  bool known = false;
  uint64_t dropped = 0;
  uint64_t dropped_no_memory = 0;  // of `dropped`, for want of room in /dev/shm
  uint64_t malformed = 0;
  uint64_t lost_no_slot = 0;
  uint64_t total() const { return dropped + malformed + lost_no_slot; }
};
LossCounts loss_counts(const reader::TraceReader& reader);

// After a trace was read: a warning on stderr when it is not whole (or has bytes after its end).
// Returns the exit code the command ends with: kExitPartialTrace when the trace is not whole.
int warn_status(const reader::TraceReader& reader, const char* command);

// The recorder's warnings about what the trace may lack (a CUDA library loaded but none of its calls
// recorded, no CUDA at all): the kEnd summary's warning.N values, in order.
std::vector<std::string> trace_warnings(const reader::TraceReader& reader);
// The recording's warnings were said when it ended, and `cutrace info` lists them: a command that reads
// the trace says only that there are some, in one line on stderr, and nothing when the command that
// recorded it runs it (profile's --stats and --export, which set kTraceWarningsSaidEnvVar for theirs).
void mention_trace_warnings(const reader::TraceReader& reader, const char* command);
inline constexpr const char* kTraceWarningsSaidEnvVar = "CUTRACE_TRACE_WARNINGS_SAID";

// "1,234 records dropped (ring full), 2 malformed, 5 lost (no free ring)", naming only nonzero counts;
// empty when nothing was lost.
std::string loss_sentence(const LossCounts& loss);

}  // namespace cutrace::cli
