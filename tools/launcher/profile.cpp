#include "launcher/profile.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "launcher/cpu_sampling.h"
#include "launcher/descendants.h"
#include "launcher/environment.h"
#include "launcher/locate.h"
#include "launcher/options.h"
#include "launcher/outcome.h"
#include "launcher/output_path.h"
#include "launcher/output_relay.h"
#include "launcher/process.h"
#include "launcher/recorder_process.h"
#include "common/cli.h"
#include "common/commands.h"
#include "cutrace/job.h"
#include "cutrace/session.h"

namespace cutrace::launcher {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDefaultStartTimeout{10'000};
// Finishing means draining every ring and compressing it; a large trace on a slow disk can take a
// while, and a recorder that is stopped early still finishes cleanly on SIGTERM.
constexpr milliseconds kDefaultStopTimeout{120'000};
constexpr milliseconds kMaxKillGrace{10'000};

int fail(const UsageError& error) {
  std::fprintf(stderr, "%s\n", error.message.c_str());
  return error.exit_code;
}

int fail(int exit_code, const std::string& message) {
  return fail(UsageError{exit_code, "cutrace profile: " + message + "."});
}

void warn(const std::string& message) { std::fprintf(stderr, "cutrace: warning: %s.\n", message.c_str()); }

bool timeout_from_env(const char* name, milliseconds fallback, milliseconds* out, UsageError* error) {
  const char* text = std::getenv(name);
  if (!text || !*text) {
    *out = fallback;
    return true;
  }
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400 * 365) {
    *error = UsageError{kExitUsage, std::string("cutrace profile: ") + name +
                                        " must be a number of seconds greater than 0, not '" + text + "'."};
    return false;
  }
  *out = milliseconds(std::max<int64_t>(1, int64_t(seconds * 1000)));
  return true;
}

// The job this launch is one rank of (`mpirun -n 8 cutrace profile -o rank%q{RANK} -- app`), from the
// launcher's own environment, as the trace's job.* metadata; nothing when no launcher variable is set.
std::vector<std::string> job_metadata_args() {
  const job::Identity id = job::identify([](const char* name) { return std::getenv(name); });
  if (!id.known()) return {};
  std::vector<std::string> args = {"--meta", "job.rank=" + std::to_string(id.rank), "--meta",
                                   std::string("job.rank_variable=") + id.rank_variable};
  if (id.local_rank >= 0) args.insert(args.end(), {"--meta", "job.local_rank=" + std::to_string(id.local_rank)});
  if (id.world_size >= 0) args.insert(args.end(), {"--meta", "job.world_size=" + std::to_string(id.world_size)});
  return args;
}

std::string seconds_text(milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", double(duration.count()) / 1000);
  return text;
}

bool file_size(const std::string& path, uint64_t* bytes) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *bytes = uint64_t(st.st_size);
  return true;
}

// How long the program's output is still copied after it exited, for a process it left behind that
// holds its stdout or stderr open.
constexpr std::chrono::milliseconds kOutputGrace{200};

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Says what became of the trace once the recorder is gone. Returns true when a trace file exists.
// `also` is appended to the summary line (where the program's output went, with -w false).
bool report_trace(const RecorderFinish& finish, const OutputTarget& output, milliseconds stop_timeout,
                  const std::string& also, bool quiet, bool rings_capped_by_shm) {
  const bool clean = WIFEXITED(finish.wait_status) && WEXITSTATUS(finish.wait_status) == 0;
  if (finish.timed_out) {
    warn("the recorder had not finished " + seconds_text(stop_timeout) +
         " s after the program ended and was sent SIGTERM" + (finish.killed ? ", then SIGKILL" : "") +
         "; raise CUTRACE_RECORDER_STOP_TIMEOUT if large traces need longer");
  }
  const std::string what = describe_wait_status(finish.wait_status);
  uint64_t bytes = 0;
  const std::string& part = output.part;
  if (file_size(part, &bytes) && bytes > 0) {
    // The recorder renames the .part away when it finishes, so one left here is the newest data of this
    // run: chunks are self-contained, and the reader reads it up to the last complete one.
    const std::string cause = clean ? "exited without finishing the trace" : what;
    if (std::rename(part.c_str(), output.path.c_str()) != 0) {
      warn("the recorder " + cause + " and " + part + " cannot be renamed (" + std::strerror(errno) +
           "); it holds what was recorded");
      return false;
    }
    warn("the recorder " + cause + "; " + output.path + " (" + human_size(bytes) + ") holds what it wrote before");
    return true;
  }
  if (!file_size(output.path, &bytes)) {
    warn("the recorder " + (clean ? std::string("exited") : what) + " and left no trace at " + output.path);
    return false;
  }
  if (!clean && !finish.summary.present) {
    // It moved what it had written into place itself (after a failed write, whose cause it stated).
    warn("the recorder " + what + "; " + output.path + " (" + human_size(bytes) + ") holds what it wrote before");
    return true;
  }
  if (!clean) {
    warn("the recorder " + what + " after finishing " + output.path + " (" + human_size(bytes) + ")");
    return true;
  }
  if (!finish.summary.present) {
    warn("the recorder reported no counts; " + output.path + " (" + human_size(bytes) + ") was written");
    return true;
  }
  if (!quiet)
    std::fprintf(stderr, "%s%s\n", summary_line(finish.summary, output.path, bytes, rings_capped_by_shm).c_str(),
                 also.c_str());
  for (const std::string& w : finish.summary.warnings) warn(w);
  return true;
}


// A copy of the session's descriptor for the program to inherit (abi::kSessionFdEnvVar), with the
// entry that names it. At 100 or above where the limit allows: clear of the small numbers shells and
// programs name themselves, and free in the launcher, so never a descriptor the user handed down.
// No entry (and fd -1) if there is none to give: processes then open the session by name, as before.
struct InheritedSession {
  int fd = -1;
  std::string env_entry;
};

InheritedSession inherited_session(const session::Session& session) {
  int fd = fcntl(session.descriptor(), F_DUPFD_CLOEXEC, 100);
  if (fd < 0) fd = fcntl(session.descriptor(), F_DUPFD_CLOEXEC, 3);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return {};
  }
  return {fd, std::string(abi::kSessionFdEnvVar) + "=" + std::to_string(fd) + ":" +
                  std::to_string(uint64_t(st.st_dev)) + ":" + std::to_string(uint64_t(st.st_ino))};
}

// What the shim of every process needs to gate itself (abi::kCaptureEnvVar).
std::vector<std::string> capture_environment(const ProfileOptions& options) {
  if (options.capture_range == ProfileOptions::CaptureRange::kNone) return {};
  const bool nvtx = options.capture_range == ProfileOptions::CaptureRange::kNvtx;
  std::vector<std::string> env = {std::string(abi::kCaptureEnvVar) + "=" + (nvtx ? "nvtx" : "cudaProfilerApi") + "," +
                                  options.capture_end + "," + std::to_string(options.capture_count)};
  if (nvtx) env.push_back(std::string(abi::kNvtxCaptureEnvVar) + "=" + options.nvtx_capture);
  return env;
}

// For the recorder's explanation of a process that never opened a range.
std::string capture_opened_by(const ProfileOptions& options) {
  if (options.capture_range == ProfileOptions::CaptureRange::kNvtx) return "-c nvtx: the NVTX range " + options.nvtx_capture;
  return "-c cudaProfilerApi: cudaProfilerStart or cuProfilerStart";
}

// CLOCK_MONOTONIC in ns: the clock of CUPTI's timestamps, which the session's window is compared with.
uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// Waits for the program, meanwhile opening the session's gate after -y, closing it after -d, and
// ending the program (--kill) after -d or when a process's range ended in a shutdown mode.
int wait_with_capture_control(Child& program, const ProfileOptions& options, abi::SessionHeader* header) {
  const bool shutdown_mode = options.capture_range != ProfileOptions::CaptureRange::kNone &&
                             options.capture_end.ends_with("shutdown");
  if (!options.delay_ns && !options.duration_ns && !shutdown_mode) return program.wait();
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto open_at = start + std::chrono::nanoseconds(options.delay_ns);
  const auto close_at = open_at + std::chrono::nanoseconds(options.duration_ns);
  bool opened = options.delay_ns == 0, closed = false, killed = false;
  auto end_program = [&] {
    if (killed) return;
    killed = true;
    if (options.kill_signal) program.signal(options.kill_signal);
  };
  for (;;) {
    siginfo_t info{};
    if (waitid(P_PID, id_t(program.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == program.pid())
      return program.wait();
    const auto now = clock::now();
    if (!opened && now >= open_at) {
      opened = true;
      header->capture_opened_ns.store(monotonic_ns(), std::memory_order_release);
      header->capture_domains.store(header->trace_domains, std::memory_order_release);
    }
    if (options.duration_ns && !closed && now >= close_at) {
      closed = true;
      header->capture_domains.store(0, std::memory_order_release);
      header->capture_closed_ns.store(monotonic_ns(), std::memory_order_release);
      end_program();
    }
    if (shutdown_mode && header->capture_shutdown.load(std::memory_order_acquire)) end_program();
    usleep(5000);
  }
}

// `environ` with -e's NAME=VALUE pairs set, a later one over an earlier one.
std::vector<std::string> environment_with(const std::vector<std::string>& pairs) {
  std::vector<std::string> entries;
  for (char* const* e = environ; e && *e; ++e) entries.emplace_back(*e);
  for (const std::string& pair : pairs) {
    const std::string name = pair.substr(0, pair.find('=') + 1);
    std::erase_if(entries, [&](const std::string& e) { return e.starts_with(name); });
    entries.push_back(pair);
  }
  return entries;
}

// --export TYPE: `cutrace export` of the finished trace, run as a command of its own (an export may
// hand itself over to Python by exec).
void export_trace(const std::string& trace, const std::string& type, const ProfileOptions& options) {
  std::vector<std::string> args = {"cutrace", "export", "--type", type, "-f", options.force_overwrite ? "true" : "false"};
  if (options.quiet) args.push_back("-q");
  args.insert(args.end(), {"--", trace});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    restore_signals_in_child();  // Ctrl-C stops an export as it would one run by hand
    setenv(cli::kTraceWarningsSaidEnvVar, "1", 1);  // the run's end has just said them
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) == 127)
    warn("--export " + type + " could not be run (" + (child < 0 ? std::strerror(errno) : "it did not finish") +
         "); run cutrace export --type " + type + " " + trace);
}

int run(const ProfileOptions& options) {
  StdFdPlaceholders std_fds;
  UsageError error;

  // Everything that can be checked without starting anything is checked first.
  std::string program_path;
  if (!find_command(options.command[0], std::getenv("PATH"), &program_path, &error)) return fail(error);
  const std::string exe_dir = executable_dir();
  std::string preload_path, recorder_path;
  if (!find_preload(exe_dir, &preload_path, &error)) return fail(error);
  const std::string preload_dir = preload_path.substr(0, preload_path.rfind('/') + 1);
  // CUDA 12's wrappers come before the shim: their definitions under CUDA 12's symbol versions must be
  // found ahead of the shim's unversioned ones, which would take those references too. A build without
  // them (-DCUTRACE_CUDA12=OFF) has none to add.
  std::string ld_preload = preload_path;
  if (CUTRACE_WITH_CUDA12) {
    const std::string cuda12_path = preload_dir + kCuda12FileName;
    if (access(cuda12_path.c_str(), R_OK) != 0)
      return fail(kExitSetupFailed, cuda12_path +
                                        " is missing, and without it CUDA 12 programs would be traced through CUDA "
                                        "13's prototypes; rebuild or reinstall cutrace");
    ld_preload = cuda12_path + ":" + ld_preload;
  }
  // -t osrt: the OS runtime wrappers, a library of their own beside the shim, preloaded after it.
  if (options.trace_domains & abi::domain_bit(abi::ApiDomain::kOsRuntime)) {
    const std::string osrt_path = preload_dir + kOsrtFileName;
    if (access(osrt_path.c_str(), R_OK) != 0)
      return fail(kExitSetupFailed, "-t osrt needs " + osrt_path +
                                        ", which is missing; rebuild or reinstall cutrace, or leave osrt out of -t");
    ld_preload += ":" + osrt_path;
  }
  // -t mpi: the interposer of the MPI implementation --mpi-impl names (the two ABIs differ), after the
  // shim. It is only there when cutrace was built where that implementation's headers were.
  if (options.trace_domains & abi::domain_bit(abi::ApiDomain::kMpi)) {
    const std::string mpi_path = preload_dir + "libcutrace-mpi-" + options.mpi_impl + ".so";
    if (access(mpi_path.c_str(), R_OK) != 0)
      return fail(kExitSetupFailed, "-t mpi --mpi-impl " + options.mpi_impl + " needs " + mpi_path +
                                        ", which is missing: this cutrace was built without " +
                                        (options.mpi_impl == "mpich" ? "MPICH (libmpich-dev)" : "Open MPI (libopenmpi-dev)") +
                                        "; install it and rebuild cutrace, or leave mpi out of -t");
    ld_preload += ":" + mpi_path;
  }
  // --pytorch: the start-up hook that every Python of the command runs from PYTHONPATH
  // (python/bootstrap/), installed beside the shim.
  const std::string pytorch_bootstrap = preload_dir + kPytorchBootstrapDir;
  const bool python_hook = !options.pytorch.empty() || !options.python_functions.empty();
  if (python_hook && access((pytorch_bootstrap + "/sitecustomize.py").c_str(), R_OK) != 0)
    return fail(kExitSetupFailed, std::string(options.pytorch.empty() ? "--python-functions-trace" : "--pytorch") +
                                      " needs " + pytorch_bootstrap +
                                      "/sitecustomize.py, which is missing; rebuild or reinstall cutrace");
  if (!find_recorder(exe_dir, &recorder_path, &error)) return fail(error);
  if (!options.output_pattern.empty()) {
    std::string unused;
    if (!expand_output_pattern(options.output_pattern, getpid(), &unused, &error)) return fail(error);
  }
  milliseconds start_timeout, stop_timeout;
  if (!timeout_from_env("CUTRACE_RECORDER_START_TIMEOUT", kDefaultStartTimeout, &start_timeout, &error) ||
      !timeout_from_env("CUTRACE_RECORDER_STOP_TIMEOUT", kDefaultStopTimeout, &stop_timeout, &error))
    return fail(error);

  // Installed before anything needs cleaning up, so a signal can no longer end the launcher with
  // shared memory left behind.
  SignalForwarding signals;
  // Processes the command leaves behind become the launcher's to wait for (--wait all) or count.
  const bool adopts_orphans = become_subreaper();

  session::Options session_options;
  session_options.slot_count = options.ring_slots;
  session_options.ring_bytes = options.ring_bytes;
  if (!options.ring_bytes_given) session_options.min_ring_bytes = session::kSmallestFittedRingBytes;
  session_options.clock = session::choose_clock();
  session_options.trace_domains = options.trace_domains;
  session_options.osrt_threshold_ns = options.osrt_threshold_ns;
  std::copy(std::begin(options.backtrace_threshold_ns), std::end(options.backtrace_threshold_ns),
            session_options.backtrace_threshold_ns);
  session_options.backtrace_depth_osrt = options.osrt_backtrace_depth;
  if (!options.python_backtrace) session_options.backtrace_depth_python = 0;
  session::Session session;  // its destructor removes the shared memory on every way out
  std::string why;
  if (!session.create(session_options, &why))
    return fail(kExitSetupFailed, why + "; check that /dev/shm is mounted, writable and has room");
  // What the share of /dev/shm allowed, in one line, where it is less than was asked.
  const bool rings_capped_by_shm = session.header()->slot_count < session_options.slot_count;
  if (rings_capped_by_shm || session.header()->ring_bytes < session_options.ring_bytes)
    std::fprintf(stderr,
                 "cutrace: /dev/shm has %s free, and cutrace takes at most half of it (%s) so that the program keeps "
                 "the rest: %u rings of %s (asked: %u of %s), one for each thread that records at once; a container's "
                 "/dev/shm grows with docker run --shm-size.\n",
                 human_size(session.shm_free_bytes()).c_str(), human_size(session.shm_budget()).c_str(),
                 session.header()->slot_count, human_size(session.header()->ring_bytes).c_str(),
                 session_options.slot_count, human_size(session_options.ring_bytes).c_str());
  // -y: nothing is recorded until the delay has passed (the launcher opens the session's gate then),
  // nor is GPU work that CUPTI reports before the window opens.
  if (options.delay_ns) {
    session.header()->capture_domains.store(0, std::memory_order_release);
    session.header()->capture_opened_ns.store(UINT64_MAX, std::memory_order_release);
  }
  std::vector<std::string> extra_env = capture_environment(options);
  const InheritedSession inherited = inherited_session(session);
  FdCloser close_inherited(inherited.fd);  // the program has its copy once it is spawned
  if (inherited.fd >= 0) extra_env.push_back(inherited.env_entry);
  const bool inject_nvtx = (options.trace_domains & abi::domain_bit(abi::ApiDomain::kNvtx)) != 0 ||
                           options.capture_range == ProfileOptions::CaptureRange::kNvtx;
  std::vector<std::string> given_entries = environment_with(options.env_vars);
  if (python_hook) {
    // First on the program's own path, so that Python finds this sitecustomize, which runs the one it
    // hides (python/bootstrap/sitecustomize.py).
    std::string python_path = pytorch_bootstrap;
    for (const std::string& e : given_entries)
      if (e.starts_with("PYTHONPATH=") && e.size() > strlen("PYTHONPATH=")) python_path += ":" + e.substr(strlen("PYTHONPATH="));
    extra_env.push_back("PYTHONPATH=" + python_path);
    if (!options.pytorch.empty()) extra_env.push_back(std::string(kPytorchEnvVar) + "=" + options.pytorch);
    if (!options.python_functions.empty())
      extra_env.push_back(std::string(kPythonFunctionsEnvVar) + "=" + options.python_functions);
  }
  std::vector<char*> given_environment;
  for (std::string& e : given_entries) given_environment.push_back(e.data());
  given_environment.push_back(nullptr);
  const std::vector<std::string> program_env =
      program_environment(given_environment.data(), ld_preload, session.name(),
                          inject_nvtx ? preload_path : std::string(), extra_env);

  const int dev_null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (dev_null < 0) return fail(kExitSetupFailed, std::string("cannot open /dev/null: ") + std::strerror(errno));
  FdCloser close_dev_null(dev_null);

  // The program is forked first and held before exec: %p in -o needs its pid, and it must not run a
  // single instruction before the recorder is ready. Until released it is only a copy of the launcher;
  // every failure below kills it unseen.
  Child program;
  SpawnOptions program_spawn;
  program_spawn.path = program_path;
  program_spawn.argv = options.command;
  program_spawn.env = &program_env;
  program_spawn.hold = true;
  program_spawn.shell_fallback = true;
  program_spawn.forward_signals = true;
  if (inherited.fd >= 0) program_spawn.fd_map.emplace_back(inherited.fd, inherited.fd);
  OutputRelay relay;
  if (!options.show_output) {
    if (!relay.create_pipes(&why)) return fail(kExitSetupFailed, why);
    program_spawn.fd_map.insert(program_spawn.fd_map.end(),
                                {{relay.stdout_write_end(), 1}, {relay.stderr_write_end(), 2}});
  }
  // A signal that came while there was no program yet ends the launch the way it would have ended the
  // program.
  if (int sig = SignalForwarding::take_untargeted_signal()) return 128 + sig;
  if (!program.spawn(program_spawn, &why)) return fail(kExitSetupFailed, why);
  relay.close_write_ends();
  // From here until the program is reaped every signal has a target; one that finds none after that
  // asks the recorder to hurry (see RecorderProcess::finish).
  if (int sig = SignalForwarding::take_untargeted_signal()) program.signal(sig);

  OutputTarget output;
  if (!prepare_output(options.output_pattern, options.force_overwrite, program.pid(), &output, &error))
    return fail(error);
  // --export: its outputs are checked now, so that a run is not spent on a trace whose export would
  // be refused at the end.
  for (const std::string& type : options.exports) {
    const std::string path = exporting::default_export_path(output.path, type);
    if (!options.force_overwrite && access(path.c_str(), F_OK) == 0) {
      abandon_output(&output);
      return fail(kExitSetupFailed, path + " (--export " + type +
                                        ") already exists; pass -f true to overwrite it or choose another name with -o");
    }
  }
  if (!options.show_output) {
    if (!relay.open_files(output.path, options.force_overwrite, &why)) {
      abandon_output(&output);
      return fail(kExitSetupFailed, why);
    }
    relay.start();
  }

  std::vector<std::string> recorder_args = {
      "--session",  session.name(),
      "--output",   output.path,
      "--part",     output.part,
      "--claim-fd", std::to_string(RecorderProcess::kClaimFd),
      "--ready-fd", std::to_string(RecorderProcess::kReadyFd),
      // Should the launcher die, the recorder waits for the program instead of for a shutdown request.
      // Named now, while the program is held and this launcher has not reaped it: the pid is its own.
      "--command-pid", std::to_string(program.pid()),
      "--meta",     "command=" + shell_join(options.command),
      "--meta",     "options=" + shell_join(options.given),
      "--meta",     "host=" + host_name(),
  };
  std::error_code cwd_error;
  const auto cwd = std::filesystem::current_path(cwd_error);
  if (!cwd_error) recorder_args.insert(recorder_args.end(), {"--meta", "cwd=" + cwd.string()});
  const std::vector<std::string> job_args = job_metadata_args();
  recorder_args.insert(recorder_args.end(), job_args.begin(), job_args.end());
  if (options.force_overwrite) recorder_args.push_back("--force");
  if (options.capture_range != ProfileOptions::CaptureRange::kNone)
    recorder_args.insert(recorder_args.end(), {"--meta", "capture.opened_by=" + capture_opened_by(options)});
  if (!options.pytorch.empty()) recorder_args.insert(recorder_args.end(), {"--meta", "pytorch=" + options.pytorch});
  // -s cpu: events on the held program, enabled by its exec; the recorder reads them.
  CpuSamplingEvents sampling;
  if (options.cpu_sampling || options.context_switches) {
    open_cpu_sampling(program.pid(), options.cpu_sampling ? options.sampling_frequency : 0, options.context_switches,
                      &sampling);
    const bool perf = !sampling.fds.empty();
    if (perf) {
      recorder_args.insert(recorder_args.end(), {"--perf-fds", std::to_string(sampling.fds.size())});
      if (options.context_switches) recorder_args.insert(recorder_args.end(), {"--meta", "cpuctxsw=process-tree"});
    } else if (options.cpu_sampling) {
      // The fallback: every thread that claims a ring samples itself with a timer on its CPU clock.
      session.header()->timer_sampling_hz = options.sampling_frequency;
      warn("perf events are not available here (" + sampling.unavailable + "), so CPU samples come from a timer "
           "signal in each thread that makes a traced call, not from other threads, and at most at the kernel's tick "
           "rate" +
           std::string(options.context_switches ? ", and the trace has no context switches" : ""));
    } else {
      warn("--cpuctxsw is not available here (" + sampling.unavailable + "), so the trace has no context switches");
    }
    if (options.cpu_sampling)
      recorder_args.insert(recorder_args.end(),
                           {"--meta", "sampling.frequency=" + std::to_string(options.sampling_frequency), "--meta",
                            std::string("sampling.method=") + (perf ? "perf" : "timer")});
  }

  if (options.gpu_activity && (options.trace_domains & abi::kCudaDomains)) {
    session.header()->gpu_activity =
        abi::kGpuActivityOn | (options.cuda_memory_usage ? abi::kGpuActivityMemoryUsage : 0) |
        (options.cuda_graph_nodes ? abi::kGpuActivityGraphNodes : 0);
    recorder_args.insert(recorder_args.end(), {"--meta", "gpu_activity=cupti"});
    recorder_args.insert(recorder_args.end(),
                         {"--meta", std::string("cuda_graph_trace=") + (options.cuda_graph_nodes ? "node" : "graph")});
    if (options.cuda_memory_usage) recorder_args.insert(recorder_args.end(), {"--meta", "cuda_memory_usage=true"});
  }
  if (options.python_sampling) {
    session.header()->python_sampling_hz = options.python_sampling_frequency;
    recorder_args.insert(recorder_args.end(),
                         {"--meta", "python_sampling.frequency=" + std::to_string(options.python_sampling_frequency)});
  }

  const std::vector<std::string> recorder_env = recorder_environment(environ);
  RecorderProcess recorder;
  if (!recorder.start(recorder_path, recorder_args, recorder_env, dev_null, std_fds.was_closed(2),
                      output.claim.fd(), sampling.fds, start_timeout, &error)) {
    relay.discard();
    abandon_output(&output);
    return fail(error);
  }
  sampling.close_all();  // the recorder holds them now
  // An old trace under the same name would otherwise survive a run whose recorder dies before it
  // finishes, and pass for this run's.
  if (options.force_overwrite) unlink(output.path.c_str());

  // As nsys says "Collecting data...": the user sees where the trace goes before the program's output.
  if (!options.quiet) std::fprintf(stderr, "cutrace: collecting data into %s\n", output.path.c_str());
  program.release();
  if (int exec_errno = program.exec_result()) {
    fail(exec_errno == ENOENT ? kExitCommandNotFound : kExitNotExecutable,
         "cannot run " + program_path + " (" + std::strerror(exec_errno) + ")");
  }
  const int program_status = wait_with_capture_control(program, options, session.header());
  size_t cut_off = 0;
  if (adopts_orphans) {
    if (options.wait_all)
      wait_for_descendants(recorder.pid());
    else
      cut_off = live_descendants(recorder.pid()).size();
  }
  // The recorder states it as a warning in the trace, which the summary below repeats.
  session.header()->processes_cut_off.store(uint32_t(cut_off), std::memory_order_release);

  session::request_shutdown(session.header());
  const RecorderFinish finish = recorder.finish(stop_timeout, std::min(stop_timeout, kMaxKillGrace));
  session.unlink();
  // What the program printed last is in the files before the summary names them.
  relay.finish(kOutputGrace);
  if (!relay.error().empty()) warn(relay.error());

  const std::string output_files =
      options.show_output ? "" : "; program output -> " + relay.stdout_path() + ", " + relay.stderr_path();
  const bool have_trace =
      report_trace(finish, output, stop_timeout, output_files, options.quiet, rings_capped_by_shm);

  // The trace is in place (or reported missing): the name is free for the next run.
  output.claim.release();
  // nsys's order: the exports, then the statistics. Neither changes the exit status, which is the
  // program's; an export that fails says why.
  if (have_trace)
    for (const std::string& type : options.exports) export_trace(output.path, type, options);
  if (options.stats && have_trace) {
    std::fflush(stderr);
    report::print_default_reports(output.path);
  }
  return exit_code_of(program_status);
}

}  // namespace

int profile_main(int argc, char** argv) {
  ProfileOptions options;
  UsageError error;
  if (!parse_options(argc, argv, &options, &error)) return fail(error);
  if (options.help) {
    std::fputs(help_text(), stdout);
    return 0;
  }
  return run(options);
}

}  // namespace cutrace::launcher
