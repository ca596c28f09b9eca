// The block codec must give back byte-for-byte the records it was given, and never read past its
// input or write past one record whatever bytes it is fed.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cutrace/record_codec.h"
#include "cutrace/ring.h"

namespace cutrace {
namespace {

std::vector<uint8_t> random_call(std::mt19937_64& rng, uint64_t& clock, uint32_t& correlation) {
  const uint32_t args = uint32_t(rng() % (abi::kMaxApiArgs + 1));
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord) + 8 * args);
  abi::ApiCallRecord r{};
  r.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(rec.size()), uint32_t(rng() % 3 ? rng() % 40 : rng())};
  // Nested calls begin before the previous record's begin: deltas go both ways.
  clock += rng() % 5000;
  r.begin = clock - (rng() % 4 == 0 ? rng() % 3000 : 0);
  r.end = r.begin + (rng() % 2 ? rng() % 100000 : rng() >> 8);
  r.result = rng() % 2 ? 0 : (rng() % 2 ? uint64_t(-int64_t(rng() % 1000)) : rng());
  r.depth = uint8_t(rng() % 4);
  // Sets beyond the first eight domains too: the file stores all 64 bits.
  r.outer_domains = r.depth ? (rng() % 2 ? rng() % 256 : rng()) : 0;
  r.flags = uint8_t(rng() % 8);
  // Correlation ids mostly count up by one, as CUPTI's do; sometimes they jump or are absent.
  correlation = rng() % 4 == 0 ? uint32_t(rng() % 2 ? 0 : rng()) : (correlation ? correlation + 1 : 0);
  r.correlation = correlation;
  r.arg_count = uint8_t(args);
  std::memcpy(rec.data(), &r, sizeof r);
  for (uint32_t i = 0; i < args; ++i) {
    uint64_t v = rng() % 3 == 0 ? rng() : 0x7f0000000000ull + (rng() % 16) * 256;
    std::memcpy(rec.data() + sizeof r + 8 * i, &v, 8);
  }
  return rec;
}

std::vector<uint8_t> string_record(const std::string& text) {
  std::vector<uint8_t> rec(abi::align_record(uint32_t(sizeof(abi::StringRecord) + text.size())));
  abi::StringRecord s{};
  s.header = {uint16_t(abi::RecordKind::kString), uint16_t(rec.size()), uint32_t(abi::StringKind::kKernelName)};
  s.key = 0x401000;
  s.length = uint32_t(text.size());
  std::memcpy(rec.data(), &s, sizeof s);
  std::memcpy(rec.data() + sizeof s, text.data(), text.size());
  return rec;
}

std::vector<uint8_t> module_record(const std::string& path) {
  std::vector<uint8_t> rec(abi::align_record(uint32_t(sizeof(abi::ModuleRecord) + path.size())));
  abi::ModuleRecord m{};
  m.header = {uint16_t(abi::RecordKind::kModuleMap), uint16_t(rec.size()), uint32_t(abi::ModuleEvent::kLoaded)};
  m.base = 0x7f1234560000;
  m.text_start = m.base + 0x1000;
  m.text_end = m.base + 0x9000;
  m.flags = abi::kModuleFlagDeviceCode;
  m.build_id_bytes = 20;
  for (int i = 0; i < 20; ++i) m.build_id[i] = uint8_t(i * 7);
  m.path_bytes = uint32_t(path.size());
  std::memcpy(rec.data(), &m, sizeof m);
  std::memcpy(rec.data() + sizeof m, path.data(), path.size());
  return rec;
}

TEST(RecordCodec, RoundTripIsByteForByteAcrossBlocks) {
  std::mt19937_64 rng(1);
  uint64_t clock = 1'000'000'000;
  uint32_t correlation = 0;
  for (int block = 0; block < 50; ++block) {
    codec::BlockBuilder builder;
    std::vector<std::vector<uint8_t>> records;
    for (int i = 0; i < 200; ++i) {
      records.push_back(i % 37 == 0   ? string_record("_ZN2ns4axpyIfEEvT_PS1_S2_i" + std::to_string(i))
                        : i % 53 == 0 ? module_record("/usr/lib/libexample" + std::to_string(i) + ".so")
                                      : random_call(rng, clock, correlation));
      ASSERT_TRUE(ring::record_well_formed(records.back().data(), uint32_t(records.back().size())));
      builder.add(records.back().data(), uint32_t(records.back().size()));
    }
    const std::vector<uint8_t> body = builder.body();
    codec::BlockInput in;
    ASSERT_TRUE(in.open(body.data(), uint32_t(body.size())));
    codec::BlockState dec;
    dec.start_block();
    uint8_t decoded[abi::kMaxRecordBytes];
    for (auto& expected : records) {
      uint32_t n = codec::decode(dec, in, decoded);
      ASSERT_EQ(n, expected.size());
      ASSERT_EQ(0, std::memcmp(decoded, expected.data(), n));
    }
    EXPECT_TRUE(in.done());
  }
}

TEST(RecordCodec, RepeatedCallsShrinkToAFewBytes) {
  codec::BlockBuilder block;
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord) + 8 * 5);
  for (int i = 0; i < 100; ++i) {
    abi::ApiCallRecord r{};
    r.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(rec.size()), 17};
    r.begin = 1'000'000 + uint64_t(i) * 2000;
    r.end = r.begin + 1500;
    r.arg_count = 5;
    std::memcpy(rec.data(), &r, sizeof r);
    for (int a = 0; a < 5; ++a) {
      uint64_t v = 0x7f1234560000ull + a;
      std::memcpy(rec.data() + sizeof r + 8 * a, &v, 8);
    }
    block.add(rec.data(), uint32_t(rec.size()));
  }
  // After the first call: tag and api id, and in the times stream begin delta and duration (2 bytes
  // each); nothing else changed.
  EXPECT_LE(block.body().size(), 99u * 6 + 64);
}

// Encodes one call and returns its structure bytes (its times go to a stream of their own).
std::vector<uint8_t> encode_one(codec::BlockState& enc, uint32_t api, uint64_t begin, uint32_t correlation,
                                std::vector<uint64_t> args) {
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord) + 8 * args.size());
  abi::ApiCallRecord r{};
  r.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(rec.size()), api};
  r.begin = begin;
  r.end = begin + 10;
  r.correlation = correlation;
  r.arg_count = uint8_t(args.size());
  std::memcpy(rec.data(), &r, sizeof r);
  if (!args.empty()) std::memcpy(rec.data() + sizeof r, args.data(), 8 * args.size());
  std::vector<uint8_t> structure(codec::kMaxEncodedBytes), times(codec::kMaxEncodedTimeBytes);
  codec::StreamCursors to{structure.data(), times.data()};
  codec::encode(enc, rec.data(), uint32_t(rec.size()), to);
  structure.resize(size_t(to.structure - structure.data()));
  return structure;
}

TEST(RecordCodec, OnlyFieldsThatDifferFromTheFunctionsPreviousCallAreStored) {
  codec::BlockState enc;
  enc.start_block();
  // First call of api 3: its argument count and its nonzero arguments differ from the zero state.
  auto first = encode_one(enc, 3, 1000, 0, {0, 7, 0});
  EXPECT_EQ(first[0], codec::kCallTag | codec::kChangeArgCount | codec::kChangeArgs);
  // Another function in between keeps its own history.
  encode_one(enc, 4, 1100, 0, {9});
  // Same arguments as api 3's previous call: nothing but the times.
  auto same = encode_one(enc, 3, 1200, 0, {0, 7, 0});
  EXPECT_EQ(same, (std::vector<uint8_t>{codec::kCallTag, 3}));
  // One argument changed: a mask naming argument 2 and its difference.
  auto changed = encode_one(enc, 3, 1300, 0, {0, 7, 5});
  EXPECT_EQ(changed[0], codec::kCallTag | codec::kChangeArgs);
  EXPECT_EQ(changed, (std::vector<uint8_t>{codec::kCallTag | codec::kChangeArgs, 3, 1u << 2, 10}));
  // Correlation ids counting up by one cost nothing after the first.
  auto numbered = encode_one(enc, 3, 1400, 100, {0, 7, 5});
  EXPECT_EQ(numbered[0], codec::kCallTag | codec::kChangeCorrelation);
  auto next = encode_one(enc, 4, 1500, 101, {9});
  EXPECT_EQ(next[0], codec::kCallTag);
  // Ids without history compare against zero every time.
  auto unkept = encode_one(enc, 5000, 1600, 102, {1});
  auto unkept_again = encode_one(enc, 5000, 1700, 103, {1});
  EXPECT_EQ(unkept[0], codec::kCallTag | codec::kChangeArgCount | codec::kChangeArgs);
  EXPECT_EQ(unkept_again[0], unkept[0]);
}

TEST(RecordCodec, MalformedCallEncodingsAreRejected) {
  // Decodes a block of the given structure stream whose times stream holds zeros enough for it.
  auto decode_all = [](std::vector<uint8_t> structure) {
    std::vector<uint8_t> body(codec::kBlockPrefixBytes);
    const uint32_t structure_bytes = uint32_t(structure.size());
    std::memcpy(body.data(), &structure_bytes, 4);
    body.insert(body.end(), structure.begin(), structure.end());
    body.insert(body.end(), 2 * structure.size(), 0);
    codec::BlockInput in;
    EXPECT_TRUE(in.open(body.data(), uint32_t(body.size())));
    codec::BlockState dec;
    dec.start_block();
    uint8_t record[abi::kMaxRecordBytes];
    uint32_t n = 1;
    while (in.structure < in.structure_end && (n = codec::decode(dec, in, record)) != 0) {
    }
    return n;
  };
  // A well-formed call: api 1, two arguments, argument 1 changed by +1.
  EXPECT_NE(decode_all({0x80 | codec::kChangeArgCount | codec::kChangeArgs, 1, 2, 0b10, 2}), 0u);
  // The reserved bit.
  EXPECT_EQ(decode_all({0x80 | codec::kChangeReserved, 1}), 0u);
  // A mask naming an argument beyond the count, or naming none.
  EXPECT_EQ(decode_all({0x80 | codec::kChangeArgCount | codec::kChangeArgs, 1, 2, 0b100, 2}), 0u);
  EXPECT_EQ(decode_all({0x80 | codec::kChangeArgCount | codec::kChangeArgs, 1, 2, 0, 2}), 0u);
  // More arguments than a record holds.
  EXPECT_EQ(decode_all({0x80 | codec::kChangeArgCount, 1, abi::kMaxApiArgs + 1}), 0u);
  // A correlation below 0.
  EXPECT_EQ(decode_all({0x80 | codec::kChangeCorrelation, 1, 1}), 0u);
  // Calls only ever come as tags; raw call and pad records are not part of the encoding.
  EXPECT_EQ(decode_all({uint8_t(abi::RecordKind::kApiCall), 40}), 0u);
  EXPECT_EQ(decode_all({uint8_t(abi::RecordKind::kPad), 8, 0, 0, 8, 0, 0, 0, 0, 0}), 0u);
  // Cut off inside the fields its tag announces.
  EXPECT_EQ(decode_all({0x80 | codec::kChangeResult, 1}), 0u);
}

TEST(RecordCodec, ATimesStreamShorterThanItsCallsIsRejected) {
  codec::BlockBuilder builder;
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord));
  abi::ApiCallRecord r{};
  r.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(rec.size()), 1};
  r.begin = 1000;
  r.end = 1200;
  std::memcpy(rec.data(), &r, sizeof r);
  builder.add(rec.data(), uint32_t(rec.size()));
  std::vector<uint8_t> body = builder.body();
  body.pop_back();  // the last byte of the duration
  codec::BlockInput in;
  ASSERT_TRUE(in.open(body.data(), uint32_t(body.size())));
  codec::BlockState dec;
  dec.start_block();
  uint8_t record[abi::kMaxRecordBytes];
  EXPECT_EQ(codec::decode(dec, in, record), 0u);
  // A prefix naming more structure bytes than the body has.
  const uint32_t too_long = uint32_t(body.size());
  std::memcpy(body.data(), &too_long, 4);
  EXPECT_FALSE(in.open(body.data(), uint32_t(body.size())));
  EXPECT_FALSE(in.open(body.data(), 3));
}

TEST(RecordCodec, GarbageNeverOverrunsInputOrOutput) {
  std::mt19937_64 rng(9);
  codec::BlockState dec;
  for (int round = 0; round < 20000; ++round) {
    dec.start_block();
    std::vector<uint8_t> input(rng() % 64);
    for (auto& b : input) b = uint8_t(rng() % 3 == 0 ? rng() % 3 : rng());
    if (!input.empty() && rng() % 2) input[0] = uint8_t(codec::kCallTag | (rng() & 0x7f));
    // Exactly-sized heap copy so ASan catches a read past the end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[input.size()]);
    if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
    // Any split of the garbage into structure and times.
    codec::BlockInput in;
    in.structure = copy.get();
    in.times = in.structure_end = copy.get() + (input.empty() ? 0 : rng() % (input.size() + 1));
    in.times_end = copy.get() + input.size();
    uint8_t record[abi::kMaxRecordBytes];
    while (in.structure < in.structure_end) {
      const uint8_t* before = in.structure;
      uint32_t n = codec::decode(dec, in, record);
      ASSERT_LE(in.structure, in.structure_end);
      ASSERT_LE(in.times, in.times_end);
      if (n == 0) break;
      ASSERT_GT(in.structure, before);
      ASSERT_LE(n, abi::kMaxRecordBytes);
    }
  }
}

}  // namespace
}  // namespace cutrace
