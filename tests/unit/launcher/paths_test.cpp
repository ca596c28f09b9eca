// Output names, finding programs and helper files, the program's environment, and the summary line.
#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "launcher/environment.h"
#include "launcher/locate.h"
#include "launcher/outcome.h"
#include "launcher/output_path.h"
#include "launcher/recorder_process.h"
#include "test_util.h"

namespace cutrace::launcher {
namespace {

using testing::exists;
using testing::list_dir;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;

std::string hostname() {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string expand(const std::string& pattern, pid_t pid = 4321) {
  std::string out;
  UsageError error;
  EXPECT_TRUE(expand_output_pattern(pattern, pid, &out, &error)) << error.message;
  return out;
}

UsageError expand_error(const std::string& pattern) {
  std::string out;
  UsageError error;
  EXPECT_FALSE(expand_output_pattern(pattern, 1, &out, &error)) << pattern << " gave " << out;
  return error;
}

TEST(LauncherOutputName, Expansion) {
  setenv("CUTRACE_TEST_JOB", "77", 1);
  setenv("CUTRACE_TEST_RANK", "3", 1);
  EXPECT_EQ(expand("plain"), "plain");
  EXPECT_EQ(expand("100%%"), "100%");
  EXPECT_EQ(expand("run-%p", 4321), "run-4321");
  EXPECT_EQ(expand("on-%h"), "on-" + hostname());
  EXPECT_EQ(expand("/out/job%q{CUTRACE_TEST_JOB}/rank%q{CUTRACE_TEST_RANK}"), "/out/job77/rank3");
  EXPECT_EQ(expand("%q{CUTRACE_TEST_JOB}%%%p%h", 9), "77%9" + hostname());
  unsetenv("CUTRACE_TEST_JOB");
  unsetenv("CUTRACE_TEST_RANK");
}

TEST(LauncherOutputName, ExpansionErrors) {
  unsetenv("CUTRACE_TEST_UNSET");
  UsageError e = expand_error("job%q{CUTRACE_TEST_UNSET}");
  EXPECT_EQ(e.message,
            "cutrace profile: -o uses %q{CUTRACE_TEST_UNSET} but the environment variable CUTRACE_TEST_UNSET is not "
            "set; set it "
            "or change -o.");
  EXPECT_EQ(e.exit_code, kExitSetupFailed);
  EXPECT_EQ(expand_error("run%").message, "cutrace profile: -o ends with a lone %; write %% for a literal %.");
  EXPECT_EQ(expand_error("run%z").message,
            "cutrace profile: -o contains %z, which cutrace does not know; use %q{VAR}, %h, %p or %%.");
  EXPECT_EQ(expand_error("run%qX").message, "cutrace profile: -o has %q without a variable name; write %q{VAR}.");
  EXPECT_EQ(expand_error("run%q{}").message, "cutrace profile: -o has %q without a variable name; write %q{VAR}.");
  EXPECT_EQ(expand_error("run%q{OPEN").exit_code, kExitUsage);
}

TEST(LauncherOutputName, ExtensionAppendedOnce) {
  EXPECT_EQ(with_trace_extension("run1"), "run1.cutrace");
  EXPECT_EQ(with_trace_extension("run1.cutrace"), "run1.cutrace");
  EXPECT_EQ(with_trace_extension("run1.nsys-rep"), "run1.nsys-rep.cutrace");
}

TEST(LauncherOutputName, FirstFreeReportNumber) {
  ScratchDir dir;
  EXPECT_EQ(first_free_report_name(dir.path()), dir / "report1.cutrace");
  write_file(dir / "report1.cutrace", "x");
  EXPECT_EQ(first_free_report_name(dir.path()), dir / "report2.cutrace");
  write_file(dir / "report2.cutrace.part", "x");  // a run still writing report2
  EXPECT_EQ(first_free_report_name(dir.path()), dir / "report3.cutrace");
  EXPECT_EQ(first_free_report_name(dir.path() + "/"), dir / "report3.cutrace");
}

TEST(LauncherOutputName, MakeDirectories) {
  ScratchDir dir;
  std::vector<std::string> created;
  std::string error;
  ASSERT_TRUE(make_directories(dir / "a/b/c", &created, &error)) << error;
  EXPECT_EQ(created, (std::vector<std::string>{dir / "a", dir / "a/b", dir / "a/b/c"}));
  created.clear();
  ASSERT_TRUE(make_directories(dir / "a/b/c", &created, &error)) << error;
  EXPECT_TRUE(created.empty());

  write_file(dir / "file", "x");
  EXPECT_FALSE(make_directories(dir / "file/sub", &created, &error));
  EXPECT_EQ(error, dir / "file" + " is not a directory");
}

TEST(LauncherOutputName, PrepareCreatesDirectoriesClaimsTheNameAndMakesAPartialFile) {
  ScratchDir dir;
  setenv("CUTRACE_TEST_JOB", "12", 1);
  OutputTarget target;
  UsageError error;
  ASSERT_TRUE(prepare_output(dir / "out/job%q{CUTRACE_TEST_JOB}/rank%p", false, 555, &target, &error)) << error.message;
  unsetenv("CUTRACE_TEST_JOB");
  EXPECT_EQ(target.path, dir / "out/job12/rank555.cutrace");
  EXPECT_EQ(target.part.rfind(dir / "out/job12/rank555.cutrace.", 0), 0u) << target.part;
  EXPECT_TRUE(target.part.ends_with(".part")) << target.part;
  EXPECT_EQ(read_file(target.part), "");
  EXPECT_EQ(target.created_dirs, (std::vector<std::string>{dir / "out", dir / "out/job12"}));
  EXPECT_TRUE(target.claim.held());
  EXPECT_TRUE(reader::claim_is_held(target.path));
  EXPECT_FALSE(exists(target.path));
  // Two runs never share a partial file.
  OutputTarget second;
  ASSERT_TRUE(prepare_output(dir / "out/other", false, 1, &second, &error)) << error.message;
  EXPECT_NE(second.part, target.part);
  abandon_output(&second);
  abandon_output(&target);
  EXPECT_FALSE(reader::claim_is_held(target.path));
  EXPECT_FALSE(exists(dir / "out"));
}

TEST(LauncherOutputName, ClaimedNameIsRefusedEvenWithForce) {
  ScratchDir dir;
  OutputTarget first, second;
  UsageError error;
  ASSERT_TRUE(prepare_output(dir / "run", false, 1, &first, &error)) << error.message;
  for (bool force : {false, true}) {
    ASSERT_FALSE(prepare_output(dir / "run", force, 2, &second, &error));
    EXPECT_EQ(error.exit_code, kExitSetupFailed);
    EXPECT_NE(error.message.find(dir / "run.cutrace is being written by cutrace run " + std::to_string(getpid())),
              std::string::npos)
        << error.message;
  }
  // The default name goes past it.
  char old_cwd[PATH_MAX];
  ASSERT_NE(getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  OutputTarget report1, report2;
  const bool ok1 = prepare_output("", false, 1, &report1, &error);
  const bool ok2 = prepare_output("", false, 1, &report2, &error);
  ASSERT_EQ(chdir(old_cwd), 0);
  ASSERT_TRUE(ok1 && ok2) << error.message;
  EXPECT_EQ(report1.path, dir / "report1.cutrace");
  EXPECT_EQ(report2.path, dir / "report2.cutrace");
  abandon_output(&report1);
  abandon_output(&report2);
  abandon_output(&first);
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(LauncherOutputName, RelativeNamesAndDirectories) {
  ScratchDir dir;
  char old_cwd[PATH_MAX];
  ASSERT_NE(getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  OutputTarget target;
  UsageError error;
  const bool relative_ok = prepare_output("sub/../run", false, 1, &target, &error);
  const std::string relative_path = target.path;
  abandon_output(&target);
  const bool default_ok = prepare_output("", false, 1, &target, &error);
  const std::string default_path = target.path;
  abandon_output(&target);
  const bool dir_ok = prepare_output("traces/", false, 1, &target, &error);
  const std::string dir_path = target.path;
  abandon_output(&target);
  ASSERT_EQ(chdir(old_cwd), 0);

  ASSERT_TRUE(relative_ok && default_ok && dir_ok) << error.message;
  EXPECT_EQ(relative_path, dir / "run.cutrace");
  EXPECT_EQ(default_path, dir / "report1.cutrace");
  EXPECT_EQ(dir_path, dir / "traces/report1.cutrace");
}

TEST(LauncherOutputName, ExistingTraceNeedsForce) {
  ScratchDir dir;
  write_file(dir / "run.cutrace", "old");
  OutputTarget target;
  UsageError error;
  ASSERT_FALSE(prepare_output(dir / "run", false, 1, &target, &error));
  EXPECT_EQ(error.exit_code, kExitSetupFailed);
  EXPECT_EQ(error.message, "cutrace profile: " + dir / "run.cutrace" +
                               " already exists; pass -f true to overwrite it or choose another name with -o.");
  EXPECT_EQ(read_file(dir / "run.cutrace"), "old");
  EXPECT_FALSE(exists(dir / "run.cutrace.lock"));  // a refused run leaves no claim

  ASSERT_TRUE(prepare_output(dir / "run.cutrace", true, 1, &target, &error)) << error.message;
  EXPECT_EQ(read_file(dir / "run.cutrace"), "old");  // overwriting is the recorder's job, at the end
  abandon_output(&target);
}

// The partial file of a run that was cut off holds that run's data: a new run writes its own.
TEST(LauncherOutputName, LeftoverPartialFileIsLeftAlone) {
  ScratchDir dir;
  write_file(dir / "run.cutrace.part", "someone's");
  OutputTarget target;
  UsageError error;
  ASSERT_TRUE(prepare_output(dir / "run", false, 1, &target, &error)) << error.message;
  EXPECT_NE(target.part, dir / "run.cutrace.part");
  abandon_output(&target);
  EXPECT_EQ(read_file(dir / "run.cutrace.part"), "someone's");
}

TEST(LauncherOutputName, DirectoryInTheWay) {
  ScratchDir dir;
  ASSERT_EQ(mkdir((dir / "run.cutrace").c_str(), 0755), 0);
  OutputTarget target;
  UsageError error;
  ASSERT_FALSE(prepare_output(dir / "run", true, 1, &target, &error));
  EXPECT_EQ(error.message, "cutrace profile: " + dir / "run.cutrace" + " is a directory; choose another name with -o.");
}

TEST(LauncherOutputName, UnwritableDirectoryIsRefused) {
  // /proc refuses new files for every user, root included, unlike a chmod'ed directory.
  OutputTarget target;
  UsageError error;
  ASSERT_FALSE(prepare_output("/proc/cutrace-launcher-test", false, 1, &target, &error));
  EXPECT_EQ(error.exit_code, kExitSetupFailed);
  EXPECT_EQ(error.message.rfind("cutrace profile: cannot write /proc/cutrace-launcher-test.cutrace.lock (", 0), 0)
      << error.message;

  ASSERT_FALSE(prepare_output("/proc/cutrace-launcher-test/sub/run", false, 1, &target, &error));
  EXPECT_EQ(error.message.rfind("cutrace profile: cannot create directory /proc/cutrace-launcher-test: ", 0), 0)
      << error.message;
}

TEST(LauncherOutputName, FailureRemovesTheDirectoriesItMade) {
  ScratchDir dir;
  OutputTarget target;
  UsageError error;
  // A file name the file system rejects fails only when the claim is created, after mkdir.
  ASSERT_FALSE(prepare_output(dir / "new/deeper/" + std::string(300, 'x'), false, 1, &target, &error));
  EXPECT_NE(error.message.find("File name too long"), std::string::npos) << error.message;
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(LauncherLocate, CommandSearchFollowsExecvp) {
  ScratchDir dir;
  ASSERT_EQ(mkdir((dir / "a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir / "b").c_str(), 0755), 0);
  write_file(dir / "a/tool", "#!/bin/sh\n", 0644);  // found first but not executable: skipped
  write_file(dir / "b/tool", "#!/bin/sh\n", 0755);
  std::string resolved;
  UsageError error;
  const std::string path = dir / "a" + ":" + dir / "b";
  ASSERT_TRUE(find_command("tool", path.c_str(), &resolved, &error)) << error.message;
  EXPECT_EQ(resolved, dir / "b/tool");

  ASSERT_TRUE(find_command("sh", nullptr, &resolved, &error)) << error.message;  // PATH unset: /bin:/usr/bin
  EXPECT_EQ(resolved, "/bin/sh");
}

TEST(LauncherLocate, CommandNotFoundIs127) {
  std::string resolved;
  UsageError error;
  ASSERT_FALSE(find_command("cutrace-no-such-command", "/bin:/usr/bin", &resolved, &error));
  EXPECT_EQ(error.exit_code, kExitCommandNotFound);
  EXPECT_EQ(error.message, "cutrace profile: command 'cutrace-no-such-command' not found; check its spelling or PATH.");
  ASSERT_FALSE(find_command("./cutrace-no-such-file", "/bin", &resolved, &error));
  EXPECT_EQ(error.exit_code, kExitCommandNotFound);
  EXPECT_EQ(error.message, "cutrace profile: ./cutrace-no-such-file does not exist; check the path.");
}

TEST(LauncherLocate, NotExecutableIs126) {
  ScratchDir dir;
  write_file(dir / "data", "x", 0644);
  ASSERT_EQ(mkdir((dir / "subdir").c_str(), 0755), 0);
  std::string resolved;
  UsageError error;
  ASSERT_FALSE(find_command(dir / "data", "/bin", &resolved, &error));
  EXPECT_EQ(error.exit_code, kExitNotExecutable);
  EXPECT_EQ(error.message, "cutrace profile: " + dir / "data" + " is not an executable file; check its permissions.");
  ASSERT_FALSE(find_command(dir / "subdir", "/bin", &resolved, &error));
  EXPECT_EQ(error.exit_code, kExitNotExecutable);
  ASSERT_FALSE(find_command("data", dir.path().c_str(), &resolved, &error));
  EXPECT_EQ(error.exit_code, kExitNotExecutable);
  EXPECT_EQ(error.message, "cutrace profile: 'data' was found in PATH but is not executable; check its permissions.");
}

TEST(LauncherLocate, HelperCandidatesAreRelativeToTheExecutable) {
  const auto preload = preload_candidates("/opt/cutrace/bin");
  ASSERT_GE(preload.size(), 2u);
  EXPECT_EQ(preload.front(), "/opt/cutrace/lib/libcutrace-preload.so");
  EXPECT_NE(std::find(preload.begin(), preload.end(), "/opt/cutrace/lib/cutrace/libcutrace-preload.so"), preload.end());
  const auto recorder = recorder_candidates("/opt/cutrace/bin");
  ASSERT_GE(recorder.size(), 2u);
  EXPECT_EQ(recorder[0], "/opt/cutrace/bin/cutrace-recorder");
  EXPECT_EQ(recorder[1], "/opt/cutrace/libexec/cutrace/cutrace-recorder");
}

TEST(LauncherLocate, FindsInstalledLayout) {
  ScratchDir dir;
  for (auto sub : {"bin", "lib", "lib/cutrace", "libexec", "libexec/cutrace"})
    ASSERT_EQ(mkdir((dir / sub).c_str(), 0755), 0);
  write_file(dir / "lib/cutrace/libcutrace-preload.so", "elf", 0644);
  write_file(dir / "libexec/cutrace/cutrace-recorder", "#!/bin/sh\n", 0755);
  unsetenv(kPreloadEnvVar);
  unsetenv(kRecorderEnvVar);
  std::string preload, recorder;
  UsageError error;
  ASSERT_TRUE(find_preload(dir / "bin", &preload, &error)) << error.message;
  EXPECT_EQ(preload, dir / "lib/cutrace/libcutrace-preload.so");
  ASSERT_TRUE(find_recorder(dir / "bin", &recorder, &error)) << error.message;
  EXPECT_EQ(recorder, dir / "libexec/cutrace/cutrace-recorder");

  // A non-executable recorder next to cutrace does not hide the one that works.
  write_file(dir / "bin/cutrace-recorder", "data", 0644);
  ASSERT_TRUE(find_recorder(dir / "bin", &recorder, &error)) << error.message;
  EXPECT_EQ(recorder, dir / "libexec/cutrace/cutrace-recorder");
}

TEST(LauncherLocate, MissingHelpersNameWhereTheyWereLookedFor) {
  ScratchDir dir;
  unsetenv(kPreloadEnvVar);
  unsetenv(kRecorderEnvVar);
  std::string path;
  UsageError error;
  ASSERT_FALSE(find_preload(dir / "bin", &path, &error));
  EXPECT_EQ(error.exit_code, kExitSetupFailed);
  EXPECT_EQ(
      error.message.rfind(
          "cutrace profile: cannot find libcutrace-preload.so (looked at " + dir / "lib/libcutrace-preload.so", 0),
      0)
      << error.message;
  EXPECT_NE(error.message.find("set CUTRACE_PRELOAD_LIB to its path."), std::string::npos) << error.message;
  ASSERT_FALSE(find_recorder(dir / "bin", &path, &error));
  EXPECT_NE(error.message.find(dir / "bin/cutrace-recorder"), std::string::npos) << error.message;
}

TEST(LauncherLocate, EnvironmentOverrides) {
  ScratchDir dir;
  write_file(dir / "pre.so", "elf");
  write_file(dir / "rec", "#!/bin/sh\n", 0755);
  setenv(kPreloadEnvVar, (dir / "pre.so").c_str(), 1);
  setenv(kRecorderEnvVar, (dir / "rec").c_str(), 1);
  std::string path;
  UsageError error;
  EXPECT_TRUE(find_preload("/nonexistent/bin", &path, &error)) << error.message;
  EXPECT_EQ(path, dir / "pre.so");
  EXPECT_TRUE(find_recorder("/nonexistent/bin", &path, &error)) << error.message;
  EXPECT_EQ(path, dir / "rec");

  setenv(kPreloadEnvVar, (dir / "missing.so").c_str(), 1);
  EXPECT_FALSE(find_preload("/nonexistent/bin", &path, &error));
  EXPECT_EQ(error.message, "cutrace profile: CUTRACE_PRELOAD_LIB names " + dir / "missing.so" +
                               ", which is not a readable file; point it at libcutrace-preload.so or unset it.");
  setenv(kRecorderEnvVar, (dir / "pre.so").c_str(), 1);
  EXPECT_FALSE(find_recorder("/nonexistent/bin", &path, &error));
  EXPECT_EQ(error.message, "cutrace profile: CUTRACE_RECORDER names " + dir / "pre.so" +
                               ", which is not an executable file; point it at cutrace-recorder or unset it.");

  // LD_PRELOAD cannot carry a path with a colon or a space.
  ASSERT_EQ(mkdir((dir / "a:b").c_str(), 0755), 0);
  write_file(dir / "a:b/pre.so", "elf");
  setenv(kPreloadEnvVar, (dir / "a:b/pre.so").c_str(), 1);
  EXPECT_FALSE(find_preload("/nonexistent/bin", &path, &error));
  EXPECT_NE(error.message.find("contains a space or colon"), std::string::npos) << error.message;
  unsetenv(kPreloadEnvVar);
  unsetenv(kRecorderEnvVar);
}

TEST(LauncherEnvironment, PreloadIsPrependedAndNothingElseChanges) {
  const char* entries[] = {"A=1", "LD_PRELOAD=/usr/lib/libuser.so", "CUTRACE_SESSION=/stale", "B=x=y", nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/opt/lib/libcutrace-preload.so", "/cutrace-0-abc");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "LD_PRELOAD=/usr/lib/libuser.so:/opt/lib/libcutrace-preload.so",
                                           "CUTRACE_SESSION=/cutrace-0-abc", "B=x=y"}));
}

TEST(LauncherEnvironment, VariablesAddedWhenAbsent) {
  const char* entries[] = {"PATH=/bin", nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/p.so", "/s");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "LD_PRELOAD=/p.so", "CUTRACE_SESSION=/s"}));
  const char* empty_preload[] = {"LD_PRELOAD=", nullptr};
  env = program_environment(const_cast<char* const*>(empty_preload), "/p.so", "/s");
  EXPECT_EQ(env, (std::vector<std::string>{"LD_PRELOAD=/p.so", "CUTRACE_SESSION=/s"}));
}

TEST(LauncherEnvironment, DuplicatePreloadKeepsTheValueTheLoaderUses) {
  // ld.so takes the last LD_PRELOAD entry of the environment.
  const char* entries[] = {"LD_PRELOAD=/first.so", "X=1", "LD_PRELOAD=/last.so /other.so", nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/p.so", "/s");
  EXPECT_EQ(env, (std::vector<std::string>{"LD_PRELOAD=/last.so /other.so:/p.so", "X=1", "CUTRACE_SESSION=/s"}));
}

// The interpreter the pip-installed command ran under is the launcher's, never the program's: the
// program's environment is what it would be without cutrace.
TEST(LauncherEnvironment, ThePackagesInterpreterStaysOutOfTheProgramsEnvironment) {
  const char* entries[] = {"A=1", "CUTRACE_PACKAGE_PYTHON=/venv/bin/python3", "CUTRACE_PYTHON=/usr/bin/python3",
                           nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/p.so", "/s");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "CUTRACE_PYTHON=/usr/bin/python3", "LD_PRELOAD=/p.so",
                                           "CUTRACE_SESSION=/s"}));
}

// NVTX loads one tool: while nvtx is traced it is the shim, replacing the program's own; otherwise the
// program's stays.
TEST(LauncherEnvironment, NvtxToolIsTheShimOnlyWhileNvtxIsTraced) {
  const char* entries[] = {"NVTX_INJECTION64_PATH=/other/tool.so", "A=1", nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/p.so", "/s", "/p.so");
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "LD_PRELOAD=/p.so", "CUTRACE_SESSION=/s",
                                           "NVTX_INJECTION64_PATH=/p.so"}));
  env = program_environment(const_cast<char* const*>(entries), "/p.so", "/s", "");
  EXPECT_EQ(env, (std::vector<std::string>{"NVTX_INJECTION64_PATH=/other/tool.so", "A=1", "LD_PRELOAD=/p.so",
                                           "CUTRACE_SESSION=/s"}));
}

// -t osrt: the OS runtime wrappers come after the shim (their RTLD_NEXT then reaches libc), and NVTX
// still loads the shim alone.
TEST(LauncherEnvironment, OsrtWrappersFollowTheShim) {
  const char* entries[] = {"LD_PRELOAD=/u.so", nullptr};
  auto env = program_environment(const_cast<char* const*>(entries), "/p.so:/osrt.so", "/s", "/p.so");
  EXPECT_EQ(env, (std::vector<std::string>{"LD_PRELOAD=/u.so:/p.so:/osrt.so", "CUTRACE_SESSION=/s",
                                           "NVTX_INJECTION64_PATH=/p.so"}));
}

TEST(LauncherEnvironment, RecorderLeavesAnOuterSessionAlone) {
  const char* entries[] = {"A=1", "CUTRACE_SESSION=/outer", "LD_PRELOAD=/u.so", "CUTRACE_SESSION_FD=100:5:6", nullptr};
  EXPECT_EQ(recorder_environment(const_cast<char* const*>(entries)),
            (std::vector<std::string>{"A=1", "LD_PRELOAD=/u.so"}));
}

TEST(LauncherEnvironment, ShellQuoting) {
  EXPECT_EQ(shell_quote("python"), "python");
  EXPECT_EQ(shell_quote("--epochs=3"), "--epochs=3");
  EXPECT_EQ(shell_quote("/a/b.py"), "/a/b.py");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_join({"sh", "-c", "echo hi"}), "sh -c 'echo hi'");
}

TEST(LauncherSummary, ParsesTheRecorderLine) {
  RecorderSummary s = parse_recorder_summary(
      "ready\nsummary events=1234 processes=1 threads=2 dropped=5 dropped_no_memory=3 malformed=6 lost=7 bytes=12595 "
      "future=9 stalled_ms=2500\n");
  ASSERT_TRUE(s.present);
  EXPECT_EQ(s.events, 1234u);
  EXPECT_EQ(s.processes, 1u);
  EXPECT_EQ(s.threads, 2u);
  EXPECT_EQ(s.dropped, 5u);
  EXPECT_EQ(s.dropped_no_memory, 3u);
  EXPECT_EQ(s.malformed, 6u);
  EXPECT_EQ(s.lost, 7u);
  EXPECT_EQ(s.bytes, 12595u);
  EXPECT_EQ(s.stalled_ms, 2500u);
  EXPECT_FALSE(parse_recorder_summary("ready\n").present);
  s = parse_recorder_summary("summary events=x threads=3");  // unfinished line, bad number skipped
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.events, 0u);
  EXPECT_EQ(s.threads, 3u);
  EXPECT_TRUE(s.warnings.empty());
  // Warning lines come before the summary they belong to, in order.
  s = parse_recorder_summary("ready\nwarning process 7 (./app): libcublas.so.13 was loaded\nwarning second\n"
                             "summary events=1\n");
  ASSERT_TRUE(s.present);
  EXPECT_EQ(s.warnings, (std::vector<std::string>{"process 7 (./app): libcublas.so.13 was loaded", "second"}));
}

TEST(LauncherSummary, Sizes) {
  EXPECT_EQ(human_size(0), "0 B");
  EXPECT_EQ(human_size(1023), "1023 B");
  EXPECT_EQ(human_size(1024), "1.0 KiB");
  EXPECT_EQ(human_size(12595), "12.3 KiB");
  EXPECT_EQ(human_size(5u << 20), "5.0 MiB");
  EXPECT_EQ(human_size(uint64_t(3) << 30), "3.0 GiB");
}

TEST(LauncherSummary, Line) {
  RecorderSummary s;
  s.present = true;
  s.events = 1234;
  s.processes = 1;
  s.threads = 2;
  EXPECT_EQ(summary_line(s, "/abs/run1.cutrace", 12595),
            "cutrace: 1234 events, 1 process, 2 threads, 0 dropped -> /abs/run1.cutrace (12.3 KiB)");
  s.events = 1;
  s.processes = 3;
  s.threads = 1;
  s.dropped = 9;
  s.malformed = 2;
  s.lost = 4;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100),
            "cutrace: 1 event, 3 processes, 1 thread, 9 dropped (rings full; raise --ring-size), 2 malformed, 4 lost "
            "(all rings taken; raise --ring-slots) -> /r.cutrace (100 B)");
  // Where /dev/shm's share allowed fewer rings than asked, more slots cannot be had: more room can.
  s.dropped = 0;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100, true),
            "cutrace: 1 event, 3 processes, 1 thread, 0 dropped, 2 malformed, 4 lost (all the rings /dev/shm had "
            "room for were taken; give the container a larger /dev/shm with docker run --shm-size, or pass a "
            "smaller --ring-size) -> /r.cutrace (100 B)");
  s.dropped = 9;
  // Drops for want of /dev/shm space call for another remedy than full rings.
  s.malformed = s.lost = 0;
  s.dropped_no_memory = 9;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100),
            "cutrace: 1 event, 3 processes, 1 thread, 9 dropped (no room left in /dev/shm for the rings; free some) "
            "-> /r.cutrace (100 B)");
  s.dropped_no_memory = 4;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100),
            "cutrace: 1 event, 3 processes, 1 thread, 9 dropped (4 for want of room in /dev/shm, the rest in full "
            "rings; raise --ring-size) -> /r.cutrace (100 B)");
  // Rings that filled while the recorder was held up: a larger ring is not the first remedy.
  s.dropped_no_memory = 0;
  s.stalled_ms = 10234;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100),
            "cutrace: 1 event, 3 processes, 1 thread, 9 dropped (rings full: the recorder went 10.2 s at once without "
            "reading them, stopped, without a CPU or behind, while the program went on; keep it running, or raise "
            "--ring-size to ride out such pauses) -> /r.cutrace (100 B)");
  s.dropped = 0;
  EXPECT_EQ(summary_line(s, "/r.cutrace", 100), "cutrace: 1 event, 3 processes, 1 thread, 0 dropped -> /r.cutrace (100 B)");
}

}  // namespace
}  // namespace cutrace::launcher
