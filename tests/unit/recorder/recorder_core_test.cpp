// The recorder core in-process: a real session, the test acting as producer, the output parsed back.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "recorder/library_exports.h"
#include "recorder/recorder.h"
#include "cutrace/session.h"
#include "test_support.h"

namespace cutrace {
namespace {

namespace fs = std::filesystem;
using test::TestRing;

uint64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// Fast options for tests: check processes on every pass.
recorder::RecorderOptions test_options() {
  recorder::RecorderOptions o;
  o.process_check_interval_ns = 0;
  return o;
}

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cutrace-recorder-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "t.cutrace").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void start(uint32_t slots = 4, uint32_t ring_bytes = abi::kMinRingBytes,
             abi::ClockKind clock = abi::ClockKind::kMonotonicNs,
             recorder::RecorderOptions options = test_options()) {
    session::Options so;
    so.slot_count = slots;
    so.ring_bytes = ring_bytes;
    so.clock = clock;
    so.trace_domains = trace_domains_;
    std::string error;
    ASSERT_TRUE(session_.create(so, &error)) << error;
    session_.header()->python_sampling_hz = python_sampling_hz_;
    ASSERT_TRUE(writer_.open(path_)) << writer_.error();
    rec_ = std::make_unique<recorder::Recorder>(options);
    ASSERT_TRUE(rec_->attach(session_.header(), session_.bytes(), &writer_, &error)) << error;
  }

  // Final drain, kEnd, parse.
  void finish() {
    rec_->final_drain();
    ASSERT_TRUE(writer_.finish(rec_->summary(), rec_->thread_stats())) << writer_.error();
    ASSERT_TRUE(test::parse_file(path_, &file_));
    ASSERT_EQ(file_.stop_reason, "");
    ASSERT_FALSE(file_.chunks.empty());
    ASSERT_EQ(file_.chunks.back().header.type, uint16_t(format::ChunkType::kEnd));
    ASSERT_TRUE(test::parse_end(file_.chunks.back(), &end_));
    events_ = test::decode_events(file_.chunks);
    ASSERT_EQ(events_.error, "");
  }

  std::vector<const test::Decoded*> calls_of(uint32_t thread) const {
    std::vector<const test::Decoded*> out;
    for (const auto& r : events_.records)
      if (r.thread == thread && r.kind == abi::RecordKind::kApiCall) out.push_back(&r);
    return out;
  }

  abi::SlotState state(uint32_t slot) const {
    return abi::SlotState(session_.slot(slot)->state.load(std::memory_order_acquire));
  }

  uint32_t trace_domains_ = session::Options{}.trace_domains;  // what `-t` selected
  uint32_t python_sampling_hz_ = 0;  // --python-sampling
  fs::path dir_;
  std::string path_;
  session::Session session_;
  trace::TraceWriter writer_;
  std::unique_ptr<recorder::Recorder> rec_;
  test::ParsedFile file_;
  test::EndChunk end_;
  test::Events events_;
};

TEST_F(RecorderTest, WritesThreadDefsDeltaCodedCallsAndDropsPads) {
  start();
  TestRing r = TestRing::claim_self(session_.header(), 1, 4242);
  ASSERT_TRUE(r.valid());
  ASSERT_TRUE(r.push_thread_start(1000, uint32_t(getpid()), 4242));
  ASSERT_TRUE(r.push_string(abi::StringKind::kThreadName, 0, "worker-0"));
  // An outer call recorded after the nested call it contains, so its begin goes backwards.
  ASSERT_TRUE(r.push_call(3, 5000, 5100, 0, 1, {64}));
  ASSERT_TRUE(r.push_call(2, 4900, 5300, uint64_t(-1), 0, {1, 2, 3}));
  ASSERT_TRUE(r.push_call(2, 6000, 6000, 0));
  EXPECT_GT(rec_->poll(), 0u);
  finish();

  ASSERT_EQ(events_.threads.size(), 1u);
  const format::ThreadDef& def = events_.threads[0];
  EXPECT_EQ(def.thread_index, 0u);
  EXPECT_EQ(def.pid, uint32_t(getpid()));
  EXPECT_EQ(def.tid, 4242u);
  EXPECT_EQ(def.ppid, uint32_t(getppid()));
  EXPECT_EQ(def.process_start_ticks, test::own_start_ticks());
  EXPECT_EQ(def.claim_serial, r.serial);
  EXPECT_GT(def.first_seen_ns, 0u);

  ASSERT_EQ(events_.records.size(), 5u);
  EXPECT_EQ(events_.records[0].kind, abi::RecordKind::kThreadStart);
  EXPECT_EQ(events_.records[0].time_ns, 1000u);
  EXPECT_EQ(events_.records[1].kind, abi::RecordKind::kString);
  EXPECT_EQ(events_.records[1].text, "worker-0");
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]->begin_ns, 5000u);
  EXPECT_EQ(calls[0]->end_ns, 5100u);
  EXPECT_EQ(calls[0]->depth, 1u);
  EXPECT_EQ(calls[0]->args, std::vector<uint64_t>{64});
  EXPECT_EQ(calls[1]->begin_ns, 4900u);
  EXPECT_EQ(calls[1]->end_ns, 5300u);
  EXPECT_EQ(calls[1]->result, uint64_t(-1));
  EXPECT_EQ(calls[1]->args, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(calls[2]->begin_ns, 6000u);
  EXPECT_EQ(calls[2]->end_ns, 6000u);

  // The stored fields themselves, in the block's times stream: begin as the gap after the previous
  // call's end, the duration as the change from the previous call of the same function.
  auto stored = [](const test::Decoded* d) {
    const uint8_t* p = d->encoded_times.data();
    const uint8_t* end = d->encoded_times.data() + d->encoded_times.size();
    uint64_t gap = 0, duration_change = 0;
    EXPECT_TRUE(codec::get_varint(p, end, gap) && codec::get_varint(p, end, duration_change));
    EXPECT_EQ(p, end);
    return std::pair<int64_t, int64_t>(codec::unzigzag(gap), codec::unzigzag(duration_change));
  };
  EXPECT_EQ(stored(calls[0]), (std::pair<int64_t, int64_t>(5000, 100)));  // first call of api 3
  EXPECT_EQ(stored(calls[1]), (std::pair<int64_t, int64_t>(-200, 400)));  // began inside calls[0]
  EXPECT_EQ(stored(calls[2]), (std::pair<int64_t, int64_t>(700, -400)));  // api 2 again, 400 ns shorter

  const recorder::Totals t = rec_->totals();
  EXPECT_EQ(t.events, 5u);
  EXPECT_EQ(t.threads, 1u);
  EXPECT_EQ(t.processes, 1u);
  EXPECT_EQ(t.malformed, 0u);
  ASSERT_EQ(end_.threads.size(), 1u);
  EXPECT_EQ(end_.threads[0].records_written, 5u);
  EXPECT_EQ(test::lookup(end_.summary, "events"), "5");
  EXPECT_EQ(test::lookup(end_.summary, "threads"), "1");
  EXPECT_EQ(test::lookup(end_.summary, "processes"), "1");
  // A live thread that never retired keeps its slot: the recorder frees only retired or dead ones.
  EXPECT_EQ(state(1), abi::SlotState::kActive);
}

TEST_F(RecorderTest, WrappingRingKeepsOrderAndWritesNoPads) {
  start(1);
  TestRing r = TestRing::claim_self(session_.header(), 0);
  // 56-byte records do not divide the ring, so every wrap leaves a pad.
  uint64_t next = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 200; ++i, ++next) ASSERT_TRUE(r.push_call(1, next * 10, next * 10 + 5, next, 0, {next, 0}));
    rec_->poll();
  }
  finish();
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), next);
  for (uint64_t i = 0; i < next; ++i) {
    ASSERT_EQ(calls[i]->result, i);
    ASSERT_EQ(calls[i]->begin_ns, i * 10);
    ASSERT_EQ(calls[i]->end_ns, i * 10 + 5);
  }
  EXPECT_EQ(end_.threads[0].records_dropped, 0u);
  EXPECT_EQ(end_.threads[0].records_malformed, 0u);
}

TEST_F(RecorderTest, RetiredSlotIsDrainedResetAndFreedForTheNextClaim) {
  start(2);
  TestRing a = TestRing::claim_self(session_.header(), 0, 111);
  for (int i = 0; i < 10; ++i) a.push_call(1, 100 + i, 101 + i, 0);
  a.producer.count_drop();  // the producer could not store one record
  a.retire();
  rec_->poll();
  EXPECT_EQ(state(0), abi::SlotState::kFree);
  abi::RingHeader* h = session_.slot(0);
  EXPECT_EQ(h->head.load(), 0u);
  EXPECT_EQ(h->tail.load(), 0u);
  EXPECT_EQ(h->dropped_records.load(), 0u);
  EXPECT_EQ(h->pid, 0u);

  // Claimed, filled and retired between two passes: the thread is still defined and recorded.
  TestRing b = TestRing::claim_self(session_.header(), 0, 222);
  ASSERT_TRUE(b.valid());
  for (int i = 0; i < 3; ++i) b.push_call(1, 200 + i, 201 + i, 0);
  b.retire();
  rec_->poll();
  EXPECT_EQ(state(0), abi::SlotState::kFree);
  finish();

  ASSERT_EQ(events_.threads.size(), 2u);
  EXPECT_EQ(events_.threads[0].tid, 111u);
  EXPECT_EQ(events_.threads[1].tid, 222u);
  EXPECT_EQ(events_.threads[1].thread_index, 1u);
  EXPECT_NE(events_.threads[0].claim_serial, events_.threads[1].claim_serial);
  EXPECT_EQ(calls_of(0).size(), 10u);
  EXPECT_EQ(calls_of(1).size(), 3u);
  ASSERT_EQ(end_.threads.size(), 2u);
  EXPECT_EQ(end_.threads[0].records_written, 10u);
  EXPECT_EQ(end_.threads[0].records_dropped, 1u);  // captured before the reset
  EXPECT_EQ(end_.threads[1].records_dropped, 0u);
  EXPECT_EQ(test::lookup(end_.summary, "dropped"), "1");
  EXPECT_EQ(test::lookup(end_.summary, "processes"), "1");
}

TEST_F(RecorderTest, ImpossibleTimesAndUnknownRecordsAreCountedNotWritten) {
  start(1);
  TestRing r = TestRing::claim_self(session_.header(), 0);
  r.push_call(1, 100, 200, 0);
  r.push_call(1, 500, 400, 0);  // ends before it begins
  uint64_t junk[2] = {0, 0};
  abi::RecordHeader bad{uint16_t(abi::RecordKind::kGpuActivity), 16, 0};  // a GPU activity record of no known kind
  std::memcpy(junk, &bad, sizeof bad);
  r.push_raw(junk, sizeof junk);
  uint8_t too_many_args[sizeof(abi::ApiCallRecord) + 8] = {};
  abi::ApiCallRecord call{};
  call.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(sizeof too_many_args), 1};
  call.arg_count = 3;  // claims 3 slots, has 1
  std::memcpy(too_many_args, &call, sizeof call);
  r.push_raw(too_many_args, sizeof too_many_args);
  r.push_call(1, 300, 350, 0);
  rec_->poll();
  finish();
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]->begin_ns, 100u);
  EXPECT_EQ(calls[1]->begin_ns, 300u);
  EXPECT_EQ(end_.threads[0].records_malformed, 3u);
  EXPECT_EQ(end_.threads[0].records_written, 2u);
  EXPECT_EQ(test::lookup(end_.summary, "malformed"), "3");
}

TEST_F(RecorderTest, TscTimestampsAreConvertedToMonotonicNanoseconds) {
  start(1, abi::kMinRingBytes, abi::ClockKind::kTsc);
  ASSERT_TRUE(rec_->clock().is_tsc());
  EXPECT_GT(rec_->clock().tsc_hz(), 1e8);
  EXPECT_LT(rec_->clock().tsc_hz(), 1e10);
  TestRing r = TestRing::claim_self(session_.header(), 0);
  struct Bracket {
    uint64_t before, after;
  };
  std::vector<Bracket> brackets;
  for (int i = 0; i < 50; ++i) {
    const uint64_t before = mono_ns();
    const uint64_t t0 = __rdtsc();
    const uint64_t t1 = __rdtsc();
    const uint64_t after = mono_ns();
    r.push_call(1, t0, t1, 0);
    brackets.push_back({before, after});
    if (i % 10 == 9) rec_->poll();
  }
  finish();
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), brackets.size());
  // The recorder's own bound for a record up to 10 ms from its calibration pair, plus slack for a
  // vCPU preempted between the two clock reads of a bracket.
  const double bound = rec_->clock().error_bound_ns(10e6) + 20000;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_GE(double(calls[i]->begin_ns), double(brackets[i].before) - bound) << i;
    EXPECT_LE(double(calls[i]->end_ns), double(brackets[i].after) + bound) << i;
    EXPECT_LE(calls[i]->begin_ns, calls[i]->end_ns);
  }
  EXPECT_EQ(test::lookup(end_.summary, "clock.tsc_hz") != "<missing>", true);
}

TEST(TimestampConverter, MonotonicPassesThroughAndTscIsMonotonic) {
  recorder::TimestampConverter mono;
  std::string error;
  ASSERT_TRUE(mono.init(abi::ClockKind::kMonotonicNs, 1000, &error));
  EXPECT_EQ(mono.to_ns(123456789), 123456789u);

  recorder::TimestampConverter tsc;
  ASSERT_TRUE(tsc.init(abi::ClockKind::kTsc, 0, &error)) << error;
  EXPECT_GE(tsc.baseline_ns(), recorder::TimestampConverter::kInitialBaselineNs);
  const uint64_t base = __rdtsc();
  uint64_t prev = tsc.to_ns(base - 1000000);
  for (uint64_t d = 0; d < 2000000; d += 997) {
    const uint64_t ns = tsc.to_ns(base - 1000000 + d);
    ASSERT_GE(ns, prev);
    prev = ns;
  }
  // After a recalibration the error bound of a near timestamp stays small.
  tsc.recalibrate();
  EXPECT_LT(tsc.error_bound_ns(1e6), 10000.0);
  const uint64_t now_tsc = __rdtsc(), now = mono_ns();
  EXPECT_LT(std::abs(double(tsc.to_ns(now_tsc)) - double(now)), 50000.0);
}

// A child process claims a slot, pushes, and dies without retiring it.
class DeadProducerTest : public RecorderTest, public ::testing::WithParamInterface<std::tuple<bool, bool>> {};

TEST_P(DeadProducerTest, EverythingADeadProcessPushedIsRecordedAndItsSlotFreed) {
  const bool use_pidfd = std::get<0>(GetParam());
  const bool sigkill = std::get<1>(GetParam());
  recorder::RecorderOptions options = test_options();
  options.use_pidfd = use_pidfd;
  start(2, abi::kMinRingBytes, abi::ClockKind::kMonotonicNs, options);

  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  constexpr int kRecords = 150;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    close(hold[1]);
    TestRing r = TestRing::claim_self(session_.header(), 1);
    if (!r.valid()) _exit(3);
    char c = 'x';
    for (int i = 0; i < kRecords; ++i) {
      if (!r.push_call(7, 1000 + i, 1001 + i, uint64_t(i), 0, {uint64_t(i)})) _exit(4);
      // Halfway, let the parent drain while this process is alive, then go on.
      if (i == kRecords / 2 && (write(ready[1], &c, 1) != 1 || read(hold[0], &c, 1) != 1)) _exit(5);
    }
    if (write(ready[1], &c, 1) != 1) _exit(5);
    if (read(hold[0], &c, 1) < 0) _exit(6);  // waits until the parent closes its end
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char c = 'g';
  ASSERT_EQ(read(ready[0], &c, 1), 1);

  // Alive: its records are drained but its slot stays claimed.
  rec_->poll();
  EXPECT_EQ(state(1), abi::SlotState::kActive);
  EXPECT_EQ(rec_->totals().events, uint64_t(kRecords / 2 + 1));
  ASSERT_EQ(write(hold[1], &c, 1), 1);
  ASSERT_EQ(read(ready[0], &c, 1), 1);  // the rest is pushed; only the dead-process drain can get it

  int status = 0;
  if (sigkill) {
    ASSERT_EQ(kill(child, SIGKILL), 0);
    // Wait for death without reaping: the recorder must see a zombie as dead too.
    siginfo_t info{};
    ASSERT_EQ(waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT), 0);
  } else {
    close(hold[1]);
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  rec_->poll();
  EXPECT_EQ(state(1), abi::SlotState::kFree);
  EXPECT_EQ(rec_->totals().events, uint64_t(kRecords)) << "drained before the slot was freed";
  if (sigkill) {
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status));
    close(hold[1]);
  }
  close(ready[0]);
  finish();

  ASSERT_EQ(events_.threads.size(), 1u);
  EXPECT_EQ(events_.threads[0].pid, uint32_t(child));
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), size_t(kRecords));
  for (int i = 0; i < kRecords; ++i) EXPECT_EQ(calls[i]->result, uint64_t(i));
  EXPECT_EQ(test::lookup(end_.summary, "events"), std::to_string(kRecords));
}

INSTANTIATE_TEST_SUITE_P(Liveness, DeadProducerTest,
                         ::testing::Combine(::testing::Values(true, false), ::testing::Values(false, true)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Pidfd" : "Proc") +
                                  (std::get<1>(info.param) ? "Sigkill" : "Exit");
                         });

TEST_F(RecorderTest, ReusedPidIsTreatedAsDead) {
  start(1);
  // This process is alive, but with a different start time the slot belongs to an earlier one.
  TestRing r = TestRing::claim(session_.header(), 0, uint32_t(getpid()), 1, test::own_start_ticks() + 12345);
  r.push_call(1, 10, 20, 0);
  rec_->poll();
  EXPECT_EQ(state(0), abi::SlotState::kFree);
  finish();
  EXPECT_EQ(calls_of(0).size(), 1u);
}

TEST_F(RecorderTest, ImplausiblePidIsTreatedAsDead) {
  start(1);
  TestRing r = TestRing::claim(session_.header(), 0, 0xfffffff0u, 1, 1);
  r.push_call(1, 10, 20, 0);
  rec_->poll();
  EXPECT_EQ(state(0), abi::SlotState::kFree);
  finish();
  ASSERT_EQ(events_.threads.size(), 1u);
  EXPECT_EQ(events_.threads[0].pid, 0xfffffff0u);  // recorded as it was, never used
  EXPECT_EQ(calls_of(0).size(), 1u);
}

TEST_F(RecorderTest, SlotStuckInClaimingIsFreedOnlyWhenItsClaimerIsDead) {
  recorder::RecorderOptions options = test_options();
  options.claiming_timeout_ns = 0;
  start(2, abi::kMinRingBytes, abi::ClockKind::kMonotonicNs, options);
  abi::RingHeader* dead = session_.slot(0);
  abi::RingHeader* live = session_.slot(1);
  dead->state.store(uint32_t(abi::SlotState::kClaiming));  // claimer died before writing its pid
  live->pid = uint32_t(getpid());
  live->state.store(uint32_t(abi::SlotState::kClaiming));
  rec_->poll();  // first sight starts the timeout
  EXPECT_EQ(state(0), abi::SlotState::kClaiming);
  rec_->poll();
  EXPECT_EQ(state(0), abi::SlotState::kFree);
  EXPECT_EQ(state(1), abi::SlotState::kClaiming);
  finish();
  EXPECT_EQ(events_.threads.size(), 0u);
}

TEST_F(RecorderTest, FinalDrainTakesActiveRingsOfLiveProcessesAndLostCount) {
  start(3);
  TestRing a = TestRing::claim_self(session_.header(), 0, 1);
  TestRing b = TestRing::claim_self(session_.header(), 2, 2);
  for (int i = 0; i < 5; ++i) a.push_call(1, i, i + 1, 0);
  for (int i = 0; i < 7; ++i) b.push_call(1, i, i + 1, 0);
  b.producer.count_drop();
  b.producer.count_drop();
  session_.header()->lost_no_slot.store(9);
  finish();  // no poll: everything comes from the final drain
  EXPECT_EQ(events_.threads.size(), 2u);
  EXPECT_EQ(test::lookup(end_.summary, "events"), "12");
  EXPECT_EQ(test::lookup(end_.summary, "dropped"), "2");
  EXPECT_EQ(test::lookup(end_.summary, "lost_no_slot"), "9");
  EXPECT_EQ(rec_->summary_line(1234),
            "summary events=12 processes=1 threads=2 dropped=2 dropped_no_memory=0 malformed=0 lost=9 bytes=1234\n");
}

TEST_F(RecorderTest, ACallStillInProgressWhenRecordingEndsIsWrittenAsNotReturned) {
  start(2);
  TestRing r = TestRing::claim_self(session_.header(), 0, 1);
  r.push_call(1, 100, 200, 0);
  // A producer may not say it of its own calls: only the recorder knows recording has ended.
  uint8_t claimed[sizeof(abi::ApiCallRecord)] = {};
  abi::ApiCallRecord call{};
  call.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(sizeof claimed), 1};
  call.begin = 300;
  call.end = 400;
  call.flags = abi::kCallFlagNotReturned;
  std::memcpy(claimed, &call, sizeof call);
  r.push_raw(claimed, sizeof claimed);
  const uint64_t begin = mono_ns() - 5'000'000;
  r.header->call_in_progress.store(abi::call_in_progress(7, begin));
  // A ring whose word names an id beyond what the word can hold is not believed either.
  TestRing other = TestRing::claim_self(session_.header(), 1, 2);
  other.push_call(1, 100, 200, 0);
  other.header->call_in_progress.store(abi::call_in_progress(abi::kCallInProgressUnknownApi, begin));
  const uint64_t before_end = mono_ns();
  finish();
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]->flags, 0);
  EXPECT_EQ(calls[1]->aux, 7u);
  EXPECT_EQ(calls[1]->flags, abi::kCallFlagNotReturned);
  EXPECT_EQ(calls[1]->begin_ns, begin);  // the start's low 48 bits, placed before the end
  EXPECT_GE(calls[1]->end_ns, before_end);
  EXPECT_EQ(calls[1]->result, 0u);
  EXPECT_EQ(calls_of(1).size(), 1u);
  EXPECT_EQ(end_.threads[0].records_malformed, 1u);
  EXPECT_EQ(end_.threads[1].records_malformed, 1u);
  EXPECT_EQ(test::lookup(end_.summary, "calls_not_returned"), "1");
  const std::vector<std::string> warnings = rec_->warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings.back().rfind("1 call had not returned when recording of its thread ended", 0), 0u) << warnings.back();
  EXPECT_NE(warnings.back().find("api#7 for "), std::string::npos) << warnings.back();
}

TEST_F(RecorderTest, EventsAreFlushedOnTimeSoAKilledRecorderLosesLittle) {
  recorder::RecorderOptions options = test_options();
  options.flush_interval_ns = 0;
  start(1, abi::kMinRingBytes, abi::ClockKind::kMonotonicNs, options);
  TestRing r = TestRing::claim_self(session_.header(), 0);
  r.push_call(1, 1, 2, 0);
  rec_->poll();  // drains into the pending chunk
  EXPECT_GT(writer_.pending_event_bytes(), 0u);
  const uint64_t chunks = writer_.chunks_written();
  rec_->poll();  // the interval has passed: the pending chunk is written
  EXPECT_EQ(writer_.pending_event_bytes(), 0u);
  EXPECT_EQ(writer_.chunks_written(), chunks + 1);
}

// Kernel names and the handles __cudaGetKernel hands out, gathered per process instance for the
// kNames chunk, so that readers can name a launch whose naming records come later in the file.
TEST_F(RecorderTest, GathersKernelNamesAndHandlesPerProcess) {
  static const ApiArgInfo kGetKernelArgs[] = {{"kernel", abi::ArgFormat::kKernelHandle, format::kArgFlagOut},
                                              {"entryFuncAddr", abi::ArgFormat::kKernelStub}};
  static const ApiInfo kApis[] = {
      {"cudaMalloc", "libcudart.so.13", abi::ApiDomain::kCudaRuntime, abi::ApiClass::kMemory,
       format::ResultKind::kErrorCode, 0, nullptr},
      {"__cudaGetKernel", "libcudart.so.13", abi::ApiDomain::kCudaRuntime, abi::ApiClass::kOther,
       format::ResultKind::kErrorCode, 2, kGetKernelArgs},
  };
  start();
  rec_->set_api_table(kApis, 2);
  test::TestRing main = test::TestRing::claim(session_.header(), 0, 4242, 4242, 1000);
  test::TestRing worker = test::TestRing::claim(session_.header(), 1, 4242, 4243, 1000);
  test::TestRing reused_pid = test::TestRing::claim(session_.header(), 2, 4242, 4244, 2000);
  ASSERT_TRUE(main.valid() && worker.valid() && reused_pid.valid());
  ASSERT_TRUE(main.push_string(abi::StringKind::kKernelName, 0x401000, "_Z6reducePKfPfi"));
  ASSERT_TRUE(main.push_string(abi::StringKind::kThreadName, 0, "main"));
  ASSERT_TRUE(worker.push_call(1, 10, 20, 0, 0, {0x7f0000001000, 0x401000}));
  ASSERT_TRUE(worker.push_call(1, 30, 40, 500, 0, {0, 0x402000}));  // failed: no handle to learn
  ASSERT_TRUE(worker.push_call(0, 50, 60, 0, 0, {}));
  ASSERT_TRUE(reused_pid.push_string(abi::StringKind::kKernelName, 0x401000, "_Z4axpyv"));
  rec_->poll();

  const std::vector<names::ProcessNames> seen = rec_->kernel_names();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].pid, 4242u);
  EXPECT_EQ(seen[0].start_ticks, 1000u);
  EXPECT_EQ(seen[0].kernels, (std::vector<std::pair<uint64_t, std::string>>{{0x401000, "_Z6reducePKfPfi"}}));
  EXPECT_EQ(seen[0].handles, (std::vector<std::pair<uint64_t, uint64_t>>{{0x7f0000001000, 0x401000}}));
  EXPECT_EQ(seen[1].start_ticks, 2000u);
  EXPECT_EQ(seen[1].kernels, (std::vector<std::pair<uint64_t, std::string>>{{0x401000, "_Z4axpyv"}}));
  EXPECT_TRUE(seen[1].handles.empty());
  finish();
}

// Module records and the nesting of calls (depth, enclosing domains) reach the file as pushed.
// The sampler thread's ring names the threads it sampled: each sample is filed under its thread (one
// that claimed no ring gets a thread of its own), and a tid that is no thread of the process is counted.
TEST_F(RecorderTest, FilesPythonSamplesUnderTheThreadTheyName) {
  std::atomic<uint32_t> other_tid{0};
  std::atomic<bool> release{false};
  std::thread other([&] {
    other_tid = uint32_t(gettid());
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!other_tid) std::this_thread::yield();
  python_sampling_hz_ = 100;
  start();
  TestRing sampler = TestRing::claim_self(session_.header(), 0, uint32_t(gettid()) + 1000000);
  TestRing main_ring = TestRing::claim_self(session_.header(), 1);
  ASSERT_TRUE(sampler.valid() && main_ring.valid());
  ASSERT_TRUE(main_ring.push_call(0, 100, 200, 0));
  rec_->poll();  // the main thread is known by its ring before it is sampled
  ASSERT_TRUE(sampler.push_python_sample(1000, uint32_t(gettid()), {{7, 11}, {8, 12}}));
  ASSERT_TRUE(sampler.push_python_sample(2000, other_tid, {{9, 13}}));
  ASSERT_TRUE(sampler.push_python_sample(3000, 0x7ffffff0u, {{9, 14}}));  // no such thread
  rec_->poll();
  // The sampled thread's first recorded call: its ring continues the thread the sample defined.
  TestRing other_ring = TestRing::claim_self(session_.header(), 2, other_tid);
  ASSERT_TRUE(other_ring.valid());
  ASSERT_TRUE(other_ring.push_call(0, 4000, 4100, 0));
  sampler.retire();
  main_ring.retire();
  other_ring.retire();
  rec_->poll();
  release = true;
  other.join();
  finish();
  const test::Events& ev = events_;
  std::map<uint32_t, uint32_t> tid_of;  // thread index -> tid
  for (const format::ThreadDef& d : ev.threads) tid_of[d.thread_index] = d.tid;
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> samples;
  for (const test::Decoded& d : ev.records)
    if (d.kind == abi::RecordKind::kPythonSample) {
      EXPECT_EQ(d.key, tid_of[d.thread]);
      samples.emplace_back(tid_of[d.thread], d.args);
    }
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0], (std::pair<uint32_t, std::vector<uint64_t>>{uint32_t(gettid()), {7, 11, 8, 12}}));
  EXPECT_EQ(samples[1], (std::pair<uint32_t, std::vector<uint64_t>>{other_tid.load(), {9, 13}}));
  // Main's sample went to its ring's thread; the other thread got a definition with claim serial 0,
  // its only one: its call is filed under it too.
  std::vector<format::ThreadDef> others;
  for (const format::ThreadDef& d : ev.threads)
    if (d.tid == other_tid) others.push_back(d);
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].claim_serial, 0u);
  uint32_t calls_of_other = 0;
  for (const test::Decoded& d : ev.records)
    calls_of_other += d.kind == abi::RecordKind::kApiCall && d.thread == others[0].thread_index;
  EXPECT_EQ(calls_of_other, 1u);
  EXPECT_EQ(test::lookup(end_.summary, "python_samples"), "2");
  EXPECT_EQ(test::lookup(end_.summary, "python_samples.unplaced"), "1");
  EXPECT_EQ(rec_->totals().malformed, 0u);
}

TEST_F(RecorderTest, KeepsModulesAndTheDomainsAroundANestedCall) {
  start();
  TestRing r = TestRing::claim_self(session_.header(), 0);
  ASSERT_TRUE(r.valid());
  ASSERT_TRUE(r.push_module("/opt/lib/libcublas.so.13", 0x7f0000000000, abi::kModuleFlagDeviceCode));
  // A domain beyond the first eight travels as well: a set of 64 domains in the ring and the file.
  const abi::DomainSet runtime = abi::domain_bit(abi::ApiDomain::kCudaRuntime) | abi::DomainSet(1) << 63;
  ASSERT_TRUE(r.push_call(1, 100, 150, 0, 1, {}, runtime));
  ASSERT_TRUE(r.push_call(0, 90, 200, 0, 0, {}));
  r.retire();
  rec_->poll();
  finish();
  const test::Events& ev = events_;
  ASSERT_EQ(ev.records.size(), 3u);
  EXPECT_EQ(ev.records[0].kind, abi::RecordKind::kModuleMap);
  EXPECT_EQ(ev.records[0].text, "/opt/lib/libcublas.so.13");
  EXPECT_EQ(ev.records[0].key, 0x7f0000000000u);
  EXPECT_EQ(ev.records[1].depth, 1);
  EXPECT_EQ(ev.records[1].outer_domains, runtime);
  EXPECT_EQ(ev.records[2].depth, 0);
  EXPECT_EQ(ev.records[2].outer_domains, 0);
  EXPECT_EQ(rec_->totals().malformed, 0u);
}

// A table with one function of each library, as set_api_table gets the generated one.
const ApiInfo kLibraryApis[] = {
    {"cudaMalloc", "libcudart.so.13", abi::ApiDomain::kCudaRuntime, abi::ApiClass::kMemory,
     format::ResultKind::kErrorCode, 0, nullptr},
    {"cuMemAlloc_v2", "libcuda.so.1", abi::ApiDomain::kCudaDriver, abi::ApiClass::kMemory,
     format::ResultKind::kErrorCode, 0, nullptr},
    {"cublasSgemm_v2", "libcublas.so.13", abi::ApiDomain::kCublas, abi::ApiClass::kKernel,
     format::ResultKind::kErrorCode, 0, nullptr},
    {"cublasLtMatmul", "libcublasLt.so.13", abi::ApiDomain::kCublasLt, abi::ApiClass::kKernel,
     format::ResultKind::kErrorCode, 0, nullptr},
};
constexpr uint32_t kRtMalloc = 0, kCublasSgemm = 2;

class WarningTest : public RecorderTest {
 protected:
  // A process 4242 "./gemm" that loaded the runtime, the driver and cuBLAS, and made a runtime call;
  // the GPU ran `kernels` kernels for it (CUPTI's records). The libraries' paths name no file: what their
  // files export is another test's business.
  void run_gemm_process(bool with_cublas_call, int kernels = 0) {
    start();
    rec_->set_api_table(kLibraryApis, 4);
    TestRing r = TestRing::claim(session_.header(), 0, 4242, 4242, 1000);
    ASSERT_TRUE(r.valid());
    ASSERT_TRUE(r.push_string(abi::StringKind::kProcessCommand, 0, "./gemm 512"));
    ASSERT_TRUE(r.push_module("/work/gemm", 0x400000, abi::kModuleFlagMainProgram | abi::kModuleFlagNeedsCudart));
    ASSERT_TRUE(r.push_module("/opt/cuda-test/lib64/libcudart.so.13", 0x7f0000000000, 0));
    ASSERT_TRUE(r.push_module("/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x7f1000000000, 0));
    ASSERT_TRUE(r.push_module("/opt/cuda-test/lib64/libcublasLt.so.13", 0x7f2000000000, 0));
    ASSERT_TRUE(r.push_module("/opt/cuda-test/lib64/libcublas.so.13", 0x7f3000000000, 0));
    ASSERT_TRUE(r.push_call(kRtMalloc, 100, 200, 0));
    if (with_cublas_call) {
      ASSERT_TRUE(r.push_call(kCublasSgemm, 300, 400, 0));
    }
    for (int k = 0; k < kernels; ++k) {
      abi::GpuKernelRecord g{};
      g.h.header = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(sizeof g), uint32_t(abi::GpuActivity::kKernel)};
      g.h.start = 1000 + 100 * k, g.h.end = 1050 + 100 * k;
      ASSERT_TRUE(r.push_raw(&g, sizeof g));
    }
    r.retire();
    rec_->poll();
  }
};

// A library loaded and never called is no blind spot (cuDNN loaded by a model without convolutions, CUDA
// in a DataLoader worker): no warning says so.
TEST_F(WarningTest, ALoadedLibraryWithoutRecordedCallsIsNoWarning) {
  trace_domains_ = abi::kCudaDomains | abi::kCublasDomains;
  run_gemm_process(/*with_cublas_call=*/false);
  EXPECT_TRUE(rec_->warnings().empty());
  finish();
  EXPECT_EQ(test::lookup(end_.summary, "warning.0"), "<missing>");
}

// Kernels that ran with no recorded call that launches kernels are: named with the process, and with
// the libraries it loaded but never reached, where to look.
TEST_F(WarningTest, KernelsWithoutARecordedLaunchAreNamedWithTheSilentLibraries) {
  trace_domains_ = abi::kCudaDomains | abi::kCublasDomains;
  run_gemm_process(/*with_cublas_call=*/false, /*kernels=*/3);
  const std::string expected =
      "process 4242 (./gemm 512): the GPU ran 3 kernels of it, but no call that launches kernels was recorded: "
      "they came through a route cutrace does not see; loaded with no recorded call: libcublas.so.13 and "
      "libcublasLt.so.13";
  EXPECT_EQ(rec_->warnings(), std::vector<std::string>{expected});
  // To the launcher before the summary line, and into the end summary.
  const std::string line = rec_->summary_line(0);
  EXPECT_EQ(line.rfind("warning " + expected + "\nsummary events=", 0), 0u) << line;
  finish();
  EXPECT_EQ(test::lookup(end_.summary, "warning.0"), expected);
  EXPECT_EQ(test::lookup(end_.summary, "warning.1"), "<missing>");
}

TEST_F(WarningTest, NoWarningWhenTheLibrarysCallsWereRecordedOrNotAskedFor) {
  trace_domains_ = abi::kCudaDomains | abi::kCublasDomains;
  run_gemm_process(/*with_cublas_call=*/true, /*kernels=*/3);
  EXPECT_TRUE(rec_->warnings().empty());
  EXPECT_EQ(rec_->summary_line(0).rfind("summary ", 0), 0u);
  finish();
  EXPECT_EQ(test::lookup(end_.summary, "warning.0"), "<missing>");
}

TEST_F(WarningTest, NoWarningForALibraryTheTraceDidNotSelect) {
  trace_domains_ = abi::kCudaDomains;  // -t cuda: cuBLAS calls were never going to be recorded
  run_gemm_process(/*with_cublas_call=*/false);
  EXPECT_TRUE(rec_->warnings().empty());
  finish();
}

// The real runtime against a table that wraps only cudaMalloc of it: every other export is named as one
// whose calls cannot be recorded (what a runtime newer than the build looks like).
TEST_F(WarningTest, ALibraryExportingFunctionsTheTableLacksIsNamed) {
  trace_domains_ = abi::kCudaDomains;
  start();
  rec_->set_api_table(kLibraryApis, 4);
  TestRing r = TestRing::claim(session_.header(), 0, 4243, 4243, 1000);
  ASSERT_TRUE(r.valid());
  ASSERT_TRUE(r.push_module(CUTRACE_TEST_CUDART, 0x7f0000000000, 0));
  ASSERT_TRUE(r.push_call(kRtMalloc, 100, 200, 0));
  r.retire();
  rec_->poll();
  cutrace::recorder::LibraryExports exports;
  std::string error;
  ASSERT_TRUE(cutrace::recorder::read_library_exports(CUTRACE_TEST_CUDART, &exports, &error)) << error;
  const std::string expected = std::string(CUTRACE_TEST_CUDART) + " (" + exports.soname +
                               ", loaded by process 4243) exports " + std::to_string(exports.functions.size() - 1) +
                               " functions this cutrace has no wrapper for (the library is newer than the one "
                               "cutrace was built from), so calls to them are not recorded: " +
                               exports.functions[0] + ", ";
  const std::vector<std::string> w = rec_->warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind(expected, 0), 0u) << w[0];
  EXPECT_NE(w[0].find(", ... (scripts/coverage.py --libraries lists them all)"), std::string::npos) << w[0];
  EXPECT_EQ(w[0].find("cudaMalloc,"), std::string::npos) << "cudaMalloc is wrapped: " << w[0];
}

TEST_F(WarningTest, ACommandThatUsedNoCudaGetsOneLine) {
  start();
  rec_->set_api_table(kLibraryApis, 4);
  for (uint32_t slot = 0; slot < 2; ++slot) {  // a shell and what it ran, neither touching CUDA
    TestRing r = TestRing::claim(session_.header(), slot, 5000 + slot, 5000 + slot, 1000);
    ASSERT_TRUE(r.valid());
    ASSERT_TRUE(r.push_module("/usr/bin/bash", 0x400000, abi::kModuleFlagMainProgram));
    ASSERT_TRUE(r.push_module("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000, 0));
    r.retire();
  }
  rec_->poll();
  EXPECT_EQ(rec_->warnings(),
            std::vector<std::string>{
                "no CUDA call was recorded and no traced process loaded a CUDA library; check that the program uses "
                  "CUDA"});
  finish();
}

TEST_F(WarningTest, DeviceCodeWithoutASharedRuntimeIsTheStaticRuntime) {
  start();
  rec_->set_api_table(kLibraryApis, 4);
  TestRing r = TestRing::claim(session_.header(), 0, 4300, 4300, 1000);
  ASSERT_TRUE(r.valid());
  ASSERT_TRUE(r.push_string(abi::StringKind::kProcessExe, 0, "/work/static_app"));
  ASSERT_TRUE(r.push_module("/work/static_app", 0x400000, abi::kModuleFlagMainProgram | abi::kModuleFlagDeviceCode));
  r.retire();
  rec_->poll();
  EXPECT_EQ(rec_->warnings(),
            std::vector<std::string>{"process 4300 (/work/static_app) carries CUDA device code but loaded no CUDA "
                                     "library and no CUDA call was recorded: the program is built with the static "
                                     "CUDA runtime and no driver was found, or it ended before using CUDA"});
  finish();
}

TEST_F(RecorderTest, TinyRingWithFastProducerAccountsForEveryRecord) {
  start(1, abi::kMinRingBytes);
  constexpr uint64_t kIssued = 300000;
  TestRing r = TestRing::claim_self(session_.header(), 0);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kIssued; ++i) r.push_call(1, i, i + 1, i, 0, {i});
    r.retire();
    done.store(true, std::memory_order_release);
  });
  rec_->run([&] { return done.load(std::memory_order_acquire) && state(0) == abi::SlotState::kFree; });
  producer.join();
  finish();
  const uint64_t written = end_.threads.at(0).records_written;
  const uint64_t dropped = end_.threads.at(0).records_dropped;
  EXPECT_EQ(written + dropped, kIssued);
  EXPECT_GT(written, 0u);
  // What was written is in order, with gaps only where records were dropped.
  auto calls = calls_of(0);
  ASSERT_EQ(calls.size(), written);
  for (size_t i = 1; i < calls.size(); ++i) ASSERT_GT(calls[i]->result, calls[i - 1]->result);
}

TEST_F(RecorderTest, ShutdownRequestEndsAnIdleNapAtOnce) {
  // Naps long enough that only the wake can end run() within the test's lifetime.
  recorder::RecorderOptions options = test_options();
  options.idle_sleep_min_ns = options.idle_sleep_max_ns = 600'000'000'000ull;
  start(1, abi::kMinRingBytes, abi::ClockKind::kMonotonicNs, options);
  rec_->set_wake_word(&session_.header()->recorder_wake);
  std::atomic<bool> napping{false};
  std::atomic<uint64_t> returned_ns{0};
  std::atomic<pid_t> runner_tid{0};
  std::thread runner([&] {
    runner_tid.store(pid_t(syscall(SYS_gettid)));
    rec_->run([&] {
      const bool stop = session_.header()->shutdown_requested.load(std::memory_order_acquire) != 0;
      napping.store(true, std::memory_order_release);
      return stop;
    });
    returned_ns.store(mono_ns(), std::memory_order_release);
  });
  while (!napping.load(std::memory_order_acquire)) std::this_thread::yield();
  // In the futex wait, so that the wake (not the value check before waiting) is what ends it.
  ASSERT_TRUE(test::wait_until_in_futex(runner_tid.load()));
  EXPECT_EQ(returned_ns.load(), 0u);
  const uint64_t requested_ns = mono_ns();
  session::request_shutdown(session_.header());
  runner.join();
  // A correctness bound, not a speed goal: without the wake, run() would nap for ten minutes.
  EXPECT_LT(returned_ns.load() - requested_ns, 30'000'000'000ull);
  finish();
}

TEST_F(RecorderTest, AClaimEndsTheNapOfARecorderWithNoRingInUse) {
  // Every nap lasts ten minutes unless woken: only the claim's wake can get the record drained.
  recorder::RecorderOptions options = test_options();
  options.idle_sleep_min_ns = options.idle_sleep_max_ns = options.idle_sleep_max_no_rings_ns = 600'000'000'000ull;
  start(2, abi::kMinRingBytes, abi::ClockKind::kMonotonicNs, options);
  rec_->set_wake_word(&session_.header()->recorder_wake);
  std::atomic<int> passes{0};
  std::atomic<pid_t> runner_tid{0};
  std::thread runner([&] {
    runner_tid.store(pid_t(syscall(SYS_gettid)));
    rec_->run([&] {
      ++passes;
      return session_.header()->shutdown_requested.load(std::memory_order_acquire) != 0;
    });
  });
  while (passes.load() == 0) std::this_thread::yield();
  ASSERT_TRUE(test::wait_until_in_futex(runner_tid.load()));  // into the nap
  // The shim wakes the recorder right after the claim, before its first push; a pass that comes
  // in between finds the ring empty and naps again, which is harmless there because a ring in use
  // caps the nap at 1 ms. Here every nap lasts ten minutes, so the record is pushed before the wake
  // and the one pass the wake causes must find it.
  TestRing r = TestRing::claim_self(session_.header(), 0, 0, /*wake=*/false);
  ASSERT_TRUE(r.valid());
  ASSERT_TRUE(r.push_call(1, 100, 200, 0));
  abi::wake_recorder(session_.header());
  const uint64_t deadline = mono_ns() + 30'000'000'000ull;  // a correctness bound, not a speed goal
  while (session_.slot(0)->tail.load(std::memory_order_acquire) == 0 && mono_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(session_.slot(0)->tail.load(), 0u) << "the claim did not wake the recorder";
  session::request_shutdown(session_.header());
  runner.join();
  finish();
  EXPECT_EQ(calls_of(0).size(), 1u);
}

}  // namespace
}  // namespace cutrace
