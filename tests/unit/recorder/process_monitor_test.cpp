// Liveness checks and /proc parsing of the recorder's process monitor.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "recorder/clock.h"
#include "recorder/process_monitor.h"

namespace cutrace::recorder {
namespace {

// A child that runs `setup`, reports its pid and waits until the returned fd is closed.
struct Held {
  pid_t pid = -1;
  int release = -1;
  bool ok = false;
};

template <class Setup>
Held hold_child(Setup setup) {
  int ready[2], hold[2];
  if (pipe(ready) != 0 || pipe(hold) != 0) return {};
  Held h;
  h.pid = fork();
  if (h.pid == 0) {
    close(ready[0]);
    close(hold[1]);
    const char ok = setup() ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    char c;
    (void)!read(hold[0], &c, 1);
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char ok = 0;
  h.ok = read(ready[0], &ok, 1) == 1 && ok == 1;
  close(ready[0]);
  h.release = hold[1];
  return h;
}

void release(Held& h) {
  close(h.release);
  waitpid(h.pid, nullptr, 0);
}

TEST(ProcStat, ParsesFieldsAfterACommandNameWithParenthesesAndSpaces) {
  Held child = hold_child([] { return prctl(PR_SET_NAME, "a) S 1 (b") == 0; });
  ASSERT_TRUE(child.ok);
  ProcStat st;
  ASSERT_TRUE(read_proc_stat(uint32_t(child.pid), &st));
  EXPECT_EQ(st.ppid, uint32_t(getpid()));
  EXPECT_NE(st.state, 0);
  ProcStat self;
  ASSERT_TRUE(read_proc_stat(uint32_t(getpid()), &self));
  EXPECT_GE(st.start_ticks, self.start_ticks);
  release(child);
  EXPECT_FALSE(read_proc_stat(uint32_t(child.pid), &st)) << "reaped: gone";
}

class MonitorTest : public ::testing::TestWithParam<bool> {};

TEST_P(MonitorTest, TracksLifeAndDeathByPidAndStartTime) {
  ProcessMonitor monitor(GetParam());
  Held child = hold_child([] { return true; });
  ASSERT_TRUE(child.ok);
  ProcStat st;
  ASSERT_TRUE(read_proc_stat(uint32_t(child.pid), &st));

  const uint32_t alive = monitor.track(uint32_t(child.pid), st.start_ticks, monotonic_ns());
  const uint32_t reused = monitor.track(uint32_t(child.pid), st.start_ticks + 1, monotonic_ns());
  const uint32_t bogus = monitor.track(0, 0, monotonic_ns());
  EXPECT_EQ(monitor.track(uint32_t(child.pid), st.start_ticks, monotonic_ns()), alive) << "same instance, same id";
  EXPECT_EQ(monitor.count(), 3u);
  EXPECT_FALSE(monitor.dead(alive));
  EXPECT_TRUE(monitor.dead(reused)) << "a different start time means the pid was reused";
  EXPECT_TRUE(monitor.dead(bogus));

  monitor.refresh(monotonic_ns());
  EXPECT_FALSE(monitor.dead(alive));
  close(child.release);
  // Not reaped yet: a zombie has pushed its last record and counts as dead.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT), 0);
  monitor.refresh(monotonic_ns());
  EXPECT_TRUE(monitor.dead(alive));
  waitpid(child.pid, nullptr, 0);
}

TEST_P(MonitorTest, CountsTheProcessesStillAlive) {
  ProcessMonitor monitor(GetParam());
  Held child = hold_child([] { return true; });
  ASSERT_TRUE(child.ok);
  ProcStat st;
  ASSERT_TRUE(read_proc_stat(uint32_t(child.pid), &st));
  monitor.track(uint32_t(child.pid), st.start_ticks, monotonic_ns());
  monitor.track(0, 0, monotonic_ns());
  EXPECT_EQ(monitor.alive(), 1u);
  release(child);
  monitor.refresh(monotonic_ns());
  EXPECT_EQ(monitor.alive(), 0u);
}

// The command the launcher started, watched before it claims a ring (it may never claim one).
TEST_P(MonitorTest, WatchesOneProcessUntilItExits) {
  ProcessWatch watch;
  EXPECT_FALSE(watch.alive()) << "nothing opened";
  EXPECT_FALSE(watch.open(0, GetParam()));
  Held child = hold_child([] { return true; });
  ASSERT_TRUE(child.ok);
  ASSERT_TRUE(watch.open(uint32_t(child.pid), GetParam()));
  EXPECT_EQ(watch.pid(), uint32_t(child.pid));
  EXPECT_TRUE(watch.alive());
  EXPECT_TRUE(watch.alive()) << "asking again changes nothing";
  close(child.release);
  // Exited but not reaped: as good as gone, it makes no more calls.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(watch.alive());
  waitpid(child.pid, nullptr, 0);
  EXPECT_FALSE(watch.alive());
  EXPECT_FALSE(watch.open(uint32_t(child.pid), GetParam())) << "reaped: nothing to watch";
}

INSTANTIATE_TEST_SUITE_P(Liveness, MonitorTest, ::testing::Values(true, false),
                         [](const auto& info) { return std::string(info.param ? "Pidfd" : "Proc"); });

TEST(ProcessMonitor, FindsTheCudaRuntimeMappedByATracedProcess) {
  const std::string runtime = CUTRACE_TEST_CUDART;
  Held child = hold_child([&] { return dlopen(runtime.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr; });
  if (!child.ok) {
    release(child);
    GTEST_SKIP() << "cannot load " << runtime;
  }
  ProcStat st;
  ASSERT_TRUE(read_proc_stat(uint32_t(child.pid), &st));
  ProcessMonitor monitor;
  monitor.track(uint32_t(child.pid), st.start_ticks, monotonic_ns());
  monitor.refresh(monotonic_ns());
  ASSERT_EQ(monitor.cuda_runtime_libraries().size(), 1u);
  EXPECT_NE(monitor.cuda_runtime_libraries()[0].find("libcudart.so"), std::string::npos)
      << monitor.cuda_runtime_libraries()[0];
  EXPECT_EQ(find_mapped_file(uint32_t(getpid()), "libcudart.so"), "") << "this test process never loads it";
  release(child);
}

}  // namespace
}  // namespace cutrace::recorder
