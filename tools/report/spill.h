// Bounded memory for reports of any trace length: rows sorted through temporary files (an external
// merge sort), and exact order statistics of values that do not fit in memory.
//
// Temporary files come from tmpfile(): unnamed, in $TMPDIR (default /tmp), gone when closed or when
// the process dies. A report of N calls may use up to about 40 bytes per call there.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <queue>
#include <string>
#include <type_traits>
#include <vector>

namespace cutrace::report {

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

// Sorts rows of a trivially copyable type by `Less` in at most `budget` bytes of memory: full
// buffers are sorted and written to temporary files, and for_each() merges them. For equal keys the
// order is unspecified, so `Less` should break ties (a sequence number) where the order matters.
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
    buffer_.push_back(row);
    ++size_;
  }
  uint64_t size() const { return size_; }
  bool failed() const { return failed_; }

  // Calls visit(const Row&) for every row in order. May be called again; no push() after the first.
  template <class Visit>
  bool for_each(Visit&& visit) {
    if (!sorted_) {
      std::sort(buffer_.begin(), buffer_.end(), less_);
      sorted_ = true;
    }
    if (runs_.empty()) {
      for (const Row& r : buffer_) visit(r);
      return !failed_;
    }
    // The rows still in memory are one more run, merged in place.
    struct Cursor {
      TempFile* file = nullptr;  // nullptr: the in-memory buffer
      std::vector<Row> block;
      size_t at = 0, memory_at = 0;
    };
    std::vector<Cursor> cursors(runs_.size() + 1);
    const size_t block_rows = std::max<size_t>(256, (size_t(64) << 10) / sizeof(Row));
    auto refill = [&](Cursor& c) -> bool {
      if (!c.file) return c.memory_at < buffer_.size();
      if (c.at < c.block.size()) return true;
      c.block.resize(block_rows);
      const size_t got = c.file->read(c.block.data(), block_rows * sizeof(Row)) / sizeof(Row);
      c.block.resize(got);
      c.at = 0;
      return got > 0;
    };
    auto head = [&](const Cursor& c) -> const Row& { return c.file ? c.block[c.at] : buffer_[c.memory_at]; };
    auto greater = [&](size_t a, size_t b) { return less_(head(cursors[b]), head(cursors[a])); };
    std::priority_queue<size_t, std::vector<size_t>, decltype(greater)> heap(greater);
    for (size_t i = 0; i < runs_.size(); ++i) {
      cursors[i].file = &runs_[i];
      if (!runs_[i].rewind()) failed_ = true;
      if (refill(cursors[i])) heap.push(i);
    }
    if (refill(cursors.back())) heap.push(runs_.size());
    while (!heap.empty()) {
      const size_t i = heap.top();
      heap.pop();
      Cursor& c = cursors[i];
      visit(head(c));
      if (c.file) ++c.at;
      else ++c.memory_at;
      if (refill(c)) heap.push(i);
    }
    return !failed_;
  }

 private:
  void spill() {
    std::sort(buffer_.begin(), buffer_.end(), less_);
    TempFile run;
    if (!run.write(buffer_.data(), buffer_.size() * sizeof(Row))) failed_ = true;
    runs_.push_back(std::move(run));
    buffer_.clear();
  }

  size_t capacity_;
  Less less_;
  std::vector<Row> buffer_;
  std::vector<TempFile> runs_;
  uint64_t size_ = 0;
  bool sorted_ = false, failed_ = false;
};

// Values (the durations of one row of a summary) for an exact order statistic (the median): held in
// memory while the owner's budget allows, then in a temporary file, from which the k-th smallest is
// found by narrowing a histogram of the values pass by pass (each pass reads the file once and keeps
// 65,536 counters) until the candidates left fit in `final_pass_values`.
class SpillingValues {
 public:
  explicit SpillingValues(size_t final_pass_values = kSpillBudgetBytes / sizeof(uint64_t) / 4)
      : final_pass_values_(final_pass_values) {}
  SpillingValues(SpillingValues&&) = default;
  void add(uint64_t d) { held_.push_back(d); }
  size_t held() const { return held_.size(); }
  bool spill() {
    if (held_.empty()) return true;
    const bool ok = file_.write(held_.data(), held_.size() * sizeof(uint64_t));
    spilled_ += held_.size();
    held_.clear();
    held_.shrink_to_fit();
    return ok;
  }

  // The k-th smallest (0-based) of `count` values that all lie in [lo, hi].
  uint64_t select(uint64_t k, uint64_t count, uint64_t lo, uint64_t hi, bool* ok) {
    if (spilled_ == 0) {
      std::nth_element(held_.begin(), held_.begin() + long(k), held_.end());
      return held_[k];
    }
    if (!spill()) *ok = false;
    constexpr uint64_t kBuckets = 65536;
    std::vector<uint64_t> block(1 << 17);
    auto scan = [&](auto&& visit) {
      if (!file_.rewind()) *ok = false;
      for (size_t got; (got = file_.read(block.data(), block.size() * sizeof(uint64_t)) / sizeof(uint64_t)) > 0;)
        for (size_t i = 0; i < got; ++i) visit(block[i]);
    };
    uint64_t in_range = count;
    for (;;) {
      if (in_range <= final_pass_values_ || lo == hi) {
        if (lo == hi) return lo;
        std::vector<uint64_t> values;
        values.reserve(in_range);
        scan([&](uint64_t v) {
          if (v >= lo && v <= hi) values.push_back(v);
        });
        if (k >= values.size()) {
          *ok = false;
          return hi;
        }
        std::nth_element(values.begin(), values.begin() + long(k), values.end());
        return values[k];
      }
      const uint64_t width = (hi - lo) / kBuckets + 1;
      std::vector<uint64_t> histogram(kBuckets, 0);
      scan([&](uint64_t v) {
        if (v >= lo && v <= hi) ++histogram[(v - lo) / width];
      });
      uint64_t before = 0;
      size_t b = 0;
      while (b + 1 < kBuckets && before + histogram[b] <= k) before += histogram[b++];
      k -= before;
      in_range = histogram[b];
      lo += b * width;
      hi = std::min(hi, lo + (width - 1));
    }
  }

 private:
  size_t final_pass_values_;
  std::vector<uint64_t> held_;
  TempFile file_;
  uint64_t spilled_ = 0;
};

}  // namespace cutrace::report
