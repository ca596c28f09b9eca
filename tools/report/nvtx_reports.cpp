// The NVTX reports: nvtx_sum and nvtx_pushpop_trace.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "reader/decode.h"
#include "model/nvtx_ranges.h"
#include "report/report_support.h"

namespace cutrace::report {
namespace {

using model::NvtxRange;
using model::NvtxRangeTracker;
using model::SpillSorter;
using model::TempFile;
using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

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

}  // namespace

std::unique_ptr<Report> make_nvtx_sum() { return std::make_unique<NvtxSum>(); }
std::unique_ptr<Report> make_nvtx_pushpop_trace() { return std::make_unique<NvtxPushPopTrace>(); }

}  // namespace cutrace::report
