// Command-line options of `cutrace profile`, spelled as `nsys profile` spells them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cutrace/abi.h"
#include "cutrace/session.h"

namespace cutrace::launcher {

// Exit codes shared by every refusal, so scripts can tell a usage mistake from a failed setup.
inline constexpr int kExitSetupFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitCommandNotFound = 127;

struct ProfileOptions {
  std::string output_pattern;  // as given to -o, before %-expansion; empty: the first free reportN
  bool force_overwrite = false;
  bool show_output = true;
  bool stats = false;
  // --wait all (nsys's default): recording ends when every process the command started has exited.
  bool wait_all = true;
  // abi::domain_bit() of each domain `-t` selected; 0 for `-t none` (the program runs under the
  // session with capture off).
  // The default is nsys's, less what cutrace does not trace yet (opengl, osrt).
  abi::DomainSet trace_domains = abi::kCudaDomains | abi::domain_bit(abi::ApiDomain::kNvtx);
  // The session's settings start from session::Options' defaults, the one place they are written.
  uint64_t osrt_threshold_ns = session::Options{}.osrt_threshold_ns;  // --osrt-threshold
  // --cudabacktrace as given ("" or "none": no CUDA backtraces) and --cudabacktrace-threshold (the
  // threshold of the classes given without their own); resolved into backtrace_threshold_ns.
  std::string cudabacktrace;
  uint64_t cudabacktrace_threshold_ns = 1000;
  // Per backtrace class (abi::ApiClass, then abi::kBacktraceClassOsrt): calls at least this long carry
  // their stack; abi::kBacktraceOff: none. The OS runtime's comes from --osrt-backtrace-threshold
  // (nsys's default, 80 us), with -t osrt.
  uint64_t backtrace_threshold_ns[abi::kBacktraceClasses] = {abi::kBacktraceOff, abi::kBacktraceOff,
                                                             abi::kBacktraceOff, abi::kBacktraceOff,
                                                             abi::kBacktraceOff};
  uint64_t osrt_backtrace_threshold_ns = 80000;
  uint32_t osrt_backtrace_depth = session::Options{}.backtrace_depth_osrt;  // --osrt-backtrace-depth
  // --python-backtrace: Python frames with the stacks of CPython threads (cuda, the default) or not
  // (none, false).
  bool python_backtrace = true;
  // --python-sampling: the Python stacks of every thread of each CPython process, at
  // --python-sampling-frequency Hz (nsys's 1 to 2000, default 1000). Off by default, as in nsys.
  bool python_sampling = false;
  // --pytorch: the annotations every Python process of the command starts when it imports torch, in
  // a fixed order ("autograd-shapes-nvtx,functions-trace"); empty for none (python/bootstrap/).
  std::string pytorch;
  // --python-functions-trace: the absolute path of the checked JSON file of functions to annotate.
  std::string python_functions;
  // --gpu-activity (cutrace's own): with -t cuda, GPU activity through CUPTI, as nsys's -t cuda has it.
  bool gpu_activity = true;
  // --cuda-memory-usage: with GPU activity, device memory in use over time (nsys's default false).
  bool cuda_memory_usage = false;
  // --cuda-graph-trace node: every node of a graph launch as its own GPU record; graph (nsys's default):
  // one record per launch, where CUPTI can trace graphs whole.
  bool cuda_graph_nodes = false;
  uint32_t python_sampling_frequency = 1000;
  // -s/--sample process-tree (or its older spelling cpu): CPU samples of every thread of the command's
  // processes, at --sampling-frequency Hz (nsys's 100 to 8000, default 1000). Off by default (nsys
  // samples by default): a run costs only what it asks for.
  bool cpu_sampling = false;
  uint32_t sampling_frequency = 1000;
  // --cpuctxsw process-tree: when each thread of the command's processes left its CPU and got it back
  // (nsys's default is process-tree; here, as sampling, off unless asked for).
  bool context_switches = false;
  uint32_t ring_bytes = session::Options{}.ring_bytes;
  bool ring_bytes_given = false;  // --ring-size was given: the session must not shrink the rings
  uint32_t ring_slots = session::Options{}.slot_count;
  // Capture ranges (-c): each process records only inside its own ranges.
  enum class CaptureRange { kNone, kProfilerApi, kNvtx } capture_range = CaptureRange::kNone;
  // --capture-range-end, nsys's default stop-shutdown; capture_count: N of repeat[:N] and
  // repeat-shutdown:N, 0 = no limit.
  std::string capture_end = "stop-shutdown";
  uint32_t capture_count = 0;
  std::string nvtx_capture;  // -p RANGE[@DOMAIN|@*]
  // -y/--delay and -d/--duration, in ns (0: none): recording starts after the delay and ends after
  // the duration, when the program is sent kill_signal (0: --kill none).
  uint64_t delay_ns = 0;
  uint64_t duration_ns = 0;
  int kill_signal = 15;  // SIGTERM, nsys's default
  // --mpi-impl: the MPI implementation whose interposer -t mpi preloads (nsys's default, openmpi).
  std::string mpi_impl = "openmpi";
  // --export TYPE[,TYPE...]: `cutrace export --type TYPE` of the trace once it is written, under its
  // default name beside the trace, in the order given.
  std::vector<std::string> exports;
  // -e/--env-var NAME=VALUE[,NAME=VALUE...]: set in the program's environment, in the order given.
  std::vector<std::string> env_vars;
  bool help = false;
  bool quiet = false;  // -q: no "collecting" line and no summary line, only warnings and errors
  std::vector<std::string> given;    // the option words exactly as typed, stored in the trace
  std::vector<std::string> command;  // the program and its arguments
};

// A refusal of the command line: one sentence, already prefixed with "cutrace profile: ".
struct UsageError {
  int exit_code = kExitUsage;
  std::string message;
};

// Parses argv (argv[0] is the subcommand name). Returns false and fills `error` on the first problem.
// With -h/--help it returns true with options->help set and no command required.
bool parse_options(int argc, const char* const* argv, ProfileOptions* options, UsageError* error);

// The text printed by `cutrace profile --help`.
const char* help_text();

// Parses "4194304", "4M", "4MiB", "512K" (binary multiples). Returns false on anything else or on
// overflow of 64 bits.
bool parse_byte_count(const std::string& text, uint64_t* bytes);

}  // namespace cutrace::launcher
