// Hostile rings: the recorder must survive any bytes a producer can write into shared memory, count what
// it rejects, and write only well-formed records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "recorder/recorder.h"
#include "cutrace/session.h"
#include "test_support.h"

namespace cutrace {
namespace {

namespace fs = std::filesystem;
using test::TestRing;

class HostileRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cutrace-fuzz-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "t.cutrace").string();
    session::Options so;
    so.slot_count = 4;
    so.ring_bytes = abi::kMinRingBytes;
    std::string error;
    ASSERT_TRUE(session_.create(so, &error)) << error;
    ASSERT_TRUE(writer_.open(path_)) << writer_.error();
    recorder::RecorderOptions options;
    options.process_check_interval_ns = 0;
    options.scratch_bytes = abi::kMaxRecordBytes;  // many span boundaries inside each ring
    rec_ = std::make_unique<recorder::Recorder>(options);
    ASSERT_TRUE(rec_->attach(session_.header(), session_.bytes(), &writer_, &error)) << error;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void finish() {
    rec_->final_drain();
    ASSERT_TRUE(writer_.finish(rec_->summary(), rec_->thread_stats())) << writer_.error();
    ASSERT_TRUE(test::parse_file(path_, &file_));
    ASSERT_EQ(file_.stop_reason, "");
    ASSERT_TRUE(test::parse_end(file_.chunks.back(), &end_));
    events_ = test::decode_events(file_.chunks);
    ASSERT_EQ(events_.error, "") << "a record the recorder wrote does not parse";
    uint64_t written = 0;
    for (const auto& t : end_.threads) written += t.records_written;
    EXPECT_EQ(written, events_.records.size());
  }

  size_t calls() const {
    size_t n = 0;
    for (const auto& r : events_.records) n += r.kind == abi::RecordKind::kApiCall;
    return n;
  }

  fs::path dir_;
  std::string path_;
  session::Session session_;
  trace::TraceWriter writer_;
  std::unique_ptr<recorder::Recorder> rec_;
  test::ParsedFile file_;
  test::EndChunk end_;
  test::Events events_;
};

TEST_F(HostileRingTest, CorruptSizeSkipsTheRestOfThePublishedSpan) {
  TestRing r = TestRing::claim_self(session_.header(), 0);
  r.push_call(1, 1, 2, 0);
  r.push_call(1, 3, 4, 0);
  const uint64_t bad_at = r.producer.head;
  r.push_call(1, 5, 6, 0);
  r.push_call(1, 7, 8, 0);
  // Size 0 cannot be stepped over: nothing after it can be trusted to start on a record boundary.
  abi::RecordHeader zero{uint16_t(abi::RecordKind::kApiCall), 0, 1};
  std::memcpy(r.producer.data + bad_at, &zero, sizeof zero);
  rec_->poll();
  EXPECT_EQ(r.header->tail.load(), r.header->head.load());
  r.push_call(1, 9, 10, 0);  // later records are read normally again
  rec_->poll();
  finish();
  EXPECT_EQ(calls(), 3u);
  EXPECT_EQ(end_.threads[0].records_malformed, 1u);
}

TEST_F(HostileRingTest, ImpossibleHeadIsCountedAndSkipped) {
  TestRing r = TestRing::claim_self(session_.header(), 0);
  const uint64_t heads[] = {abi::kMinRingBytes + 8,  // more than a ring's worth published
                            12,                      // not a multiple of the record alignment
                            UINT64_MAX - 7};         // far beyond
  uint64_t malformed = 0;
  for (uint64_t head : heads) {
    r.header->tail.store(0);
    r.header->head.store(head);
    rec_->poll();
    ++malformed;
    EXPECT_EQ(rec_->totals().malformed, malformed);
  }
  // Head behind tail.
  r.header->tail.store(64);
  r.header->head.store(32);
  rec_->poll();
  EXPECT_EQ(rec_->totals().malformed, malformed + 1);
  finish();
  EXPECT_EQ(calls(), 0u);
}

TEST_F(HostileRingTest, StringWithLyingLengthIsRejected) {
  TestRing r = TestRing::claim_self(session_.header(), 0);
  uint8_t buf[64] = {};
  abi::StringRecord s{};
  s.header = {uint16_t(abi::RecordKind::kString), 64, uint32_t(abi::StringKind::kThreadName)};
  s.length = 1000;  // longer than the record
  std::memcpy(buf, &s, sizeof s);
  r.push_raw(buf, sizeof buf);
  r.push_string(abi::StringKind::kThreadName, 0, "fine");
  rec_->poll();
  finish();
  ASSERT_EQ(events_.records.size(), 1u);
  EXPECT_EQ(events_.records[0].text, "fine");
  EXPECT_EQ(end_.threads[0].records_malformed, 1u);
}

TEST_F(HostileRingTest, RandomBytesStatesAndCountersNeverCrashTheRecorder) {
  std::mt19937_64 rng(20240601);
  auto* session = session_.header();
  const uint32_t ring_bytes = session->ring_bytes;
  const uint32_t own_pid = uint32_t(getpid());
  const uint64_t own_ticks = test::own_start_ticks();
  for (int iteration = 0; iteration < 400; ++iteration) {
    for (uint32_t slot = 0; slot < session->slot_count; ++slot) {
      abi::RingHeader* h = abi::slot_header(session, slot);
      uint8_t* data = abi::slot_data(session, slot);
      switch (rng() % 4) {
        case 0: {  // garbage everywhere
          for (uint32_t i = 0; i < ring_bytes; i += 8) {
            const uint64_t v = rng();
            std::memcpy(data + i, &v, 8);
          }
          const uint64_t tail = rng() % 3 == 0 ? rng() : rng() % (2 * ring_bytes);
          h->tail.store(tail);
          h->head.store(rng() % 2 ? tail + rng() % (2 * ring_bytes) : rng());
          break;
        }
        case 1: {  // valid records, then a few random bytes flipped inside what was published
          // Freed as the recorder frees a slot (Recorder::free_slot): positions and counters reset.
          h->head.store(0);
          h->tail.store(0);
          h->dropped_records.store(0);
          h->dropped_no_memory.store(0);
          h->state.store(uint32_t(abi::SlotState::kFree));
          TestRing r = TestRing::claim(session, slot, own_pid, 1000 + slot, own_ticks);
          const int n = int(rng() % 300);
          for (int i = 0; i < n; ++i) {
            switch (rng() % 3) {
              case 0: r.push_call(uint32_t(rng() % 50), i, i + rng() % 3, 0, 0, {1, 2}); break;
              case 1: r.push_string(abi::StringKind::kKernelName, rng(), std::string(rng() % 100, 'k')); break;
              default: r.push_thread_start(i, own_pid, 1); break;
            }
          }
          const uint64_t published = r.producer.head - h->tail.load();
          for (int flips = int(rng() % 4); flips > 0 && published; --flips)
            data[(h->tail.load() + rng() % published) & (ring_bytes - 1)] ^= uint8_t(1u << (rng() % 8));
          break;
        }
        case 2: {  // a valid-looking header over random payload
          for (uint32_t off = 0; off + 8 <= ring_bytes; off += 8) {
            abi::RecordHeader rh{uint16_t(rng() % 12), uint16_t((rng() % 80) * 8), uint32_t(rng())};
            std::memcpy(data + off, &rh, sizeof rh);
          }
          h->tail.store(0);
          h->head.store((rng() % (ring_bytes / 8)) * 8);
          break;
        }
        default:
          break;  // leave the slot as the previous iteration and the recorder left it
      }
      // Identity and state: sometimes sane, sometimes anything.
      const uint32_t states[] = {0, 1, 2, 2, 2, 3, 3, uint32_t(rng())};
      h->state.store(states[rng() % 8]);
      const uint32_t pids[] = {own_pid, 0, 1, uint32_t(rng()), uint32_t(rng() % 40000)};
      h->pid = pids[rng() % 5];
      h->process_start_ticks = rng() % 2 ? own_ticks : rng();
      h->claim_serial = rng() % 3 ? h->claim_serial : rng();
      h->dropped_records.store(rng() % 2 ? 0 : rng());
    }
    rec_->poll();
  }
  finish();
  EXPECT_GT(rec_->totals().malformed, 0u);
  EXPECT_GT(events_.records.size(), 0u);
}

}  // namespace
}  // namespace cutrace
