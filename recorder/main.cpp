// cutrace-recorder: drains a session's rings into a .cutrace file. Started by `cutrace profile`:
//
//   cutrace-recorder --session /cutrace-... --output trace.cutrace [--part FILE] [--claim-fd N]
//                    [--ready-fd N] [--command-pid N] [--meta key=value]... [--force]
//                    [--compression-level N] [--compression-threads N]
//
// Writes "ready\n" to the ready fd once the file is set up (nothing if it cannot start), records until
// the session asks for shutdown (or SIGTERM; or, once the launcher has died, until every traced
// process has exited), then renames the partial file to <output> and writes the one-line summary to
// the ready fd.
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "common/command_line.h"
#include "cutrace/api_table.h"
#include "reader/trace_claim.h"
#include "recorder/clock.h"
#include "recorder/process_monitor.h"
#include "recorder/recorder.h"
#include "recorder/trace_writer.h"
#include "cutrace/session.h"

namespace {

volatile sig_atomic_t g_terminate = 0;  // SIGTERMs received, up to 2

void on_sigterm(int) {
  if (g_terminate < 2) g_terminate = g_terminate + 1;
}

// After a SIGTERM, how long the recording waits for traced processes that are exiting anyway (a
// signal to the whole process group or job reaches them too) before it calls the trace cut off. A
// second SIGTERM ends the wait.
constexpr uint64_t kSigtermGraceNs = 2'000'000'000;

// Sent by the kernel when the launcher dies (PR_SET_PDEATHSIG). Not SIGTERM: a SIGTERM is then always
// someone asking the recorder to stop, while the launcher's death asks it to go on until the program
// is done. The handler only ends the nap; getppid() tells what happened.
constexpr int kLauncherDeathSignal = SIGUSR1;

void on_launcher_death(int) {}

constexpr const char* kUsage =
    "usage: cutrace-recorder --session NAME --output FILE [--part FILE] [--claim-fd N] [--ready-fd N]\n"
    "                        [--command-pid N] [--meta KEY=VALUE]... [--force]\n"
    "\n"
    "Records the CUDA calls pushed into the shared-memory session NAME into FILE (written as a partial\n"
    "file until complete). Normally started by `cutrace profile`, not by hand.\n"
    "\n"
    "  --session NAME     the session's shared-memory object, e.g. /cutrace-1000-...\n"
    "  --output FILE      the trace to write\n"
    "  --part FILE        the partial file, renamed to FILE when complete (default FILE.part)\n"
    "  --claim-fd N       the launcher's claim on FILE (a lock on FILE.lock), kept open until FILE is in\n"
    "                     place; the lock file is removed here when the launcher is gone by then\n"
    "  --ready-fd N       write \"ready\" here once recording, and the summary line at the end\n"
    "  --command-pid N    the command the launcher started (a child of the launcher, not reaped before\n"
    "                     this recorder is ready): should the launcher die, recording goes on until it\n"
    "                     and every process that claimed a ring have exited\n"
    "  --meta KEY=VALUE   add a metadata pair to the trace (repeatable)\n"
    "  --force            the caller allowed overwriting FILE (recorded in the metadata)\n"
    "  --perf-fds N       read CPU samples (-s cpu) from the N perf events open on fds 5 and up\n"
    "  --compression-level N    zstd level of the chunks (default 1: fast enough to keep up with\n"
    "                           tens of millions of calls per second on a few threads; while\n"
    "                           chunks wait for a compression thread, they get level -1)\n"
    "  --compression-threads N  threads compressing chunks beside the draining one (default: half the\n"
    "                           CPUs, at most 4)\n";

// zstd level 1 compresses this data about twice as fast as level 3 for 13% more bytes; the recorder
// must keep up with the program in real time, the tools can recompress later.
constexpr int kDefaultCompressionLevel = 1;
// Where the launcher puts the perf events of -s cpu (RecorderProcess::kPerfFdBase).
constexpr int kPerfFdBase = 5;

unsigned default_compression_threads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return std::clamp(cpus / 2, 1u, 4u);
}

struct Args {
  std::string session, output, part;
  int ready_fd = -1;
  int claim_fd = -1;
  uint32_t command_pid = 0;
  std::vector<int> perf_fds;  // --perf-fds N: the perf events of -s cpu, on fds 5 .. 5 + N - 1
  bool force = false;
  int compression_level = kDefaultCompressionLevel;
  unsigned compression_threads = default_compression_threads();
  cutrace::trace::KeyValues meta;
};

int fail(const std::string& sentence) {
  std::fprintf(stderr, "cutrace-recorder: %s\n", sentence.c_str());
  return 1;
}

// Returns -1 to go on, or the exit status.
int parse_args(int argc, char** argv, Args* args) {
  enum Option : int { kHelp, kForce, kSession, kOutput, kPart, kReadyFd, kClaimFd, kCommandPid, kPerfFds,
                      kCompressionLevel, kCompressionThreads, kMeta };
  constexpr cutrace::cli::OptionSpec kOptions[] = {
      {'h', "help", cutrace::cli::Arity::kNone, kHelp},
      {0, "force", cutrace::cli::Arity::kNone, kForce},
      {0, "session", cutrace::cli::Arity::kValue, kSession},
      {0, "output", cutrace::cli::Arity::kValue, kOutput},
      {0, "part", cutrace::cli::Arity::kValue, kPart},
      {0, "ready-fd", cutrace::cli::Arity::kValue, kReadyFd},
      {0, "claim-fd", cutrace::cli::Arity::kValue, kClaimFd},
      {0, "command-pid", cutrace::cli::Arity::kValue, kCommandPid},
      {0, "perf-fds", cutrace::cli::Arity::kValue, kPerfFds},
      {0, "compression-level", cutrace::cli::Arity::kValue, kCompressionLevel},
      {0, "compression-threads", cutrace::cli::Arity::kValue, kCompressionThreads},
      {0, "meta", cutrace::cli::Arity::kValue, kMeta},
  };
  cutrace::cli::Scanner words(argc, argv, kOptions);
  for (cutrace::cli::Arg arg; words.next(arg);) {
    if (arg.kind != cutrace::cli::Arg::Kind::kOption || (arg.spec->arity == cutrace::cli::Arity::kNone && arg.has_attached)) {
      std::fprintf(stderr, "cutrace-recorder: unknown option '%s'; see --help.\n", arg.word.c_str());
      return 2;
    }
    std::string text;
    if (arg.spec->arity == cutrace::cli::Arity::kValue && !words.value(arg, text)) {
      std::fprintf(stderr, "cutrace-recorder: %s needs a value; see --help.\n", arg.spelled.c_str());
      return 2;
    }
    const std::string_view value = text;
    const std::string& name = arg.spelled;
    switch (Option(arg.spec->id)) {
      case kHelp:
        std::fputs(kUsage, stdout);
        return 0;
      case kForce:
        args->force = true;
        break;
      case kSession:
        args->session = text;
        break;
      case kOutput:
        args->output = text;
        break;
      case kPart:
        args->part = text;
        break;
      case kReadyFd:
      case kClaimFd: {
        char* end = nullptr;
        long fd = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || fd < 0 || fd > 1 << 20 || fcntl(int(fd), F_GETFD) < 0) {
          std::fprintf(stderr, "cutrace-recorder: %s %s is not an open file descriptor.\n", name.c_str(), text.c_str());
          return 2;
        }
        (arg.spec->id == kReadyFd ? args->ready_fd : args->claim_fd) = int(fd);
        break;
      }
      case kCommandPid: {
        char* end = nullptr;
        const long pid = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || !cutrace::recorder::pid_plausible(uint32_t(pid < 0 ? 0 : pid))) {
          std::fprintf(stderr, "cutrace-recorder: --command-pid must be a process id, got '%s'.\n", text.c_str());
          return 2;
        }
        args->command_pid = uint32_t(pid);
        break;
      }
      case kPerfFds: {
        char* end = nullptr;
        const long n = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || n < 1 || n > 4096) {
          std::fprintf(stderr, "cutrace-recorder: --perf-fds must be a count from 1 to 4096, got '%s'.\n", text.c_str());
          return 2;
        }
        for (int fd = kPerfFdBase; fd < kPerfFdBase + n; ++fd) {
          if (fcntl(fd, F_GETFD) < 0) {
            std::fprintf(stderr, "cutrace-recorder: --perf-fds %ld: descriptor %d is not open.\n", n, fd);
            return 2;
          }
          args->perf_fds.push_back(fd);
        }
        break;
      }
      case kCompressionLevel:
      case kCompressionThreads: {
        char* end = nullptr;
        const long n = std::strtol(text.c_str(), &end, 10);
        const bool level = arg.spec->id == kCompressionLevel;
        if (text.empty() || *end || (level ? n < 1 || n > 19 : n < 0 || n > 64)) {
          std::fprintf(stderr, "cutrace-recorder: %s must be a number from %d to %d, got '%s'.\n", name.c_str(),
                       level ? 1 : 0, level ? 19 : 64, text.c_str());
          return 2;
        }
        if (level)
          args->compression_level = int(n);
        else
          args->compression_threads = unsigned(n);
        break;
      }
      case kMeta: {
        const size_t eq = value.find('=');
        if (eq == std::string_view::npos || eq == 0) {
          std::fprintf(stderr, "cutrace-recorder: --meta expects KEY=VALUE, got '%s'.\n", text.c_str());
          return 2;
        }
        args->meta.emplace_back(std::string(value.substr(0, eq)), std::string(value.substr(eq + 1)));
        break;
      }
    }
  }
  if (args->session.empty() || args->output.empty()) {
    std::fputs("cutrace-recorder: --session and --output are required; see --help.\n", stderr);
    return 2;
  }
  if (args->part.empty()) args->part = args->output + ".part";
  return -1;
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// A write failed (a full disk, most often): the chunks written so far are a readable trace up to the
// last complete one, so it goes where the trace belongs, and the one sentence says how much of what
// was recorded it lacks: the records handed to the writer that never reached the file (the recorder
// went on draining the rings after the failure, so the program's rings did not fill because of it),
// and those the producers dropped.
int fail_after_write_error(const cutrace::trace::TraceWriter& writer, const cutrace::recorder::Recorder& recorder,
                           const std::string& part, const std::string& output) {
  std::string cause = writer.error();
  std::string where = output;
  if (::rename(part.c_str(), output.c_str()) == 0) {
    // The writer named the file it was writing; the user will find it under its final name.
    for (size_t at = cause.find(part); at != std::string::npos; at = cause.find(part, at + output.size()))
      cause.replace(at, part.size(), output);
  } else {
    where = part;
  }
  const cutrace::recorder::Totals t = recorder.totals();
  const uint64_t on_file = std::min(writer.records_on_file(), t.events);
  std::string sentence = cause + "; " + where + " keeps the " + std::to_string(on_file) +
                         " records written before, and the " + std::to_string(t.events - on_file) +
                         " recorded after them were not written";
  if (t.dropped) sentence += " (" + std::to_string(t.dropped) + " more were dropped in full rings)";
  return fail(sentence + ".");
}

void set_meta(cutrace::trace::KeyValues& kv, const std::string& key, const std::string& value) {
  for (auto& [k, v] : kv)
    if (k == key) {
      v = value;
      return;
    }
  kv.emplace_back(key, value);
}

// Any process of the user can shrink the session object under the recorder's mapping (ftruncate),
// and the next read of a page beyond the new end raises SIGBUS. Reads of the session happen only in
// the recorder's drain loop on this thread, so the handler jumps back there and the recorder finishes
// the trace with what it had read; a SIGBUS anywhere else is a real crash.
sigjmp_buf g_session_fault;
volatile sig_atomic_t g_session_guarded = 0;

void on_sigbus(int signo) {
  if (g_session_guarded) siglongjmp(g_session_fault, 1);
  signal(signo, SIG_DFL);
  raise(signo);
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl+C reaches the whole process group; the launcher forwards it to the program, whose exit then
  // ends the session. Dying here instead would lose the trace.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  // The launcher may close the ready fd early; a failed write must not kill the recorder.
  signal(SIGPIPE, SIG_IGN);
  struct sigaction term {};
  term.sa_handler = on_sigterm;
  sigemptyset(&term.sa_mask);
  sigaction(SIGTERM, &term, nullptr);  // no SA_RESTART: an idle nanosleep ends at once
  struct sigaction death {};
  death.sa_handler = on_launcher_death;
  sigemptyset(&death.sa_mask);
  sigaction(kLauncherDeathSignal, &death, nullptr);
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, kLauncherDeathSignal);

  Args args;
  if (int status = parse_args(argc, argv, &args); status >= 0) return status;

  // Opened while the launcher is known to be alive (checked below), so that the command, its unreaped
  // child, still holds its pid: after the launcher's death the pid could be reaped and reused.
  cutrace::recorder::ProcessWatch command;
  if (args.command_pid) command.open(args.command_pid);

  cutrace::session::Session session;
  std::string error;
  if (!session.open(args.session, &error)) return fail(error + ".");
  auto* header = session.header();
  const uint32_t launcher_pid = header->launcher_pid;
  // A launcher that died before the prctl above would never be noticed otherwise.
  if ((launcher_pid != 0 && ::kill(pid_t(launcher_pid), 0) != 0 && errno == ESRCH) || getppid() != parent)
    return fail("the process that created the session (pid " + std::to_string(launcher_pid) +
                ") has exited, so there is nothing to record.");
  header->recorder_pid.store(uint32_t(getpid()), std::memory_order_release);

  const std::string& part = args.part;
  cutrace::trace::TraceWriter writer;
  // No fsync at the end, of the file or of its directory after the rename: the trace only has to
  // survive the processes involved (the kernel keeps written pages and the rename), and waiting for
  // the disk would add milliseconds to every run's exit.
  writer.set_compression_threads(args.compression_threads);
  if (!writer.open(part, args.compression_level)) return fail(writer.error() + ".");

  // Before the program starts (the launcher waits for "ready"): a shim of another build stays out.
  header->api_table_hash = cutrace::kApiTableHash;
  cutrace::recorder::Recorder recorder;
  recorder.set_api_table(cutrace::kApiTable, cutrace::kApiTableSize);
  for (const auto& [key, value] : args.meta)
    if (key == "capture.opened_by") recorder.set_capture_range(value);
    else if (key == "pytorch") recorder.set_pytorch(value);
  if (!recorder.attach(header, session.bytes(), &writer, &error)) {
    ::unlink(part.c_str());
    return fail(error + ".");
  }
  // Before the program starts, so no announcement is missed. Without it the run goes on: only the
  // explanation of a process that could not attach is lost.
  if (std::string why; !recorder.watch_unreached(args.session, &why))
    std::fprintf(stderr, "cutrace-recorder: %s.\n", why.c_str());
  if (!args.perf_fds.empty() && !recorder.attach_cpu_samples(args.perf_fds, &error)) {
    ::unlink(part.c_str());
    return fail(error + ".");
  }

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  cutrace::trace::KeyValues meta = {
      {"host", host},
      {"cutrace.version", CUTRACE_VERSION_STRING},
      {"recorder.pid", std::to_string(getpid())},
      {"launcher.pid", std::to_string(launcher_pid)},
      {"output", args.output},
      {"output.force", args.force ? "true" : "false"},
      {"recorder.compression_level", std::to_string(args.compression_level)},
      {"recorder.compression_threads", std::to_string(args.compression_threads)},
  };
  for (auto& [key, value] : recorder.metadata()) set_meta(meta, key, value);
  for (auto& [key, value] : args.meta) set_meta(meta, key, value);
  if (!writer.write_metadata(meta) || !writer.write_api_table(cutrace::kApiTable, cutrace::kApiTableSize)) {
    ::unlink(part.c_str());
    return fail(writer.error() + ".");
  }

  if (args.ready_fd >= 0 && !write_all(args.ready_fd, "ready\n")) {
    // Whoever was waiting for us is gone: record nothing, leave nothing behind.
    writer.close();
    ::unlink(part.c_str());
    return fail(std::string("cannot report readiness on the ready fd: ") + std::strerror(errno) + ".");
  }

  struct sigaction bus {};
  bus.sa_handler = on_sigbus;
  sigemptyset(&bus.sa_mask);
  sigaction(SIGBUS, &bus, nullptr);
  bool launcher_died = false, terminated = false;
  uint64_t terminate_deadline_ns = 0;
  // Made before sigsetjmp: a SIGBUS jumps back over run(), and anything built inside would be leaked.
  const std::function<bool()> should_stop = [&] {
    if (header->shutdown_requested.load(std::memory_order_acquire) != 0) return true;
    bool news = false;
    // PR_SET_PDEATHSIG only covers a parent that dies after the prctl; getppid() covers the rest.
    if (!launcher_died && getppid() != parent) {
      launcher_died = news = true;
      recorder.set_launcher_died(cutrace::recorder::monotonic_ns());
    }
    if (g_terminate) {
      const uint64_t now = cutrace::recorder::monotonic_ns();
      if (!terminated) {
        terminated = news = true;
        terminate_deadline_ns = now + kSigtermGraceNs;
      }
      if (g_terminate > 1 || now >= terminate_deadline_ns) return true;
    } else if (!launcher_died) {
      return false;
    }
    // One more pass first: it finds the rings claimed since the last one.
    if (news) return false;
    // Nobody is left to ask for shutdown (or the recorder was asked to stop), and the program goes
    // on: its calls are still wanted, until the command and every process that claimed a ring have
    // exited.
    return !command.alive() && !recorder.producers_running();
  };
  if (sigsetjmp(g_session_fault, 1) == 0) {
    g_session_guarded = 1;
    recorder.set_wake_word(&header->recorder_wake);
    recorder.run(should_stop);
    // Also after a failed write: what the rings still hold is counted as not written.
    recorder.final_drain();
    // After the final drain's process check: a program that was exiting anyway lost nothing.
    if (terminated && (recorder.processes_alive() || command.alive()))
      recorder.set_cut_off(std::string(launcher_died ? "the launcher died, and " : "") +
                           "the recorder was sent SIGTERM while traced processes were still running");
    g_session_guarded = 0;
  } else {
    g_session_guarded = 0;
    recorder.abandon_session();
    recorder.set_cut_off("another process shrank the session's shared memory, so nothing more could be read from it");
    std::fprintf(stderr,
                 "cutrace-recorder: the session's shared memory was shrunk by another process; the trace ends "
                 "with what was read before.\n");
  }
  // Nothing is read from the session any more. Its name is normally removed by the launcher, but a
  // launcher killed with SIGKILL never does: remove it here too (a second unlink is harmless), so
  // /dev/shm does not keep the object. Processes still mapping it keep their mapping.
  cutrace::session::unlink_name(args.session);
  if (!writer.good()) return fail_after_write_error(writer, recorder, part, args.output);

  // Flushed first, so that the names chunk directly precedes the end chunk, where readers look.
  writer.flush_events();
  if (!writer.write_names(cutrace::names::encode(recorder.kernel_names())) ||
      !writer.finish(recorder.summary(), recorder.thread_stats()))
    return fail_after_write_error(writer, recorder, part, args.output);
  if (::rename(part.c_str(), args.output.c_str()) != 0)
    return fail("cannot rename " + part + " to " + args.output + ": " + std::strerror(errno) + ".");
  // The launcher removes its claim after reporting; one that is gone leaves that to us, so no lock
  // file stays behind (another run would simply claim it again, but it would be clutter).
  if (getppid() != parent) cutrace::reader::remove_claim_file_if_ours(args.claim_fd, cutrace::reader::claim_path(args.output));

  if (args.ready_fd >= 0) {
    write_all(args.ready_fd, recorder.summary_line(writer.bytes_written()));
    ::close(args.ready_fd);
  }
  return 0;
}
