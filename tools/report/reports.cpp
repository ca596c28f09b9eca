#include "report/reports.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "reader/decode.h"
#include "report/nvtx_ranges.h"
#include "report/spill.h"
#include "report/symbolizer.h"

namespace cutrace::report {
namespace {

using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

double sample_deviation(uint64_t n, uint64_t sum, unsigned __int128 squares);

// One row of an nsys-style summary (cuda_api_sum, nvtx_sum): count, total, min, max and the sum of
// squares (exact, in 128 bits) as running values, and the durations for an exact median
// (SpillingValues).
struct DurationStats {
  uint64_t count = 0, total = 0, min = 0, max = 0;
  unsigned __int128 squares = 0;
  SpillingValues durations;

  // Returns whether the durations hold one more distinct value (for spill_when_over_budget).
  bool add(uint64_t d) {
    if (count == 0 || d < min) min = d;
    if (d > max) max = d;
    ++count;
    total += d;
    squares += (unsigned __int128)d * d;
    return durations.add(d);
  }

  // The cells the summaries share: Time (%), Total Time, the count, Avg, Med, Min, Max, StdDev.
  void append_cells(std::vector<Cell>& row, uint64_t grand_total, bool* ok) {
    double median = double(durations.select(count / 2, min, max, ok));
    if (count % 2 == 0) median = (double(durations.select(count / 2 - 1, min, max, ok)) + median) / 2;
    const double pct = grand_total ? 100.0 * double(total) / double(grand_total) : 0.0;
    row.insert(row.end(), {Cell::decimal(pct), Cell::integer(total), Cell::integer(count),
                           Cell::decimal(double((long double)total / (long double)count)), Cell::decimal(median),
                           Cell::integer(min), Cell::integer(max),
                           Cell::decimal(sample_deviation(count, total, squares))});
  }
};

// Half the spill budget for the durations of all rows of a summary together: once they hold that
// many distinct values, every row spills its own.
template <class Rows>
void spill_when_over_budget(Rows& rows, uint64_t& held, bool& ok) {
  if (++held < kSpillBudgetBytes / 2 / SpillingValues::kBytesPerHeldValue) return;
  for (auto& each : rows) ok = each.stats.durations.spill() && ok;
  held = 0;
}

// The rows of a summary, most total time first (ties broken by `tie`), and the grand total of their time.
template <class Row, class Tie>
std::vector<Row*> by_total_time(std::deque<Row>& rows, uint64_t& grand_total, Tie tie) {
  grand_total = 0;
  std::vector<Row*> order;
  for (Row& r : rows) {
    grand_total += r.stats.total;
    order.push_back(&r);
  }
  std::sort(order.begin(), order.end(), [&](const Row* a, const Row* b) {
    return a->stats.total != b->stats.total ? a->stats.total > b->stats.total : tie(*a, *b);
  });
  return order;
}

// cuda_api_sum (and the cuBLAS and cuDNN sums): per display name, as nsys groups by name
// (__cudaLaunchKernel and __cudaLaunchKernel_ptsz are both the one cudaLaunchKernel users wrote), the
// statistics of DurationStats.
class ApiSum : public Report {
 public:
  ApiSum(const char* title, CallFamily family, const ReportOptions& options)
      : title_(title), family_(family), options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_call(ev.call, family_, options_.show_internal)) return;
    if (row_of(ev.call).stats.add(ev.call.duration_ns())) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    if (!table_ready_) build_table();
    replay(table_, sink);
    return ok_;
  }

 private:
  struct Row {
    const std::string* name = nullptr;
    DurationStats stats;
  };

  Row& row_of(const ApiCall& call) {
    if (call.api_id < row_by_api_.size() && row_by_api_[call.api_id] >= 0) return rows_[size_t(row_by_api_[call.api_id])];
    auto [it, added] = row_by_name_.emplace(call.api->display_name, rows_.size());
    if (added) {
      rows_.emplace_back();
      rows_.back().name = &call.api->display_name;
    }
    if (call.api_id >= row_by_api_.size()) row_by_api_.resize(call.api_id + 1, -1);
    row_by_api_[call.api_id] = int32_t(it->second);
    return rows_[it->second];
  }

  void build_table() {
    table_ready_ = true;
    uint64_t grand_total = 0;
    const std::vector<Row*> order =
        by_total_time(rows_, grand_total, [](const Row& a, const Row& b) { return *a.name < *b.name; });
    table_.title = title_;
    table_.columns = {"Time (%)", "Total Time (ns)", "Num Calls", "Avg (ns)",   "Med (ns)",
                      "Min (ns)", "Max (ns)",        "StdDev (ns)", "Name"};
    for (Row* r : order) {
      std::vector<Cell>& row = table_.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(*r->name));
    }
    // The durations are not needed any more.
    rows_.clear();
  }

  const char* title_;
  CallFamily family_;
  ReportOptions options_;
  std::deque<Row> rows_;
  std::unordered_map<std::string_view, size_t> row_by_name_;
  std::vector<int32_t> row_by_api_;
  uint64_t held_ = 0;
  bool ok_ = true;
  bool table_ready_ = false;
  Table table_;
};

// The sample standard deviation, as nsys shows it, from the count, sum and sum of squares:
// (n * squares - sum^2) / (n * (n - 1)), exact in 128 bits where it fits.
double sample_deviation(uint64_t n, uint64_t sum, unsigned __int128 squares) {
  if (n < 2) return 0.0;
  unsigned __int128 n_squares = 0;
  const unsigned __int128 sum_squared = (unsigned __int128)sum * sum;
  long double variance;
  if (!__builtin_mul_overflow((unsigned __int128)n, squares, &n_squares) && n_squares >= sum_squared)
    variance = (long double)(n_squares - sum_squared) / ((long double)n * (long double)(n - 1));
  else
    variance = ((long double)squares - (long double)sum * (long double)sum / (long double)n) / (long double)(n - 1);
  return variance > 0 ? double(std::sqrt(variance)) : 0.0;
}

// The result cell of a call, as nsys shows it: the number. Set in place, as rows are written by the
// million.
void set_result(Cell& cell, const ApiSpec& api, uint64_t result) {
  switch (api.result_kind) {
    case format::ResultKind::kErrorCode: cell.set_signed(int64_t(result)); break;
    case format::ResultKind::kVoid: cell.set_borrowed(""); break;
    case format::ResultKind::kPointer: cell = Cell::string(reader::hex(result), true); break;
    default: cell.set_integer(result); break;
  }
}

// cuda_api_trace lists calls by start time. Threads reach the file in drain order, not time order, so
// rows are sorted through temporary files (SpillSorter) in bounded memory; equal start times keep
// the order of the file.
//
// CorrID is CUPTI's correlation id of the call, as nsys shows it, for the calls that give the device
// work, wait for it or allocate (0 for the others; in a trace without GPU activity, the reader's
// numbering of the calls): the trace links each to its call through GPU activity's API link
// records (the thread, the api and a time inside the call), which CUPTI delivers after the call. Such
// a call's row waits for its link on a list of its thread; a row whose link cannot come any more (a
// later call of the thread was linked, or the trace ends) goes out with 0, and so do the oldest when
// kMaxAwaiting rows wait, which keeps memory bounded.
class CudaApiTrace : public Report {
 public:
  explicit CudaApiTrace(const ReportOptions& options) : options_(options) {}

  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind == EventKind::kGpuActivity) {
      if (ev.gpu.kind == abi::GpuActivity::kApiLink) link(ev);
      return;
    }
    if (ev.kind != EventKind::kApiCall || !is_counted_cuda_call(ev.call, options_.show_internal)) return;
    Row row{ev.call.begin_ns, ev.call.duration_ns(), ev.call.result, next_++, ev.call.api_id, ev.thread->index,
            ev.call.correlation, 0};
    if (!awaits_links(reader)) {
      rows_.push(row);
      return;
    }
    // With GPU activity, CorrID is CUPTI's id or nothing: the reader's own numbering of calls could
    // equal an id of GPU work and join the wrong call to it.
    row.correlation = 0;
    if (ev.call.api->api_class == abi::ApiClass::kOther) {
      rows_.push(row);
      return;
    }
    const uint64_t thread = uint64_t(ev.thread->pid) << 32 | ev.thread->tid;
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
        rows_.push(row);
        return;
      }
    }
    awaiting_[thread].push_back(row);
    if (++awaiting_count_ > kMaxAwaiting) release_oldest();
  }

  uint64_t row_count(TraceReader&) override {
    release_all();
    return rows_.size();
  }

  bool write(TraceReader& reader, TableSink& sink) override {
    release_all();
    // As nsys: Start counts from the session's start, which is when the recorder created the file
    // (the program is held until then, so no call starts before it).
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    sink.begin("CUDA API Trace (cuda_api_trace)",
               {"Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "T-Pri", "Thread Name"});
    std::vector<Cell> cells(9);
    const bool ok = rows_.for_each([&](const Row& r) {
      const ApiSpec& api = reader.api(r.api);
      const reader::Thread* th = reader.thread(r.thread);
      cells[0].set_integer(r.begin > origin ? r.begin - origin : 0);
      cells[1].set_integer(r.duration);
      cells[2].set_borrowed(api.display_name);
      set_result(cells[3], api, r.result);
      cells[4].set_integer(r.correlation);
      cells[5].set_integer(th->pid);
      cells[6].set_integer(th->tid);
      if (th->priority >= 0) cells[7].set_integer(uint64_t(th->priority));
      else cells[7].set_borrowed("", true);
      cells[8].set_borrowed(th->name);
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  struct Row {
    uint64_t begin, duration, result, order;
    uint32_t api, thread, correlation, unused;
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const { return a.begin != b.begin ? a.begin < b.begin : a.order < b.order; }
  };
  static constexpr uint64_t kMaxAwaiting = 1u << 20;

  bool awaits_links(TraceReader& reader) {
    if (!links_checked_) {
      const std::string* gpu = reader.metadata_value("gpu_activity");
      awaits_links_ = gpu && *gpu == "cupti";
      links_checked_ = true;
    }
    return awaits_links_;
  }

  // A call's link: CUPTI's interval lies inside the call on the same thread, and names the same api (a
  // link inside it of another api is a call it made, which CUPTI delivers first). The thread's rows
  // that ended before the link began will get none: CUPTI delivers a thread's calls in order.
  void link(const Event& ev) {
    const uint64_t thread = uint64_t(ev.thread->pid) << 32 | ev.gpu.tid;
    bool used = false;
    if (auto it = awaiting_.find(thread); it != awaiting_.end()) {
      std::deque<Row>& waiting = it->second;
      while (!waiting.empty()) {
        Row& r = waiting.front();
        if (r.begin + r.duration < ev.gpu.start_ns) {
          rows_.push(r);
        } else if (r.begin <= ev.gpu.start_ns && r.api == ev.gpu.api_id) {
          r.correlation = ev.gpu.correlation;
          rows_.push(r);
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
    // Before its call (the shim writes links from CUPTI's callbacks, inside the call): kept for it, a
    // bounded number per thread.
    std::deque<EarlyLink>& links = early_links_[thread];
    links.push_back({ev.gpu.start_ns, ev.gpu.api_id, ev.gpu.correlation});
    if (links.size() > kMaxEarlyLinks) links.pop_front();
  }

  void release_oldest() {
    // The thread whose first waiting row is oldest gives it up.
    auto oldest = awaiting_.end();
    for (auto it = awaiting_.begin(); it != awaiting_.end(); ++it)
      if (oldest == awaiting_.end() || it->second.front().order < oldest->second.front().order) oldest = it;
    if (oldest == awaiting_.end()) return;
    rows_.push(oldest->second.front());
    oldest->second.pop_front();
    --awaiting_count_;
    if (oldest->second.empty()) awaiting_.erase(oldest);
  }

  void release_all() {
    for (auto& [thread, waiting] : awaiting_)
      for (const Row& r : waiting) rows_.push(r);
    awaiting_.clear();
    awaiting_count_ = 0;
  }

  ReportOptions options_;
  SpillSorter<Row, Earlier> rows_;
  uint64_t next_ = 0;
  bool links_checked_ = false, awaits_links_ = false;
  std::unordered_map<uint64_t, std::deque<Row>> awaiting_;  // pid << 32 | tid -> rows waiting for a link
  // Links that came before their call (the shim writes them from CUPTI's callbacks, inside the call).
  struct EarlyLink {
    uint64_t start;
    uint32_t api, correlation;
  };
  static constexpr size_t kMaxEarlyLinks = 256;
  std::unordered_map<uint64_t, std::deque<EarlyLink>> early_links_;
  uint64_t awaiting_count_ = 0;
};

// api_trace: every shown call of every domain, nested ones included, so that what a library did inside
// a call can be read: Depth and Domain say where a call sits, Self (ns) is its duration less that of
// the recorded calls made directly inside it. A thread's records arrive in the order its calls ended,
// children before their parent, so per thread the time of finished calls is summed per depth and the
// parent takes the sum one level below it. Rows are sorted like cuda_api_trace's, with their arguments
// kept in a temporary file; they are decoded at the end, when every kernel name is known.
class ApiTrace : public Report {
 public:
  explicit ApiTrace(const ReportOptions& options) : options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall) return;
    const ApiCall& c = ev.call;
    // Every call takes part in its parent's Self time, shown or not: hidden time is still not the
    // parent's own.
    std::vector<uint64_t>& below = children_[ev.thread->index];
    const size_t d = c.depth;
    if (below.size() < d + 2) below.resize(d + 2, 0);
    const uint64_t children = below[d + 1];
    // Levels below d belong to calls that ended inside this one; a record lost to a drop must not
    // carry its children's time over to an unrelated parent.
    std::fill(below.begin() + long(d) + 1, below.end(), 0);
    below[d] += c.duration_ns();
    if (!is_shown_call(c, options_.show_internal)) return;
    Row r{};
    r.begin = c.begin_ns;
    r.duration = c.duration_ns();
    r.self = children > r.duration ? 0 : r.duration - children;
    r.result = c.result;
    r.order = next_++;
    r.args_at = args_.bytes();
    r.api = c.api_id;
    r.thread = ev.thread->index;
    r.depth = c.depth;
    r.arg_count = c.arg_count;
    if (c.arg_count && !args_.write(c.args, 8u * c.arg_count)) ok_ = false;
    rows_.push(r);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    sink.begin("API Trace, all domains (api_trace)", {"Start (ns)", "Duration (ns)", "Self (ns)", "Depth", "Domain",
                                                      "Name", "Result", "Args", "Pid", "Tid", "Thread Name"});
    std::vector<Cell> cells(11);
    ApiCall call;
    const bool sorted_ok = rows_.for_each([&](const Row& r) {
      const reader::Thread* th = reader.thread(r.thread);
      call.api = &reader.api(r.api);
      call.api_id = r.api;
      call.arg_count = r.arg_count;
      if (r.arg_count && !args_.read_at(r.args_at, call.args, 8u * r.arg_count)) {
        ok_ = false;
        call.arg_count = 0;
      }
      std::string args;
      for (uint32_t i = 0; i < call.arg_count; ++i) {
        if (i) args += ", ";
        args += reader::arg_name(*call.api, i) + "=" + reader::decode_call_arg(reader, *th, call, i).to_string();
      }
      cells[0] = Cell::integer(r.begin);
      cells[1] = Cell::integer(r.duration);
      cells[2] = Cell::integer(r.self);
      cells[3] = Cell::integer(r.depth);
      cells[4] = Cell::borrowed(reader::domain_name(call.api->domain));
      cells[5] = Cell::borrowed(call.api->display_name);
      cells[6] = Cell::string(reader::result_text(*call.api, r.result));
      cells[7] = Cell::string(std::move(args));
      cells[8] = Cell::integer(th->pid);
      cells[9] = Cell::integer(th->tid);
      cells[10] = Cell::borrowed(th->name);
      sink.row(cells);
    });
    sink.end();
    return sorted_ok && ok_;
  }

 private:
  struct Row {
    uint64_t begin, duration, self, result, order, args_at;
    uint32_t api, thread;
    uint16_t depth;
    uint8_t arg_count, unused[5];
  };
  // A parent starts no later than its children; on a tie the outer call comes first.
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.depth != b.depth) return a.depth < b.depth;
      return a.order < b.order;
    }
  };
  ReportOptions options_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> children_;  // thread -> time of ended calls per depth
  SpillSorter<Row, Earlier> rows_;
  TempFile args_;
  uint64_t next_ = 0;
  bool ok_ = true;
};

// nvtx_sum: per range name and style, the statistics cuda_api_sum keeps per function. Ranges still
// open when the trace ends are not counted (they have no duration), as in nsys.
class NvtxSum : public Report {
 public:
  NvtxSum() : tracker_([this](const NvtxRange& r) { add_range(r); }) {}

  void add(TraceReader& reader, const Event& ev) override { tracker_.add(reader, ev); }
  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    if (!table_ready_) build_table();
    replay(table_, sink);
    return ok_;
  }

 private:
  struct Row {
    std::string name;
    bool push_pop = true;
    DurationStats stats;
  };

  void add_range(const NvtxRange& range) {
    const std::string key = (range.push_pop ? "P" : "S") + range.name;
    auto [it, added] = row_by_key_.emplace(key, rows_.size());
    if (added) {
      rows_.emplace_back();
      rows_.back().name = range.name;
      rows_.back().push_pop = range.push_pop;
    }
    if (rows_[it->second].stats.add(range.end_ns - range.start_ns)) spill_when_over_budget(rows_, held_, ok_);
  }

  void build_table() {
    table_ready_ = true;
    uint64_t grand_total = 0;
    const std::vector<Row*> order = by_total_time(rows_, grand_total, [](const Row& a, const Row& b) {
      return a.name != b.name ? a.name < b.name : a.push_pop > b.push_pop;
    });
    table_.title = "NVTX Range Summary (nvtx_sum)";
    table_.columns = {"Time (%)", "Total Time (ns)", "Instances", "Avg (ns)",    "Med (ns)",
                      "Min (ns)", "Max (ns)",        "StdDev (ns)", "Style",     "Range"};
    for (Row* r : order) {
      std::vector<Cell>& row = table_.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(r->push_pop ? "PushPop" : "StartEnd"));
      row.push_back(Cell::string(r->name));
    }
    rows_.clear();
  }

  NvtxRangeTracker tracker_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t held_ = 0;
  bool ok_ = true;
  bool table_ready_ = false;
  Table table_;
};

// nvtx_pushpop_trace: every push/pop range by start time, with nsys's columns. Names, range stacks
// and name trees are kept in a temporary file; rows sort like the call traces.
class NvtxPushPopTrace : public Report {
 public:
  NvtxPushPopTrace() : tracker_([this](const NvtxRange& r) { add_range(r); }) {}

  void add(TraceReader& reader, const Event& ev) override { tracker_.add(reader, ev); }
  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    sink.begin("NVTX Push/Pop Range Trace (nvtx_pushpop_trace)",
               {"Start (ns)", "End (ns)", "Duration (ns)", "DurChild (ns)", "DurNonChild (ns)", "Name", "PID", "TID",
                "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack", "NameTree"});
    std::vector<Cell> cells(14);
    std::string text;
    const bool sorted_ok = rows_.for_each([&](const Row& r) {
      const reader::Thread* th = reader.thread(r.thread);
      text.resize(size_t(r.name_bytes) + r.stack_bytes + r.tree_bytes);
      if (!texts_.read_at(r.text_at, text.data(), text.size())) {
        ok_ = false;
        text.assign(text.size(), '?');
      }
      const uint64_t duration = r.end - r.start;
      cells[0].set_integer(r.start > origin ? r.start - origin : 0);
      cells[1].set_integer(r.end > origin ? r.end - origin : 0);
      cells[2].set_integer(duration);
      cells[3].set_integer(r.child_ns);
      cells[4].set_integer(r.child_ns > duration ? 0 : duration - r.child_ns);
      cells[5].set_borrowed(std::string_view(text).substr(0, r.name_bytes));
      cells[6].set_integer(th->pid);
      cells[7].set_integer(th->tid);
      cells[8].set_integer(r.level);
      cells[9].set_integer(r.children);
      cells[10].set_integer(r.id);
      if (r.parent_id) cells[11].set_integer(r.parent_id);
      else cells[11].set_borrowed("");
      cells[12].set_borrowed(std::string_view(text).substr(r.name_bytes, r.stack_bytes));
      cells[13].set_borrowed(std::string_view(text).substr(size_t(r.name_bytes) + r.stack_bytes, r.tree_bytes));
      sink.row(cells);
    });
    sink.end();
    return sorted_ok && ok_;
  }

 private:
  struct Row {
    uint64_t start, end, child_ns, id, parent_id, text_at;
    uint32_t thread, level, children, name_bytes, stack_bytes, tree_bytes;
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const {
      if (a.start != b.start) return a.start < b.start;
      if (a.level != b.level) return a.level < b.level;
      return a.id < b.id;
    }
  };

  void add_range(const NvtxRange& range) {
    if (!range.push_pop) return;
    Row r{};
    r.start = range.start_ns;
    r.end = range.end_ns;
    r.child_ns = range.child_ns;
    r.id = range.id;
    r.parent_id = range.parent_id;
    r.text_at = texts_.bytes();
    r.thread = range.thread->index;
    r.level = range.level;
    r.children = range.children;
    r.name_bytes = uint32_t(range.name.size());
    r.stack_bytes = uint32_t(range.stack.size());
    r.tree_bytes = uint32_t(range.name_tree.size());
    const std::string text = range.name + range.stack + range.name_tree;
    if (!texts_.write(text.data(), text.size())) ok_ = false;
    rows_.push(r);
  }

  NvtxRangeTracker tracker_;
  SpillSorter<Row, Earlier> rows_;
  TempFile texts_;
  bool ok_ = true;
};

// callsite_sum: the slow calls that carry a backtrace (--cudabacktrace, --osrt-backtrace-threshold),
// grouped by API and by their stack named from the binaries, ranked by the total time they took: which
// line of the program issued the time (in a Python program, the innermost Python frame). Calls under
// their class's threshold carry no stack and are not counted here; cuda_api_sum counts every call.
class CallsiteSum : public Report {
 public:
  explicit CallsiteSum(const ReportOptions& options) : options_(options) {}

  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || ev.call.frame_count + ev.call.python_frame_count == 0 ||
        !is_shown_call(ev.call, options_.show_internal))
      return;
    const reader::Process& process = reader.process_of(*ev.thread);
    std::string stack, site, python;
    for (const std::string& frame : python_stack(process, ev.call.python_frames, ev.call.python_frame_count)) {
      if (site.empty()) site = frame;  // in a Python program the call site is the script's line
      if (!python.empty()) python += " <- ";
      python += frame;
    }
    auto append = [&](const std::string& frame) {
      if (site.empty()) site = frame;
      if (!stack.empty()) stack += " <- ";
      stack += frame;
    };
    for (const std::string& frame : symbols_.named_stack(process, ev.call.frames, ev.call.frame_count, ev.call.begin_ns)) append(frame);
    std::string key = ev.call.api->display_name;
    key += '\x1f';
    key += stack;
    key += '\x1f';
    key += python;
    auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
    if (added) {
      Row& row = rows_.emplace_back();
      row.name = &ev.call.api->display_name;
      row.site = std::move(site);
      row.stack = std::move(stack);
      row.python = std::move(python);
    }
    if (rows_[it->second].stats.add(ev.call.duration_ns())) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    if (!table_ready_) build_table();
    replay(table_, sink);
    return ok_;
  }

  std::vector<std::string> notes() const override { return symbols_.notes(); }

 private:
  struct Row {
    const std::string* name = nullptr;
    std::string site, stack, python;
    DurationStats stats;
  };

  void build_table() {
    table_ready_ = true;
    uint64_t grand_total = 0;
    const std::vector<Row*> order = by_total_time(rows_, grand_total, [](const Row& a, const Row& b) {
      if (*a.name != *b.name) return *a.name < *b.name;
      return a.stack != b.stack ? a.stack < b.stack : a.python < b.python;
    });
    table_.title = "Call Sites of Slow Calls (callsite_sum)";
    table_.columns = {"Time (%)", "Total Time (ns)", "Num Calls", "Avg (ns)", "Med (ns)", "Min (ns)",
                      "Max (ns)", "StdDev (ns)", "Name", "Call Site", "Stack", "Python Stack"};
    for (Row* r : order) {
      std::vector<Cell>& row = table_.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(*r->name));
      row.push_back(Cell::string(r->site));
      row.push_back(Cell::string(r->stack));
      row.push_back(Cell::string(r->python));
    }
    rows_.clear();
  }

  ReportOptions options_;
  Symbolizer symbols_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t held_ = 0;
  bool ok_ = true;
  bool table_ready_ = false;
  Table table_;
};

// cpu_sample_sum: where the CPU samples (-s cpu) found the threads, per function (the innermost frame
// of each sample, named from the binaries; inlined code counts for the function it was inlined into's
// innermost inlined function), most samples first. A frame no symbol names counts for its module.
class CpuSampleSum : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind != EventKind::kCpuSample || ev.sample.frame_count == 0) return;
    const ResolvedAddress& where = symbols_.resolve(reader.process_of(*ev.thread), ev.sample.frames[0], ev.sample.time_ns, true);
    std::string function = where.frames.empty() ? "[unknown]" : where.frames.front().function;
    std::string key = function + '\x1f' + where.module;
    auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
    if (added) rows_.push_back(Row{std::move(function), where.module.empty() ? "[unknown]" : where.module, 0});
    ++rows_[it->second].samples;
    ++total_;
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    Table table;
    table.title = "CPU Samples by Function (cpu_sample_sum)";
    table.columns = {"Samples (%)", "Samples", "Function", "Module"};
    std::vector<const Row*> order;
    for (const Row& r : rows_) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](const Row* a, const Row* b) {
      if (a->samples != b->samples) return a->samples > b->samples;
      return a->function != b->function ? a->function < b->function : a->module < b->module;
    });
    for (const Row* r : order)
      table.rows.push_back({Cell::decimal(100.0 * double(r->samples) / double(total_)), Cell::integer(r->samples),
                            Cell::string(r->function), Cell::string(r->module)});
    replay(table, sink);
    return true;
  }

  std::vector<std::string> notes() const override { return symbols_.notes(); }

 private:
  struct Row {
    std::string function, module;
    uint64_t samples;
  };
  Symbolizer symbols_;
  std::vector<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t total_ = 0;
};

// python_sample_sum: where the Python samples (--python-sampling) found the threads, per Python
// function: the samples it was running in (Self: the innermost frame) and those it was on the stack of
// (Total: counted once per sample, however deep its recursion), most self samples first.
class PythonSampleSum : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind != EventKind::kPythonSample || ev.python_sample.frame_count == 0) return;
    const reader::Process& process = reader.process_of(*ev.thread);
    std::unordered_set<size_t> on_stack;
    for (uint32_t i = 0; i < ev.python_sample.frame_count; ++i) {
      const abi::PythonFrame& frame = ev.python_sample.frames[i];
      auto known = process.python_functions.find(frame.function);
      std::string function, file;
      if (known != process.python_functions.end()) {
        function = known->second.name;
        file = known->second.file;
      } else {
        function = "python function " + reader::hex(frame.function);
      }
      std::string key = function + '\x1f' + file;
      auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
      if (added) rows_.push_back(Row{std::move(function), std::move(file), 0, 0});
      if (i == 0) ++rows_[it->second].self;
      if (on_stack.insert(it->second).second) ++rows_[it->second].total;
    }
    ++samples_;
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    Table table;
    table.title = "Python Samples by Function (python_sample_sum)";
    table.columns = {"Self (%)", "Self Samples", "Total (%)", "Total Samples", "Function", "File"};
    std::vector<const Row*> order;
    for (const Row& r : rows_) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](const Row* a, const Row* b) {
      if (a->self != b->self) return a->self > b->self;
      if (a->total != b->total) return a->total > b->total;
      return a->function != b->function ? a->function < b->function : a->file < b->file;
    });
    for (const Row* r : order)
      table.rows.push_back({Cell::decimal(100.0 * double(r->self) / double(samples_)), Cell::integer(r->self),
                            Cell::decimal(100.0 * double(r->total) / double(samples_)), Cell::integer(r->total),
                            Cell::string(r->function), Cell::string(r->file)});
    replay(table, sink);
    return true;
  }

 private:
  struct Row {
    std::string function, file;
    uint64_t self, total;
  };
  std::vector<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t samples_ = 0;
};

// --- GPU activity (CUPTI) ---

std::string memory_operation(const reader::GpuActivityEvent& g) { return reader::gpu_memory_operation(g.kind, g.copy_kind); }

bool is_gpu_work(const Event& ev) {
  return ev.kind == EventKind::kGpuActivity &&
         (ev.gpu.kind == abi::GpuActivity::kKernel || ev.gpu.kind == abi::GpuActivity::kMemcpy ||
          ev.gpu.kind == abi::GpuActivity::kMemset);
}

// The function's own name in a demangled one: without its return type, namespaces and classes,
// template arguments and parameters ("void ns::axpy<float>(int, float*)" -> "axpy").
std::string base_kernel_name(std::string_view demangled) {
  // The parameters: the last top-level parenthesised group.
  size_t end = demangled.size();
  if (end && demangled[end - 1] == ')') {
    int depth = 0;
    for (size_t i = end; i-- > 0;) {
      if (demangled[i] == ')') ++depth;
      else if (demangled[i] == '(' && --depth == 0) {
        end = i;
        break;
      }
    }
  }
  std::string_view name = demangled.substr(0, end);
  // Template arguments of the function itself.
  if (!name.empty() && name.back() == '>') {
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == '>') ++depth;
      else if (name[i] == '<' && --depth == 0) {
        name = name.substr(0, i);
        break;
      }
    }
  }
  // The qualifiers and the return type before it: what follows the last top-level "::" or space.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    else if ((c == '>' || c == ')') && depth > 0) --depth;
    else if (depth == 0 && (c == ' ' || (c == ':' && i + 1 < name.size() && name[i + 1] == ':')))
      start = c == ' ' ? i + 1 : i + 2;
  }
  return std::string(name.substr(start));
}

std::string kernel_display_name(const reader::GpuActivityEvent& g, KernelNames style = KernelNames::kDemangled) {
  if (!g.name) return "[unnamed kernel]";
  switch (style) {
    case KernelNames::kMangled: return g.name->mangled;
    case KernelNames::kBase: return base_kernel_name(g.name->demangled);
    default: return g.name->demangled;
  }
}

// cuda_gpu_kern_sum, cuda_gpu_mem_time_sum: per kernel name, or per memory operation, nsys's duration
// statistics of what the GPU ran.
class GpuTimeSum : public Report {
 public:
  GpuTimeSum(const char* title, bool kernels, KernelNames names) : title_(title), kernels_(kernels), names_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev) || (ev.gpu.kind == abi::GpuActivity::kKernel) != kernels_) return;
    std::string name = kernels_ ? kernel_display_name(ev.gpu, names_) : memory_operation(ev.gpu);
    auto [it, added] = row_by_name_.emplace(std::move(name), rows_.size());
    if (added) rows_.emplace_back().name = &it->first;
    if (rows_[it->second].stats.add(ev.gpu.duration_ns())) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order =
        by_total_time(rows_, grand_total, [](const Row& a, const Row& b) { return *a.name < *b.name; });
    Table table;
    table.title = title_;
    table.columns = {"Time (%)", "Total Time (ns)", kernels_ ? "Instances" : "Count", "Avg (ns)", "Med (ns)",
                     "Min (ns)", "Max (ns)",        "StdDev (ns)", kernels_ ? "Name" : "Operation"};
    for (Row* r : order) {
      std::vector<Cell>& row = table.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(*r->name));
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    const std::string* name = nullptr;
    DurationStats stats;
  };
  const char* title_;
  bool kernels_;
  KernelNames names_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_name_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

// cuda_gpu_mem_size_sum: per memory operation, the statistics of the bytes moved or set, in MB
// (10^6 bytes) as nsys shows them, most bytes first.
class GpuSizeSum : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev) || ev.gpu.kind == abi::GpuActivity::kKernel) return;
    auto [it, added] = row_by_name_.emplace(memory_operation(ev.gpu), rows_.size());
    if (added) rows_.emplace_back().name = &it->first;
    if (rows_[it->second].stats.add(ev.gpu.bytes)) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order =
        by_total_time(rows_, grand_total, [](const Row& a, const Row& b) { return *a.name < *b.name; });
    Table table;
    table.title = "GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum)";
    table.columns = {"Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation"};
    for (Row* r : order) {
      // The byte statistics, then each cell but the count scaled to MB.
      std::vector<Cell> bytes;
      r->stats.append_cells(bytes, grand_total, &ok_);
      auto mb = [](double v) { return Cell::decimal(v / 1e6, 3); };
      table.rows.push_back({mb(double(r->stats.total)), Cell::integer(r->stats.count), mb(bytes[3].d),
                            mb(bytes[4].d), mb(double(r->stats.min)), mb(double(r->stats.max)),
                            mb(bytes[7].d), Cell::string(*r->name)});
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    const std::string* name = nullptr;
    DurationStats stats;
  };
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_name_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

// cuda_gpu_trace: every kernel, copy and set the GPU ran, by start time, with nsys's columns. Rows
// are sorted through temporary files in bounded memory; names are looked up when written.
class GpuTrace : public Report {
 public:
  explicit GpuTrace(KernelNames names) : style_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev)) return;
    const reader::GpuActivityEvent& g = ev.gpu;
    Row r{};
    r.start = g.start_ns;
    r.duration = g.duration_ns();
    r.bytes = g.bytes;
    r.name = g.kind == abi::GpuActivity::kKernel && g.name ? std::hash<std::string>{}(g.name->mangled) : 0;
    r.order = next_++;
    r.process = ev.thread->process;
    // A copy issued through the runtime carries the driver call's id and the runtime call's: the
    // runtime call's is the one cuda_api_trace shows, so it is the one that joins the two.
    r.correlation = g.runtime_correlation ? g.runtime_correlation : g.correlation;
    r.device = g.device, r.context = g.context, r.stream = g.stream;
    std::copy(std::begin(g.grid), std::end(g.grid), r.grid);
    std::copy(std::begin(g.block), std::end(g.block), r.block);
    r.registers = g.registers_per_thread;
    r.static_shared = g.static_shared_bytes, r.dynamic_shared = g.dynamic_shared_bytes;
    r.kind = uint8_t(g.kind), r.copy_kind = g.copy_kind, r.src_kind = g.src_kind, r.dst_kind = g.dst_kind;
    if (g.kind == abi::GpuActivity::kMemset) r.src_kind = uint8_t(g.memory_kind);  // what it set
    if (r.name) names_.emplace(r.name, kernel_display_name(g, style_));
    rows_.push(r);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    sink.begin("CUDA GPU Trace (cuda_gpu_trace)",
               {"Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd",
                "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd", "DstMemKd", "Device",
                "Ctx", "GreenCtx", "Strm", "Name"});
    std::vector<Cell> cells(21);
    const bool ok = rows_.for_each([&](const Row& r) {
      const bool kernel = r.kind == uint8_t(abi::GpuActivity::kKernel);
      cells[0].set_integer(r.start > origin ? r.start - origin : 0);
      cells[1].set_integer(r.duration);
      cells[2].set_integer(r.correlation);
      for (int i = 0; i < 3; ++i) {
        if (kernel) cells[3 + i].set_integer(uint64_t(r.grid[i])), cells[6 + i].set_integer(uint64_t(r.block[i]));
        else cells[3 + i].set_borrowed("", true), cells[6 + i].set_borrowed("", true);
      }
      if (kernel) {
        cells[9].set_integer(r.registers);
        cells[10] = Cell::decimal(double(r.static_shared) / 1e6, 3);
        cells[11] = Cell::decimal(double(r.dynamic_shared) / 1e6, 3);
        for (int i = 12; i < 16; ++i) cells[i].set_borrowed("", true);
      } else {
        for (int i = 9; i < 12; ++i) cells[i].set_borrowed("", true);
        cells[12] = Cell::decimal(double(r.bytes) / 1e6, 3);
        // MB/s: bytes per ns is GB/s.
        cells[13] = Cell::decimal(r.duration ? double(r.bytes) * 1e3 / double(r.duration) : 0.0, 3);
        if (r.kind == uint8_t(abi::GpuActivity::kMemcpy)) {
          cells[14].set_borrowed(reader::gpu_memory_kind_name(r.src_kind));
          cells[15].set_borrowed(reader::gpu_memory_kind_name(r.dst_kind));
        } else {
          cells[14].set_borrowed(reader::gpu_memory_kind_name(r.src_kind));
          cells[15].set_borrowed("", true);
        }
      }
      if (r.device == UINT32_MAX) cells[16].set_borrowed("", true);
      else cells[16].set_integer(r.device);
      cells[17].set_integer(r.context);
      cells[18].set_borrowed("", true);
      if (r.stream == UINT32_MAX) cells[19].set_borrowed("", true);
      else cells[19].set_integer(r.stream);
      if (kernel) {
        auto it = names_.find(r.name);
        cells[20].set_borrowed(it == names_.end() ? std::string_view("[unnamed kernel]") : std::string_view(it->second));
      } else {
        name_ = reader::gpu_memory_operation(abi::GpuActivity(r.kind), r.copy_kind);
        cells[20].set_borrowed(name_);
      }
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  struct Row {
    uint64_t start, duration, bytes, name, order;
    uint32_t process, correlation, device, context, stream, registers, static_shared, dynamic_shared;
    int32_t grid[3], block[3];
    uint8_t kind, copy_kind, src_kind, dst_kind;
    uint32_t unused;
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const { return a.start != b.start ? a.start < b.start : a.order < b.order; }
  };
  SpillSorter<Row, Earlier> rows_;
  KernelNames style_;
  // Kernel names by a hash of the mangled name: bounded by the program's distinct kernels.
  std::unordered_map<uint64_t, std::string> names_;
  std::string name_;
  uint64_t next_ = 0;
};

// cuda_kern_exec_trace: nsys's kernel launch and execution trace: each kernel with the call that
// launched it (joined by CUPTI's correlation id through the trace's API links), when it was queued (the
// call's end), how long it waited and ran, by the call's start. A kernel whose link is not in the
// trace (CUPTI dropped it, or it came from no call CUPTI timed) has no API columns. Links and kernels
// wait for each other in bounded maps (kMaxWaiting each; the oldest give up) and rows are spill-sorted.
class KernExecTrace : public Report {
 public:
  explicit KernExecTrace(KernelNames names) : style_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kGpuActivity) return;
    const reader::GpuActivityEvent& g = ev.gpu;
    const uint64_t key = uint64_t(ev.thread->pid) << 32 | g.correlation;
    if (g.kind == abi::GpuActivity::kApiLink) {
      auto kernels = kernels_waiting_.equal_range(key);
      for (auto it = kernels.first; it != kernels.second; ++it) emit(it->second.row, &g);
      kernels_waiting_.erase(kernels.first, kernels.second);
      // A graph launch runs several kernels under one id: the link stays for those still to come.
      links_.insert_or_assign(key, Link{g.start_ns, g.end_ns, g.tid, g.api_id});
      link_order_.push_back(key);
      if (link_order_.size() > kMaxWaiting) {
        links_.erase(link_order_.front());
        link_order_.pop_front();
      }
      return;
    }
    if (g.kind != abi::GpuActivity::kKernel) return;
    Row row{};
    row.kernel_start = g.start_ns, row.kernel_end = g.end_ns;
    row.pid = ev.thread->pid, row.device = g.device, row.order = next_++;
    std::copy(std::begin(g.grid), std::end(g.grid), row.grid);
    std::copy(std::begin(g.block), std::end(g.block), row.block);
    row.name = g.name ? std::hash<std::string>{}(g.name->mangled) : 0;
    if (row.name) names_.emplace(row.name, kernel_display_name(g, style_));
    if (auto link = links_.find(key); link != links_.end()) {
      reader::GpuActivityEvent known;
      known.start_ns = link->second.start, known.end_ns = link->second.end;
      known.tid = link->second.tid, known.api_id = link->second.api;
      emit(row, &known);
      return;
    }
    kernels_waiting_.emplace(key, Waiting{row, next_});
    if (kernels_waiting_.size() > kMaxWaiting) {
      auto oldest = std::min_element(kernels_waiting_.begin(), kernels_waiting_.end(),
                                     [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
      emit(oldest->second.row, nullptr);
      kernels_waiting_.erase(oldest);
    }
  }

  uint64_t row_count(TraceReader&) override {
    release_all();
    return rows_.size();
  }

  bool write(TraceReader& reader, TableSink& sink) override {
    release_all();
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    auto since = [&](uint64_t t) { return t > origin ? t - origin : 0; };
    sink.begin("CUDA Kernel Launch & Exec Time Trace (cuda_kern_exec_trace)",
               {"API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)",
                "Kernel Dur (ns)", "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ", "BlockXYZ",
                "Kernel Name"});
    std::vector<Cell> cells(14);
    const bool ok = rows_.for_each([&](const Row& r) {
      const bool linked = r.api_end != 0;
      if (linked) {
        cells[0].set_integer(since(r.api_start));
        cells[1].set_integer(r.api_end - r.api_start);
        cells[2].set_integer(since(r.api_end));
        if (r.kernel_start >= r.api_end) cells[3].set_integer(r.kernel_start - r.api_end);
        else cells[3].set_borrowed("-", true);
        cells[6].set_integer(r.kernel_end - std::min(r.api_start, r.kernel_start));
        cells[8].set_integer(r.tid);
        cells[10].set_borrowed(reader.api(r.api).display_name);
      } else {
        for (int i : {0, 1, 2, 3, 6, 8, 10}) cells[size_t(i)].set_borrowed("", true);
      }
      cells[4].set_integer(since(r.kernel_start));
      cells[5].set_integer(r.kernel_end - r.kernel_start);
      cells[7].set_integer(r.pid);
      if (r.device == UINT32_MAX) cells[9].set_borrowed("", true);
      else cells[9].set_integer(r.device);
      grid_ = std::to_string(r.grid[0]) + " " + std::to_string(r.grid[1]) + " " + std::to_string(r.grid[2]);
      block_ = std::to_string(r.block[0]) + " " + std::to_string(r.block[1]) + " " + std::to_string(r.block[2]);
      cells[11].set_borrowed(grid_);
      cells[12].set_borrowed(block_);
      auto it = names_.find(r.name);
      cells[13].set_borrowed(it == names_.end() ? std::string_view("[unnamed kernel]") : std::string_view(it->second));
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  static constexpr size_t kMaxWaiting = 1u << 20;
  struct Row {
    uint64_t api_start, api_end, kernel_start, kernel_end, name, order;
    uint32_t pid, tid, api, device;
    int32_t grid[3], block[3];
  };
  struct Link {
    uint64_t start, end;
    uint32_t tid, api;
  };
  struct Waiting {
    Row row;
    uint64_t since;
  };
  struct Earlier {
    // By the call's start; kernels without a call by their own start, after those with one at it.
    bool operator()(const Row& a, const Row& b) const {
      const uint64_t ta = a.api_end ? a.api_start : a.kernel_start, tb = b.api_end ? b.api_start : b.kernel_start;
      return ta != tb ? ta < tb : a.order < b.order;
    }
  };

  // A row with its call, when `link` gives one (api_end is never 0 then: it marks a linked row).
  void emit(Row row, const reader::GpuActivityEvent* link) {
    if (link) {
      row.api_start = link->start_ns;
      row.api_end = std::max(link->end_ns, link->start_ns + 1);
      row.tid = link->tid;
      row.api = link->api_id;
    }
    rows_.push(row);
  }

  void release_all() {
    for (auto& [key, waiting] : kernels_waiting_) emit(waiting.row, nullptr);
    kernels_waiting_.clear();
  }

  KernelNames style_;
  SpillSorter<Row, Earlier> rows_;
  std::unordered_map<uint64_t, Link> links_;        // pid << 32 | correlation -> the call
  std::deque<uint64_t> link_order_;                  // links_' keys, oldest first
  std::unordered_multimap<uint64_t, Waiting> kernels_waiting_;  // kernels whose link has not come yet
  std::unordered_map<uint64_t, std::string> names_;
  std::string grid_, block_;
  uint64_t next_ = 0;
};

// cuda_api_gpu_sum: nsys's "CUDA Summary (API/Kernels/MemOps)": the CUDA API calls (per name), the
// kernels (per name) and the memory operations (per kind) in one table, their share of the time of
// all three together.
class ApiGpuSum : public Report {
 public:
  explicit ApiGpuSum(const ReportOptions& options) : options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind == EventKind::kApiCall) {
      if (is_counted_call(ev.call, kCudaFamily, options_.show_internal)) add_to("CUDA_API", ev.call.api->display_name, ev.call.duration_ns());
    } else if (is_gpu_work(ev)) {
      if (ev.gpu.kind == abi::GpuActivity::kKernel)
        add_to("CUDA_KERNEL", kernel_display_name(ev.gpu, options_.kernel_names), ev.gpu.duration_ns());
      else add_to("MEMORY_OPER", memory_operation(ev.gpu), ev.gpu.duration_ns());
    }
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order = by_total_time(rows_, grand_total, [](const Row& a, const Row& b) {
      return a.category != b.category ? a.category < b.category : a.name < b.name;
    });
    Table table;
    table.title = "CUDA Summary (API/Kernels/MemOps) (cuda_api_gpu_sum)";
    table.columns = {"Time (%)", "Total Time (ns)", "Count", "Avg (ns)", "Med (ns)", "Min (ns)",
                     "Max (ns)", "StdDev (ns)",     "Category", "Operation"};
    for (Row* r : order) {
      std::vector<Cell>& row = table.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(r->category));
      row.push_back(Cell::string(r->name));
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    std::string category, name;
    DurationStats stats;
  };
  void add_to(const char* category, std::string_view name, uint64_t duration) {
    std::string key = std::string(category) + '\x1f';
    key += name;
    auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
    if (added) {
      Row& r = rows_.emplace_back();
      r.category = category;
      r.name = std::string(name);
    }
    if (rows_[it->second].stats.add(duration)) spill_when_over_budget(rows_, held_, ok_);
  }
  ReportOptions options_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

// cpu_ctxsw_sum: per thread, how often --cpuctxsw saw it leave its CPU (blocked, or preempted while
// runnable) and how long it was off CPU, most time off CPU first. The thread's switches are ordered by
// time first: each CPU's are read in turn.
class CpuCtxswSum : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kContextSwitch) return;
    changes_[ev.thread->index].push_back({ev.context_switch.time_ns, ev.context_switch.change});
  }

  uint64_t row_count(TraceReader&) override { return changes_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    struct Row {
      const reader::Thread* thread;
      uint64_t blocked = 0, preempted = 0;
      DurationTotals off;
    };
    std::vector<Row> rows;
    for (auto& [index, changes] : changes_) {
      std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) { return a.time < b.time; });
      Row row{&reader.threads()[index], 0, 0, {}};
      uint64_t left = 0;
      bool off = false;
      for (const Change& c : changes) {
        if (c.change == abi::ContextSwitch::kIn) {
          if (off) row.off.add(c.time - left);
          off = false;
        } else {
          ++(c.change == abi::ContextSwitch::kPreempted ? row.preempted : row.blocked);
          left = c.time;
          off = true;
        }
      }
      rows.push_back(row);
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      if (a.off.total != b.off.total) return a.off.total > b.off.total;
      return a.thread->index < b.thread->index;
    });
    Table table;
    table.title = "CPU Context Switches per Thread (cpu_ctxsw_sum)";
    table.columns = {"Off-CPU Time (ns)", "Switches Out", "Blocked", "Preempted", "Avg Off (ns)", "Max Off (ns)",
                     "Pid", "Tid", "Thread Name"};
    for (const Row& r : rows)
      table.rows.push_back({Cell::integer(r.off.total), Cell::integer(r.blocked + r.preempted), Cell::integer(r.blocked),
                            Cell::integer(r.preempted),
                            Cell::decimal(r.off.count ? double(r.off.total) / double(r.off.count) : 0.0),
                            Cell::integer(r.off.max), Cell::integer(r.thread->pid), Cell::integer(r.thread->tid),
                            Cell::string(r.thread->name)});
    replay(table, sink);
    return true;
  }

 private:
  struct Change {
    uint64_t time;
    abi::ContextSwitch change;
  };
  struct DurationTotals {
    uint64_t count = 0, total = 0, max = 0;
    void add(uint64_t d) {
      ++count;
      total += d;
      max = std::max(max, d);
    }
  };
  std::map<uint32_t, std::vector<Change>> changes_;  // by thread index
};

}  // namespace

const std::vector<ReportInfo>& stats_reports() {
  static const std::vector<ReportInfo> kReports = {
      {"cuda_api_sum", "CUDA API Summary: time, calls, average, median, min, max, stddev per API (default)",
       "CUDA trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiSum>("CUDA API Summary (cuda_api_sum)", kCudaFamily, o);
       }},
      {"cuda_api_trace", "CUDA API Trace: every call by start time, with result, pid, tid and thread name",
       "CUDA trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<CudaApiTrace>(o);
       }},
      {"cublas_api_sum", "cuBLAS API Summary: cuda_api_sum's columns for cuBLAS and cuBLASLt calls",
       "cuBLAS trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiSum>("cuBLAS API Summary (cublas_api_sum)", kCublasFamily, o);
       }},
      {"cudnn_api_sum", "cuDNN API Summary: cuda_api_sum's columns for cuDNN calls", "cuDNN trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiSum>("cuDNN API Summary (cudnn_api_sum)", kCudnnFamily, o);
       }},
      {"osrt_sum", "OS Runtime Summary: cuda_api_sum's columns for the blocking libc calls -t osrt recorded",
       "OS Runtime trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiSum>("OS Runtime Summary (osrt_sum)", kOsrtFamily, o);
       }},
      {"api_trace", "every call of every domain, nested ones too, with depth, self time and decoded arguments",
       "API trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiTrace>(o);
       }},
      {"nvtx_sum", "NVTX Range Summary: time, instances, average, median, min, max, stddev per range name and style",
       "NVTX data", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<NvtxSum>();
       }},
      {"nvtx_pushpop_trace", "NVTX Push/Pop Range Trace: every push/pop range by start time, with its level, parent "
       "and the time of its children", "NVTX push/pop range data", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<NvtxPushPopTrace>();
       }},
      {"callsite_sum", "Call Sites of Slow Calls: the calls that carry a backtrace (--cudabacktrace, "
       "--osrt-backtrace-threshold), per API and stack named from the binaries, ranked by total time",
       "backtrace data (profile with --cudabacktrace or -t osrt)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<CallsiteSum>(o);
       }},
      {"cpu_sample_sum", "CPU Samples by Function: where -s cpu found the threads, per function and module, most "
       "samples first", "CPU sample data (profile with -s cpu)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<CpuSampleSum>();
       }},
      {"cuda_gpu_kern_sum", "CUDA GPU Kernel Summary: time, instances, average, median, min, max, stddev per kernel "
       "name, from CUPTI", "CUDA kernel data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<GpuTimeSum>("CUDA GPU Kernel Summary (cuda_gpu_kern_sum)", true, o.kernel_names);
       }},
      {"cuda_gpu_mem_time_sum", "CUDA GPU MemOps Summary (by Time): per memory operation (copy direction, memset)",
       "GPU memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<GpuTimeSum>("CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum)", false, o.kernel_names);
       }},
      {"cuda_gpu_mem_size_sum", "CUDA GPU MemOps Summary (by Size): bytes per memory operation, in MB",
       "GPU memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<GpuSizeSum>();
       }},
      {"cuda_gpu_trace", "CUDA GPU Trace: every kernel, copy and set the GPU ran, by start time",
       "CUDA kernel or memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<GpuTrace>(o.kernel_names);
       }},
      {"cuda_kern_exec_trace", "CUDA Kernel Launch & Exec Time Trace: each kernel with the call that launched it, its "
       "time queued and running", "CUDA kernel data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<KernExecTrace>(o.kernel_names);
       }},
      {"cuda_api_gpu_sum", "CUDA Summary (API/Kernels/MemOps): API calls, kernels and memory operations in one table",
       "CUDA API, kernel or memory operation data", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return std::make_unique<ApiGpuSum>(o);
       }},
      {"python_sample_sum", "Python Samples by Function: where --python-sampling found the threads, per Python "
       "function, as the running function (self) and anywhere on the stack (total)",
       "Python sample data (profile with --python-sampling true)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<PythonSampleSum>();
       }},
      {"cpu_ctxsw_sum", "CPU Context Switches per Thread: times each thread left its CPU (blocked or preempted) and "
       "its time off CPU", "context switch data (profile with --cpuctxsw process-tree)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return std::make_unique<CpuCtxswSum>();
       }},
  };
  return kReports;
}

const ReportInfo* find_report(std::string_view name, std::string* why) {
  const size_t colon = name.find(':');
  const std::string_view base = name.substr(0, colon), argument = colon == name.npos ? "" : name.substr(colon + 1);
  for (const ReportInfo& r : stats_reports()) {
    if (base != r.name) continue;
    if (colon == name.npos) return &r;
    if (r.names_kernels && (argument == "base" || argument == "mangled")) return &r;
    if (why)
      *why = "report '" + std::string(base) + "' takes " +
             (r.names_kernels ? "base or mangled after the colon" : "no argument") + ", not '" + std::string(argument) + "'";
    return nullptr;
  }
  return nullptr;
}

std::unique_ptr<Report> make_report(std::string_view full_name, const ReportOptions& given) {
  ReportOptions options = given;
  const size_t colon = full_name.find(':');
  const std::string_view name = full_name.substr(0, colon);
  if (colon != full_name.npos)
    options.kernel_names = full_name.substr(colon + 1) == "mangled" ? KernelNames::kMangled : KernelNames::kBase;
  for (const ReportInfo& r : stats_reports())
    if (name == r.name) return r.make(options);
  return nullptr;
}

bool is_shown_call(const ApiCall& call, bool show_internal) {
  return !call.outside_capture() && (show_internal || !call.api->internal);
}

bool is_counted_call(const ApiCall& call, const CallFamily& family, bool show_internal) {
  return is_shown_call(call, show_internal) && (abi::domain_bit(call.api->domain) & family.domains) &&
         !call.inside(family.within);
}

}  // namespace cutrace::report
