// The compact encoding of records inside a kRecords block of the trace file (format.h).
//
// Ring records are fixed-width for the producer's sake; in the file most of their bytes are constant
// or repeat the previous call. Encoding each field as a varint, times as deltas and arguments as the
// difference to the same argument of the previous call of the same function shrinks a typical call
// from 40-100 bytes to 12-20 before zstd sees it, which is what lets the recorder compress tens of
// millions of records per second and the file hold a repetitive pattern in a few bytes per call.
//
// Encoding of one record (all varints are LEB128, "zigzag" maps signed to unsigned):
//   u8 kind (abi::RecordKind)
//   kApiCall:  varint api_id, zigzag (begin - previous kApiCall begin of the block, 0 for the first),
//              varint (end - begin), zigzag int64(result), varint depth, u8 flags, varint correlation,
//              u8 arg_count, then per argument: zigzag (arg - the same argument of the previous call
//              of this api_id in the block, 0 if none; api ids >= kArgHistoryApis are never deltas)
//   other kinds: varint n, then the n bytes of the ring record (abi.h layout, times absolute ns)
// Each block starts from a fresh state, so every block decodes on its own.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cutrace/abi.h"

namespace cutrace::codec {

inline constexpr uint32_t kArgHistoryApis = 4096;
// Upper bound of one encoded record: what a writer must have room for.
inline constexpr uint32_t kMaxEncodedBytes = 2 * abi::kMaxRecordBytes + 64;

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
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return shift < 63 || b <= 1;
  }
  return false;
}

// The per-block memory of both sides: the previous begin time and, per api id, the previous call's
// arguments. Entries carry the block generation so starting a block costs nothing.
class BlockState {
 public:
  BlockState() : history_(new Entry[kArgHistoryApis]()) {}
  void start_block() {
    ++generation_;
    prev_begin_ = 0;
  }
  uint64_t& prev_begin() { return prev_begin_; }
  // The previous arguments of api_id, or nullptr when it keeps none.
  uint64_t* history(uint32_t api_id) {
    if (api_id >= kArgHistoryApis) return nullptr;
    Entry& e = history_[api_id];
    if (e.generation != generation_) {
      e.generation = generation_;
      e.args.fill(0);
    }
    return e.args.data();
  }

 private:
  struct Entry {
    uint64_t generation = 0;
    std::array<uint64_t, abi::kMaxApiArgs> args{};
  };
  std::unique_ptr<Entry[]> history_;
  uint64_t generation_ = 0;
  uint64_t prev_begin_ = 0;
};

// Encodes one well-formed kApiCall ring record with the given absolute times, which replace the
// record's own `begin` and `end` (the recorder converts ring ticks here without copying the record).
inline uint8_t* encode_call(BlockState& state, const uint8_t* record, uint64_t begin, uint64_t end, uint8_t* out) {
  abi::ApiCallRecord r;
  std::memcpy(&r, record, sizeof r);
  *out++ = uint8_t(abi::RecordKind::kApiCall);
  out = put_varint(out, r.header.aux);
  out = put_varint(out, zigzag(int64_t(begin - state.prev_begin())));
  state.prev_begin() = begin;
  out = put_varint(out, end - begin);
  out = put_varint(out, zigzag(int64_t(r.result)));
  out = put_varint(out, r.depth);
  *out++ = r.flags;
  out = put_varint(out, r.correlation);
  *out++ = r.arg_count;
  uint64_t* prev = state.history(r.header.aux);
  const uint8_t* args = record + sizeof(abi::ApiCallRecord);
  for (uint32_t i = 0; i < r.arg_count; ++i) {
    uint64_t arg;
    std::memcpy(&arg, args + 8 * i, 8);
    if (prev) {
      out = put_varint(out, zigzag(int64_t(arg - prev[i])));
      prev[i] = arg;
    } else {
      out = put_varint(out, zigzag(int64_t(arg)));
    }
  }
  return out;
}

// Encodes one well-formed ring record (ring::record_well_formed; times already absolute ns) at `out`,
// which has room for kMaxEncodedBytes. Returns the end of the encoding.
inline uint8_t* encode(BlockState& state, const uint8_t* record, uint32_t bytes, uint8_t* out) {
  abi::RecordHeader h;
  std::memcpy(&h, record, sizeof h);
  if (h.kind == uint16_t(abi::RecordKind::kApiCall)) {
    uint64_t begin, end;
    std::memcpy(&begin, record + offsetof(abi::ApiCallRecord, begin), sizeof begin);
    std::memcpy(&end, record + offsetof(abi::ApiCallRecord, end), sizeof end);
    return encode_call(state, record, begin, end, out);
  }
  *out++ = uint8_t(h.kind);
  out = put_varint(out, bytes);
  std::memcpy(out, record, bytes);
  return out + bytes;
}

// Decodes one record from [p, end) into `record` (room for abi::kMaxRecordBytes) in ring layout with
// absolute times. Returns the record's size, or 0 when the input is malformed; advances p.
inline uint32_t decode(BlockState& state, const uint8_t*& p, const uint8_t* end, uint8_t* record) {
  if (p == end) return 0;
  const uint8_t kind = *p++;
  uint64_t v;
  if (kind != uint8_t(abi::RecordKind::kApiCall)) {
    if (!get_varint(p, end, v) || v < sizeof(abi::RecordHeader) || v > abi::kMaxRecordBytes || v % abi::kRecordAlign ||
        uint64_t(end - p) < v)
      return 0;
    std::memcpy(record, p, v);
    p += v;
    abi::RecordHeader h;
    std::memcpy(&h, record, sizeof h);
    if (h.kind != kind || h.size != v) return 0;
    return uint32_t(v);
  }
  abi::ApiCallRecord r{};
  r.header.kind = kind;
  uint64_t api, delta, duration, result, depth, correlation;
  if (!get_varint(p, end, api) || api > UINT32_MAX || !get_varint(p, end, delta) || !get_varint(p, end, duration) ||
      !get_varint(p, end, result) || !get_varint(p, end, depth) || depth > UINT16_MAX || p == end)
    return 0;
  r.flags = *p++;
  if (!get_varint(p, end, correlation) || correlation > UINT32_MAX || p == end) return 0;
  r.arg_count = *p++;
  if (r.arg_count > abi::kMaxApiArgs) return 0;
  r.header.aux = uint32_t(api);
  r.header.size = uint16_t(sizeof(abi::ApiCallRecord) + 8 * r.arg_count);
  r.begin = state.prev_begin() + uint64_t(unzigzag(delta));
  state.prev_begin() = r.begin;
  r.end = r.begin + duration;
  r.result = uint64_t(unzigzag(result));
  r.depth = uint16_t(depth);
  r.correlation = uint32_t(correlation);
  std::memcpy(record, &r, sizeof r);
  uint64_t* prev = state.history(r.header.aux);
  for (uint32_t i = 0; i < r.arg_count; ++i) {
    if (!get_varint(p, end, v)) return 0;
    uint64_t arg = uint64_t(unzigzag(v));
    if (prev) {
      arg += prev[i];
      prev[i] = arg;
    }
    std::memcpy(record + sizeof r + 8 * i, &arg, 8);
  }
  return r.header.size;
}

}  // namespace cutrace::codec
