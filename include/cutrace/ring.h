// Single-producer single-consumer byte ring over abi::RingHeader. The producer half runs on the hot path
// of every intercepted call (no locks, no allocation, and a system call only once per kPopulateBytes of
// a ring's first lap); the consumer half runs in the recorder and trusts nothing it reads.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cutrace/abi.h"

namespace cutrace::ring {

// Makes [addr, addr + bytes) of a shared mapping backed by memory, so that writing there can never
// raise SIGBUS; returns false when the filesystem has no room (the pages stay unbacked). The default
// asks the kernel with MADV_POPULATE_WRITE. Where the kernel cannot be asked (before 5.14: EINVAL; a
// seccomp filter: EPERM or ENOSYS) the pages are left to be touched as before rather than every
// record dropped. Replaceable for tests.
inline bool populate_for_write(void* addr, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t start = uintptr_t(addr) & ~(page - 1);
  if (madvise(reinterpret_cast<void*>(start), uintptr_t(addr) + bytes - start, MADV_POPULATE_WRITE) == 0) return true;
  // EFAULT: a write would have raised SIGBUS (no room); EHWPOISON: a page with a memory error;
  // ENOMEM, EAGAIN, EINTR: no memory for now.
  const int e = errno;
  return e != EFAULT && e != EHWPOISON && e != ENOMEM && e != EAGAIN && e != EINTR;
#else
  (void)addr;
  (void)bytes;
  return true;
#endif
}
inline bool (*populate_hook)(void* addr, size_t bytes) = populate_for_write;

// Ring memory is made ready this much at a time, ahead of the producer, during its first lap.
inline constexpr uint64_t kPopulateBytes = 256u << 10;
// After a failed populate, this many drops pass before the next try, so a full /dev/shm costs a
// system call per this many calls rather than per call.
inline constexpr uint64_t kPopulateRetryDrops = 1024;

// Producer state kept in the producing thread (TLS), so the hot path touches the shared header only to
// publish `head` and, rarely, to refresh its view of `tail`.
//
// A ring in a /dev/shm object is backed by memory only as far as it has been written; a write to a
// page the filesystem cannot supply (another session, or anything else, filled /dev/shm) raises
// SIGBUS in the traced program. So the producer writes only into memory it has made ready
// (populate_hook), kPopulateBytes ahead during its first lap, and counts a record as dropped when
// that fails. The hot path pays nothing for it, nor for the ring's wrap: one comparison against
// `limit` covers a full ring, the end of the ready memory and the end of the ring's current lap.
struct Producer {
  abi::RingHeader* header = nullptr;
  uint8_t* data = nullptr;
  uint64_t mask = 0;         // ring_bytes - 1
  uint64_t head = 0;         // private copy of header->head
  uint64_t cached_tail = 0;  // last tail seen; refreshed only when `limit` is reached
  uint64_t ready_bytes = 0;  // data bytes from the ring's start known to be backed by memory
  // A record may end at or below this without the slow path: never past the end of the lap `head`
  // is in, so such a record is contiguous.
  uint64_t limit = 0;
  uint64_t dropped = 0;
  uint64_t dropped_no_memory = 0;  // of `dropped`, for want of ready memory
  uint64_t retry_populate_at = 0;  // drop count at which a failed populate is tried again

  void attach(abi::RingHeader* h, uint8_t* ring_data, uint32_t ring_bytes) {
    header = h;
    data = ring_data;
    mask = ring_bytes - 1;
    head = h->head.load(std::memory_order_relaxed);
    cached_tail = h->tail.load(std::memory_order_acquire);
    dropped = h->dropped_records.load(std::memory_order_relaxed);
    dropped_no_memory = h->dropped_no_memory.load(std::memory_order_relaxed);
    // Whatever a previous owner of the slot made ready is made ready again, which costs little.
    ready_bytes = 0;
    limit = 0;
    retry_populate_at = 0;
  }

  // Returns where to write `bytes` (a multiple of 8, <= kMaxRecordBytes), or nullptr when the ring is
  // full or its memory cannot be made ready, in which case the drop has been counted. The caller
  // fills the record and calls commit().
  __attribute__((always_inline)) inline uint8_t* reserve(uint32_t bytes) {
    if (__builtin_expect(head + bytes <= limit, 1)) return data + (head & mask);
    return reserve_slow(bytes);
  }

  // Writes one record of `bytes` with `fill(uint8_t* where)` and publishes it; false when it was
  // dropped (counted). The hot path's form of reserve() and commit(): the ring position and header
  // are read once, before the record's stores, and no null test stands in the common case.
  template <class Fill>
  __attribute__((always_inline)) inline bool write(uint32_t bytes, Fill&& fill) {
    uint64_t position = head;
    uint8_t* where;
    if (__builtin_expect(position + bytes <= limit, 1)) {
      where = data + (position & mask);
    } else {
      where = reserve_slow(bytes);
      if (where == nullptr) return false;
      position = head;
    }
    abi::RingHeader* const published = header;
    fill(where);
    head = position + bytes;
    // Release: the record bytes (and a pad, if any) are visible before the consumer sees the new head.
    published->head.store(position + bytes, std::memory_order_release);
    return true;
  }

  // Publishes the record written at the pointer reserve() returned.
  __attribute__((always_inline)) inline void commit(uint32_t bytes) {
    head += bytes;
    // Release: the record bytes (and a pad, if any) are visible before the consumer sees the new head.
    header->head.store(head, std::memory_order_release);
  }

  inline void count_drop() {
    ++dropped;
    header->dropped_records.store(dropped, std::memory_order_relaxed);
  }

  // reserve() past `limit`: pads to the end of the lap when the record does not fit before it, makes
  // room (make_room) and recomputes `limit`, or counts the drop.
  __attribute__((noinline, cold)) uint8_t* reserve_slow(uint32_t bytes) {
    const uint64_t capacity = mask + 1;
    const uint64_t offset = head & mask;
    const uint64_t contiguous = capacity - offset;
    const uint64_t needed = contiguous < bytes ? contiguous + bytes : bytes;
    const bool room = make_room(needed);
    if (room && contiguous < bytes) {
      auto* pad = reinterpret_cast<abi::RecordHeader*>(data + offset);
      pad->kind = uint16_t(abi::RecordKind::kPad);
      pad->size = uint16_t(contiguous);  // < bytes <= kMaxRecordBytes, so it fits
      pad->aux = 0;
      head += contiguous;
    }
    // make_room() sets `limit` from the free space and the ready memory alone. Stored or dropped, the
    // lap's end must bound it too: after a record too large for its pad and itself is dropped, a
    // smaller one that fits the free space would otherwise be written across the end of the ring.
    const uint64_t lap_end = (head & ~mask) + capacity;
    if (limit > lap_end) limit = lap_end;
    if (!room) {
      count_drop();
      return nullptr;
    }
    return data + (head & mask);
  }

  // The slow path's refresh: reads tail, makes more memory ready if needed, and sets `limit` from the
  // free space and the ready memory. Returns whether `needed` bytes fit at head now. Leaves errno as it
  // found it: it runs inside the program's calls.
  __attribute__((noinline, cold)) bool make_room(uint64_t needed) {
    const uint64_t capacity = mask + 1;
    // Acquire pairs with the consumer's release of tail: the bytes it freed are no longer read.
    cached_tail = header->tail.load(std::memory_order_acquire);
    bool fits = head + needed - cached_tail <= capacity;
    // Positions below capacity are first written in the first lap; a record that wraps writes its
    // pad up to capacity.
    const uint64_t end = head + needed > capacity ? capacity : head + needed;
    if (fits && end > ready_bytes) {
      if (dropped >= retry_populate_at) {
        const int saved_errno = errno;
        uint64_t target = (end + kPopulateBytes - 1) / kPopulateBytes * kPopulateBytes;
        if (target > capacity) target = capacity;
        if (populate_hook(data + ready_bytes, target - ready_bytes))
          ready_bytes = target;
        else
          retry_populate_at = dropped + kPopulateRetryDrops;
        errno = saved_errno;
      }
      fits = end <= ready_bytes;
      if (!fits) {
        // reserve_slow() counts the drop itself; this says why.
        ++dropped_no_memory;
        header->dropped_no_memory.store(dropped_no_memory, std::memory_order_relaxed);
      }
    }
    limit = cached_tail + capacity;
    if (ready_bytes < capacity && ready_bytes < limit) limit = ready_bytes;
    return fits;
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

// Claims slot `slot` of `session` for one thread, following SlotState's protocol (abi.h): kFree ->
// kClaiming by compare-and-swap, the thread's identity and the session's next claim serial, `producer`
// attached, then kActive with release, so that the recorder sees the identity before the slot is
// active. False when the slot was not free. The caller wakes the recorder. Shared by the shim and the
// tests that play a producer, so that those test the protocol the shim follows.
inline bool claim_slot(abi::SessionHeader* session, uint32_t slot, uint32_t pid, uint32_t tid, uint32_t ppid,
                       uint64_t process_start_ticks, Producer* producer, uint64_t* serial = nullptr) {
  abi::RingHeader* ring = abi::slot_header(session, slot);
  uint32_t expected = uint32_t(abi::SlotState::kFree);
  if (ring->state.load(std::memory_order_relaxed) != expected) return false;
  // Acquire pairs with the recorder's release when it freed the slot: its reset of head/tail is seen.
  if (!ring->state.compare_exchange_strong(expected, uint32_t(abi::SlotState::kClaiming), std::memory_order_acquire,
                                           std::memory_order_relaxed))
    return false;
  ring->pid = pid;
  ring->tid = tid;
  ring->ppid = ppid;
  ring->process_start_ticks = process_start_ticks;
  // The slot's last owner may have died inside a call.
  ring->call_in_progress.store(0, std::memory_order_relaxed);
  ring->claim_serial = session->next_claim_serial.fetch_add(1, std::memory_order_relaxed);
  if (serial) *serial = ring->claim_serial;
  producer->attach(ring, abi::slot_data(session, slot), session->ring_bytes);
  // Release: the identity above is visible to the recorder before it sees the slot as active.
  ring->state.store(uint32_t(abi::SlotState::kActive), std::memory_order_release);
  return true;
}

// Structural check of one record that has already been copied out of shared memory: its size is
// the one its kind's row (abi::kRecordKinds) gives for its counts. Returns false for anything a
// well-behaved producer never writes, including the kinds only the recorder writes.
inline bool record_well_formed(const uint8_t* p, uint32_t bytes) {
  if (bytes < sizeof(abi::RecordHeader) || bytes % abi::kRecordAlign || bytes > abi::kMaxRecordBytes) return false;
  abi::RecordHeader h;
  std::memcpy(&h, p, sizeof h);
  if (h.size != bytes) return false;
  const abi::RecordKindInfo* info = abi::record_kind_info(h.kind);
  if (info == nullptr || !info->from_producers || bytes < info->fixed_bytes) return false;
  if (bytes != abi::record_bytes_by_counts(*info, p, h.aux)) return false;
  return h.kind != uint16_t(abi::RecordKind::kModuleMap) ||
         p[offsetof(abi::ModuleRecord, build_id_bytes)] <= abi::kMaxBuildIdBytes;
}

struct DrainStats {
  uint64_t records = 0;    // well-formed records handed to the visitor
  uint64_t malformed = 0;  // records (or unreadable spans) skipped
  uint64_t bytes = 0;      // bytes consumed, pads included
};

// Consumer: copies [tail, head) out of shared memory in pieces of at most `scratch_bytes`, validates
// every record in the copy and hands each well-formed one to `visit(const uint8_t*, uint32_t)`. Then
// releases the space by advancing tail. `data` is the ring's own (abi::slot_data). `scratch` must hold
// at least kMaxRecordBytes bytes.
// A corrupt span (bad size, impossible head) cannot be resynchronised, so the rest of the published
// data is skipped and counted as one malformed span.
template <class Visitor>
DrainStats drain(abi::RingHeader* header, const uint8_t* data, uint32_t ring_bytes, uint8_t* scratch,
                 uint32_t scratch_bytes, uint64_t max_bytes, Visitor&& visit) {
  DrainStats stats;
  const uint64_t capacity = ring_bytes, mask = capacity - 1;
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
