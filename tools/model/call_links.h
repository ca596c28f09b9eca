// CorrID as nsys shows it: CUPTI's correlation id of a call that gives the device work, waits for it
// or allocates, which joins the call to that work. The trace links each such call to its id through
// GPU activity's API link records (the thread, the api and a time inside the call). CUPTI delivers a
// link after its call, or the shim writes it from CUPTI's callback inside the call, before the call's
// own record. So a call waits on a list of its thread until its link comes; one whose link cannot come
// any more (a later call of the thread was linked, or the trace ends) is given up with 0, and so are
// the oldest when kMaxAwaiting calls wait, which keeps memory bounded. cuda_api_trace and the SQLite
// export take their CorrID from here, so the two agree.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

namespace cutrace::model {

// Row: anything with `uint64_t begin, duration, order` (order: the order calls were added, for giving
// up the oldest), `uint32_t api` and `uint32_t correlation` (set here; 0 when no link came). Emit:
// called once per row, when its id is decided; rows of one thread in the order they were added.
template <class Row, class Emit>
class CallLinks {
 public:
  explicit CallLinks(Emit emit) : emit_(std::move(emit)) {}

  // `thread`: pid << 32 | tid. A call that may get a link.
  void add(uint64_t thread, Row row) {
    row.correlation = 0;
    // A link the shim wrote from CUPTI's callback, inside the call, comes before the call's record.
    if (auto early = early_links_.find(thread); early != early_links_.end()) {
      std::deque<EarlyLink>& links = early->second;
      while (!links.empty() && links.front().start < row.begin) links.pop_front();  // earlier calls'
      for (auto it = links.begin(); it != links.end() && it->start <= row.begin + row.duration; ++it)
        if (it->api == row.api) {
          row.correlation = it->correlation;
          links.erase(links.begin(), it + 1);
          break;
        }
      if (links.empty()) early_links_.erase(early);
      if (row.correlation) {
        emit_(row);
        return;
      }
    }
    awaiting_[thread].push_back(row);
    if (++awaiting_count_ > kMaxAwaiting) release_oldest();
  }

  // An API link record of `thread`: CUPTI's interval lies inside the call on the same thread, and
  // names the same api (a link inside it of another api is a call it made, which CUPTI delivers
  // first). The thread's calls that ended before the link began will get none: CUPTI delivers a
  // thread's calls in order.
  void link(uint64_t thread, uint64_t start, uint32_t api, uint32_t correlation) {
    bool used = false;
    if (auto it = awaiting_.find(thread); it != awaiting_.end()) {
      std::deque<Row>& waiting = it->second;
      while (!waiting.empty()) {
        Row& r = waiting.front();
        if (r.begin + r.duration < start) {
          emit_(r);
        } else if (r.begin <= start && r.api == api) {
          r.correlation = correlation;
          emit_(r);
          used = true;
        } else {
          break;  // a call the link lies in but is not of, or a later call: it waits on
        }
        waiting.pop_front();
        --awaiting_count_;
        if (used) break;
      }
      if (waiting.empty()) awaiting_.erase(it);
    }
    if (used) return;
    // Before its call: kept for it, a bounded number per thread.
    std::deque<EarlyLink>& links = early_links_[thread];
    links.push_back({start, api, correlation});
    if (links.size() > kMaxEarlyLinks) links.pop_front();
  }

  // The trace ended: every call still waiting goes out without a link.
  void release_all() {
    for (auto& [thread, waiting] : awaiting_)
      for (const Row& r : waiting) emit_(r);
    awaiting_.clear();
    awaiting_count_ = 0;
  }

 private:
  static constexpr uint64_t kMaxAwaiting = 1u << 20;
  static constexpr size_t kMaxEarlyLinks = 256;
  struct EarlyLink {
    uint64_t start;
    uint32_t api, correlation;
  };

  void release_oldest() {
    // The thread whose first waiting call is oldest gives it up.
    auto oldest = awaiting_.end();
    for (auto it = awaiting_.begin(); it != awaiting_.end(); ++it)
      if (oldest == awaiting_.end() || it->second.front().order < oldest->second.front().order) oldest = it;
    if (oldest == awaiting_.end()) return;
    emit_(oldest->second.front());
    oldest->second.pop_front();
    --awaiting_count_;
    if (oldest->second.empty()) awaiting_.erase(oldest);
  }

  Emit emit_;
  std::unordered_map<uint64_t, std::deque<Row>> awaiting_;  // pid << 32 | tid -> calls waiting for a link
  std::unordered_map<uint64_t, std::deque<EarlyLink>> early_links_;
  uint64_t awaiting_count_ = 0;
};

}  // namespace cutrace::model
