// The reports of API calls: cuda_api_sum and the other per-library sums, cuda_api_trace,
// api_trace, and callsite_sum over the stacks of slow calls.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "reader/decode.h"
#include "model/symbolizer.h"
#include "model/call_links.h"
#include "model/mpi_calls.h"
#include "report/report_support.h"

namespace cutrace::report {
namespace {

using model::CallFamily;
using model::CallLinks;
using model::MpiFields;
using model::SpillSorter;
using model::Symbolizer;
using model::TempFile;
using model::is_counted_call;
using model::is_counted_cuda_call;
using model::is_shown_call;
using model::kMpiFamily;
using model::mpi_kind;
using model::mpi_kind_name;
using model::python_stack;
using model::trace_has_gpu_activity;
using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

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

// cuda_api_trace lists calls by start time. Threads reach the file in drain order, not time order, so
// rows are sorted through temporary files (SpillSorter) in bounded memory; equal start times keep
// the order of the file. CorrID is CUPTI's correlation id of the call (CallLinks) for the calls that
// give the device work, wait for it or allocate, 0 for the others; in a trace without GPU activity,
// the reader's numbering of the calls.
class CudaApiTrace : public Report {
 public:
  explicit CudaApiTrace(const ReportOptions& options) : options_(options) {}

  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind == EventKind::kGpuActivity) {
      if (ev.gpu.kind == abi::GpuActivity::kApiLink)
        links_.link(uint64_t(ev.thread->pid) << 32 | ev.gpu.tid, ev.gpu.start_ns, ev.gpu.api_id, ev.gpu.correlation);
      return;
    }
    if (ev.kind != EventKind::kApiCall || !is_counted_cuda_call(ev.call, options_.show_internal)) return;
    Row row{ev.call.begin_ns, ev.call.duration_ns(), ev.call.result, next_++, ev.call.api_id, ev.thread->index,
            ev.call.correlation, ev.call.flags};
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
    links_.add(uint64_t(ev.thread->pid) << 32 | ev.thread->tid, row);
  }

  uint64_t row_count(TraceReader&) override {
    links_.release_all();
    return rows_.size();
  }

  bool write(TraceReader& reader, TableSink& sink) override {
    links_.release_all();
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
      set_result(cells[3], api, r.result, r.flags & abi::kCallFlagNotReturned);
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
    uint32_t api, thread, correlation, flags;  // flags: ApiCall::flags
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const { return a.begin != b.begin ? a.begin < b.begin : a.order < b.order; }
  };
  struct PushRow {
    SpillSorter<Row, Earlier>* rows;
    void operator()(const Row& r) const { rows->push(r); }
  };

  bool awaits_links(TraceReader& reader) {
    if (!links_checked_) {
      awaits_links_ = trace_has_gpu_activity(reader);
      links_checked_ = true;
    }
    return awaits_links_;
  }

  ReportOptions options_;
  SpillSorter<Row, Earlier> rows_;
  CallLinks<Row, PushRow> links_{PushRow{&rows_}};
  uint64_t next_ = 0;
  bool links_checked_ = false, awaits_links_ = false;
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
    r.flags = c.flags;
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
      cells[6] = r.flags & abi::kCallFlagNotReturned ? Cell::borrowed(kNotReturned)
                                                     : Cell::string(reader::result_text(*call.api, r.result));
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
    uint8_t arg_count, flags, unused[4];
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

// mpi_event_trace: every MPI call by start time, with nsys's columns (Kind: p2p, coll, startwait or
// other, as its MPI tables sort calls; the peer's and the root's rank in MPI_COMM_WORLD; the byte
// counts, a collective's sent and received apart) and what cutrace records beside them: the
// communicator (its id in the process and its size), the datatype and the result. A column a call has
// no slot for is empty. Rank is the process's rank in its job (OMPI_COMM_WORLD_RANK, PMI_RANK), so that
// the traces of the ranks of one job read alike.
class MpiEventTrace : public Report {
 public:
  explicit MpiEventTrace(const ReportOptions& options) : options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_call(ev.call, kMpiFamily, options_.show_internal)) return;
    const ApiCall& c = ev.call;
    Row r{};
    r.begin = c.begin_ns;
    r.duration = c.duration_ns();
    r.result = c.result;
    r.order = next_++;
    r.api = c.api_id;
    r.thread = ev.thread->index;
    r.flags = c.flags;
    r.fields = fields_.read(c);
    rows_.push(r);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    using F = MpiFields;
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    sink.begin("MPI Event Trace (mpi_event_trace)",
               {"Kind", "Start (ns)", "End (ns)", "Duration (ns)", "Event", "Pid", "Tid", "Tag", "Rank", "PeerRank",
                "RootRank", "Size (B)", "CollSendSize (B)", "CollRecvSize (B)", "Comm", "CommSize", "Datatype",
                "Result"});
    // Each column's field, after the call's own columns (Kind .. Rank).
    static constexpr F::Field kFieldColumns[] = {F::kPeer, F::kRoot, F::kSize, F::kSendSize, F::kRecvSize,
                                                 F::kComm, F::kCommSize, F::kDatatype};
    std::vector<Cell> cells(18);
    const bool ok = rows_.for_each([&](const Row& r) {
      const ApiSpec& api = reader.api(r.api);
      const reader::Thread* th = reader.thread(r.thread);
      const reader::Process& process = reader.process_of(*th);
      const uint64_t start = r.begin > origin ? r.begin - origin : 0;
      cells[0].set_borrowed(mpi_kind_name(mpi_kind(api.display_name)));
      cells[1].set_integer(start);
      cells[2].set_integer(start + r.duration);
      cells[3].set_integer(r.duration);
      cells[4].set_borrowed(api.display_name);
      cells[5].set_integer(th->pid);
      cells[6].set_integer(th->tid);
      if (r.fields.has(F::kTag)) cells[7].set_signed(int64_t(r.fields.value[F::kTag]));
      else cells[7].set_borrowed("", true);
      if (process.rank >= 0) cells[8].set_integer(uint64_t(process.rank));
      else cells[8].set_borrowed("", true);
      for (size_t k = 0; k < std::size(kFieldColumns); ++k) {
        Cell& cell = cells[9 + k];
        const F::Field f = kFieldColumns[k];
        if (!r.fields.has(f)) {
          cell.set_borrowed("", true);
          continue;
        }
        const uint64_t v = r.fields.value[f];
        switch (f) {
          case F::kPeer:
          case F::kRoot: {
            const std::string_view special = reader::mpi_rank_name(int64_t(v));
            if (special.empty()) cell.set_signed(int64_t(v));
            else cell.set_borrowed(special, true);
            break;
          }
          case F::kDatatype:
            cell.set_borrowed(v > 0 && v < abi::kMpiDatatypeCount ? abi::kMpiDatatypeNames[v] : "other");
            break;
          default: cell.set_integer(v); break;
        }
      }
      set_result(cells[17], api, r.result, r.flags & abi::kCallFlagNotReturned);
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  struct Row {
    uint64_t begin, duration, result, order;
    uint32_t api, thread, flags;
    MpiFields::Values fields;
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const { return a.begin != b.begin ? a.begin < b.begin : a.order < b.order; }
  };

  ReportOptions options_;
  SpillSorter<Row, Earlier> rows_;
  MpiFields fields_;
  uint64_t next_ = 0;
};

}  // namespace

std::unique_ptr<Report> make_api_sum(const char* title, CallFamily family, const ReportOptions& options) {
  return std::make_unique<ApiSum>(title, family, options);
}
std::unique_ptr<Report> make_cuda_api_trace(const ReportOptions& options) { return std::make_unique<CudaApiTrace>(options); }
std::unique_ptr<Report> make_mpi_event_trace(const ReportOptions& options) {
  return std::make_unique<MpiEventTrace>(options);
}
std::unique_ptr<Report> make_api_trace(const ReportOptions& options) { return std::make_unique<ApiTrace>(options); }
std::unique_ptr<Report> make_callsite_sum(const ReportOptions& options) { return std::make_unique<CallsiteSum>(options); }

}  // namespace cutrace::report
