// Bounded memory for reports of any trace length: rows sorted through temporary files (an external
// merge sort), and exact order statistics of values that do not fit in memory.
//
// Temporary files come from tmpfile(): unnamed, in $TMPDIR (default /tmp), gone when closed or when
// the process dies. A call trace report of N calls uses about 10 bytes per call there (RunFile).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <queue>
#include <string>
#include <type_traits>
#include <vector>

namespace cutrace::model {

// Memory a report may hold before it spills: several reports of one trace share a process, and the
// reader needs its own, so that together they stay well under the 256 MB budget.
inline constexpr size_t kSpillBudgetBytes = size_t(48) << 20;

// A temporary file written once and read back sequentially, any number of times.
class TempFile {
 public:
  TempFile() = default;
  ~TempFile() {
    if (file_) std::fclose(file_);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  TempFile(TempFile&& o) noexcept : file_(o.file_), bytes_(o.bytes_) { o.file_ = nullptr; }

  bool write(const void* data, size_t bytes) {
    if (!file_ && !(file_ = std::tmpfile())) return false;
    if (std::fwrite(data, 1, bytes, file_) != bytes) return false;
    bytes_ += bytes;
    return true;
  }
  // Starts reading from the beginning.
  bool rewind() { return !file_ || (std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0); }
  size_t read(void* data, size_t bytes) { return file_ ? std::fread(data, 1, bytes, file_) : 0; }
  // Appending after reading: back to the end.
  bool seek_end() { return !file_ || std::fseek(file_, 0, SEEK_END) == 0; }
  // Reads `bytes` at `offset` without moving the sequential position (after a flush of the writes).
  bool read_at(uint64_t offset, void* data, size_t bytes) {
    if (!file_ || std::fflush(file_) != 0) return bytes == 0;
    return ::pread(fileno(file_), data, bytes, off_t(offset)) == ssize_t(bytes);
  }
  uint64_t bytes() const { return bytes_; }

 private:
  FILE* file_ = nullptr;
  uint64_t bytes_ = 0;
};

// A sorted run of rows in a temporary file, compactly: neighbours in a sorted run differ little
// (start times a few µs apart, the same function, thread and result, sequence numbers one apart), so
// each 8-byte word of a row is stored as the LEB128 of the zigzag of its difference from the same
// word of the previous row. A 48-byte call row takes 7 to 10 bytes: the temporary files of a
// 20-million-call report shrink from about 1 GB to under 200 MB, and writing them was most of its time.
// Rows go in frames of up to kFrameRows ([u32 bytes][u32 rows][words]), each decodable alone.
template <class Row>
class RunFile {
  static_assert(std::is_trivially_copyable_v<Row> && sizeof(Row) % 8 == 0);
  static constexpr size_t kWords = sizeof(Row) / 8;

 public:
  static constexpr size_t kFrameRows = 4096;

  bool write(const Row* rows, size_t count) {
    std::vector<uint8_t> frame;
    for (size_t at = 0; at < count; at += kFrameRows) {
      const size_t n = std::min(kFrameRows, count - at);
      frame.resize(8 + n * kWords * 10);
      uint8_t* out = frame.data() + 8;
      uint64_t prev[kWords] = {};
      for (size_t r = 0; r < n; ++r) {
        uint64_t words[kWords];
        std::memcpy(words, &rows[at + r], sizeof(Row));
        for (size_t w = 0; w < kWords; ++w) {
          const uint64_t d = words[w] - prev[w];
          uint64_t z = (d << 1) ^ uint64_t(int64_t(d) >> 63);
          while (z >= 0x80) {
            *out++ = uint8_t(z) | 0x80;
            z >>= 7;
          }
          *out++ = uint8_t(z);
          prev[w] = words[w];
        }
      }
      const uint32_t header[2] = {uint32_t(out - frame.data() - 8), uint32_t(n)};
      std::memcpy(frame.data(), header, sizeof header);
      if (!file_.write(frame.data(), size_t(out - frame.data()))) return false;
    }
    return true;
  }
  bool rewind() { return file_.rewind(); }
  // The next frame's rows into `rows` (replacing its contents); false at the end or on damage.
  bool read_frame(std::vector<Row>& rows) {
    uint32_t header[2];
    rows.clear();
    if (file_.read(header, sizeof header) != sizeof header || header[1] == 0 || header[1] > kFrameRows ||
        header[0] > header[1] * kWords * 10)
      return false;
    bytes_.resize(header[0]);
    if (file_.read(bytes_.data(), header[0]) != header[0]) return false;
    rows.resize(header[1]);
    const uint8_t* p = bytes_.data();
    const uint8_t* const end = p + header[0];
    uint64_t prev[kWords] = {};
    for (Row& row : rows) {
      uint64_t words[kWords];
      for (size_t w = 0; w < kWords; ++w) {
        uint64_t z = 0;
        for (unsigned shift = 0;; shift += 7) {
          if (p == end || shift > 63) return false;
          const uint8_t b = *p++;
          z |= uint64_t(b & 0x7f) << shift;
          if (!(b & 0x80)) break;
        }
        prev[w] += (z >> 1) ^ (~(z & 1) + 1);
        words[w] = prev[w];
      }
      std::memcpy(&row, words, sizeof(Row));
    }
    return p == end;
  }
  uint64_t bytes() const { return file_.bytes(); }

 private:
  TempFile file_;
  std::vector<uint8_t> bytes_;
};

// Sorts rows of a trivially copyable type by `Less` in at most `budget` bytes of memory: full
// buffers are sorted and written to temporary files (RunFile), and for_each() merges them. For equal
// keys the order is unspecified, so `Less` should break ties (a sequence number) where the order
// matters.
template <class Row, class Less>
class SpillSorter {
  static_assert(std::is_trivially_copyable_v<Row>);

 public:
  explicit SpillSorter(size_t budget = kSpillBudgetBytes, Less less = Less())
      : capacity_(std::max<size_t>(1024, budget / sizeof(Row))), less_(less) {}

  void push(const Row& row) {
    // Reserved whole at once: growth by doubling would hold twice the budget for a moment.
    if (buffer_.capacity() < capacity_) buffer_.reserve(capacity_);
    if (buffer_.size() == capacity_) spill();
    // Rows often arrive in order (one thread's calls, or long stretches of it): such a buffer needs
    // no sort.
    if (!buffer_.empty() && less_(row, buffer_.back())) buffer_in_order_ = false;
    buffer_.push_back(row);
    ++size_;
  }
  uint64_t size() const { return size_; }
  bool failed() const { return failed_; }

  // Calls visit(const Row&) for every row in order. May be called again; no push() after the first.
  template <class Visit>
  bool for_each(Visit&& visit) {
    if (!sorted_) {
      if (!buffer_in_order_) std::sort(buffer_.begin(), buffer_.end(), less_);
      sorted_ = true;
    }
    if (runs_.empty()) {
      for (const Row& r : buffer_) visit(r);
      return !failed_;
    }
    // The rows still in memory are one more run, merged in place.
    struct Cursor {
      RunFile<Row>* file = nullptr;  // nullptr: the in-memory buffer
      std::vector<Row> block;
      size_t at = 0, memory_at = 0, rows_left = 0;
    };
    std::vector<Cursor> cursors(runs_.size() + 1);
    auto refill = [&](Cursor& c) -> bool {
      if (!c.file) return c.memory_at < buffer_.size();
      if (c.at < c.block.size()) return true;
      c.at = 0;
      if (c.rows_left == 0) return c.block.clear(), false;
      if (!c.file->read_frame(c.block) || c.block.size() > c.rows_left) {
        failed_ = true;  // a temporary file that reads back differently: the report says so
        c.block.clear();
        return false;
      }
      c.rows_left -= c.block.size();
      return true;
    };
    auto head = [&](const Cursor& c) -> const Row& { return c.file ? c.block[c.at] : buffer_[c.memory_at]; };
    auto greater = [&](size_t a, size_t b) { return less_(head(cursors[b]), head(cursors[a])); };
    std::priority_queue<size_t, std::vector<size_t>, decltype(greater)> heap(greater);
    for (size_t i = 0; i < runs_.size(); ++i) {
      cursors[i].file = &runs_[i];
      cursors[i].rows_left = run_rows_[i];
      if (!runs_[i].rewind()) failed_ = true;
      if (refill(cursors[i])) heap.push(i);
    }
    if (refill(cursors.back())) heap.push(runs_.size());
    while (!heap.empty()) {
      const size_t i = heap.top();
      heap.pop();
      Cursor& c = cursors[i];
      // The run stays in front while its rows come no later than the next run's head: runs of
      // mostly ordered input cost a heap operation per switch, not per row.
      do {
        visit(head(c));
        if (c.file) ++c.at;
        else ++c.memory_at;
      } while (refill(c) && (heap.empty() || !greater(i, heap.top())));
      if (refill(c)) heap.push(i);
    }
    return !failed_;
  }

 private:
  void spill() {
    if (!buffer_in_order_) std::sort(buffer_.begin(), buffer_.end(), less_);
    buffer_in_order_ = true;
    RunFile<Row>& run = runs_.emplace_back();
    if (!run.write(buffer_.data(), buffer_.size())) failed_ = true;
    run_rows_.push_back(buffer_.size());
    buffer_.clear();
  }

  size_t capacity_;
  Less less_;
  std::vector<Row> buffer_;
  std::deque<RunFile<Row>> runs_;
  std::vector<uint64_t> run_rows_;
  uint64_t size_ = 0;
  bool sorted_ = false, failed_ = false;
  bool buffer_in_order_ = true;
};

// Values (the durations of one row of a summary) for an exact order statistic (the median), held as
// counts of distinct values: call durations repeat (a 20-million-call trace of one loop has a few
// thousand distinct durations), so an open-addressing table of (value, count) holds them in a tiny
// fraction of 8 bytes per call and is updated in a few ns. When the owner's budget runs out the
// table is written to a temporary file as (value, count) pairs and emptied; the k-th smallest is then
// found by narrowing a weighted histogram of the pairs pass by pass (each pass reads the file once and
// keeps 65,536 counters) until the pairs left fit in `final_pass_pairs`. Exact either way.
class SpillingValues {
 public:
  explicit SpillingValues(size_t final_pass_pairs = kSpillBudgetBytes / sizeof(Pair) / 4)
      : final_pass_pairs_(final_pass_pairs) {}
  SpillingValues(SpillingValues&&) = default;

  // Returns true when `v` was not held yet (the table grew by one entry).
  bool add(uint64_t v) {
    if (slots_.empty()) rehash(64);
    for (size_t i = slot_of(v);; i = (i + 1) & mask_) {
      Pair& s = slots_[i];
      if (s.count == 0) {
        s = {v, 1};
        if (++used_ * 2 > slots_.size()) rehash(slots_.size() * 2);
        return true;
      }
      if (s.value == v) {
        ++s.count;
        return false;
      }
    }
  }
  // Distinct values held in memory; each costs at most kBytesPerHeldValue.
  size_t held() const { return used_; }
  static constexpr size_t kBytesPerHeldValue = 4 * sizeof(uint64_t) * 2;  // load <= 1/2, doubling

  bool spill() {
    if (used_ == 0) return true;
    std::vector<Pair> pairs = take_pairs();
    const bool ok = file_.write(pairs.data(), pairs.size() * sizeof(Pair));
    spilled_ += pairs.size();
    return ok;
  }

  // The k-th smallest (0-based) of the values added, which all lie in [lo, hi]. No add() after it.
  uint64_t select(uint64_t k, uint64_t lo, uint64_t hi, bool* ok) {
    if (spilled_ == 0) {
      if (used_) {
        sorted_ = take_pairs();
        std::sort(sorted_.begin(), sorted_.end(), [](const Pair& a, const Pair& b) { return a.value < b.value; });
      }
      return kth(sorted_, k, hi, ok);
    }
    if (!spill()) *ok = false;
    constexpr uint64_t kBuckets = 65536;
    std::vector<Pair> block(1 << 16);
    auto scan = [&](auto&& visit) {
      if (!file_.rewind()) *ok = false;
      for (size_t got; (got = file_.read(block.data(), block.size() * sizeof(Pair)) / sizeof(Pair)) > 0;)
        for (size_t i = 0; i < got; ++i) visit(block[i]);
    };
    uint64_t pairs_in_range = spilled_;
    for (;;) {
      if (lo == hi) return lo;
      if (pairs_in_range <= final_pass_pairs_) {
        std::vector<Pair> pairs;
        pairs.reserve(pairs_in_range);
        scan([&](const Pair& p) {
          if (p.value >= lo && p.value <= hi) pairs.push_back(p);
        });
        std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.value < b.value; });
        return kth(pairs, k, hi, ok);
      }
      const uint64_t width = (hi - lo) / kBuckets + 1;
      std::vector<uint64_t> values(kBuckets, 0), pairs(kBuckets, 0);
      scan([&](const Pair& p) {
        if (p.value < lo || p.value > hi) return;
        const uint64_t b = (p.value - lo) / width;
        values[b] += p.count;
        ++pairs[b];
      });
      uint64_t before = 0;
      size_t b = 0;
      while (b + 1 < kBuckets && before + values[b] <= k) before += values[b++];
      k -= before;
      pairs_in_range = pairs[b];
      lo += b * width;
      hi = std::min(hi, lo + (width - 1));
    }
  }

 private:
  struct Pair {
    uint64_t value;
    uint64_t count;  // 0: an empty slot
  };

  size_t slot_of(uint64_t v) const { return size_t((v * 0x9E3779B97F4A7C15ull) >> shift_) & mask_; }

  void rehash(size_t slots) {
    std::vector<Pair> old;
    old.swap(slots_);
    slots_.assign(slots, Pair{0, 0});
    mask_ = slots - 1;
    shift_ = 64 - unsigned(__builtin_ctzll(slots));
    used_ = 0;
    for (const Pair& p : old)
      if (p.count) put_back(p);
  }
  void put_back(const Pair& p) {
    size_t i = slot_of(p.value);
    while (slots_[i].count) i = (i + 1) & mask_;
    slots_[i] = p;
    ++used_;
  }
  // Empties the table (and frees it), returning its entries.
  std::vector<Pair> take_pairs() {
    std::vector<Pair> pairs;
    pairs.reserve(used_);
    for (const Pair& p : slots_)
      if (p.count) pairs.push_back(p);
    slots_ = {};
    used_ = 0;
    return pairs;
  }
  // The k-th smallest of the values counted by `sorted` (ascending by value, a value may repeat).
  static uint64_t kth(const std::vector<Pair>& sorted, uint64_t k, uint64_t fallback, bool* ok) {
    for (const Pair& p : sorted) {
      if (k < p.count) return p.value;
      k -= p.count;
    }
    *ok = false;
    return fallback;
  }

  size_t final_pass_pairs_;
  std::vector<Pair> slots_;
  std::vector<Pair> sorted_;  // the table, sorted by the first select() when nothing spilled
  size_t mask_ = 0, used_ = 0;
  unsigned shift_ = 64;
  TempFile file_;
  uint64_t spilled_ = 0;  // pairs in file_
};

}  // namespace cutrace::model
