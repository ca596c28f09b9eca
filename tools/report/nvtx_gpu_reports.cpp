// The NVTX reports that project ranges onto the GPU, as nsys has them: nvtx_gpu_proj_trace,
// nvtx_gpu_proj_sum and nvtx_kern_sum. A GPU operation belongs to every NVTX range, push/pop or
// start/end, of the thread that launched it, that holds the whole launching call (CUPTI's interval of
// the call, the API link of the operation's correlation id): all enclosing ranges, not only the
// innermost. That is how a kernel is traced to the PyTorch op and module (--pytorch) that launched it.
//
// The ranges and operations of the trace are held until the end (about 80 bytes a range and 40 an
// operation, names once each), then matched thread by thread in one sweep.
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "model/nvtx_ranges.h"
#include "report/report_support.h"

namespace cutrace::report {
namespace {

using model::KernelNames;
using model::NvtxRange;
using model::NvtxRangeTracker;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

struct RangeRec {
  uint64_t start = 0, end = 0, id = 0;
  uint64_t thread = 0;  // pid << 32 | tid
  uint32_t name = 0;    // index into names_
  bool push_pop = true;
  // Filled by the projection.
  uint64_t proj_start = UINT64_MAX, proj_end = 0, ops = 0, last_correlation = UINT64_MAX;
  uint64_t parent = 0;  // RangeId of the tightest enclosing range; 0: none
  uint32_t level = 0, children = 0;
  std::string stack;
};

struct OpRec {
  uint64_t start, end;
  uint32_t pid, correlation;
  uint32_t kernel;  // index into kernel names + 1; 0: not a kernel
};

struct Link {
  uint64_t start, end;
  uint32_t tid;
};

// What all three reports share: the trace's ranges and GPU operations, projected once.
class Projection {
 public:
  Projection() : tracker_([this](const NvtxRange& r) { add_range(r); }) {}

  void add(TraceReader& reader, const Event& ev, KernelNames style) {
    if (ev.kind == EventKind::kNvtx) {
      tracker_.add(reader, ev);
      return;
    }
    if (ev.kind != EventKind::kGpuActivity) return;
    const reader::GpuActivityEvent& g = ev.gpu;
    const uint64_t key = uint64_t(ev.thread->pid) << 32 | g.correlation;
    switch (g.kind) {
      case abi::GpuActivity::kApiLink:
        links_.insert_or_assign(key, Link{g.start_ns, std::max(g.end_ns, g.start_ns), g.tid});
        return;
      case abi::GpuActivity::kKernel: {
        const std::string name = kernel_display_name(g, style);
        auto [it, added] = kernel_index_.emplace(name, uint32_t(kernel_names_.size()));
        if (added) kernel_names_.push_back(name);
        ops_.push_back({g.start_ns, g.end_ns, ev.thread->pid, g.correlation, it->second + 1});
        return;
      }
      case abi::GpuActivity::kMemcpy:
      case abi::GpuActivity::kMemset:
      case abi::GpuActivity::kGraph:
        ops_.push_back({g.start_ns, g.end_ns, ev.thread->pid, g.correlation, 0});
        return;
      default:
        return;
    }
  }

  // Matches every operation with the ranges holding its launch; `pair` is called for each (operation,
  // range) pair and once with nullptr for an operation no range holds. Once.
  template <class Pair>
  void project(Pair pair) {
    if (projected_) return;
    projected_ = true;
    // (thread, call start, call end, op) for each operation whose launch the trace has.
    struct Launch {
      uint64_t thread, start, end;
      const OpRec* op;
    };
    std::vector<Launch> launches;
    launches.reserve(ops_.size());
    for (const OpRec& op : ops_) {
      auto link = links_.find(uint64_t(op.pid) << 32 | op.correlation);
      if (op.correlation == 0 || link == links_.end()) {
        pair(op, nullptr, 0);
        continue;
      }
      launches.push_back({uint64_t(op.pid) << 32 | link->second.tid, link->second.start, link->second.end, &op});
    }
    std::sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) {
      return a.thread != b.thread ? a.thread < b.thread : a.start != b.start ? a.start < b.start : a.op < b.op;
    });
    std::sort(ranges_.begin(), ranges_.end(), [](const RangeRec& a, const RangeRec& b) {
      if (a.thread != b.thread) return a.thread < b.thread;
      if (a.start != b.start) return a.start < b.start;
      return a.end != b.end ? a.end > b.end : a.id < b.id;
    });
    nest();
    // One sweep per thread: the ranges opened by a call's start that have not ended by it are the
    // candidates; those that also outlast the call hold it.
    size_t next_range = 0;
    std::vector<RangeRec*> active;
    uint64_t thread = UINT64_MAX;
    for (const Launch& l : launches) {
      if (l.thread != thread) {
        thread = l.thread;
        active.clear();
        while (next_range < ranges_.size() && ranges_[next_range].thread < thread) ++next_range;
      }
      while (next_range < ranges_.size() && ranges_[next_range].thread == thread && ranges_[next_range].start <= l.start)
        active.push_back(&ranges_[next_range++]);
      std::erase_if(active, [&](const RangeRec* r) { return r->end < l.start; });
      bool held = false;
      for (RangeRec* r : active) {
        if (r->end < l.end) continue;
        held = true;
        r->proj_start = std::min(r->proj_start, l.op->start);
        r->proj_end = std::max(r->proj_end, l.op->end);
        // Launches, not records: the kernels of one graph launch share its correlation id.
        if (r->last_correlation != l.op->correlation) {
          r->last_correlation = l.op->correlation;
          ++r->ops;
        }
        pair(*l.op, r, l.thread);
      }
      if (!held) pair(*l.op, nullptr, l.thread);
    }
    // Children that are rows themselves.
    std::unordered_map<uint64_t, RangeRec*> by_id;
    for (RangeRec& r : ranges_) by_id.emplace(r.id, &r);
    for (const RangeRec& r : ranges_)
      if (r.ops && r.parent)
        if (auto it = by_id.find(r.parent); it != by_id.end()) ++it->second->children;
  }

  std::vector<RangeRec>& ranges() { return ranges_; }
  const std::string& name(uint32_t index) const { return names_[index]; }
  const std::string& kernel_name(uint32_t index) const { return kernel_names_[index - 1]; }
  uint64_t open_ranges() const { return tracker_.open(); }

 private:
  void add_range(const NvtxRange& r) {
    // nsys leaves out a start/end range that ended on another thread: it has no one launching thread.
    if (r.end_thread && r.end_thread != r.thread) return;
    auto [it, added] = name_index_.emplace(r.name, uint32_t(names_.size()));
    if (added) names_.push_back(r.name);
    RangeRec& rec = ranges_.emplace_back();
    rec.start = r.start_ns, rec.end = r.end_ns, rec.id = r.id;
    rec.thread = uint64_t(r.thread->pid) << 32 | r.thread->tid;
    rec.name = it->second;
    rec.push_pop = r.push_pop;
  }

  // Each range's parent is the tightest range of its thread that holds it, whatever its style or
  // domain (nsys nests by time, not by the push/pop stack): with the ranges by start, longest first,
  // the holders of a range are a chain of the ranges still open at its start.
  void nest() {
    std::vector<RangeRec*> open;
    uint64_t thread = UINT64_MAX;
    for (RangeRec& r : ranges_) {
      if (r.thread != thread) {
        thread = r.thread;
        open.clear();
      }
      while (!open.empty() && open.back()->end < r.end) open.pop_back();
      if (!open.empty()) {
        r.parent = open.back()->id;
        r.level = open.back()->level + 1;
        r.stack = open.back()->stack;
      }
      r.stack += ":" + std::to_string(r.id);
      open.push_back(&r);
    }
  }

  NvtxRangeTracker tracker_;
  std::vector<RangeRec> ranges_;
  std::vector<OpRec> ops_;
  std::unordered_map<uint64_t, Link> links_;  // pid << 32 | correlation -> the launching call
  std::vector<std::string> names_, kernel_names_;
  std::unordered_map<std::string, uint32_t> name_index_, kernel_index_;
  bool projected_ = false;
};

const char* style_name(bool push_pop) { return push_pop ? "PushPop" : "StartEnd"; }

// nvtx_gpu_proj_trace: each range that holds a GPU operation, projected onto the GPU: from its first
// operation's start to its last one's end, by that start.
class NvtxGpuProjTrace : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override { projection_.add(reader, ev, KernelNames::kDemangled); }

  uint64_t row_count(TraceReader&) override {
    rows();
    return rows_.size();
  }

  bool write(TraceReader& reader, TableSink& sink) override {
    rows();
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    auto since = [&](uint64_t t) { return t > origin ? t - origin : 0; };
    sink.begin("NVTX GPU Projection Trace (nvtx_gpu_proj_trace)",
               {"Name", "Projected Start (ns)", "Projected Duration (ns)", "Orig Start (ns)", "Orig Duration (ns)",
                "Style", "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack"});
    std::vector<Cell> cells(14);
    for (const RangeRec* r : rows_) {
      cells[0].set_borrowed(projection_.name(r->name));
      cells[1].set_integer(since(r->proj_start));
      cells[2].set_integer(r->proj_end - r->proj_start);
      cells[3].set_integer(since(r->start));
      cells[4].set_integer(r->end - r->start);
      cells[5].set_borrowed(style_name(r->push_pop));
      cells[6].set_integer(r->thread >> 32);
      cells[7].set_integer(uint32_t(r->thread));
      cells[8].set_integer(r->ops);
      cells[9].set_integer(r->level);
      cells[10].set_integer(r->children);
      cells[11].set_integer(r->id);
      if (r->parent) cells[12].set_integer(r->parent);
      else cells[12].set_borrowed("");
      cells[13].set_borrowed(r->stack);
      sink.row(cells);
    }
    sink.end();
    return true;
  }

 private:
  void rows() {
    if (ready_) return;
    ready_ = true;
    projection_.project([](const OpRec&, const RangeRec*, uint64_t) {});
    for (const RangeRec& r : projection_.ranges())
      if (r.ops) rows_.push_back(&r);
    std::sort(rows_.begin(), rows_.end(), [](const RangeRec* a, const RangeRec* b) {
      if (a->proj_start != b->proj_start) return a->proj_start < b->proj_start;
      const uint64_t da = a->proj_end - a->proj_start, db = b->proj_end - b->proj_start;
      return da != db ? da > db : a->id < b->id;
    });
  }

  Projection projection_;
  std::vector<const RangeRec*> rows_;
  bool ready_ = false;
};

// nvtx_gpu_proj_sum: the projected ranges of nvtx_gpu_proj_trace summed per range name and style, over
// every process and thread. A child's projection is not taken from its parent's.
class NvtxGpuProjSum : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override { projection_.add(reader, ev, KernelNames::kDemangled); }

  uint64_t row_count(TraceReader&) override {
    build();
    return table_.rows.size();
  }

  bool write(TraceReader&, TableSink& sink) override {
    build();
    replay(table_, sink);
    return ok_;
  }

 private:
  struct Row {
    uint32_t name = 0;
    bool push_pop = true;
    DurationStats stats;  // of the projected durations
    uint64_t range_time = 0, ops = 0, levels = 0, children = 0;
  };

  void build() {
    if (ready_) return;
    ready_ = true;
    projection_.project([](const OpRec&, const RangeRec*, uint64_t) {});
    std::deque<Row> rows;
    std::map<std::pair<uint32_t, bool>, size_t> index;
    uint64_t held = 0;
    for (const RangeRec& r : projection_.ranges()) {
      if (!r.ops) continue;
      auto [it, added] = index.emplace(std::make_pair(r.name, r.push_pop), rows.size());
      if (added) {
        rows.emplace_back();
        rows.back().name = r.name;
        rows.back().push_pop = r.push_pop;
      }
      Row& row = rows[it->second];
      if (row.stats.add(r.proj_end - r.proj_start)) spill_when_over_budget(rows, held, ok_);
      row.range_time += r.end - r.start;
      row.ops += r.ops;
      row.levels += r.level;
      row.children += r.children;
    }
    std::vector<Row*> order;
    for (Row& row : rows) order.push_back(&row);
    std::sort(order.begin(), order.end(), [&](const Row* a, const Row* b) {
      if (a->stats.total != b->stats.total) return a->stats.total > b->stats.total;
      const std::string &na = projection_.name(a->name), &nb = projection_.name(b->name);
      return na != nb ? na < nb : a->push_pop > b->push_pop;
    });
    table_.title = "NVTX GPU Projection Summary (nvtx_gpu_proj_sum)";
    table_.columns = {"Range",          "Style",          "Total Proj Time (ns)", "Total Range Time (ns)",
                      "Range Instances", "Proj Avg (ns)", "Proj Med (ns)",        "Proj Min (ns)",
                      "Proj Max (ns)",  "Proj StdDev (ns)", "Total GPU Ops",      "Avg GPU Ops",
                      "Avg Range Lvl",  "Avg Num Child"};
    for (Row* r : order) {
      // The summaries' shared cells: Time (%), Total, Instances, Avg, Med, Min, Max, StdDev.
      std::vector<Cell> stats;
      r->stats.append_cells(stats, 0, &ok_);
      const double n = double(r->stats.count);
      std::vector<Cell>& row = table_.rows.emplace_back();
      row = {Cell::string(projection_.name(r->name)), Cell::string(style_name(r->push_pop)), stats[1],
             Cell::integer(r->range_time), stats[2], stats[3], stats[4], stats[5], stats[6], stats[7],
             Cell::integer(r->ops), Cell::decimal(double(r->ops) / n), Cell::decimal(double(r->levels) / n),
             Cell::decimal(double(r->children) / n)};
    }
  }

  Projection projection_;
  Table table_;
  bool ready_ = false, ok_ = true;
};

// nvtx_kern_sum: each kernel's duration under each range that holds its launch, per process, thread,
// range name and style, and kernel name. A kernel under two nested ranges of one name is counted in
// both (so twice in that row's times, once in Kern Inst), as nsys counts it; kernels that no range
// holds are the rows with no range, first.
class NvtxKernSum : public Report {
 public:
  explicit NvtxKernSum(KernelNames names) : style_(names) {}

  void add(TraceReader& reader, const Event& ev) override { projection_.add(reader, ev, style_); }

  uint64_t row_count(TraceReader&) override {
    build();
    return table_.rows.size();
  }

  bool write(TraceReader&, TableSink& sink) override {
    build();
    replay(table_, sink);
    return ok_;
  }

 private:
  struct Key {
    uint32_t range_name;  // UINT32_MAX: no range
    bool push_pop;
    uint64_t thread;  // pid << 32 | tid; UINT64_MAX: the launch is not in the trace
    uint32_t kernel;
    bool operator<(const Key& o) const {
      return std::tie(range_name, push_pop, thread, kernel) < std::tie(o.range_name, o.push_pop, o.thread, o.kernel);
    }
  };
  struct Row {
    Key key{};
    DurationStats stats;  // of the kernels' durations, per (kernel, range) pair
    std::unordered_set<uint64_t> ranges;
    std::unordered_set<const OpRec*> kernels;
  };

  void build() {
    if (ready_) return;
    ready_ = true;
    std::deque<Row> rows;
    std::map<Key, size_t> index;
    uint64_t held = 0;
    projection_.project([&](const OpRec& op, const RangeRec* range, uint64_t thread) {
      if (!op.kernel) return;
      Key key{range ? range->name : UINT32_MAX, range ? range->push_pop : false,
              range ? range->thread : thread ? thread : UINT64_MAX, op.kernel};
      auto [it, added] = index.emplace(key, rows.size());
      if (added) {
        rows.emplace_back();
        rows.back().key = key;
      }
      Row& row = rows[it->second];
      if (row.stats.add(op.end - op.start)) spill_when_over_budget(rows, held, ok_);
      if (range) row.ranges.insert(range->id);
      row.kernels.insert(&op);
    });
    std::vector<Row*> order;
    for (Row& row : rows) order.push_back(&row);
    // By range name (no range first), process, thread, then the most time first.
    std::sort(order.begin(), order.end(), [&](const Row* a, const Row* b) {
      const bool ra = a->key.range_name != UINT32_MAX, rb = b->key.range_name != UINT32_MAX;
      if (ra != rb) return !ra;
      if (ra && a->key.range_name != b->key.range_name)
        return projection_.name(a->key.range_name) < projection_.name(b->key.range_name);
      if (a->key.thread != b->key.thread) return a->key.thread < b->key.thread;
      if (a->stats.total != b->stats.total) return a->stats.total > b->stats.total;
      return projection_.kernel_name(a->key.kernel) < projection_.kernel_name(b->key.kernel);
    });
    table_.title = "NVTX Range Kernel Summary (nvtx_kern_sum)";
    table_.columns = {"NVTX Range", "Style",    "PID",      "TID",      "NVTX Inst",   "Kern Inst",  "Total Time (ns)",
                      "Avg (ns)",   "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Kernel Name"};
    for (Row* r : order) {
      std::vector<Cell> stats;
      r->stats.append_cells(stats, 0, &ok_);
      const bool ranged = r->key.range_name != UINT32_MAX, launched = r->key.thread != UINT64_MAX;
      std::vector<Cell>& row = table_.rows.emplace_back();
      row = {ranged ? Cell::string(projection_.name(r->key.range_name)) : Cell::string(""),
             ranged ? Cell::string(style_name(r->key.push_pop)) : Cell::string(""),
             launched ? Cell::integer(r->key.thread >> 32) : Cell::string(""),
             launched ? Cell::integer(uint32_t(r->key.thread)) : Cell::string(""),
             Cell::integer(r->ranges.size()), Cell::integer(r->kernels.size()), stats[1], stats[3], stats[4],
             stats[5], stats[6], stats[7], Cell::string(projection_.kernel_name(r->key.kernel))};
    }
  }

  KernelNames style_;
  Projection projection_;
  Table table_;
  bool ready_ = false, ok_ = true;
};

}  // namespace

std::unique_ptr<Report> make_nvtx_gpu_proj_trace() { return std::make_unique<NvtxGpuProjTrace>(); }
std::unique_ptr<Report> make_nvtx_gpu_proj_sum() { return std::make_unique<NvtxGpuProjSum>(); }
std::unique_ptr<Report> make_nvtx_kern_sum(KernelNames names) { return std::make_unique<NvtxKernSum>(names); }

}  // namespace cutrace::report
