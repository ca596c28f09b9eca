// The device timeline on its own: ordering, timing and completion, independent of any API layer.
#include "core/timeline.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "simcuda.h"

namespace simcuda {
namespace {

constexpr uint64_t kMs = 1000000;
// Long enough that a test never waits for it: it is dropped by a device reset.
constexpr uint64_t kForever = 600000 * kMs;

class TimelineTest : public ::testing::Test {
 protected:
  StreamId stream(unsigned flags = kStreamNonBlocking) {
    StreamId id = 0;
    EXPECT_EQ(timeline().create_stream(0, flags, 0, false, &id), Status::kOk);
    created_.push_back(id);
    return id;
  }
  OpTimes op(StreamId s, uint64_t ns, std::function<void()> effect = {}) {
    OpTimes t;
    EXPECT_EQ(timeline().submit(s, Work{OpKind::kKernel, ns, std::move(effect), {}}, &t), Status::kOk);
    return t;
  }
  void TearDown() override {
    for (StreamId id : created_) timeline().destroy_stream(id);
  }
  std::vector<StreamId> created_;
};

TEST_F(TimelineTest, OperationsInAStreamRunInIssueOrderForTheirDurations) {
  StreamId s = stream();
  uint64_t before = now_ns();
  const uint64_t durations[] = {1000, 50000, 0, 20000};
  std::vector<OpTimes> t;
  for (uint64_t d : durations) t.push_back(op(s, d));
  EXPECT_GE(t[0].start_ns, before);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].key.end_ns, t[i].start_ns + durations[i]);
    if (i > 0) {
      EXPECT_GE(t[i].start_ns, t[i - 1].key.end_ns);
      EXPECT_LT(t[i - 1].key, t[i].key);
    }
  }
  EXPECT_EQ(timeline().synchronize_stream(s), Status::kOk);
  EXPECT_GE(now_ns(), t.back().key.end_ns);
  EXPECT_TRUE(timeline().complete(t.back().key));
}

TEST_F(TimelineTest, EffectsRunInCompletionOrderAndNeverBeforeTheEnd) {
  StreamId a = stream();
  StreamId b = stream();
  std::mutex mu;
  std::vector<std::pair<int, uint64_t>> ran;  // operation index, time its effect ran
  const uint64_t durations[] = {30 * kMs, 1 * kMs, 0, 5 * kMs, 2 * kMs, 0};
  std::vector<OpKey> keys;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(op(i % 2 == 0 ? a : b, durations[i], [&mu, &ran, i] {
                     std::lock_guard<std::mutex> lock(mu);
                     ran.emplace_back(i, now_ns());
                   }).key);
  }
  timeline().synchronize_all();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 6u);
  for (size_t i = 0; i < ran.size(); ++i) {
    EXPECT_GE(ran[i].second, keys[ran[i].first].end_ns);
    if (i > 0) {
      EXPECT_LT(keys[ran[i - 1].first], keys[ran[i].first]);
    }
  }
}

TEST_F(TimelineTest, LegacyStreamAndBlockingStreamsWaitForEachOther) {
  StreamId blocking = stream(0);
  StreamId other_blocking = stream(0);
  StreamId non_blocking = stream(kStreamNonBlocking);
  StreamId legacy = timeline().legacy_stream(0);

  OpTimes long_op = op(blocking, kForever);
  OpTimes on_legacy = op(legacy, 1000);
  EXPECT_GE(on_legacy.start_ns, long_op.key.end_ns);
  OpTimes after_legacy = op(other_blocking, 1000);
  EXPECT_GE(after_legacy.start_ns, on_legacy.key.end_ns);
  OpTimes independent = op(non_blocking, 1000);
  EXPECT_LT(independent.start_ns, long_op.key.end_ns);
  EXPECT_EQ(timeline().synchronize_stream(non_blocking), Status::kOk);

  timeline().reset_device(0);
  timeline().synchronize_device(0);
  created_.clear();  // the reset destroyed them
}

TEST_F(TimelineTest, StreamWaitEventOrdersWorkAcrossStreams) {
  StreamId a = stream();
  StreamId b = stream();
  EventId e = 0;
  ASSERT_EQ(timeline().create_event(0, 0, &e), Status::kOk);
  // Waiting for an event never recorded waits for nothing.
  EXPECT_EQ(timeline().stream_wait_event(b, e), Status::kOk);
  OpTimes free_op = op(b, 1000);
  EXPECT_EQ(timeline().synchronize_stream(b), Status::kOk);

  OpTimes long_op = op(a, kForever);
  OpTimes record;
  ASSERT_EQ(timeline().record_event(e, a, &record), Status::kOk);
  EXPECT_GE(record.start_ns, long_op.key.end_ns);
  ASSERT_EQ(timeline().stream_wait_event(b, e), Status::kOk);
  OpTimes waiting = op(b, 1000);
  EXPECT_GE(waiting.start_ns, record.start_ns);
  EXPECT_LT(free_op.key, waiting.key);

  timeline().reset_device(0);
  created_.clear();
}

TEST_F(TimelineTest, QueriesAreNotReadyBeforeTheEnd) {
  StreamId s = stream();
  EventId e = 0;
  ASSERT_EQ(timeline().create_event(0, 0, &e), Status::kOk);
  OpTimes t = op(s, 50 * kMs);
  ASSERT_EQ(timeline().record_event(e, s), Status::kOk);
  Status stream_status = timeline().query_stream(s);
  Status event_status = timeline().query_event(e);
  uint64_t after = now_ns();
  // Complete is only allowed once the end time has passed.
  EXPECT_TRUE(stream_status == Status::kNotReady || after >= t.key.end_ns);
  EXPECT_TRUE(event_status == Status::kNotReady || after >= t.key.end_ns);
  EXPECT_EQ(timeline().synchronize_event(e), Status::kOk);
  EXPECT_GE(now_ns(), t.key.end_ns);
  EXPECT_EQ(timeline().query_stream(s), Status::kOk);
  EXPECT_EQ(timeline().query_event(e), Status::kOk);
  EXPECT_EQ(timeline().destroy_event(e), Status::kOk);
}

TEST_F(TimelineTest, ElapsedTimeIsTheDifferenceOfTheRecordTimes) {
  StreamId s = stream();
  EventId start = 0, end = 0, untimed = 0;
  ASSERT_EQ(timeline().create_event(0, 0, &start), Status::kOk);
  ASSERT_EQ(timeline().create_event(0, 0, &end), Status::kOk);
  ASSERT_EQ(timeline().create_event(0, kEventDisableTiming, &untimed), Status::kOk);
  int64_t ns = 0;
  EXPECT_EQ(timeline().elapsed_ns(start, end, &ns), Status::kInvalidHandle);  // never recorded

  OpTimes t_start, t_end;
  ASSERT_EQ(timeline().record_event(start, s, &t_start), Status::kOk);
  for (int i = 0; i < 5; ++i) op(s, 20000);
  ASSERT_EQ(timeline().record_event(end, s, &t_end), Status::kOk);
  ASSERT_EQ(timeline().record_event(untimed, s), Status::kOk);
  Status early = timeline().elapsed_ns(start, end, &ns);
  EXPECT_TRUE(early == Status::kNotReady || timeline().complete(t_end.key));
  ASSERT_EQ(timeline().synchronize_event(end), Status::kOk);
  ASSERT_EQ(timeline().elapsed_ns(start, end, &ns), Status::kOk);
  EXPECT_EQ(uint64_t(ns), t_end.start_ns - t_start.start_ns);
  EXPECT_GE(ns, 5 * 20000);
  EXPECT_EQ(timeline().elapsed_ns(start, untimed, &ns), Status::kInvalidHandle);
  for (EventId e : {start, end, untimed}) EXPECT_EQ(timeline().destroy_event(e), Status::kOk);
}

TEST_F(TimelineTest, DestroyedAndUnknownHandlesAreInvalid) {
  StreamId s = 0;
  ASSERT_EQ(timeline().create_stream(0, 0, 0, false, &s), Status::kOk);
  ASSERT_EQ(timeline().destroy_stream(s), Status::kOk);
  EXPECT_EQ(timeline().submit(s, Work{}), Status::kInvalidHandle);
  EXPECT_EQ(timeline().synchronize_stream(s), Status::kInvalidHandle);
  EXPECT_EQ(timeline().destroy_stream(s), Status::kInvalidHandle);
  EXPECT_EQ(timeline().destroy_stream(timeline().legacy_stream(0)), Status::kInvalidHandle);
  EXPECT_EQ(timeline().create_stream(0, 0x10, 0, false, &s), Status::kInvalidValue);
  EXPECT_EQ(timeline().create_stream(kMaxDeviceCount, 0, 0, false, &s), Status::kInvalidDevice);
  EventId e = 0;
  ASSERT_EQ(timeline().create_event(0, 0, &e), Status::kOk);
  ASSERT_EQ(timeline().destroy_event(e), Status::kOk);
  EXPECT_EQ(timeline().query_event(e), Status::kInvalidHandle);
  EXPECT_EQ(timeline().record_event(e, timeline().legacy_stream(0)), Status::kInvalidHandle);
}

TEST_F(TimelineTest, ResetDropsPendingEffectsAndStreams) {
  StreamId s = stream(0);
  bool ran = false;
  op(s, kForever, [&ran] { ran = true; });
  timeline().reset_device(0);
  // Both return at once: nothing submitted before the reset is waited for any more.
  timeline().synchronize_device(0);
  timeline().synchronize_all();
  EXPECT_EQ(timeline().stream_info(s, nullptr), Status::kInvalidHandle);
  EXPECT_EQ(timeline().stream_info(timeline().legacy_stream(0), nullptr), Status::kOk);
  created_.clear();
  // The legacy stream would wait for the blocking stream's work, had the reset not dropped it.
  StreamId legacy = timeline().legacy_stream(0);
  uint64_t before = now_ns();
  OpTimes t = op(legacy, 1000);
  EXPECT_LT(t.start_ns, before + kForever);
  EXPECT_EQ(timeline().synchronize_stream(legacy), Status::kOk);
  EXPECT_FALSE(ran);
}

TEST_F(TimelineTest, ManyThreadsSubmitAndSynchronizeConcurrently) {
  constexpr int kThreads = 4;
  constexpr int kOps = 300;
  std::vector<StreamId> streams;
  for (int i = 0; i < kThreads; ++i) streams.push_back(stream(i % 2 == 0 ? 0 : kStreamNonBlocking));
  std::vector<int> counters(kThreads, 0);
  std::vector<char> ok(kThreads, 0);  // not vector<bool>: threads write neighbouring elements
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < kOps; ++k) {
        OpKind kind = k % 3 == 0 ? OpKind::kMemset : OpKind::kKernel;
        if (timeline().submit(streams[i], Work{kind, uint64_t(k % 5) * 100,
                                               [&counters, i] { ++counters[i]; }, {}}) != Status::kOk) {
          return;
        }
        if (k % 50 == 0) timeline().query_stream(streams[i]);
      }
      ok[i] = timeline().synchronize_stream(streams[i]) == Status::kOk && counters[i] == kOps;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_TRUE(ok[i]) << "thread " << i;
}

}  // namespace
}  // namespace simcuda
