// The ring is the contract between every producer thread and the recorder: these tests push through
// it at several sizes and thread counts and check that what comes out is exactly what went in, in
// order, with every record that did not fit counted, and that hostile ring contents are contained.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cutrace/ring.h"
#include "cutrace/session.h"

namespace cutrace {
namespace {

using abi::ApiCallRecord;

// An ApiCallRecord whose fields encode (sequence, argument count) so the consumer can check contents.
uint32_t make_call(uint8_t* out, uint64_t seq, uint32_t arg_count) {
  const uint32_t bytes = sizeof(ApiCallRecord) + 8 * arg_count;
  std::memset(out, 0, bytes);
  auto* r = reinterpret_cast<ApiCallRecord*>(out);
  r->header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(bytes), uint32_t(seq % 1000)};
  r->begin = seq;
  r->end = seq + 1;
  r->result = ~seq;
  r->arg_count = uint8_t(arg_count);
  for (uint32_t i = 0; i < arg_count; ++i) r->args[i] = seq * 31 + i;
  return bytes;
}

void check_call(const uint8_t* p, uint32_t bytes, uint64_t expected_seq) {
  ApiCallRecord r;
  std::memcpy(&r, p, sizeof r);
  ASSERT_EQ(r.header.kind, uint16_t(abi::RecordKind::kApiCall));
  ASSERT_EQ(r.begin, expected_seq);
  ASSERT_EQ(r.end, expected_seq + 1);
  ASSERT_EQ(r.result, ~expected_seq);
  ASSERT_EQ(bytes, sizeof(ApiCallRecord) + 8u * r.arg_count);
  for (uint32_t i = 0; i < r.arg_count; ++i) {
    uint64_t arg;
    std::memcpy(&arg, p + sizeof r + 8 * i, 8);
    ASSERT_EQ(arg, expected_seq * 31 + i);
  }
}

struct SessionFixture {
  session::Session s;
  explicit SessionFixture(uint32_t slots, uint32_t ring_bytes) {
    std::string error;
    session::Options o;
    o.slot_count = slots;
    o.ring_bytes = ring_bytes;
    if (!s.create(o, &error)) throw std::runtime_error(error);
  }
  // Slot `slot`'s producer, attached as the thread that claims it would be.
  ring::Producer producer(uint32_t slot = 0) const {
    ring::Producer p;
    p.attach(s.slot(slot), s.data(slot), s.header()->ring_bytes);
    return p;
  }
  // Drains slot `slot` up to its head, or `max_bytes` of it, through a scratch of two records.
  template <class Visit>
  ring::DrainStats drain(uint32_t slot, Visit&& visit, uint64_t max_bytes = UINT64_MAX) {
    return ring::drain(s.slot(slot), s.data(slot), s.header()->ring_bytes, scratch.data(), uint32_t(scratch.size()),
                       max_bytes, visit);
  }
  std::vector<uint8_t> scratch = std::vector<uint8_t>(abi::kMaxRecordBytes * 2);
};

class RingSizes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RingSizes, SingleThreadRoundTripThroughManyWraps) {
  const uint32_t ring_bytes = GetParam();
  SessionFixture f(1, ring_bytes);
  ring::Producer p = f.producer();
  std::mt19937 rng(ring_bytes);
  uint64_t pushed = 0, seen = 0;
  uint8_t record[abi::kMaxRecordBytes];
  // Push bursts of varied sizes, drain in between: covers pads at every offset the sizes can reach.
  for (int round = 0; round < 200; ++round) {
    const int burst = int(rng() % 64) + 1;
    for (int i = 0; i < burst; ++i) {
      uint32_t bytes = make_call(record, pushed, rng() % (abi::kMaxApiArgs + 1));
      if (!p.push(record, bytes)) break;
      ++pushed;
    }
    auto stats = f.drain(0, [&](const uint8_t* r, uint32_t bytes) { check_call(r, bytes, seen++); });
    ASSERT_EQ(stats.malformed, 0u);
  }
  EXPECT_EQ(seen, pushed);
  EXPECT_EQ(p.dropped, 0u);
  EXPECT_EQ(f.s.slot(0)->head.load(), p.head);
}

// write(), the wrappers' form, and push() share one ring: records of every size reach the consumer in
// order through many laps, each lap's end padded only where a record does not fit before it.
TEST_P(RingSizes, WriteAndPushShareTheRingThroughManyWraps) {
  const uint32_t ring_bytes = GetParam();
  SessionFixture f(1, ring_bytes);
  ring::Producer p = f.producer();
  std::mt19937 rng(ring_bytes + 1);
  uint64_t stored = 0, seen = 0, pad_bytes = 0, record_bytes = 0;
  uint8_t record[abi::kMaxRecordBytes];
  while (p.head < 5ull * ring_bytes) {
    const int burst = int(rng() % 64) + 1;
    for (int i = 0; i < burst; ++i) {
      const uint32_t bytes = make_call(record, stored, rng() % (abi::kMaxApiArgs + 1));
      const uint64_t offset = p.head % ring_bytes;
      if (offset + bytes > ring_bytes) pad_bytes += ring_bytes - offset;
      const bool ok = stored % 2 ? p.push(record, bytes)
                                 : p.write(bytes, [&](uint8_t* where) { make_call(where, stored, (bytes - 48) / 8); });
      ASSERT_TRUE(ok) << "the ring is drained after every burst, which fits";
      record_bytes += bytes;
      ++stored;
    }
    auto stats = f.drain(0, [&](const uint8_t* r, uint32_t bytes) { check_call(r, bytes, seen++); });
    ASSERT_EQ(stats.malformed, 0u);
  }
  EXPECT_EQ(seen, stored);
  EXPECT_EQ(p.dropped, 0u);
  EXPECT_EQ(p.head, record_bytes + pad_bytes) << "a pad only where a record would have crossed a lap's end";
  EXPECT_EQ(f.s.slot(0)->head.load(), p.head);
}

// Records that tile the ring exactly end each lap at its last byte: no pad, and no drop at the lap's
// end, where the hot path's limit stops.
TEST_P(RingSizes, RecordsThatTileTheRingNeedNoPad) {
  const uint32_t ring_bytes = GetParam();
  SessionFixture f(1, ring_bytes);
  ring::Producer p = f.producer();
  const uint32_t bytes = 64;  // an ApiCallRecord with two slots; a power of two divides the ring
  static_assert(sizeof(abi::ApiCallRecord) + 2 * 8 == 64);
  const uint64_t per_lap = ring_bytes / bytes;
  uint64_t stored = 0, seen = 0;
  for (int lap = 0; lap < 3; ++lap) {
    for (uint64_t i = 0; i < per_lap; ++i) {
      ASSERT_TRUE(p.write(bytes, [&](uint8_t* where) { make_call(where, stored, 2); })) << "lap " << lap << " record " << i;
      ++stored;
    }
    EXPECT_EQ(p.head, stored * bytes);
    f.drain(0, [&](const uint8_t* r, uint32_t n) { check_call(r, n, seen++); });
  }
  EXPECT_EQ(seen, stored);
  EXPECT_EQ(p.dropped, 0u);
}

// A record dropped at a lap's end, for want of room for its pad and itself, must not leave the hot
// path free to write a smaller record across the end of the ring: the next record is padded to the
// next lap or dropped, never written into the memory after the ring (the next thread's ring, or the
// end of the mapping). Set up: the consumer has freed 48 bytes at the ring's start and the head is 8
// bytes short of the lap's end, so a 64-byte record (8 of pad + 64 > 56 free) is dropped, and a
// 48-byte record (8 + 48 = 56) fits after a pad.
TEST_P(RingSizes, ADropAtTheLapsEndNeverLetsARecordCrossIt) {
  const uint32_t ring_bytes = GetParam();
  for (const bool through_write : {false, true}) {
    SCOPED_TRACE(through_write ? "write()" : "push()");
    SessionFixture f(2, ring_bytes);
    uint8_t* const next_ring = f.s.data(1);
    std::memset(next_ring, 0xA5, 64);
    ring::Producer p = f.producer();
    uint8_t record[abi::kMaxRecordBytes];
    uint64_t stored = 0, seen = 0;
    auto store = [&](uint32_t arg_count) {
      const uint32_t bytes = make_call(record, stored, arg_count);
      const bool ok = through_write ? p.write(bytes, [&](uint8_t* where) { make_call(where, stored, arg_count); })
                                    : p.push(record, bytes);
      if (ok) ++stored;
      return ok;
    };
    const uint32_t smallest = sizeof(ApiCallRecord), largest = smallest + 8 * abi::kMaxApiArgs;
    ASSERT_TRUE(store(0));
    f.drain(0, [&](const uint8_t* r, uint32_t n) { check_call(r, n, seen++); });
    ASSERT_EQ(f.s.slot(0)->tail.load(), smallest);
    // Fill up to 8 bytes short of the lap's end, leaving no remainder smaller than a record.
    for (uint64_t left = ring_bytes - 8 - p.head; left > 0;) {
      const uint32_t bytes = left <= largest ? uint32_t(left) : left - largest >= smallest ? largest : smallest;
      ASSERT_TRUE(store((bytes - smallest) / 8));
      left -= bytes;
    }
    ASSERT_EQ(p.head, ring_bytes - 8);
    EXPECT_FALSE(store(2)) << "8 bytes of pad and 64 of record do not fit in the 56 bytes free";
    EXPECT_TRUE(store(0)) << "8 bytes of pad and 48 of record fit in the 56 bytes free";
    EXPECT_EQ(p.head, ring_bytes + smallest) << "the 48-byte record went to the next lap, after a pad";
    EXPECT_FALSE(store(0)) << "the ring is full";
    for (int i = 0; i < 64; ++i) ASSERT_EQ(next_ring[i], 0xA5) << "byte " << i << " after the ring was written";
    auto stats = f.drain(0, [&](const uint8_t* r, uint32_t n) { check_call(r, n, seen++); });
    EXPECT_EQ(stats.malformed, 0u);
    EXPECT_EQ(seen, stored);
    EXPECT_EQ(f.s.slot(0)->dropped_records.load(), 2u);
  }
}

// A producer outrunning a consumer that frees the ring a random amount at a time: records of every
// size through write() and push(), kept near full so that drops fall at every offset of a lap. Every
// record stored comes out once, in order, every other one is counted as dropped, and no byte is
// written past the ring.
TEST_P(RingSizes, AProducerOutrunningItsConsumerStoresOrCountsEveryRecord) {
  const uint32_t ring_bytes = GetParam();
  SessionFixture f(2, ring_bytes);
  uint8_t* const next_ring = f.s.data(1);
  std::memset(next_ring, 0xA5, abi::kMaxRecordBytes);
  ring::Producer p = f.producer();
  std::mt19937 rng(ring_bytes + 2);
  uint8_t record[abi::kMaxRecordBytes];
  uint64_t issued = 0, stored = 0, seen = 0, malformed = 0;
  auto consume = [&](uint64_t max_bytes) {
    malformed += f.drain(0, [&](const uint8_t* r, uint32_t n) { check_call(r, n, seen++); }, max_bytes).malformed;
  };
  while (issued < 200000) {
    const uint32_t arg_count = rng() % (abi::kMaxApiArgs + 1);
    const uint32_t bytes = make_call(record, stored, arg_count);
    const bool ok = rng() % 2 ? p.push(record, bytes)
                              : p.write(bytes, [&](uint8_t* where) { make_call(where, stored, arg_count); });
    ++issued;
    if (ok) ++stored;
    // About 64 bytes freed per record issued, against about 96 written: the ring stays full.
    if (rng() % 2) consume(rng() % 272 / 8 * 8);
  }
  consume(UINT64_MAX);
  EXPECT_EQ(malformed, 0u);
  EXPECT_EQ(seen, stored);
  EXPECT_GT(p.dropped, issued / 10) << "the consumer was meant to fall behind";
  EXPECT_EQ(stored + f.s.slot(0)->dropped_records.load(), issued);
  for (uint32_t i = 0; i < abi::kMaxRecordBytes; ++i) ASSERT_EQ(next_ring[i], 0xA5) << "byte " << i << " after the ring";
}

TEST_P(RingSizes, FullRingDropsAndCountsEveryRecordItCannotStore) {
  const uint32_t ring_bytes = GetParam();
  SessionFixture f(1, ring_bytes);
  ring::Producer p = f.producer();
  uint8_t record[256];
  const uint32_t record_bytes = uint32_t(sizeof(abi::ApiCallRecord)) + 8;  // make_call's one argument
  const uint64_t issued = 3 * ring_bytes / record_bytes + 17;
  uint64_t stored = 0;
  for (uint64_t i = 0; i < issued; ++i) {
    uint32_t bytes = make_call(record, stored, 1);
    if (p.push(record, bytes)) ++stored;
  }
  EXPECT_EQ(stored, ring_bytes / record_bytes);  // the records fill the ring, up to one pad
  EXPECT_EQ(stored + f.s.slot(0)->dropped_records.load(), issued);
  uint64_t seen = 0;
  f.drain(0, [&](const uint8_t* r, uint32_t bytes) { check_call(r, bytes, seen++); });
  EXPECT_EQ(seen, stored);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingSizes, ::testing::Values(abi::kMinRingBytes, 64u << 10, 1u << 20));

struct Concurrency {
  uint32_t threads;
  uint32_t ring_bytes;
  uint64_t records_per_thread;
};

class ConcurrentRings : public ::testing::TestWithParam<Concurrency> {};

// Every producer thread owns a ring; one consumer drains all of them while they run. Per thread the
// consumer must see an unbroken, ordered sequence, and stored + dropped must equal what was issued.
TEST_P(ConcurrentRings, ConsumerSeesEveryStoredRecordInOrder) {
  const Concurrency c = GetParam();
  SessionFixture f(c.threads, c.ring_bytes);
  std::atomic<uint32_t> finished{0};
  std::vector<uint64_t> stored(c.threads, 0);
  std::vector<std::thread> producers;
  for (uint32_t t = 0; t < c.threads; ++t) {
    producers.emplace_back([&, t] {
      ring::Producer p;
      p.attach(f.s.slot(t), f.s.data(t), c.ring_bytes);
      uint8_t record[256];
      uint64_t next = 0;
      for (uint64_t i = 0; i < c.records_per_thread; ++i) {
        uint32_t bytes = make_call(record, next, uint32_t(i % 5));
        if (p.push(record, bytes)) ++next;
      }
      stored[t] = next;
      finished.fetch_add(1, std::memory_order_release);
    });
  }
  std::vector<uint64_t> seen(c.threads, 0);
  std::vector<uint8_t> scratch(64 << 10);
  bool failed = false;
  auto drain_all = [&] {
    for (uint32_t t = 0; t < c.threads; ++t) {
      auto stats = ring::drain(f.s.slot(t), f.s.data(t), c.ring_bytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX,
                               [&](const uint8_t* r, uint32_t bytes) {
                                 ApiCallRecord h;
                                 std::memcpy(&h, r, sizeof h);
                                 if (h.begin != seen[t] || bytes != sizeof h + 8u * h.arg_count) failed = true;
                                 ++seen[t];
                               });
      if (stats.malformed) failed = true;
    }
  };
  while (finished.load(std::memory_order_acquire) < c.threads) drain_all();
  for (auto& th : producers) th.join();
  drain_all();
  ASSERT_FALSE(failed);
  for (uint32_t t = 0; t < c.threads; ++t) {
    EXPECT_EQ(seen[t], stored[t]) << "thread " << t;
    EXPECT_EQ(stored[t] + f.s.slot(t)->dropped_records.load(), c.records_per_thread) << "thread " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ConcurrentRings,
                         ::testing::Values(Concurrency{1, abi::kMinRingBytes, 200000},
                                           Concurrency{1, 1u << 20, 200000},
                                           Concurrency{4, 64u << 10, 50000},
                                           Concurrency{16, abi::kMinRingBytes, 10000},
                                           Concurrency{64, 64u << 10, 2000}));

// The recorder must survive whatever a buggy or hostile producer leaves in shared memory.
TEST(RingHostileInput, ImpossibleHeadIsSkippedAndCounted) {
  const uint32_t ring_bytes = abi::kMinRingBytes;
  SessionFixture f(1, ring_bytes);
  std::vector<uint8_t> scratch(abi::kMaxRecordBytes);
  auto* h = f.s.slot(0);
  for (uint64_t head : {uint64_t(ring_bytes) * 2, uint64_t(13), uint64_t(1) << 63}) {
    h->tail.store(0);
    h->head.store(head);
    uint64_t visited = 0;
    auto stats = ring::drain(h, f.s.data(0), ring_bytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX,
                             [&](const uint8_t*, uint32_t) { ++visited; });
    EXPECT_EQ(visited, 0u);
    EXPECT_EQ(stats.malformed, 1u);
    EXPECT_EQ(h->tail.load(), head);  // resynchronised: the next drain starts clean
  }
}

TEST(RingHostileInput, RandomBytesNeverEscapeTheRing) {
  const uint32_t ring_bytes = abi::kMinRingBytes;
  SessionFixture f(1, ring_bytes);
  std::vector<uint8_t> scratch(abi::kMaxRecordBytes);
  auto* h = f.s.slot(0);
  std::mt19937_64 rng(42);
  for (int round = 0; round < 2000; ++round) {
    uint8_t* data = f.s.data(0);
    for (uint32_t i = 0; i < ring_bytes; i += 8) {
      uint64_t v = rng();
      // Make some headers plausible so the validation behind the size checks is reached too.
      if (rng() % 4 == 0) v = (v & ~0xffffffffull) | (uint64_t(8 * (1 + rng() % 64)) << 16) | (rng() % 6);
      std::memcpy(data + i, &v, 8);
    }
    const uint64_t tail = (rng() % 1000) * 8;
    h->tail.store(tail);
    h->head.store(tail + (rng() % (ring_bytes / 8 + 2)) * 8);
    uint64_t visited = 0;
    ring::drain(h, data, ring_bytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX,
                [&](const uint8_t* r, uint32_t bytes) {
                  ASSERT_TRUE(ring::record_well_formed(r, bytes));
                  ++visited;
                });
    EXPECT_LE(h->tail.load(), h->head.load() + 0);
  }
}

TEST(RingRecords, WellFormedChecksEveryKindsLayout) {
  uint8_t buf[512] = {};
  uint32_t bytes = make_call(buf, 7, 3);
  EXPECT_TRUE(ring::record_well_formed(buf, bytes));
  buf[offsetof(ApiCallRecord, arg_count)] = 4;  // claims more arguments than its size holds
  EXPECT_FALSE(ring::record_well_formed(buf, bytes));
  buf[offsetof(ApiCallRecord, arg_count)] = abi::kMaxApiArgs + 1;
  EXPECT_FALSE(ring::record_well_formed(buf, bytes));

  auto* s = reinterpret_cast<abi::StringRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  s->header = {uint16_t(abi::RecordKind::kString), uint16_t(abi::align_record(sizeof *s + 5)),
               uint32_t(abi::StringKind::kKernelName)};
  s->length = 5;
  EXPECT_TRUE(ring::record_well_formed(buf, s->header.size));
  s->length = 200;  // longer than the record
  EXPECT_FALSE(ring::record_well_formed(buf, s->header.size));

  // A backtrace: its frame count (aux) says its size exactly, from 1 to kMaxBacktraceFrames.
  auto* b = reinterpret_cast<abi::BacktraceRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  b->header = {uint16_t(abi::RecordKind::kBacktrace), uint16_t(sizeof *b + 8 * 3), 3};
  EXPECT_TRUE(ring::record_well_formed(buf, b->header.size));
  b->header.aux = 4;  // more frames than the record holds
  EXPECT_FALSE(ring::record_well_formed(buf, b->header.size));
  b->header.aux = 2;  // fewer: trailing bytes nobody accounts for
  EXPECT_FALSE(ring::record_well_formed(buf, b->header.size));
  b->header = {uint16_t(abi::RecordKind::kBacktrace), uint16_t(sizeof *b), 0};  // no frame at all
  EXPECT_FALSE(ring::record_well_formed(buf, b->header.size));
  // Python frames (16 bytes each) follow the native ones; a record may hold only those.
  b->header = {uint16_t(abi::RecordKind::kBacktrace), uint16_t(abi::backtrace_record_bytes(3, 2)), 3};
  b->python_frames = 2;
  EXPECT_TRUE(ring::record_well_formed(buf, b->header.size));
  b->python_frames = 1;  // bytes nobody accounts for
  EXPECT_FALSE(ring::record_well_formed(buf, b->header.size));
  b->header = {uint16_t(abi::RecordKind::kBacktrace), uint16_t(abi::backtrace_record_bytes(0, 2)), 0};
  b->python_frames = 2;
  EXPECT_TRUE(ring::record_well_formed(buf, b->header.size));
  b->python_frames = abi::kMaxPythonFrames + 1;  // more than any producer writes
  b->header.size = uint16_t(abi::backtrace_record_bytes(0, abi::kMaxPythonFrames + 1));
  EXPECT_FALSE(ring::record_well_formed(buf, b->header.size));

  // A CPU sample of the timer sampler: its frame count says its size, from 1 to kMaxSampleFrames.
  auto* sample = reinterpret_cast<abi::CpuSampleRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  sample->header = {uint16_t(abi::RecordKind::kCpuSample), uint16_t(sizeof *sample + 8 * 2), 2};
  EXPECT_TRUE(ring::record_well_formed(buf, sample->header.size));
  sample->header.aux = 3;
  EXPECT_FALSE(ring::record_well_formed(buf, sample->header.size));
  sample->header = {uint16_t(abi::RecordKind::kCpuSample), uint16_t(sizeof *sample), 0};
  EXPECT_FALSE(ring::record_well_formed(buf, sample->header.size));
  // A context switch is the recorder's to write (from perf events): one in a ring is refused.
  auto* change = reinterpret_cast<abi::ContextSwitchRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  change->header = {uint16_t(abi::RecordKind::kContextSwitch), uint16_t(sizeof *change), 1};
  EXPECT_FALSE(ring::record_well_formed(buf, change->header.size));

  // GPU activity: each kind at its own size exactly.
  for (uint32_t kind = 1; kind <= 7; ++kind) {
    std::memset(buf, 0, sizeof buf);
    const uint32_t size = abi::gpu_activity_bytes(kind);
    ASSERT_NE(size, 0u) << kind;
    auto* g = reinterpret_cast<abi::RecordHeader*>(buf);
    *g = {uint16_t(abi::RecordKind::kGpuActivity), uint16_t(size), kind};
    EXPECT_TRUE(ring::record_well_formed(buf, size)) << kind;
    g->size = uint16_t(size + 8);
    EXPECT_FALSE(ring::record_well_formed(buf, size + 8)) << kind;
  }
  {
    std::memset(buf, 0, sizeof buf);
    auto* g = reinterpret_cast<abi::RecordHeader*>(buf);
    *g = {uint16_t(abi::RecordKind::kGpuActivity), 40, 8};  // no such kind
    EXPECT_FALSE(ring::record_well_formed(buf, 40));
  }

  // A Python sample: its frames fill the record exactly.
  auto* ps = reinterpret_cast<abi::PythonSampleRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  ps->header = {uint16_t(abi::RecordKind::kPythonSample), uint16_t(sizeof *ps + 2 * sizeof(abi::PythonFrame)), 2};
  EXPECT_TRUE(ring::record_well_formed(buf, ps->header.size));
  ps->header.aux = 3;  // more frames than the record holds
  EXPECT_FALSE(ring::record_well_formed(buf, ps->header.size));
  ps->header.aux = 0;
  EXPECT_FALSE(ring::record_well_formed(buf, ps->header.size));
  ps->header = {uint16_t(abi::RecordKind::kPythonSample), uint16_t(sizeof *ps + 65 * sizeof(abi::PythonFrame)), 65};
  EXPECT_FALSE(ring::record_well_formed(buf, ps->header.size));  // over kMaxPythonFrames

  auto* m = reinterpret_cast<abi::ModuleRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  m->header = {uint16_t(abi::RecordKind::kModuleMap), uint16_t(abi::align_record(sizeof *m + 20)),
               uint32_t(abi::ModuleEvent::kLoaded)};
  m->path_bytes = 20;
  m->build_id_bytes = 20;
  EXPECT_TRUE(ring::record_well_formed(buf, m->header.size));
  m->build_id_bytes = abi::kMaxBuildIdBytes + 1;  // more build-id than its field holds
  EXPECT_FALSE(ring::record_well_formed(buf, m->header.size));
  m->build_id_bytes = 20;
  m->path_bytes = 200;  // longer than the record
  EXPECT_FALSE(ring::record_well_formed(buf, m->header.size));
  m->path_bytes = 8;  // the record is larger than its path needs
  EXPECT_FALSE(ring::record_well_formed(buf, m->header.size));
  m->path_bytes = 20;
  m->header.aux = uint32_t(abi::ModuleEvent::kUnloaded);
  EXPECT_TRUE(ring::record_well_formed(buf, m->header.size));
  m->header.aux = 3;  // no such event
  EXPECT_FALSE(ring::record_well_formed(buf, m->header.size));
  m->header.aux = 0;
  EXPECT_FALSE(ring::record_well_formed(buf, m->header.size));

  auto* n = reinterpret_cast<abi::NvtxRecord*>(buf);
  std::memset(buf, 0, sizeof buf);
  n->header = {uint16_t(abi::RecordKind::kNvtx), uint16_t(abi::align_record(sizeof *n + 9)),
               uint32_t(abi::NvtxEvent::kPush)};
  n->text_bytes = 9;
  EXPECT_TRUE(ring::record_well_formed(buf, n->header.size));
  n->text_bytes = 40;  // longer than the record
  EXPECT_FALSE(ring::record_well_formed(buf, n->header.size));
  n->text_bytes = 1;  // the record is larger than its text needs
  EXPECT_FALSE(ring::record_well_formed(buf, n->header.size));
  n->text_bytes = 9;
  EXPECT_FALSE(ring::record_well_formed(buf, sizeof *n));  // its size says otherwise

  std::memset(buf, 0, sizeof buf);
  EXPECT_FALSE(ring::record_well_formed(buf, 8));  // kInvalid
}

// A /dev/shm with no room left: the producer must drop and count records rather than write to memory
// that is not ready (a SIGBUS in the traced program), leave errno alone, and resume once memory can
// be had again.
struct FakePopulate {
  static inline uint8_t* data = nullptr;
  static inline uint64_t allowed = 0;  // data bytes that can be made ready
  static inline int calls = 0;
  static bool populate(void* addr, size_t bytes) {
    ++calls;
    const uint64_t end = uint64_t(static_cast<uint8_t*>(addr) - data) + bytes;
    if (end <= allowed) return true;
    errno = ENOMEM;
    return false;
  }
};

TEST(RingMemory, ProducerDropsWhereItsMemoryCannotBeMadeReady) {
  constexpr uint32_t kRingBytes = 1u << 20;
  SessionFixture f(1, kRingBytes);
  abi::RingHeader* h = f.s.slot(0);
  uint8_t* data = f.s.data(0);
  std::memset(data, 0xAB, kRingBytes);  // a canary: nothing beyond the ready memory may change
  FakePopulate::data = data;
  FakePopulate::allowed = ring::kPopulateBytes;
  FakePopulate::calls = 0;
  ring::populate_hook = FakePopulate::populate;
  ring::Producer p;
  p.attach(h, data, kRingBytes);

  uint8_t rec[abi::kMaxRecordBytes];
  const uint32_t bytes = make_call(rec, 0, 2);
  const uint64_t fit = ring::kPopulateBytes / bytes;
  uint64_t issued = 0, stored = 0;
  errno = 12345;
  for (; issued < fit + 3 * ring::kPopulateRetryDrops; ++issued) {
    make_call(rec, issued, 2);
    stored += p.push(rec, bytes);
  }
  EXPECT_EQ(errno, 12345);
  EXPECT_EQ(stored, fit);
  EXPECT_EQ(p.dropped, issued - fit);
  EXPECT_EQ(h->dropped_records.load(), issued - fit);
  EXPECT_EQ(h->dropped_no_memory.load(), issued - fit);  // every one of them for want of memory
  // One try per kPopulateRetryDrops drops, not one per call: the first success, then failures.
  EXPECT_EQ(FakePopulate::calls, 1 + 3);
  for (uint64_t i = ring::kPopulateBytes; i < kRingBytes; ++i) ASSERT_EQ(data[i], 0xAB) << i;

  // Room again: the next retry succeeds and records flow.
  FakePopulate::allowed = kRingBytes;
  for (uint64_t i = 0; i < ring::kPopulateRetryDrops + 10; ++i, ++issued) {
    make_call(rec, issued, 2);
    stored += p.push(rec, bytes);
  }
  EXPECT_GT(stored, fit);
  EXPECT_EQ(stored + p.dropped, issued);
  ring::populate_hook = ring::populate_for_write;

  // What was stored comes out intact and in order.
  std::vector<uint8_t> scratch(1 << 16);
  uint64_t seen = 0;
  uint64_t expected_seq = 0;
  ring::drain(h, data, kRingBytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX, [&](const uint8_t* r, uint32_t n) {
    ApiCallRecord c;
    std::memcpy(&c, r, sizeof c);
    if (seen == fit) expected_seq = c.begin;  // the first record after the gap of drops
    check_call(r, n, seen < fit ? seen : expected_seq + (seen - fit));
    ++seen;
  });
  EXPECT_EQ(seen, stored);
}

// The real mechanism: the session's headers are backed at creation, and a producer backs its ring a
// segment at a time as it writes, never the whole ring up front.
TEST(RingMemory, RingMemoryIsBackedAheadOfTheProducerOnly) {
  {
    // Kernels before 5.14 do not know the advice; there pages are touched as before (populate_for_write).
    void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(probe, MAP_FAILED);
    const bool supported = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    munmap(probe, 4096);
    if (!supported) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14 and later)";
  }
  constexpr uint32_t kRingBytes = 4u << 20;
  SessionFixture f(2, kRingBytes);
  const long page = sysconf(_SC_PAGESIZE);
  auto resident = [&](const void* addr) {
    unsigned char vec = 0;
    const uintptr_t start = uintptr_t(addr) & ~uintptr_t(page - 1);
    EXPECT_EQ(mincore(reinterpret_cast<void*>(start), size_t(page), &vec), 0);
    return (vec & 1) != 0;
  };
  EXPECT_TRUE(resident(f.s.header()));
  EXPECT_TRUE(resident(f.s.slot(1)));
  uint8_t* data = f.s.data(0);
  EXPECT_FALSE(resident(data + kRingBytes / 2));

  ring::Producer p;
  p.attach(f.s.slot(0), f.s.data(0), kRingBytes);
  uint8_t rec[abi::kMaxRecordBytes];
  ASSERT_TRUE(p.push(rec, make_call(rec, 1, 0)));
  EXPECT_TRUE(resident(data + ring::kPopulateBytes - 1));
  EXPECT_FALSE(resident(data + kRingBytes / 2));
}

}  // namespace
}  // namespace cutrace
