// Single-producer single-consumer byte ring over abi::RingHeader. The producer half runs on the hot path
// of every intercepted call (no locks, no syscalls, no allocation); the consumer half runs in the
// recorder and trusts nothing it reads.
#pragma once

#include <cstdint>
#include <cstring>

#include "cutrace/abi.h"

namespace cutrace::ring {

// Producer state kept in the producing thread (TLS), so the hot path touches the shared header only to
// publish `head` and, rarely, to refresh its view of `tail`.
struct Producer {
  abi::RingHeader* header = nullptr;
  uint8_t* data = nullptr;
  uint64_t mask = 0;         // ring_bytes - 1
  uint64_t head = 0;         // private copy of header->head
  uint64_t cached_tail = 0;  // last tail seen; refreshed only when the ring looks full
  uint64_t pushed = 0;
  uint64_t dropped = 0;

  void attach(abi::RingHeader* h, uint32_t ring_bytes) {
    header = h;
    data = abi::slot_data(h);
    mask = ring_bytes - 1;
    head = h->head.load(std::memory_order_relaxed);
    cached_tail = h->tail.load(std::memory_order_acquire);
    pushed = h->pushed_records.load(std::memory_order_relaxed);
    dropped = h->dropped_records.load(std::memory_order_relaxed);
  }

  // Returns where to write `bytes` (a multiple of 8, <= kMaxRecordBytes), or nullptr when the ring is
  // full, in which case the drop has been counted. The caller fills the record and calls commit().
  __attribute__((always_inline)) inline uint8_t* reserve(uint32_t bytes) {
    const uint64_t capacity = mask + 1;
    const uint64_t offset = head & mask;
    const uint64_t contiguous = capacity - offset;
    const uint64_t needed = contiguous < bytes ? contiguous + bytes : bytes;
    if (__builtin_expect(head + needed - cached_tail > capacity, 0)) {
      // Acquire pairs with the consumer's release of tail: the bytes it freed are no longer read.
      cached_tail = header->tail.load(std::memory_order_acquire);
      if (head + needed - cached_tail > capacity) {
        count_drop();
        return nullptr;
      }
    }
    if (__builtin_expect(contiguous < bytes, 0)) {
      auto* pad = reinterpret_cast<abi::RecordHeader*>(data + offset);
      pad->kind = uint16_t(abi::RecordKind::kPad);
      pad->size = uint16_t(contiguous);  // < bytes <= kMaxRecordBytes, so it fits
      pad->aux = 0;
      head += contiguous;
      return data;
    }
    return data + offset;
  }

  // Publishes the record written at the pointer reserve() returned.
  __attribute__((always_inline)) inline void commit(uint32_t bytes) {
    head += bytes;
    ++pushed;
    // Only this thread writes these; relaxed stores keep them readable for `cutrace info` and tests.
    header->pushed_records.store(pushed, std::memory_order_relaxed);
    // Release: the record bytes (and a pad, if any) are visible before the consumer sees the new head.
    header->head.store(head, std::memory_order_release);
  }

  inline void count_drop() {
    ++dropped;
    header->dropped_records.store(dropped, std::memory_order_relaxed);
  }

  // Convenience for slow-path records built elsewhere.
  inline bool push(const void* record, uint32_t bytes) {
    uint8_t* dst = reserve(bytes);
    if (!dst) return false;
    std::memcpy(dst, record, bytes);
    commit(bytes);
    return true;
  }
};

// Structural check of one record that has already been copied out of shared memory.
// Returns false for anything a well-behaved producer never writes.
inline bool record_well_formed(const uint8_t* p, uint32_t bytes) {
  if (bytes < sizeof(abi::RecordHeader) || bytes % abi::kRecordAlign || bytes > abi::kMaxRecordBytes) return false;
  abi::RecordHeader h;
  std::memcpy(&h, p, sizeof h);
  if (h.size != bytes) return false;
  switch (abi::RecordKind(h.kind)) {
    case abi::RecordKind::kApiCall: {
      if (bytes < sizeof(abi::ApiCallRecord)) return false;
      uint8_t count = p[offsetof(abi::ApiCallRecord, arg_count)];
      return count <= abi::kMaxApiArgs && bytes == sizeof(abi::ApiCallRecord) + 8u * count;
    }
    case abi::RecordKind::kString: {
      if (bytes < sizeof(abi::StringRecord)) return false;
      uint32_t length;
      std::memcpy(&length, p + offsetof(abi::StringRecord, length), sizeof length);
      return length <= abi::kMaxStringBytes && abi::align_record(sizeof(abi::StringRecord) + length) == bytes;
    }
    case abi::RecordKind::kThreadStart:
      return bytes == sizeof(abi::ThreadStartRecord);
    default:
      return false;
  }
}

struct DrainStats {
  uint64_t records = 0;    // well-formed records handed to the visitor
  uint64_t malformed = 0;  // records (or unreadable spans) skipped
  uint64_t bytes = 0;      // bytes consumed, pads included
};

// Consumer: copies [tail, head) out of shared memory in pieces of at most `scratch_bytes`, validates
// every record in the copy and hands each well-formed one to `visit(const uint8_t*, uint32_t)`. Then
// releases the space by advancing tail. `scratch` must hold at least kMaxRecordBytes bytes.
// A corrupt span (bad size, impossible head) cannot be resynchronised, so the rest of the published
// data is skipped and counted as one malformed span.
template <class Visitor>
DrainStats drain(abi::RingHeader* header, uint32_t ring_bytes, uint8_t* scratch, uint32_t scratch_bytes,
                 uint64_t max_bytes, Visitor&& visit) {
  DrainStats stats;
  const uint64_t capacity = ring_bytes, mask = capacity - 1;
  const uint8_t* data = abi::slot_data(header);
  uint64_t tail = header->tail.load(std::memory_order_relaxed);
  // Acquire pairs with the producer's release of head: the bytes before it are complete.
  const uint64_t head = header->head.load(std::memory_order_acquire);
  if (head < tail || head - tail > capacity || (head - tail) % abi::kRecordAlign) {
    stats.malformed = 1;
    header->tail.store(head, std::memory_order_release);
    return stats;
  }
  uint64_t end = head;
  if (end - tail > max_bytes) end = tail + max_bytes;
  while (tail < end) {
    const uint64_t offset = tail & mask;
    const uint64_t contiguous = capacity - offset;
    uint64_t span = end - tail;
    if (span > contiguous) span = contiguous;
    if (span > scratch_bytes) span = scratch_bytes;
    std::memcpy(scratch, data + offset, span);
    uint64_t pos = 0;
    bool corrupt = false;
    while (pos + sizeof(abi::RecordHeader) <= span) {
      abi::RecordHeader h;
      std::memcpy(&h, scratch + pos, sizeof h);
      if (h.kind == uint16_t(abi::RecordKind::kPad)) {
        // A pad always runs exactly to the end of the ring.
        // It is published together with the record after it, so it never reaches past head.
        if (h.size != contiguous - pos || h.size % abi::kRecordAlign || h.size < sizeof h ||
            tail + pos + h.size > head) { corrupt = true; break; }
        pos += h.size;  // may exceed span when span was cut by scratch size; handled below
        break;
      }
      if (h.size < sizeof h || h.size % abi::kRecordAlign || h.size > abi::kMaxRecordBytes ||
          h.size > contiguous - pos || tail + pos + h.size > head) { corrupt = true; break; }
      if (pos + h.size > span) break;  // record continues past this copy: fetch it with the next one
      if (record_well_formed(scratch + pos, h.size)) {
        visit(static_cast<const uint8_t*>(scratch + pos), uint32_t(h.size));
        ++stats.records;
      } else {
        ++stats.malformed;
      }
      pos += h.size;
    }
    if (corrupt) {
      ++stats.malformed;
      stats.bytes += head - tail;
      tail = head;
      break;
    }
    if (pos == 0) {
      // Not even one header fits: only possible with a span shorter than a record that the
      // producer claims to have published, i.e. `end` was cut by max_bytes. Stop for now.
      break;
    }
    tail += pos;
    stats.bytes += pos;
  }
  header->tail.store(tail, std::memory_order_release);
  return stats;
}

}  // namespace cutrace::ring
