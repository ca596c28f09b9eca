// Child processes and signal forwarding, exercised inside the test process.
#include "launcher/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "test_util.h"

namespace cutrace::launcher {
namespace {

using testing::read_file;
using testing::ScratchDir;
using testing::wait_for_file;
using testing::write_file;

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  return out;
}

// Runs `sh -c script` through Child with its stdout on a pipe; returns what it printed.
std::string capture(const std::string& script, SpawnOptions o, int* status) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.fd_map.push_back({p[1], 1});
  Child child;
  std::string error;
  EXPECT_TRUE(child.spawn(o, &error)) << error;
  close(p[1]);
  if (o.hold) child.release();
  EXPECT_EQ(child.exec_result(), 0);
  std::string out = read_all(p[0]);
  close(p[0]);
  *status = child.wait();
  return out;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

TEST(LauncherSignals, OnlySignalsSentByProcessesAreForwarded) {
  EXPECT_TRUE(sent_by_process(SI_USER));
  EXPECT_TRUE(sent_by_process(SI_QUEUE));
  EXPECT_TRUE(sent_by_process(SI_TKILL));
  EXPECT_FALSE(sent_by_process(SI_KERNEL));  // a terminal's Ctrl+C, a hangup
}

TEST(LauncherSignals, ExitCodes) {
  EXPECT_EQ(exit_code_of(0), 0);
  EXPECT_EQ(exit_code_of(3 << 8), 3);
  EXPECT_EQ(exit_code_of(SIGTERM), 143);
  EXPECT_EQ(exit_code_of(SIGKILL | 0x80), 137);  // with the core-dump bit
  EXPECT_EQ(describe_wait_status(3 << 8), "exited with code 3");
  EXPECT_EQ(describe_wait_status(SIGKILL), "was killed by signal 9 (SIGKILL)");
}

TEST(LauncherChild, HeldChildRunsOnlyWhenReleased) {
  ScratchDir dir;
  Child child;
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "echo ran > " + dir / "ran"};
  o.hold = true;
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  // Held: nothing can have run however long we look.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(testing::exists(dir / "ran"));
  EXPECT_TRUE(child.release());
  EXPECT_EQ(child.exec_result(), 0);
  EXPECT_EQ(exit_code_of(child.wait()), 0);
  EXPECT_EQ(read_file(dir / "ran"), "ran\n");
}

TEST(LauncherChild, UnreleasedChildIsKilledUnseen) {
  ScratchDir dir;
  pid_t pid;
  {
    Child child;
    SpawnOptions o;
    o.path = "/bin/sh";
    o.argv = {"sh", "-c", "echo ran > " + dir / "ran"};
    o.hold = true;
    std::string error;
    ASSERT_TRUE(child.spawn(o, &error)) << error;
    pid = child.pid();
  }
  EXPECT_EQ(kill(pid, 0), -1);  // reaped, not a zombie
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(testing::exists(dir / "ran"));
}

TEST(LauncherChild, ExecFailureIsReported) {
  Child child;
  SpawnOptions o;
  o.path = "/nonexistent/program";
  o.argv = {"program"};
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  EXPECT_EQ(child.exec_result(), ENOENT);
  EXPECT_EQ(exit_code_of(child.wait()), 127);
}

TEST(LauncherChild, ScriptWithoutInterpreterLineRunsInTheShell) {
  ScratchDir dir;
  write_file(dir / "script", "echo from-shell \"$1\"\n", 0755);
  int status = 0;
  SpawnOptions o;
  o.shell_fallback = true;
  // capture() runs sh -c; the script itself is exec'd by a nested Child here.
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  o.path = dir / "script";
  o.argv = {"script", "arg1"};
  o.fd_map = {{p[1], 1}};
  Child child;
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  close(p[1]);
  EXPECT_EQ(child.exec_result(), 0);
  EXPECT_EQ(read_all(p[0]), "from-shell arg1\n");
  close(p[0]);
  status = child.wait();
  EXPECT_EQ(exit_code_of(status), 0);
}

TEST(LauncherChild, DescriptorsMappedAndOthersClosed) {
  // A descriptor without close-on-exec, as a user's shell might pass one down.
  int inherited = open("/dev/null", O_RDONLY);
  ASSERT_GE(inherited, 3);
  const std::string script = "ls /proc/$$/fd";
  int status = 0;
  SpawnOptions keep;
  auto fds = words(capture(script, keep, &status));
  EXPECT_NE(std::find(fds.begin(), fds.end(), std::to_string(inherited)), fds.end()) << "inherited fd should pass";

  SpawnOptions closing;
  closing.close_other_fds = true;
  fds = words(capture(script, closing, &status));
  EXPECT_EQ(std::find(fds.begin(), fds.end(), std::to_string(inherited)), fds.end()) << "inherited fd should be closed";
  for (const auto& fd : fds) EXPECT_LE(std::stoi(fd), 2) << "unexpected fd " << fd;
  close(inherited);
}

TEST(LauncherChild, EveryMappedDescriptorIsKeptHoweverMany) {
  // A recorder gets one perf event per CPU: 24 descriptors on 5..28, with every other one closed.
  std::vector<int> sources;
  SpawnOptions o;
  o.close_other_fds = true;
  for (int k = 0; k < 24; ++k) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    sources.push_back(fd);
    o.fd_map.push_back({fd, 5 + k});
  }
  int status = 0;
  auto fds = words(capture("ls /proc/$$/fd", o, &status));
  for (int k = 0; k < 24; ++k)
    EXPECT_NE(std::find(fds.begin(), fds.end(), std::to_string(5 + k)), fds.end()) << "fd " << 5 + k << " was closed";
  for (int fd : sources) close(fd);
}

TEST(LauncherChild, MappingSurvivesCollidingNumbers) {
  // Two sources sitting on each other's targets (A on 8 goes to 7, B on 7 goes to 8): installing one
  // must not clobber the other.
  if (fcntl(7, F_GETFD) != -1 || fcntl(8, F_GETFD) != -1) GTEST_SKIP() << "fds 7 and 8 are taken in this process";
  int a[2], b[2];
  ASSERT_EQ(pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(b, O_CLOEXEC), 0);
  // The pipes may have landed on 7 or 8 themselves: lift them out of the way first.
  for (int* fd : {&a[0], &a[1], &b[0], &b[1]}) {
    int lifted = fcntl(*fd, F_DUPFD_CLOEXEC, 20);
    ASSERT_GE(lifted, 20);
    close(*fd);
    *fd = lifted;
  }
  ASSERT_EQ(dup3(a[1], 8, O_CLOEXEC), 8);
  ASSERT_EQ(dup3(b[1], 7, O_CLOEXEC), 7);
  close(a[1]);
  close(b[1]);
  Child child;
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "echo to-a >&7; echo to-b >&8"};
  o.fd_map = {{8, 7}, {7, 8}};
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  close(7);
  close(8);
  EXPECT_EQ(child.exec_result(), 0);
  EXPECT_EQ(read_all(a[0]), "to-a\n");
  EXPECT_EQ(read_all(b[0]), "to-b\n");
  close(a[0]);
  close(b[0]);
  EXPECT_EQ(exit_code_of(child.wait()), 0);
}

TEST(LauncherChild, OwnProcessGroup) {
  Child child;
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "exit 0"};
  o.hold = true;
  o.own_process_group = true;
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  EXPECT_EQ(getpgid(child.pid()), child.pid());
  child.release();
  EXPECT_EQ(exit_code_of(child.wait()), 0);
}

TEST(LauncherSignals, ForwardedToTheTargetWithTheSenderVisible) {
  ScratchDir dir;
  SignalForwarding forwarding;
  Child child;
  SpawnOptions o;
  o.path = SIGNAL_PROBE;
  o.argv = {"signal_probe", dir / "ready", dir / "log"};
  o.forward_signals = true;
  std::string error;
  ASSERT_TRUE(child.spawn(o, &error)) << error;
  ASSERT_EQ(child.exec_result(), 0);
  ASSERT_TRUE(wait_for_file(dir / "ready"));
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);  // this process survives: the handler passes it on
  EXPECT_EQ(exit_code_of(child.wait()), 0);
  EXPECT_EQ(read_file(dir / "log"), "sig=" + std::to_string(SIGHUP) + " code=0 pid=" + std::to_string(getpid()) + "\n");
  // Once the child is waited for, signals go nowhere but the last one is remembered.
  EXPECT_EQ(SignalForwarding::take_untargeted_signal(), 0);
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_EQ(SignalForwarding::take_untargeted_signal(), SIGTERM);
  EXPECT_EQ(SignalForwarding::take_untargeted_signal(), 0);
}

TEST(LauncherSignals, ChildGetsTheOriginalDispositions) {
  // A signal the launcher was started ignoring stays ignored in the program (nohup), while SIGPIPE,
  // which the launcher ignores for itself, is back to its default.
  struct sigaction ignore = {}, old_hup = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old_hup);
  int status = 0;
  std::string out;
  {
    SignalForwarding forwarding;
    out = capture("exec grep -E '^Sig(Ign|Blk)' /proc/self/status", SpawnOptions{}, &status);
  }
  sigaction(SIGHUP, &old_hup, nullptr);
  auto mask_of = [&](const std::string& key) {
    size_t at = out.find(key + ":");
    return at == std::string::npos ? 0ull : std::stoull(out.substr(at + key.size() + 1), nullptr, 16);
  };
  const unsigned long long ignored = mask_of("SigIgn");
  EXPECT_TRUE(ignored & (1ull << (SIGHUP - 1))) << out;
  EXPECT_FALSE(ignored & (1ull << (SIGPIPE - 1))) << out;
  EXPECT_FALSE(ignored & (1ull << (SIGTERM - 1))) << out;
  EXPECT_EQ(mask_of("SigBlk"), 0ull) << out;
}

TEST(LauncherProcess, ClosedStandardDescriptorsGetPlaceholders) {
  pid_t pid = fork();
  if (pid == 0) {
    close(0);
    close(2);
    int code = 0;
    {
      StdFdPlaceholders placeholders;
      if (!placeholders.was_closed(0) || placeholders.was_closed(1) || !placeholders.was_closed(2)) code |= 1;
      if (fcntl(0, F_GETFD) != FD_CLOEXEC || fcntl(2, F_GETFD) != FD_CLOEXEC) code |= 2;
      int p[2];
      if (pipe(p) != 0 || p[0] < 3 || p[1] < 3) code |= 4;  // new descriptors stay off 0-2
    }
    if (fcntl(0, F_GETFD) != -1) code |= 8;  // and the placeholders go away again
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(exit_code_of(status), 0);
}

}  // namespace
}  // namespace cutrace::launcher
