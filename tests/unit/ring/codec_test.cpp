// The block codec must give back byte-for-byte the records it was given, and never read past its
// input or write past one record whatever bytes it is fed.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cutrace/record_codec.h"
#include "cutrace/ring.h"

namespace cutrace {
namespace {

std::vector<uint8_t> random_call(std::mt19937_64& rng, uint64_t& clock) {
  const uint32_t args = uint32_t(rng() % (abi::kMaxApiArgs + 1));
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord) + 8 * args);
  abi::ApiCallRecord r{};
  r.header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(rec.size()), uint32_t(rng() % 3 ? rng() % 40 : rng())};
  // Nested calls begin before the previous record's begin: deltas go both ways.
  clock += rng() % 5000;
  r.begin = clock - (rng() % 4 == 0 ? rng() % 3000 : 0);
  r.end = r.begin + (rng() % 2 ? rng() % 100000 : rng() >> 8);
  r.result = rng() % 2 ? 0 : (rng() % 2 ? uint64_t(-int64_t(rng() % 1000)) : rng());
  r.depth = uint16_t(rng() % 4);
  r.flags = uint8_t(rng() % 8);
  r.correlation = uint32_t(rng() % 2 ? 0 : rng());
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

TEST(RecordCodec, RoundTripIsByteForByteAcrossBlocks) {
  std::mt19937_64 rng(1);
  uint64_t clock = 1'000'000'000;
  codec::BlockState enc, dec;
  for (int block = 0; block < 50; ++block) {
    enc.start_block();
    dec.start_block();
    std::vector<std::vector<uint8_t>> records;
    std::vector<uint8_t> encoded(200 * codec::kMaxEncodedBytes);
    uint8_t* out = encoded.data();
    for (int i = 0; i < 200; ++i) {
      records.push_back(i % 37 == 0 ? string_record("_ZN2ns4axpyIfEEvT_PS1_S2_i" + std::to_string(i))
                                    : random_call(rng, clock));
      ASSERT_TRUE(ring::record_well_formed(records.back().data(), uint32_t(records.back().size())));
      out = codec::encode(enc, records.back().data(), uint32_t(records.back().size()), out);
    }
    const uint8_t* p = encoded.data();
    uint8_t decoded[abi::kMaxRecordBytes];
    for (auto& expected : records) {
      uint32_t n = codec::decode(dec, p, out, decoded);
      ASSERT_EQ(n, expected.size());
      ASSERT_EQ(0, std::memcmp(decoded, expected.data(), n));
    }
    EXPECT_EQ(p, out);
  }
}

TEST(RecordCodec, RepeatedCallsShrinkToAFewBytes) {
  codec::BlockState enc;
  enc.start_block();
  std::vector<uint8_t> rec(sizeof(abi::ApiCallRecord) + 8 * 5);
  uint8_t out[codec::kMaxEncodedBytes];
  size_t total = 0;
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
    total += size_t(codec::encode(enc, rec.data(), uint32_t(rec.size()), out) - out);
  }
  // kind, api, delta(2), duration(2), result, depth, flags, correlation, count, 5 unchanged args.
  EXPECT_LE(total, 100u * 16 + 64);
}

TEST(RecordCodec, GarbageNeverOverrunsInputOrOutput) {
  std::mt19937_64 rng(9);
  codec::BlockState dec;
  for (int round = 0; round < 20000; ++round) {
    dec.start_block();
    std::vector<uint8_t> input(rng() % 64);
    for (auto& b : input) b = uint8_t(rng() % 3 == 0 ? rng() % 3 : rng());
    if (!input.empty() && rng() % 2) input[0] = uint8_t(abi::RecordKind::kApiCall);
    // Exactly-sized heap copy so ASan catches a read past the end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[input.size()]);
    if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
    const uint8_t* p = copy.get();
    const uint8_t* end = copy.get() + input.size();
    uint8_t record[abi::kMaxRecordBytes];
    while (p < end) {
      const uint8_t* before = p;
      uint32_t n = codec::decode(dec, p, end, record);
      ASSERT_LE(p, end);
      if (n == 0) break;
      ASSERT_GT(p, before);
      ASSERT_LE(n, abi::kMaxRecordBytes);
    }
  }
}

}  // namespace
}  // namespace cutrace
