// Turning `-o` into the trace file's absolute path, and making sure it can be written before anything
// is started.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/options.h"
#include "reader/trace_claim.h"

namespace cutrace::launcher {

inline constexpr const char* kTraceExtension = ".cutrace";
// What the recorder writes until it finishes: NAME.cutrace.XXXXXX.part, unique to the run.
inline constexpr const char* kPartialSuffix = ".part";

// Expands %q{VAR} (environment variable, which must be set), %h (host name), %p (`pid`) and %%.
bool expand_output_pattern(const std::string& pattern, pid_t pid, std::string* expanded, UsageError* error);

// `name` with ".cutrace" appended unless it already ends with it.
std::string with_trace_extension(const std::string& name);

// The first `<dir>/reportN.cutrace`, N = 1, 2, ..., for which no file named reportN.cutrace* exists
// (the trace, its lock, a partial file, program output). prepare_output also skips claimed names.
std::string first_free_report_name(const std::string& dir);

// Creates `dir` and its missing parents (mode 0777 less the umask), appending each directory it
// created to `created`, outermost first.
bool make_directories(const std::string& dir, std::vector<std::string>* created, std::string* error);

struct OutputTarget {
  std::string path;                       // absolute, normalised, ends with .cutrace
  std::string part;                       // the partial file, created empty by prepare_output
  std::vector<std::string> created_dirs;  // made by prepare_output; removed by discard_created_dirs
  reader::TraceClaim claim;               // held from prepare_output until the trace is in place
};

// Resolves `pattern` (empty: reportN in the current directory; ending in '/': reportN in that
// directory), creates missing directories, claims the name (refusing one another run is writing, and
// an existing trace unless `force`) and creates this run's partial file. On failure nothing is left
// behind.
bool prepare_output(const std::string& pattern, bool force, pid_t pid, OutputTarget* target, UsageError* error);

// Removes the directories prepare_output created, innermost first, where they are still empty.
void discard_created_dirs(const OutputTarget& target);

// Undoes prepare_output when the run does not happen: the partial file, the claim, the directories.
void abandon_output(OutputTarget* target);

}  // namespace cutrace::launcher
