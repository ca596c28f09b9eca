// cutrace-recorder as the launcher runs it: a session, a ready fd, shutdown by flag or signal, and a
// trace that is either complete or readable up to its last chunk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <thread>

#include "cutrace/api_table.h"
#include "cutrace/session.h"
#include "test_support.h"

#ifndef CUTRACE_RECORDER_PATH
#error "CUTRACE_RECORDER_PATH must name the cutrace-recorder executable"
#endif

namespace cutrace {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::TestRing;

struct Child {
  pid_t pid = -1;
  int ready = -1;   // read end of the ready fd
  int stderr_fd = -1;
};

// Starts the recorder with its ready fd and stderr on pipes.
Child spawn_recorder(const std::vector<std::string>& extra, bool with_ready_fd = true) {
  int ready[2], err[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return {};
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    // The ready fd must survive exec; the test's other descriptors must not.
    const int fd = dup(ready[1]);
    dup2(err[1], 2);
    std::vector<std::string> args = {CUTRACE_RECORDER_PATH};
    if (with_ready_fd) {
      args.push_back("--ready-fd");
      args.push_back(std::to_string(fd));
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(ready[1]);
  close(err[1]);
  c.ready = ready[0];
  c.stderr_fd = err[0];
  return c;
}

// Reads one line (or up to EOF) from `fd`, waiting at most `timeout`.
std::string read_line(int fd, std::chrono::milliseconds timeout = 20s) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (line.empty() || line.back() != '\n') {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left.count())) <= 0) break;
    char c;
    if (read(fd, &c, 1) != 1) break;
    line += c;
  }
  return line;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  return out;
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class RecorderExeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cutrace-recorder-exe-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    output_ = (dir_ / "run.cutrace").string();
  }
  void TearDown() override {
    if (child_.pid > 0 && waitpid(child_.pid, nullptr, WNOHANG) == 0) {
      kill(child_.pid, SIGKILL);
      waitpid(child_.pid, nullptr, 0);
    }
    if (child_.ready >= 0) close(child_.ready);
    if (child_.stderr_fd >= 0) close(child_.stderr_fd);
    fs::remove_all(dir_);
  }

  void create_session(uint32_t slots, uint32_t ring_bytes) {
    session::Options so;
    so.slot_count = slots;
    so.ring_bytes = ring_bytes;
    std::string error;
    ASSERT_TRUE(session_.create(so, &error)) << error;
  }

  void start_recorder(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--session", session_.name(), "--output", output_};
    args.insert(args.end(), extra.begin(), extra.end());
    child_ = spawn_recorder(args);
    ASSERT_GT(child_.pid, 0);
    ASSERT_EQ(read_line(child_.ready), "ready\n") << read_all(child_.stderr_fd);
  }

  // Pushes `count` calls, waiting for the recorder whenever the ring is full (nothing is dropped).
  static void push_waiting(TestRing& r, uint64_t first, uint64_t count) {
    const uint64_t capacity = r.producer.mask + 1;
    const uint32_t bytes = sizeof(abi::ApiCallRecord) + 16;
    for (uint64_t i = first; i < first + count; ++i) {
      while (capacity - (r.producer.head - r.header->tail.load(std::memory_order_acquire)) < 2 * bytes)
        std::this_thread::sleep_for(100us);
      ASSERT_TRUE(r.push_call(1, 1000 + i, 1010 + i, i, 0, {i, ~i}));
    }
  }

  fs::path dir_;
  std::string output_;
  session::Session session_;
  Child child_;
};

TEST_F(RecorderExeTest, RecordsUntilShutdownThenRenamesAndReportsTheSummary) {
  create_session(2, 64 << 10);
  start_recorder({"--meta", "command=app --epochs 3", "--meta=trace=cuda,nvtx", "--force"});
  EXPECT_EQ(session_.header()->recorder_pid.load(), uint32_t(child_.pid));
  EXPECT_TRUE(fs::exists(output_ + ".part"));

  TestRing r = TestRing::claim_self(session_.header(), 0, 77);
  push_waiting(r, 0, 1000);
  r.retire();
  session::request_shutdown(session_.header());

  const std::string summary = read_line(child_.ready);
  EXPECT_EQ(wait_exit(child_.pid), 0) << read_all(child_.stderr_fd);
  child_.pid = -1;
  EXPECT_EQ(read_all(child_.ready), "") << "nothing after the summary line";
  EXPECT_EQ(read_all(child_.stderr_fd), "");
  ASSERT_TRUE(fs::exists(output_));
  EXPECT_FALSE(fs::exists(output_ + ".part"));
  EXPECT_EQ(summary, "summary events=1000 processes=1 threads=1 dropped=0 dropped_no_memory=0 malformed=0 lost=0 bytes=" +
                         std::to_string(fs::file_size(output_)) + "\n");

  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  EXPECT_EQ(f.stop_reason, "");
  EXPECT_EQ(f.complete_bytes, f.file_bytes);
  ASSERT_GE(f.chunks.size(), 4u);
  ASSERT_EQ(f.chunks[0].header.type, uint16_t(format::ChunkType::kMetadata));
  test::KeyValueList meta;
  size_t pos = 0;
  ASSERT_TRUE(test::parse_key_values(f.chunks[0].payload, pos, -1, &meta));
  EXPECT_EQ(test::lookup(meta, "command"), "app --epochs 3");
  EXPECT_EQ(test::lookup(meta, "trace"), "cuda,nvtx");
  EXPECT_EQ(test::lookup(meta, "output.force"), "true");
  EXPECT_EQ(test::lookup(meta, "session.ring_bytes"), std::to_string(64 << 10));
  EXPECT_EQ(test::lookup(meta, "session.slot_count"), "2");
  EXPECT_EQ(test::lookup(meta, "session.clock"), "monotonic");
  EXPECT_EQ(test::lookup(meta, "recorder.pid"), std::to_string(session_.header()->recorder_pid.load()));
  EXPECT_NE(test::lookup(meta, "host"), "<missing>");
  EXPECT_NE(test::lookup(meta, "cutrace.version"), "<missing>");
  EXPECT_NE(test::lookup(meta, "start.realtime_ns"), "<missing>");
  EXPECT_NE(test::lookup(meta, "start.monotonic_ns"), "<missing>");

  ASSERT_EQ(f.chunks[1].header.type, uint16_t(format::ChunkType::kApiTable));
  uint32_t entries;
  std::memcpy(&entries, f.chunks[1].payload.data(), 4);
  EXPECT_EQ(entries, kApiTableSize);

  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "events"), "1000");
  EXPECT_EQ(test::lookup(end.summary, "lost_no_slot"), "0");
  test::Events ev = test::decode_events(f.chunks);
  ASSERT_EQ(ev.error, "");
  ASSERT_EQ(ev.records.size(), 1000u);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(ev.records[i].result, i);
    ASSERT_EQ(ev.records[i].begin_ns, 1000 + i);
  }
}

TEST_F(RecorderExeTest, KilledRecorderLeavesCompleteChunksUpToTheLastOne) {
  create_session(1, 1 << 20);
  start_recorder();
  TestRing r = TestRing::claim_self(session_.header(), 0);
  constexpr uint64_t kCalls = 1000000;  // about 12 MB in the compact encoding: at least two 4 MiB events chunks
  push_waiting(r, 0, kCalls);
  // Compression runs in the background, so wait until those chunks are in the file.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (test::ParsedFile f; std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(2ms)) {
    if (test::parse_file(output_ + ".part", &f) && f.chunks.size() >= 4) break;
    f = {};
  }
  // Killed while it is busy draining and compressing more.
  push_waiting(r, kCalls, 20000);
  ASSERT_EQ(kill(child_.pid, SIGKILL), 0);
  for (uint64_t i = kCalls + 20000; i < kCalls + 40000; ++i) r.push_call(1, i, i, i, 0, {i, ~i});
  EXPECT_EQ(wait_exit(child_.pid), 128 + SIGKILL);
  child_.pid = -1;

  EXPECT_FALSE(fs::exists(output_));
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_ + ".part", &f));
  // Whole chunks only: the writer never leaves a torn chunk behind except while being killed inside
  // a write, which the reader would detect here as a cut-off chunk.
  EXPECT_TRUE(f.stop_reason == "" || f.stop_reason == "cut-off chunk" || f.stop_reason == "cut-off chunk header")
      << f.stop_reason;
  ASSERT_GE(f.chunks.size(), 4u);
  EXPECT_EQ(f.chunks[0].header.type, uint16_t(format::ChunkType::kMetadata));
  EXPECT_EQ(f.chunks[1].header.type, uint16_t(format::ChunkType::kApiTable));
  for (size_t i = 2; i < f.chunks.size(); ++i) EXPECT_EQ(f.chunks[i].header.type, uint16_t(format::ChunkType::kEvents));
  test::Events ev = test::decode_events(f.chunks);
  ASSERT_EQ(ev.error, "");
  ASSERT_GE(ev.records.size(), 2 * (4u << 20) / 60);
  ASSERT_LE(ev.records.size(), kCalls + 40000);
  for (uint64_t i = 0; i < ev.records.size(); ++i) ASSERT_EQ(ev.records[i].result, i) << "a prefix, in order";
}

TEST_F(RecorderExeTest, IgnoresCtrlCAndFinishesOnSigterm) {
  create_session(1, abi::kMinRingBytes);
  start_recorder();
  TestRing r = TestRing::claim_self(session_.header(), 0);
  push_waiting(r, 0, 10);
  // Ignored (SIG_IGN, as the kernel shows it), they are dropped when sent: none can end it later.
  std::ifstream status("/proc/" + std::to_string(child_.pid) + "/status");
  std::string line;
  unsigned long long ignored = 0;
  while (std::getline(status, line))
    if (line.rfind("SigIgn:", 0) == 0) ignored = std::stoull(line.substr(7), nullptr, 16);
  for (int signal : {SIGINT, SIGHUP, SIGQUIT}) EXPECT_TRUE(ignored >> (signal - 1) & 1) << signal;
  ASSERT_EQ(kill(child_.pid, SIGINT), 0);
  ASSERT_EQ(kill(child_.pid, SIGHUP), 0);
  ASSERT_EQ(kill(child_.pid, SIGQUIT), 0);
  ASSERT_EQ(waitpid(child_.pid, nullptr, WNOHANG), 0) << "the recorder must outlive Ctrl+C";
  ASSERT_EQ(kill(child_.pid, SIGTERM), 0);
  // This test process owns the ring and lives on: the trace cannot pass for the whole run.
  const std::string warning = read_line(child_.ready);
  const std::string summary = read_line(child_.ready);
  EXPECT_EQ(wait_exit(child_.pid), 0);
  child_.pid = -1;
  EXPECT_EQ(warning,
            "warning the trace is cut off: the recorder was sent SIGTERM while traced processes were still running; "
            "later calls are not in it\n");
  EXPECT_EQ(summary.rfind("summary events=10 processes=1 threads=1 dropped=0 dropped_no_memory=0 malformed=0 lost=0 bytes=", 0), 0u)
      << summary;
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "cut_off.reason"),
            "the recorder was sent SIGTERM while traced processes were still running");
  EXPECT_EQ(test::lookup(end.summary, "cut_off.last_record_ns"), "1019") << "the end of the last call pushed";
  EXPECT_EQ(test::lookup(end.summary, "launcher.died_ns"), "<missing>");
}

TEST_F(RecorderExeTest, SigtermWaitsForTracedProcessesThatExitAnyway) {
  create_session(1, abi::kMinRingBytes);
  start_recorder();
  // A program that got the same SIGTERM (sent to the whole job) and takes a moment to exit.
  int go[2];
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  const pid_t program = fork();
  ASSERT_GE(program, 0);
  if (program == 0) {
    close(go[1]);
    TestRing r = TestRing::claim_self(session_.header(), 0);
    for (uint64_t i = 0; i < 10; ++i) r.push_call(1, 1000 + i, 1010 + i, i);
    char byte;
    (void)!read(go[0], &byte, 1);
    r.push_call(1, 2000, 2010, 10);  // its last call, made after the recorder's SIGTERM
    _exit(0);
  }
  close(go[0]);
  abi::RingHeader* ring = abi::slot_header(session_.header(), 0);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (ring->state.load() != uint32_t(abi::SlotState::kActive) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(kill(child_.pid, SIGTERM), 0);
  std::this_thread::sleep_for(100ms);
  close(go[1]);
  ASSERT_EQ(wait_exit(program), 0);
  const std::string summary = read_line(child_.ready);
  EXPECT_EQ(wait_exit(child_.pid), 0);
  child_.pid = -1;
  EXPECT_EQ(summary.rfind("summary events=11 ", 0), 0u) << "no cut-off warning first: " << summary;
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "cut_off.reason"), "<missing>");
}

// A stand-in launcher: forks a command that waits for a byte on `go`, then claims a ring, pushes
// `calls` calls and exits without retiring it (if `calls` is 0 it just exits); starts the recorder
// with --command-pid; reports both pids on `report` once the recorder is ready; and dies.
struct OrphanedRun {
  pid_t launcher = -1, recorder = -1, command = -1;
  int go = -1;  // write end: one byte lets the command run, closing it lets it exit untouched
};

OrphanedRun start_and_orphan(session::Session& session, const std::string& output, uint32_t calls,
                             bool command_stays) {
  OrphanedRun run;
  // Close-on-exec: a recorder holding a copy of go's write end would keep the command waiting.
  int go[2], report[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) return run;
  run.launcher = fork();
  if (run.launcher == 0) {
    close(report[0]);
    const pid_t command = fork();
    if (command == 0) {
      close(go[1]);
      close(report[1]);
      char byte;
      if (read(go[0], &byte, 1) != 1) _exit(0);
      TestRing r = TestRing::claim_self(session.header(), 0);
      for (uint64_t i = 0; i < calls; ++i)
        while (!r.push_call(1, 1000 + i, 1010 + i, i)) std::this_thread::sleep_for(100us);
      // Stays while the test sends the recorder SIGTERM; the closed pipe ends it.
      if (command_stays) (void)!read(go[0], &byte, 1);
      _exit(0);
    }
    close(go[0]);
    close(go[1]);
    Child c = spawn_recorder({"--session", session.name(), "--output", output, "--command-pid", std::to_string(command)});
    const bool ready = read_line(c.ready) == "ready\n";
    const pid_t pids[2] = {c.pid, command};
    _exit(ready && write(report[1], pids, sizeof pids) == sizeof pids ? 0 : 1);
  }
  close(go[0]);
  close(report[1]);
  pid_t pids[2] = {-1, -1};
  if (read(report[0], pids, sizeof pids) == ssize_t(sizeof pids)) {
    run.recorder = pids[0];
    run.command = pids[1];
  }
  close(report[0]);
  run.go = go[1];
  return run;
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  return fs::exists(path);
}

TEST_F(RecorderExeTest, KeepsRecordingAfterTheLauncherDiesUntilTheCommandHasExited) {
  create_session(1, abi::kMinRingBytes);
  OrphanedRun run = start_and_orphan(session_, output_, 100, false);
  ASSERT_GT(run.recorder, 0);
  ASSERT_EQ(wait_exit(run.launcher), 0);
  // The launcher is gone and the command has not even started: the recording goes on.
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(fs::exists(output_)) << "recorder " << run.recorder << " finished while the command still ran";
  EXPECT_EQ(kill(run.recorder, 0), 0);
  ASSERT_EQ(write(run.go, "x", 1), 1);
  close(run.go);
  ASSERT_TRUE(wait_for_file(output_)) << "recorder " << run.recorder << " left no trace after the command exited";
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "events"), "100") << "the calls made after the launcher died";
  EXPECT_NE(test::lookup(end.summary, "launcher.died_ns"), "<missing>");
  EXPECT_EQ(test::lookup(end.summary, "cut_off.reason"), "<missing>");
  EXPECT_FALSE(fs::exists(fs::path("/dev/shm") / session_.name().substr(1))) << "the name is removed at the end";
}

TEST_F(RecorderExeTest, FinishesAtOnceWhenTheLauncherDiesBeforeReleasingTheCommand) {
  create_session(1, abi::kMinRingBytes);
  OrphanedRun run = start_and_orphan(session_, output_, 0, false);
  ASSERT_GT(run.recorder, 0);
  close(run.go);  // as a held program sees its launcher die: EOF, and it exits unstarted
  ASSERT_EQ(wait_exit(run.launcher), 0);
  ASSERT_TRUE(wait_for_file(output_));
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "events"), "0");
  EXPECT_NE(test::lookup(end.summary, "launcher.died_ns"), "<missing>");
  EXPECT_EQ(test::lookup(end.summary, "cut_off.reason"), "<missing>");
}

TEST_F(RecorderExeTest, SigtermAfterTheLauncherDiedCutsTheTraceOff) {
  create_session(1, abi::kMinRingBytes);
  OrphanedRun run = start_and_orphan(session_, output_, 10, true);
  ASSERT_GT(run.recorder, 0);
  ASSERT_EQ(wait_exit(run.launcher), 0);
  ASSERT_EQ(write(run.go, "x", 1), 1);
  // The ten calls are in the recorder's hands once it has caught up with the ring.
  abi::RingHeader* ring = abi::slot_header(session_.header(), 0);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while ((ring->state.load() != uint32_t(abi::SlotState::kActive) || ring->head.load() == 0 ||
          ring->tail.load() != ring->head.load()) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(kill(run.recorder, SIGTERM), 0);
  const bool written = wait_for_file(output_);
  close(run.go);  // the command exits only now, after the recorder has stopped
  ASSERT_TRUE(written) << "recorder " << run.recorder << " did not finish on SIGTERM";
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  ASSERT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::EndChunk end;
  ASSERT_TRUE(test::parse_end(f.chunks.back(), &end));
  EXPECT_EQ(test::lookup(end.summary, "events"), "10");
  EXPECT_EQ(test::lookup(end.summary, "cut_off.reason"),
            "the launcher died, and the recorder was sent SIGTERM while traced processes were still running");
  EXPECT_EQ(test::lookup(end.summary, "cut_off.last_record_ns"), "1019");
  EXPECT_NE(test::lookup(end.summary, "launcher.died_ns"), "<missing>");
}

TEST_F(RecorderExeTest, FinishesTheTraceWhenTheLauncherDies) {
  create_session(1, abi::kMinRingBytes);
  // A stand-in launcher that starts the recorder, waits for "ready" and dies.
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    Child c = spawn_recorder({"--session", session_.name(), "--output", output_});
    const bool ready = read_line(c.ready) == "ready\n";
    _exit(ready && write(report[1], &c.pid, sizeof c.pid) == sizeof c.pid ? 0 : 1);
  }
  close(report[1]);
  pid_t recorder_pid = 0;  // known so that a hung recorder can be named in the failure
  ASSERT_EQ(read(report[0], &recorder_pid, sizeof recorder_pid), ssize_t(sizeof recorder_pid));
  close(report[0]);
  ASSERT_EQ(wait_exit(launcher), 0);
  // The recorder is now someone else's child; the final name appears once it has finished on its own.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!fs::exists(output_) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f)) << "recorder " << recorder_pid << " left no trace after the launcher died";
  EXPECT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
}

TEST_F(RecorderExeTest, UnwritableOutputFailsWithOneSentenceAndNoReady) {
  create_session(1, abi::kMinRingBytes);
  const std::string bad = (dir_ / "no-such-dir" / "x.cutrace").string();
  child_ = spawn_recorder({"--session", session_.name(), "--output", bad});
  EXPECT_EQ(read_all(child_.ready), "");
  EXPECT_EQ(wait_exit(child_.pid), 1);
  child_.pid = -1;
  const std::string err = read_all(child_.stderr_fd);
  EXPECT_EQ(err.rfind("cutrace-recorder: cannot create '" + bad + ".part': No such file or directory.", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(RecorderExeTest, MissingSessionFailsWithOneSentence) {
  child_ = spawn_recorder({"--session", "/cutrace-no-such-session", "--output", output_});
  EXPECT_EQ(read_all(child_.ready), "");
  EXPECT_EQ(wait_exit(child_.pid), 1);
  child_.pid = -1;
  const std::string err = read_all(child_.stderr_fd);
  EXPECT_NE(err.find("/cutrace-no-such-session"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(output_ + ".part"));
}

TEST_F(RecorderExeTest, BadArgumentsAreUsageErrors) {
  child_ = spawn_recorder({"--output", output_}, false);
  EXPECT_EQ(wait_exit(child_.pid), 2);
  child_.pid = -1;
  EXPECT_NE(read_all(child_.stderr_fd).find("--session and --output are required"), std::string::npos);
}

}  // namespace
}  // namespace cutrace

namespace cutrace {
namespace {

// A process of the same user can shrink the session object under the recorder (ftruncate); the
// recorder's next read of a vanished page raises SIGBUS. It must finish a valid trace with what it
// had read instead of dying.
TEST_F(RecorderExeTest, SessionShrunkByAnotherProcessEndsTheTraceCleanly) {
  create_session(2, 64 << 10);
  start_recorder();
  TestRing r = TestRing::claim_self(session_.header(), 0, 77);
  push_waiting(r, 0, 500);
  // Wait until the recorder has drained them, so they are in its hands before the memory goes.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (r.header->tail.load(std::memory_order_acquire) != r.producer.head && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  const int fd = shm_open(session_.name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  // From here on neither side may touch the mapping.
  EXPECT_EQ(wait_exit(child_.pid), 0);
  child_.pid = -1;
  EXPECT_NE(read_all(child_.stderr_fd).find("shrunk by another process"), std::string::npos);
  ASSERT_TRUE(fs::exists(output_));
  test::ParsedFile f;
  ASSERT_TRUE(test::parse_file(output_, &f));
  EXPECT_EQ(f.stop_reason, "");
  EXPECT_EQ(f.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
  test::Events ev = test::decode_events(f.chunks);
  ASSERT_EQ(ev.error, "");
  uint64_t calls = 0;
  for (const auto& d : ev.records) calls += d.kind == abi::RecordKind::kApiCall;
  EXPECT_EQ(calls, 500u);
}

}  // namespace
}  // namespace cutrace
