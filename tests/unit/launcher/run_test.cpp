// Whole runs of `cutrace profile` as a separate process, with the fake recorder standing in for the
// real one and a do-nothing library for the preload.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launcher/outcome.h"
#include "reader/trace_claim.h"
#include "test_util.h"

namespace cutrace::launcher {
namespace {

using namespace testing;

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

class LauncherRun : public ::testing::Test {
 protected:
  // Runs `cutrace profile <args>` in the scratch directory and waits for it.
  int profile(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    Launch l = launch(std::move(args), std::move(env));
    return wait_exit(start(l));
  }

  Launch launch(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    Launch l;
    l.args = {"profile"};
    l.args.insert(l.args.end(), args.begin(), args.end());
    l.env = {{"CUTRACE_RECORDER", FAKE_RECORDER},
             {"CUTRACE_PRELOAD_LIB", PRELOAD_OURS},
             {"FAKE_RECORDER_LOG", dir_ / "recorder.log"}};
    // In sanitizer builds the launcher and the probe are instrumented, and ASan refuses to run behind
    // an LD_PRELOADed library unless told that this order is intended.
    const char* asan = std::getenv("ASAN_OPTIONS");
    l.env.push_back({"ASAN_OPTIONS", std::string(asan ? asan : "") + ":verify_asan_link_order=0"});
    l.env.insert(l.env.end(), env.begin(), env.end());
    l.unset = {"LD_PRELOAD", "CUTRACE_SESSION", "FAKE_RECORDER_MODE", "CUTRACE_RECORDER_START_TIMEOUT",
               "CUTRACE_RECORDER_STOP_TIMEOUT"};
    l.cwd = dir_.path();
    l.stdout_path = dir_ / "stdout";
    l.stderr_path = dir_ / "stderr";
    return l;
  }

  std::string out() const { return read_file(dir_ / "stdout"); }
  std::string err() const { return read_file(dir_ / "stderr"); }
  // stderr without the "cutrace: collecting data into ..." line every run starts with (unless -q).
  std::string run_err() const {
    std::string text = err();
    const std::string start = "cutrace: collecting data into ";
    const size_t at = text.find(start);
    if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return text;
    const size_t end = text.find('\n', at);
    return text.erase(at, end == std::string::npos ? std::string::npos : end - at + 1);
  }
  std::string recorder_log() const { return read_file(dir_ / "recorder.log"); }
  bool recorder_ran() const { return exists(dir_ / "recorder.log"); }

  // Neither a partial file nor a claim is left in the scratch directory (or `sub`).
  void expect_no_partial_or_claim(const std::string& sub = "") const {
    for (const std::string& name : list_dir(sub.empty() ? dir_.path() : dir_ / sub)) {
      EXPECT_FALSE(name.ends_with(".part")) << name;
      EXPECT_FALSE(name.ends_with(".lock")) << name;
    }
  }

  // The run left no shared memory behind.
  void expect_session_removed() {
    const std::string session = value_of(recorder_log(), "session");
    ASSERT_EQ(session.rfind("/cutrace-", 0), 0u) << recorder_log();
    EXPECT_FALSE(exists("/dev/shm" + session)) << session;
  }

  ScratchDir dir_;
};

TEST_F(LauncherRun, ExitCodeAndOutputOfTheProgramPassThrough) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "echo out; echo err >&2; exit 3"}), 3);
  EXPECT_EQ(out(), "out\n");
  // The line nsys's "Collecting data..." stands for comes before anything the program prints.
  EXPECT_EQ(err().rfind("cutrace: collecting data into " + dir_ / "run.cutrace\n", 0), 0u) << err();
  auto lines = lines_of(run_err());
  ASSERT_EQ(lines.size(), 2u) << err();
  EXPECT_EQ(lines[0], "err");
  // The fake recorder reports 42 events, 1 process, 2 threads.
  EXPECT_EQ(lines[1].rfind("cutrace: 42 events, 1 process, 2 threads, 0 dropped -> " + dir_ / "run.cutrace (", 0), 0u)
      << lines[1];
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  expect_no_partial_or_claim();
  EXPECT_EQ(value_of(recorder_log(), "finished_by"), "shutdown");
  expect_session_removed();
}

// -q leaves out the start and summary lines, never a warning.
TEST_F(LauncherRun, QuietLeavesOnlyWarnings) {
  EXPECT_EQ(profile({"-q", "-o", "run", "sh", "-c", "echo err >&2; exit 3"}), 3);
  EXPECT_EQ(err(), "err\n");
  EXPECT_EQ(profile({"--quiet", "-o", "run2", "true"}, {{"FAKE_RECORDER_MODE", "warn"}}), 0);
  EXPECT_EQ(err(), "cutrace: warning: process 4242 (./gemm): libcublas.so.13 was loaded but none of its calls was "
                   "recorded.\n");
}

// The recorder's warnings reach the user after the summary line, and change nothing else.
TEST_F(LauncherRun, RecorderWarningsArePrintedAndTheExitCodeStaysTheProgramsOwn) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "echo err >&2; exit 4"}, {{"FAKE_RECORDER_MODE", "warn"}}), 4);
  auto lines = lines_of(run_err());
  ASSERT_EQ(lines.size(), 3u) << err();
  EXPECT_EQ(lines[0], "err");
  EXPECT_EQ(lines[1].rfind("cutrace: 42 events, 1 process, 2 threads", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2],
            "cutrace: warning: process 4242 (./gemm): libcublas.so.13 was loaded but none of its calls was recorded.");
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
}

TEST_F(LauncherRun, ProgramKilledBySignalGives128PlusN) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "kill -TERM $$"}), 128 + SIGTERM);
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  EXPECT_EQ(profile({"-f", "true", "-o", "run", "sh", "-c", "kill -KILL $$"}), 128 + SIGKILL);
}

TEST_F(LauncherRun, ShowOutputFalseKeepsTheProgramsOutputInFilesBesideTheTrace) {
  EXPECT_EQ(profile({"-w", "false", "-o", "run", "sh", "-c", "echo out; echo err >&2; printf 'no newline'"}), 0);
  EXPECT_EQ(out(), "");
  auto lines = lines_of(run_err());
  ASSERT_EQ(lines.size(), 1u) << err();
  EXPECT_EQ(lines[0].rfind("cutrace: ", 0), 0u);
  const std::string base = std::filesystem::weakly_canonical(dir_ / "run").string();
  EXPECT_NE(lines[0].find("; program output -> " + base + ".stdout, " + base + ".stderr"), std::string::npos)
      << lines[0];
  EXPECT_EQ(read_file(dir_ / "run.stdout"), "out\nno newline");
  EXPECT_EQ(read_file(dir_ / "run.stderr"), "err\n");

  // Output files of an earlier run are refused like the trace itself, before the program starts...
  std::filesystem::remove(dir_ / "run.cutrace");
  EXPECT_NE(profile({"-w", "false", "-o", "run", "sh", "-c", "touch ran"}), 0);
  EXPECT_NE(err().find("run.stdout exists (the output of an earlier run); pass -f true to overwrite it"),
            std::string::npos) << err();
  EXPECT_FALSE(exists(dir_ / "ran"));
  // ... and replaced with -f true.
  EXPECT_EQ(profile({"-f", "true", "-w", "false", "-o", "run", "sh", "-c", "echo again"}), 0);
  EXPECT_EQ(read_file(dir_ / "run.stdout"), "again\n");
  EXPECT_EQ(read_file(dir_ / "run.stderr"), "");
}

TEST_F(LauncherRun, ShowOutputFalseDoesNotWaitForAProcessLeftHoldingTheOutput) {
  // The background process keeps stdout open long after the program exited; with --wait primary the
  // launcher copies what is there, finishes without it, and says that it was cut off.
  EXPECT_EQ(profile({"--wait", "primary", "-w", "false", "-o", "run", "sh", "-c",
                     "echo first; (sleep 3; echo late) & exit 0"}),
            0);
  EXPECT_EQ(read_file(dir_ / "run.stdout"), "first\n");
  // The subshell, and its sleep once it has started it: the count reaches the recorder, which words
  // the warning.
  const bool counted = err().find("cutrace: warning: processes_cut_off=1.\n") != std::string::npos ||
                       err().find("cutrace: warning: processes_cut_off=2.\n") != std::string::npos;
  EXPECT_TRUE(counted) << err();
}

// nsys's default, --wait all: recording goes on until the processes the command left running, also
// orphaned ones, have exited.
TEST_F(LauncherRun, WaitAllIsTheDefaultAndCoversOrphans) {
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(profile({"-w", "false", "-o", "run", "sh", "-c", "echo first; (sleep 0.5; echo late) & exit 7"}), 7);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
  EXPECT_EQ(read_file(dir_ / "run.stdout"), "first\nlate\n");
  EXPECT_EQ(err().find("warning"), std::string::npos) << err();
  EXPECT_EQ(profile({"--wait", "all", "-o", "run2", "sh", "-c", "(sleep 0.2; touch late) & exit 0"}), 0);
  EXPECT_TRUE(exists(dir_ / "late"));
}

TEST_F(LauncherRun, CommandNotFoundStartsNothing) {
  EXPECT_EQ(profile({"-o", "run", "cutrace-no-such-command"}), 127);
  EXPECT_EQ(err(), "cutrace profile: command 'cutrace-no-such-command' not found; check its spelling or PATH.\n");
  EXPECT_FALSE(recorder_ran());
  EXPECT_EQ(list_dir(dir_.path()), (std::vector<std::string>{"stderr", "stdout"}));
}

TEST_F(LauncherRun, NotExecutableIs126) {
  write_file(dir_ / "data", "x", 0644);
  EXPECT_EQ(profile({"./data"}), 126);
  EXPECT_FALSE(recorder_ran());
}

TEST_F(LauncherRun, ExistingOutputIsNotOverwrittenWithoutForce) {
  write_file(dir_ / "run.cutrace", "old");
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "touch ran"}), 1);
  EXPECT_EQ(err(), "cutrace profile: " + dir_ / "run.cutrace" +
                       " already exists; pass -f true to overwrite it or choose another name with -o.\n");
  EXPECT_EQ(read_file(dir_ / "run.cutrace"), "old");
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(recorder_ran());
}

TEST_F(LauncherRun, ForceOverwrites) {
  write_file(dir_ / "run.cutrace", "old");
  EXPECT_EQ(profile({"-f", "true", "-o", "run.cutrace", "true"}), 0);
  EXPECT_NE(read_file(dir_ / "run.cutrace"), "old");
  EXPECT_EQ(value_of(recorder_log(), "force"), "1");
}

// The recorder writes its own partial file and holds the claim with the launcher.
TEST_F(LauncherRun, RecorderGetsAPartialFileOfItsOwnAndTheClaim) {
  EXPECT_EQ(profile({"-o", "run", "true"}), 0);
  const std::string log = recorder_log();
  const std::string part = value_of(log, "part");
  EXPECT_EQ(part.rfind(dir_ / "run.cutrace.", 0), 0u) << log;
  EXPECT_TRUE(part.ends_with(".part")) << log;
  EXPECT_EQ(part.size(), (dir_ / "run.cutrace.XXXXXX.part").size()) << log;
  EXPECT_EQ(value_of(log, "claim_fd"), "4");
  EXPECT_EQ(value_of(log, "claim_held"), "1");
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  expect_no_partial_or_claim();
}

// Another live run holds the name: refused before the program starts, with or without -f, and the
// holder's files are untouched.
TEST_F(LauncherRun, NameAnotherRunIsWritingIsRefusedBeforeAnythingStarts) {
  reader::TraceClaim other;
  ASSERT_EQ(other.acquire(dir_ / "run.cutrace"), reader::TraceClaim::Result::kClaimed) << other.error();
  for (const char* force : {"false", "true"}) {
    EXPECT_EQ(profile({"-f", force, "-o", "run", "sh", "-c", "touch ran"}), 1);
    EXPECT_EQ(err(), "cutrace profile: " + dir_ / "run.cutrace" + " is being written by cutrace run " +
                         std::to_string(getpid()) + " on host " + host_name() +
                         "; wait for that run to end, or give each run its own name with -o (for example -o "
                         "run%p, or -o rank%q{SLURM_PROCID}).\n");
    EXPECT_FALSE(exists(dir_ / "ran"));
    EXPECT_FALSE(recorder_ran());
  }
  EXPECT_TRUE(exists(dir_ / "run.cutrace.lock"));
  other.release();
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "touch ran"}), 0);
  EXPECT_TRUE(exists(dir_ / "ran"));
  expect_no_partial_or_claim();
}

// The default name skips a number another run has claimed but not yet written.
TEST_F(LauncherRun, DefaultNameSkipsClaimedNumbers) {
  reader::TraceClaim other;
  ASSERT_EQ(other.acquire(dir_ / "report1.cutrace"), reader::TraceClaim::Result::kClaimed) << other.error();
  EXPECT_EQ(profile({"true"}), 0);
  EXPECT_EQ(value_of(recorder_log(), "output"), dir_ / "report2.cutrace");
  EXPECT_TRUE(exists(dir_ / "report2.cutrace"));
  EXPECT_FALSE(exists(dir_ / "report1.cutrace"));
}

// A lock file whose run is gone (killed with SIGKILL) claims nothing.
TEST_F(LauncherRun, LockFileOfAFinishedRunIsNoClaim) {
  write_file(dir_ / "run.cutrace.lock", "cutrace run 1 on host gone\n");
  EXPECT_EQ(profile({"-o", "run", "true"}), 0);
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  expect_no_partial_or_claim();
}

TEST_F(LauncherRun, UnwritableDirectoryStartsNothing) {
  EXPECT_EQ(profile({"-o", "/proc/cutrace-launcher-test", "sh", "-c", "touch ran"}), 1);
  EXPECT_EQ(err().rfind("cutrace profile: cannot write /proc/cutrace-launcher-test.cutrace.lock (", 0), 0u) << err();
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(recorder_ran());
}

TEST_F(LauncherRun, UsageErrorsExitTwo) {
  EXPECT_EQ(profile({"--cuda-um-cpu-page-faults=true", "true"}), 2);
  EXPECT_EQ(err(), "cutrace profile: option '--cuda-um-cpu-page-faults' is not supported yet; remove it to profile "
                   "without it, or pass --cuda-um-cpu-page-faults=false.\n");
  EXPECT_EQ(profile({"--foo", "true"}), 2);
  EXPECT_EQ(err(), "cutrace profile: unknown option '--foo'; run `cutrace profile --help`.\n");
  EXPECT_FALSE(recorder_ran());
}

TEST_F(LauncherRun, HelpGoesToStdout) {
  EXPECT_EQ(profile({"--help"}), 0);
  EXPECT_EQ(out().rfind("usage: cutrace profile", 0), 0u);
  EXPECT_EQ(err(), "");
}

TEST_F(LauncherRun, OutputNameExpansionUsesTheProgramsPid) {
  EXPECT_EQ(profile({"-o", "out/job%q{JOB}/rank%p", "sh", "-c", "echo $$ > pid"}, {{"JOB", "77"}}), 0);
  const std::string pid = lines_of(read_file(dir_ / "pid")).at(0);
  EXPECT_TRUE(exists(dir_ / "out/job77/rank" + pid + ".cutrace")) << pid;
  EXPECT_EQ(value_of(recorder_log(), "output"), dir_ / "out/job77/rank" + pid + ".cutrace");
  // The recorder is told the same pid: should the launcher die, it waits for that process.
  EXPECT_EQ(value_of(recorder_log(), "command_pid"), pid);
}

TEST_F(LauncherRun, UnsetVariableInOutputNameStartsNothing) {
  EXPECT_EQ(profile({"-o", "job%q{CUTRACE_TEST_NOT_SET}", "sh", "-c", "touch ran"}), 1);
  EXPECT_NE(err().find("CUTRACE_TEST_NOT_SET is not set"), std::string::npos) << err();
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(recorder_ran());
}

TEST_F(LauncherRun, DefaultNamesCountUp) {
  EXPECT_EQ(profile({"true"}), 0);
  EXPECT_EQ(profile({"true"}), 0);
  EXPECT_TRUE(exists(dir_ / "report1.cutrace"));
  EXPECT_TRUE(exists(dir_ / "report2.cutrace"));
}

// After the user's own preloads, so that the shim's RTLD_NEXT reaches the CUDA libraries themselves.
TEST_F(LauncherRun, PreloadIsAppendedForTheProgramOnly) {
  const std::string script =
      "printf %s \"$LD_PRELOAD\" > preload; printf %s \"$CUTRACE_SESSION\" > session; "
      "grep -c launcher_test_preload /proc/$$/maps > mapped";
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", script}, {{"LD_PRELOAD", PRELOAD_USERS}}), 0);
  // CUDA 12's wrappers, where the build has them, come just before the shim.
  const auto cuda12 = std::filesystem::path(PRELOAD_OURS).parent_path() / "libcutrace-cuda12.so";
  const std::string ours = CUTRACE_WITH_CUDA12 ? cuda12.string() + ":" + PRELOAD_OURS : PRELOAD_OURS;
  EXPECT_EQ(read_file(dir_ / "preload"), std::string(PRELOAD_USERS) + ":" + ours);
  EXPECT_EQ(read_file(dir_ / "session"), value_of(recorder_log(), "session"));
  EXPECT_GE(std::stoi(read_file(dir_ / "mapped")), 2);  // both libraries are in the program
  // The recorder keeps the user's environment as it was.
  EXPECT_EQ(value_of(recorder_log(), "ld_preload"), PRELOAD_USERS);
}

TEST_F(LauncherRun, RunInsideAnotherTracedProgramGetsItsOwnSession) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "printf %s \"$CUTRACE_SESSION\" > session"},
                    {{"CUTRACE_SESSION", "/cutrace-outer"}}),
            0);
  EXPECT_EQ(read_file(dir_ / "session"), value_of(recorder_log(), "session"));
  EXPECT_NE(read_file(dir_ / "session"), "/cutrace-outer");
  EXPECT_EQ(value_of(recorder_log(), "cutrace_session"), "(unset)");
}

// A process that changes user may not open the session by name: it maps the descriptor it inherited,
// which the variable names together with the object's device and inode.
TEST_F(LauncherRun, TheProgramInheritsTheSessionsDescriptor) {
  const std::string script =
      "printf %s \"$CUTRACE_SESSION_FD\" > fd_entry; fd=${CUTRACE_SESSION_FD%%:*}; "
      "stat -L -c %d:%i /proc/$$/fd/$fd | tr -d '\\n' > by_fd; stat -c %d:%i \"/dev/shm$CUTRACE_SESSION\" | tr -d '\\n' > by_name";
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", script}, {{"CUTRACE_SESSION_FD", "7:1:2"}}), 0);
  const std::string entry = read_file(dir_ / "fd_entry"), by_name = read_file(dir_ / "by_name");
  ASSERT_NE(entry.find(':'), std::string::npos) << entry;
  // Clear of the numbers programs name themselves, and the outer run's value replaced.
  EXPECT_GE(std::stoi(entry.substr(0, entry.find(':'))), 100);
  EXPECT_EQ(entry.substr(entry.find(':') + 1), by_name);
  EXPECT_EQ(read_file(dir_ / "by_fd"), by_name);
  EXPECT_EQ(value_of(recorder_log(), "cutrace_session"), "(unset)");
}

TEST_F(LauncherRun, RecorderContract) {
  EXPECT_EQ(profile({"-o", "run", "-w", "true", "sh", "-c", "exit 0", "it's"}), 0);
  const std::string log = recorder_log();
  EXPECT_EQ(value_of(log, "output"), dir_ / "run.cutrace");
  EXPECT_EQ(value_of(log, "ready_fd"), "3");
  EXPECT_EQ(value_of(log, "force"), "0");
  EXPECT_EQ(value_of(log, "meta command"), "sh -c 'exit 0' 'it'\\''s'");
  EXPECT_EQ(value_of(log, "meta options"), "-o run -w true");
  EXPECT_EQ(value_of(log, "meta cwd"), dir_.path());
  EXPECT_FALSE(value_of(log, "meta host").empty());
  EXPECT_EQ(value_of(log, "own_group"), "1");
  EXPECT_EQ(value_of(log, "fds"), "0,1,2,3,4");  // nothing of the launcher's but the ready pipe and the claim
  EXPECT_EQ(value_of(log, "stdin"), "/dev/null");
  EXPECT_EQ(value_of(log, "stdout"), "/dev/null");
}

TEST_F(LauncherRun, ProgramWaitsForTheRecorder) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "touch started"},
                    {{"FAKE_RECORDER_MODE", "hold-check"}, {"FAKE_RECORDER_MARKER", dir_ / "started"}}),
            0);
  EXPECT_EQ(value_of(recorder_log(), "program_started_before_ready"), "0");
  EXPECT_TRUE(exists(dir_ / "started"));
}

TEST_F(LauncherRun, NoDescriptorLeaksIntoTheProgram) {
  // The same shell, run directly and under cutrace, sees the same descriptors, but for the one that
  // CUTRACE_SESSION_FD names: the session's, for processes that change user.
  const std::string script = "ls /proc/$$/fd";
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", script + "; echo ${CUTRACE_SESSION_FD%%:*}"}), 0);
  std::string under_cutrace = out();
  const size_t last_line = under_cutrace.rfind('\n', under_cutrace.size() - 2) + 1;
  const std::string session_fd = under_cutrace.substr(last_line);
  under_cutrace.resize(last_line);
  ASSERT_GE(std::stoi(session_fd), 100) << out();
  const size_t listed = under_cutrace.find("\n" + session_fd);
  ASSERT_NE(listed, std::string::npos) << out();
  under_cutrace.erase(listed + 1, session_fd.size());
  pid_t pid = fork();
  if (pid == 0) {
    int o = open((dir_ / "direct").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = open("/dev/null", O_RDWR);
    dup2(n, 0);
    dup2(o, 1);
    dup2(n, 2);
    close_range(3, ~0U, 0);
    execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_EQ(under_cutrace, read_file(dir_ / "direct"));
  EXPECT_EQ(under_cutrace, "0\n1\n2\n");
}

TEST_F(LauncherRun, RecorderThatCannotStartStopsTheLaunch) {
  EXPECT_EQ(profile({"-o", "sub/run", "sh", "-c", "touch ran"}, {{"FAKE_RECORDER_MODE", "fail"}}), 1);
  EXPECT_NE(err().find("fake recorder: refusing to start as asked\n"), std::string::npos) << err();
  EXPECT_NE(err().find("cutrace profile: the recorder " + std::string(FAKE_RECORDER) +
                       " exited with code 3 before it was ready; see its messages above, if any.\n"),
            std::string::npos)
      << err();
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(exists(dir_ / "sub"));  // the directory made for the trace is gone again
  expect_session_removed();

  // With -w false the files for the program's output are gone too, and with them the directory.
  EXPECT_EQ(profile({"-w", "false", "-o", "sub/run", "sh", "-c", "touch ran"}, {{"FAKE_RECORDER_MODE", "fail"}}), 1);
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(exists(dir_ / "sub"));
  expect_session_removed();
}

TEST_F(LauncherRun, RecorderThatNeverGetsReadyTimesOut) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "touch ran"},
                    {{"FAKE_RECORDER_MODE", "silent"}, {"CUTRACE_RECORDER_START_TIMEOUT", "0.3"}}),
            1);
  EXPECT_NE(err().find("did not become ready within 300 ms"), std::string::npos) << err();
  EXPECT_FALSE(exists(dir_ / "ran"));
  EXPECT_FALSE(exists(dir_ / "run.cutrace"));
  expect_no_partial_or_claim();
  expect_session_removed();
}

TEST_F(LauncherRun, RecorderCrashLeavesTheProgramAloneAndTheTraceSalvaged) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "sleep 0.2; echo still-here; exit 5"}, {{"FAKE_RECORDER_MODE", "crash"}}),
            5);
  EXPECT_EQ(out(), "still-here\n");
  EXPECT_EQ(run_err(), "cutrace: warning: the recorder was killed by signal 9 (SIGKILL); " + dir_ / "run.cutrace (" +
                       human_size(std::filesystem::file_size(dir_ / "run.cutrace")) +
                       ") holds what it wrote before.\n");
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  expect_no_partial_or_claim();
  expect_session_removed();
}

TEST_F(LauncherRun, RecorderThatIgnoresShutdownIsStopped) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "exit 4"},
                    {{"FAKE_RECORDER_MODE", "term-only"}, {"CUTRACE_RECORDER_STOP_TIMEOUT", "0.2"}}),
            4);
  EXPECT_EQ(value_of(recorder_log(), "finished_by"), "sigterm");
  auto lines = lines_of(run_err());
  ASSERT_EQ(lines.size(), 2u) << err();
  EXPECT_EQ(lines[0],
            "cutrace: warning: the recorder had not finished 0.2 s after the program ended and was sent SIGTERM; "
            "raise CUTRACE_RECORDER_STOP_TIMEOUT if large traces need longer.");
  EXPECT_EQ(lines[1].rfind("cutrace: 42 events", 0), 0u) << lines[1];
}

TEST_F(LauncherRun, RecorderThatIgnoresSigtermIsKilled) {
  EXPECT_EQ(profile({"-o", "run", "sh", "-c", "exit 6"},
                    {{"FAKE_RECORDER_MODE", "stubborn"}, {"CUTRACE_RECORDER_STOP_TIMEOUT", "0.2"}}),
            6);
  EXPECT_NE(err().find("was sent SIGTERM, then SIGKILL"), std::string::npos) << err();
  EXPECT_NE(err().find("the recorder was killed by signal 9 (SIGKILL); " + dir_ / "run.cutrace ("), std::string::npos)
      << err();
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
  expect_session_removed();
}

TEST_F(LauncherRun, SignalAfterTheProgramEndedHurriesTheRecorder) {
  // With the default stop timeout of minutes, only the signal can make this run end in time.
  Launch l = launch({"-o", "run", "sh", "-c", "exit 7"},
                    {{"FAKE_RECORDER_MODE", "term-only"}, {"FAKE_RECORDER_SHUTDOWN_SEEN", dir_ / "shutdown-seen"}});
  pid_t launcher = start(l);
  ASSERT_TRUE(wait_for_file(dir_ / "shutdown-seen"));
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  EXPECT_EQ(wait_exit(launcher), 7);
  EXPECT_EQ(value_of(recorder_log(), "finished_by"), "sigterm");
  auto lines = lines_of(run_err());
  ASSERT_EQ(lines.size(), 1u) << err();  // finishing early on request is no failure: no warning
  EXPECT_EQ(lines[0].rfind("cutrace: 42 events", 0), 0u) << lines[0];
}

TEST_F(LauncherRun, StatsPrintTheDefaultReportsAfterTheRun) {
  EXPECT_EQ(profile({"--stats", "true", "-o", "run", "sh", "-c", "echo program; exit 2"}), 2);
  EXPECT_EQ(out(), "program\n");
  // The fake recorder records no call: the report says so, as nsys does, instead of an empty table.
  EXPECT_NE(err().find("SKIPPED: " + dir_ / "run.cutrace" + " does not contain CUDA trace data.\n"), std::string::npos)
      << err();
}

class LauncherForwardedSignal : public LauncherRun, public ::testing::WithParamInterface<int> {};

TEST_P(LauncherForwardedSignal, SignalSentToTheLauncherReachesTheProgramOnce) {
  const int sig = GetParam();
  Launch l = launch({"-o", "run", SIGNAL_PROBE, dir_ / "ready", dir_ / "signals"});
  pid_t launcher = start(l);
  ASSERT_TRUE(wait_for_file(dir_ / "ready"));
  ASSERT_EQ(kill(launcher, sig), 0);
  EXPECT_EQ(wait_exit(launcher), 0);  // the launcher survives and returns the probe's exit code
  EXPECT_EQ(read_file(dir_ / "signals"), "sig=" + std::to_string(sig) + " code=" + std::to_string(SI_USER) +
                                             " pid=" + std::to_string(launcher) + "\n");
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
}

INSTANTIATE_TEST_SUITE_P(Signals, LauncherForwardedSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

TEST_F(LauncherRun, TerminalInterruptIsNotForwardedAgain) {
  // Ctrl+C on the launcher's terminal reaches the program straight from the kernel, because both are in
  // the terminal's foreground process group; a second copy from the launcher would be a bug.
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  Launch l = launch({"-o", "run", SIGNAL_PROBE, dir_ / "ready", dir_ / "signals"});
  l.tty = ptsname(master);
  pid_t launcher = start(l);
  ASSERT_TRUE(wait_for_file(dir_ / "ready"));
  const char ctrl_c = 3;
  ASSERT_EQ(write(master, &ctrl_c, 1), 1);
  EXPECT_EQ(wait_exit(launcher), 0);
  close(master);
  EXPECT_EQ(read_file(dir_ / "signals"),
            "sig=" + std::to_string(SIGINT) + " code=" + std::to_string(SI_KERNEL) + " pid=0\n");
  EXPECT_TRUE(exists(dir_ / "run.cutrace"));
}

}  // namespace
}  // namespace cutrace::launcher
