// The compact encoding of records inside a kRecords block of the trace file (format.h).
//
// Ring records are fixed-width for the producer's sake; in the file most of their bytes are constant
// or repeat the previous call of the same function. A call is encoded as what cannot be predicted
// (its function, start and duration) plus only the fields that differ from that function's previous
// call in the block, announced by bits of the leading tag byte.
//
// A block holds two streams, one after the other: the structure (tags, function ids, changed
// fields, whole non-call records) and the times. The structure of a loop repeats exactly and zstd
// turns it into long matches; the times are what is left to entropy-code. Interleaved, neither is
// true, and zstd spends 5-8 times longer on the same calls and writes a larger file; separated, a
// launch/copy/sync loop costs zstd a few ns per call.
//
// The times are predicted too: a call starts shortly after the previous call ended, and lasts about
// as long as the previous call of the same function. Only the errors of those guesses are stored:
// on a launch/copy/sync loop with jittered times the times stream is a quarter smaller than with
// start deltas and absolute durations, the file 19% smaller (2.78 against 3.44 bytes per call),
// and zstd, whose time goes almost entirely into this stream, a quarter faster.
//
// Block body: u32 structure_bytes, the structure stream, then the times stream to the end.
// Varints are LEB128, "zigzag" maps signed to unsigned.
//   api call, structure: u8 tag = 0x80 | changes (kChange* bits below; bit 6 is reserved, 0),
//              varint api_id, then, each only when its bit is set, in this order:
//                kChangeResult       zigzag int64(result)
//                kChangeDepth        varint depth, varint outer_domains (they change together)
//                kChangeFlags        u8 flags
//                kChangeCorrelation  zigzag (correlation - predicted), predicted = previous call's
//                                    correlation + 1, or 0 when that was 0
//                kChangeArgCount     u8 arg_count
//                kChangeArgs         varint mask of the arguments that changed (bit i: argument i),
//                                    then per set bit, lowest first: zigzag (arg - previous)
//              A clear bit means: as in the previous call of this api_id in the block (result, depth,
//              outer_domains, flags, arg_count, duration and every argument start at 0 for a function's first call;
//              api ids >= kHistoryApis have no history and always compare against 0).
//   api call, times: zigzag (begin - previous call's end in the block, 0 for the first),
//              zigzag (duration - previous duration of this api_id), duration = end - begin
//   other kinds, structure only: u8 kind (abi::RecordKind, < 0x80, never kApiCall or kPad), varint n,
//              then the n bytes of the ring record (abi.h layout, times absolute ns)
// Each block starts from a fresh state, so every block decodes on its own.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cutrace/abi.h"

namespace cutrace::codec {

inline constexpr uint32_t kHistoryApis = 4096;
// Upper bounds of one encoded record in each stream: what a writer must have room for.
inline constexpr uint32_t kMaxEncodedBytes = 2 * abi::kMaxRecordBytes + 64;
inline constexpr uint32_t kMaxEncodedTimeBytes = 20;
// The u32 that gives the structure stream's length at the start of a block body.
inline constexpr uint32_t kBlockPrefixBytes = 4;

inline uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = uint8_t(v) | 0x80;
    v >>= 7;
  }
  *p++ = uint8_t(v);
  return p;
}

// Returns false on a truncated or over-long varint.
inline bool get_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  // Most fields of a loop's calls fit in one byte.
  if (p != end && *p < 0x80) {
    v = *p++;
    return true;
  }
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return shift < 63 || b <= 1;
  }
  return false;
}

inline constexpr uint8_t kCallTag = 0x80;
inline constexpr uint8_t kChangeResult = 1u << 0;
inline constexpr uint8_t kChangeDepth = 1u << 1;
inline constexpr uint8_t kChangeFlags = 1u << 2;
inline constexpr uint8_t kChangeCorrelation = 1u << 3;
inline constexpr uint8_t kChangeArgCount = 1u << 4;
inline constexpr uint8_t kChangeArgs = 1u << 5;
inline constexpr uint8_t kChangeReserved = 1u << 6;

// The previous call of one api id in the current block.
struct CallHistory {
  uint64_t generation = 0;
  uint64_t result = 0;
  uint64_t duration = 0;
  // In the order of abi::ApiCallRecord, so that the decoder copies the five with one copy.
  abi::DomainSet outer_domains = 0;
  uint8_t depth = 0;
  uint8_t arg_count = 0;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  std::array<uint64_t, abi::kMaxApiArgs> args{};
};

// The per-block memory of both sides: the previous call's end time and correlation and, per api
// id, its previous call. Entries carry the block generation, so starting a block costs nothing.
class BlockState {
 public:
  BlockState() : history_(new CallHistory[kHistoryApis]()) {}
  void start_block() {
    ++generation_;
    prev_end_ = 0;
    prev_correlation_ = 0;
  }
  uint64_t& prev_end() { return prev_end_; }
  uint32_t& prev_correlation() { return prev_correlation_; }
  // The previous call of api_id; for ids without history a zeroed entry that is not kept.
  CallHistory& history(uint32_t api_id) {
    CallHistory* e = &scratch_;
    if (api_id < kHistoryApis) e = &history_[api_id];
    if (e->generation != generation_ || e == &scratch_) {
      *e = CallHistory{};
      e->generation = generation_;
    }
    return *e;
  }

 private:
  std::unique_ptr<CallHistory[]> history_;
  CallHistory scratch_;
  uint64_t generation_ = 1;
  uint64_t prev_end_ = 0;
  uint32_t prev_correlation_ = 0;
};

inline uint32_t predicted_correlation(uint32_t previous) { return previous ? previous + 1 : 0; }

// Where the next record of a block is written: one cursor per stream.
struct StreamCursors {
  uint8_t* structure;
  uint8_t* times;
};

// The two streams of one block body being read.
struct BlockInput {
  const uint8_t* structure = nullptr;
  const uint8_t* structure_end = nullptr;
  const uint8_t* times = nullptr;
  const uint8_t* times_end = nullptr;

  // Splits a block body; false when its prefix is cut off or names more bytes than there are.
  bool open(const uint8_t* body, uint32_t bytes) {
    uint32_t structure_bytes;
    if (bytes < kBlockPrefixBytes) return false;
    std::memcpy(&structure_bytes, body, sizeof structure_bytes);
    if (structure_bytes > bytes - kBlockPrefixBytes) return false;
    structure = body + kBlockPrefixBytes;
    structure_end = times = structure + structure_bytes;
    times_end = body + bytes;
    return true;
  }
  // Both streams consumed exactly: a block whose streams disagree with its record count is corrupt.
  bool done() const { return structure == structure_end && times == times_end; }
};

// Encodes one well-formed kApiCall ring record with the given absolute times, which replace the
// record's own `begin` and `end` (the recorder converts ring ticks here without copying the record).
inline void encode_call(BlockState& state, const uint8_t* record, uint64_t begin, uint64_t end, StreamCursors& to) {
  abi::ApiCallRecord r;
  std::memcpy(&r, record, sizeof r);
  CallHistory& prev = state.history(r.header.aux);
  const uint64_t duration = end - begin;
  to.times = put_varint(to.times, zigzag(int64_t(begin - state.prev_end())));
  to.times = put_varint(to.times, zigzag(int64_t(duration - prev.duration)));
  state.prev_end() = end;
  prev.duration = duration;
  uint8_t* out = to.structure;
  uint8_t* tag = out++;
  uint8_t changes = 0;
  out = put_varint(out, r.header.aux);
  if (r.result != prev.result) {
    changes |= kChangeResult;
    out = put_varint(out, zigzag(int64_t(r.result)));
    prev.result = r.result;
  }
  if (r.depth != prev.depth || r.outer_domains != prev.outer_domains) {
    changes |= kChangeDepth;
    out = put_varint(out, r.depth);
    out = put_varint(out, r.outer_domains);
    prev.depth = r.depth;
    prev.outer_domains = r.outer_domains;
  }
  if (r.flags != prev.flags) {
    changes |= kChangeFlags;
    *out++ = r.flags;
    prev.flags = r.flags;
  }
  if (r.correlation != predicted_correlation(state.prev_correlation())) {
    changes |= kChangeCorrelation;
    out = put_varint(out, zigzag(int64_t(r.correlation) - int64_t(predicted_correlation(state.prev_correlation()))));
  }
  state.prev_correlation() = r.correlation;
  if (r.arg_count != prev.arg_count) {
    changes |= kChangeArgCount;
    *out++ = r.arg_count;
    prev.arg_count = r.arg_count;
  }
  // Arguments are read in place, one 8-byte load each: a variable-length copy would cost more (rep
  // movs) than the comparisons.
  const uint8_t* args = record + sizeof(abi::ApiCallRecord);
  auto arg = [args](uint32_t i) {
    uint64_t v;
    std::memcpy(&v, args + 8 * i, 8);
    return v;
  };
  uint32_t mask = 0;
  // Unrolled by a jump on the count: a loop whose trip count changes from call to call costs a
  // mispredicted exit branch on most calls.
  switch (r.arg_count) {
#define CUTRACE_ARG_CHANGED(i) \
  case i + 1:                  \
    mask |= uint32_t(arg(i) != prev.args[i]) << i;
    CUTRACE_ARG_CHANGED(11) [[fallthrough]];
    CUTRACE_ARG_CHANGED(10) [[fallthrough]];
    CUTRACE_ARG_CHANGED(9) [[fallthrough]];
    CUTRACE_ARG_CHANGED(8) [[fallthrough]];
    CUTRACE_ARG_CHANGED(7) [[fallthrough]];
    CUTRACE_ARG_CHANGED(6) [[fallthrough]];
    CUTRACE_ARG_CHANGED(5) [[fallthrough]];
    CUTRACE_ARG_CHANGED(4) [[fallthrough]];
    CUTRACE_ARG_CHANGED(3) [[fallthrough]];
    CUTRACE_ARG_CHANGED(2) [[fallthrough]];
    CUTRACE_ARG_CHANGED(1) [[fallthrough]];
    CUTRACE_ARG_CHANGED(0) [[fallthrough]];
#undef CUTRACE_ARG_CHANGED
    default:
      break;
  }
  if (mask) {
    changes |= kChangeArgs;
    out = put_varint(out, mask);
    for (uint32_t i = 0; i < r.arg_count; ++i) {
      if (!(mask >> i & 1)) continue;
      const uint64_t value = arg(i);
      out = put_varint(out, zigzag(int64_t(value - prev.args[i])));
      prev.args[i] = value;
    }
  }
  *tag = uint8_t(kCallTag | changes);
  to.structure = out;
}

// Encodes one well-formed ring record (ring::record_well_formed; times already absolute ns) at `out`,
// which has room for kMaxEncodedBytes. Returns the end of the encoding.
inline void encode(BlockState& state, const uint8_t* record, uint32_t bytes, StreamCursors& to) {
  abi::RecordHeader h;
  std::memcpy(&h, record, sizeof h);
  if (h.kind == uint16_t(abi::RecordKind::kApiCall)) {
    uint64_t begin, end;
    std::memcpy(&begin, record + offsetof(abi::ApiCallRecord, begin), sizeof begin);
    std::memcpy(&end, record + offsetof(abi::ApiCallRecord, end), sizeof end);
    encode_call(state, record, begin, end, to);
    return;
  }
  *to.structure++ = uint8_t(h.kind);
  to.structure = put_varint(to.structure, bytes);
  std::memcpy(to.structure, record, bytes);
  to.structure += bytes;
}

// Decodes the next record of a block into `record` (room for abi::kMaxRecordBytes) in ring layout
// with absolute times. Returns the record's size, or 0 when the input is malformed.
inline uint32_t decode(BlockState& state, BlockInput& in, uint8_t* record) {
  const uint8_t*& p = in.structure;
  const uint8_t* const end = in.structure_end;
  if (p == end) return 0;
  const uint8_t tag = *p++;
  uint64_t v;
  if (!(tag & kCallTag)) {
    if (tag == uint8_t(abi::RecordKind::kApiCall) || tag == uint8_t(abi::RecordKind::kPad)) return 0;
    if (!get_varint(p, end, v) || v < sizeof(abi::RecordHeader) || v > abi::kMaxRecordBytes || v % abi::kRecordAlign ||
        uint64_t(end - p) < v)
      return 0;
    std::memcpy(record, p, v);
    p += v;
    abi::RecordHeader h;
    std::memcpy(&h, record, sizeof h);
    if (h.kind != tag || h.size != v) return 0;
    return uint32_t(v);
  }
  if (tag & kChangeReserved) return 0;
  uint64_t api, gap, duration_error;
  if (!get_varint(p, end, api) || api > UINT32_MAX || !get_varint(in.times, in.times_end, gap) ||
      !get_varint(in.times, in.times_end, duration_error))
    return 0;
  CallHistory& prev = state.history(uint32_t(api));
  prev.duration += uint64_t(unzigzag(duration_error));
  if (tag & kChangeResult) {
    if (!get_varint(p, end, v)) return 0;
    prev.result = uint64_t(unzigzag(v));
  }
  if (tag & kChangeDepth) {
    if (!get_varint(p, end, v) || v > UINT8_MAX) return 0;
    prev.depth = uint8_t(v);
    if (!get_varint(p, end, v)) return 0;
    prev.outer_domains = v;
  }
  if (tag & kChangeFlags) {
    if (p == end) return 0;
    prev.flags = *p++;
  }
  uint32_t correlation = predicted_correlation(state.prev_correlation());
  if (tag & kChangeCorrelation) {
    if (!get_varint(p, end, v)) return 0;
    const int64_t value = int64_t(correlation) + unzigzag(v);
    if (value < 0 || value > int64_t(UINT32_MAX)) return 0;
    correlation = uint32_t(value);
  }
  state.prev_correlation() = correlation;
  if (tag & kChangeArgCount) {
    if (p == end || *p > abi::kMaxApiArgs) return 0;
    prev.arg_count = *p++;
  }
  if (tag & kChangeArgs) {
    if (!get_varint(p, end, v) || v == 0 || v >> prev.arg_count) return 0;
    const uint32_t mask = uint32_t(v);
    for (uint32_t i = 0; i < prev.arg_count; ++i) {
      if (!(mask >> i & 1)) continue;
      if (!get_varint(p, end, v)) return 0;
      prev.args[i] += uint64_t(unzigzag(v));
    }
  }
  static_assert(std::endian::native == std::endian::little, "the header is assembled as one little-endian word");
  // Field by field into the output: a record assembled on the stack and then copied costs a
  // store-forwarding stall per call (narrow stores read back as one wide load).
  const uint32_t size = uint32_t(sizeof(abi::ApiCallRecord) + 8 * prev.arg_count);
  const uint64_t header = uint64_t(abi::RecordKind::kApiCall) | uint64_t(size) << 16 | api << 32;
  const uint64_t begin = state.prev_end() + uint64_t(unzigzag(gap));
  const uint64_t call_end = begin + prev.duration;
  state.prev_end() = call_end;
  static_assert(offsetof(abi::ApiCallRecord, header) == 0 && offsetof(abi::ApiCallRecord, result) == 24 &&
                offsetof(abi::ApiCallRecord, outer_domains) == 32 && offsetof(abi::ApiCallRecord, depth) == 40 &&
                offsetof(abi::ApiCallRecord, arg_count) == 41 && offsetof(abi::ApiCallRecord, flags) == 42 &&
                offsetof(abi::ApiCallRecord, reserved) == 43 && offsetof(abi::ApiCallRecord, correlation) == 44);
  static_assert(offsetof(CallHistory, depth) == offsetof(CallHistory, outer_domains) + 8 &&
                offsetof(CallHistory, arg_count) == offsetof(CallHistory, outer_domains) + 9 &&
                offsetof(CallHistory, flags) == offsetof(CallHistory, outer_domains) + 10 &&
                offsetof(CallHistory, reserved) == offsetof(CallHistory, outer_domains) + 11);
  std::memcpy(record, &header, 8);
  std::memcpy(record + 8, &begin, 8);
  std::memcpy(record + 16, &call_end, 8);
  std::memcpy(record + 24, &prev.result, 8);
  std::memcpy(record + 32, &prev.outer_domains, 12);
  std::memcpy(record + 44, &correlation, 4);
  std::memcpy(record + sizeof(abi::ApiCallRecord), prev.args.data(), 8u * prev.arg_count);
  return size;
}

// Builds one block body in memory: for writers of synthetic traces (tests, tools) that have no
// reason to manage the two streams themselves.
class BlockBuilder {
 public:
  BlockBuilder() { state_.start_block(); }
  void add(const uint8_t* record, uint32_t bytes) {
    const size_t s = structure_.size(), t = times_.size();
    structure_.resize(s + kMaxEncodedBytes);
    times_.resize(t + kMaxEncodedTimeBytes);
    StreamCursors to{structure_.data() + s, times_.data() + t};
    encode(state_, record, bytes, to);
    structure_.resize(size_t(to.structure - structure_.data()));
    times_.resize(size_t(to.times - times_.data()));
    ++count_;
  }
  uint32_t count() const { return count_; }
  // The body: prefix, structure, times.
  std::vector<uint8_t> body() const {
    std::vector<uint8_t> out(kBlockPrefixBytes);
    const uint32_t structure_bytes = uint32_t(structure_.size());
    std::memcpy(out.data(), &structure_bytes, sizeof structure_bytes);
    out.insert(out.end(), structure_.begin(), structure_.end());
    out.insert(out.end(), times_.begin(), times_.end());
    return out;
  }

 private:
  BlockState state_;
  std::vector<uint8_t> structure_, times_;
  uint32_t count_ = 0;
};

}  // namespace cutrace::codec
