#include "report/reports.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "reader/decode.h"

namespace cutrace::report {
namespace {

using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

// cuda_api_sum (and the cuBLAS and cuDNN sums) keep every duration of every API so the median is
// exact, as nsys's is: 8 bytes per counted call. Everything else in the reader stays bounded; a trace of
// a billion calls needs 8 GB here.
class ApiSum : public Report {
 public:
  ApiSum(const char* title, CallFamily family, const ReportOptions& options)
      : title_(title), family_(family), options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_call(ev.call, family_, options_.show_internal)) return;
    durations_[ev.call.api].push_back(ev.call.duration_ns());
  }

  Table table(TraceReader&) override {
    struct Row {
      const std::string* name;
      uint64_t total = 0, count = 0, min = 0, max = 0;
      double avg = 0, median = 0, stddev = 0;
    };
    // Rows are by display name, as nsys groups by name: __cudaLaunchKernel and __cudaLaunchKernel_ptsz
    // are both the one cudaLaunchKernel users wrote.
    std::unordered_map<std::string_view, std::vector<uint64_t>> by_name;
    std::unordered_map<std::string_view, const std::string*> names;
    for (auto& [api, d] : durations_) {
      auto& v = by_name[api->display_name];
      if (v.empty()) v = std::move(d);
      else v.insert(v.end(), d.begin(), d.end());
      names[api->display_name] = &api->display_name;
    }
    durations_.clear();
    std::vector<Row> rows;
    uint64_t grand_total = 0;
    for (auto& [name, d] : by_name) {
      std::sort(d.begin(), d.end());
      Row r;
      r.name = names[name];
      r.count = d.size();
      long double sum = 0;
      for (uint64_t x : d) {
        r.total += x;
        sum += x;
      }
      r.min = d.front();
      r.max = d.back();
      const long double mean = sum / d.size();
      r.avg = double(mean);
      const size_t mid = d.size() / 2;
      r.median = d.size() % 2 ? double(d[mid]) : (double(d[mid - 1]) + double(d[mid])) / 2;
      if (d.size() > 1) {
        long double sq = 0;
        for (uint64_t x : d) sq += (x - mean) * (x - mean);
        r.stddev = double(std::sqrt(sq / (d.size() - 1)));  // sample deviation, as nsys
      }
      grand_total += r.total;
      rows.push_back(r);
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return a.total != b.total ? a.total > b.total : *a.name < *b.name;
    });
    Table t;
    t.title = title_;
    t.columns = {"Time (%)", "Total Time (ns)", "Num Calls", "Avg (ns)",   "Med (ns)",
                 "Min (ns)", "Max (ns)",        "StdDev (ns)", "Name"};
    for (const Row& r : rows) {
      const double pct = grand_total ? 100.0 * double(r.total) / double(grand_total) : 0.0;
      t.rows.push_back({Cell::decimal(pct), Cell::integer(r.total), Cell::integer(r.count), Cell::decimal(r.avg),
                        Cell::decimal(r.median), Cell::integer(r.min), Cell::integer(r.max), Cell::decimal(r.stddev),
                        Cell::string(*r.name)});
    }
    return t;
  }

 private:
  const char* title_;
  CallFamily family_;
  ReportOptions options_;
  std::unordered_map<const ApiSpec*, std::vector<uint64_t>> durations_;
};

// cuda_api_trace lists calls by start time. Threads reach the file in drain order, not time order, so
// rows are held and sorted at the end: about 40 bytes per counted call.
class CudaApiTrace : public Report {
 public:
  explicit CudaApiTrace(const ReportOptions& options) : options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_cuda_call(ev.call, options_.show_internal)) return;
    rows_.push_back({ev.call.begin_ns, ev.call.duration_ns(), ev.call.result, ev.call.api, ev.thread->index,
                     ev.call.correlation});
  }

  Table table(TraceReader& reader) override {
    std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.begin < b.begin; });
    // As nsys: Start counts from the session's start, which is when the recorder created the file
    // (the program is held until then, so no call starts before it).
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    Table t;
    t.title = "CUDA API Trace (cuda_api_trace)";
    t.columns = {"Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "T-Pri", "Thread Name"};
    t.rows.reserve(rows_.size());
    for (const Row& r : rows_) {
      const reader::Thread* th = reader.thread(r.thread);
      Cell result = r.api->result_kind == format::ResultKind::kErrorCode ? Cell::signed_integer(int64_t(r.result))
                    : r.api->result_kind == format::ResultKind::kVoid    ? Cell::string("")
                    : r.api->result_kind == format::ResultKind::kPointer ? Cell::string(reader::hex(r.result), true)
                                                                         : Cell::integer(r.result);
      t.rows.push_back({Cell::integer(r.begin > origin ? r.begin - origin : 0), Cell::integer(r.duration),
                        Cell::string(r.api->display_name), result, Cell::integer(r.correlation),
                        Cell::integer(th->pid), Cell::integer(th->tid),
                        th->priority >= 0 ? Cell::integer(uint64_t(th->priority)) : Cell::string("", true),
                        Cell::string(th->name)});
    }
    rows_.clear();
    rows_.shrink_to_fit();
    return t;
  }

 private:
  struct Row {
    uint64_t begin, duration, result;
    const ApiSpec* api;
    uint32_t thread, correlation;
  };
  ReportOptions options_;
  std::vector<Row> rows_;
};

// api_trace: every shown call of every domain, nested ones included, so that what a library did inside
// a call can be read: Depth and Domain say where a call sits, Self (ns) is its duration less that of
// the recorded calls made directly inside it. A thread's records arrive in the order its calls ended,
// children before their parent, so per thread the time of finished calls is summed per depth and the
// parent takes the sum one level below it. Rows are held and sorted like cuda_api_trace's; their
// arguments are decoded at the end, when every kernel name is known.
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
    Row r;
    r.begin = c.begin_ns;
    r.duration = c.duration_ns();
    r.self = children > r.duration ? 0 : r.duration - children;
    r.result = c.result;
    r.api = c.api;
    r.thread = ev.thread->index;
    r.depth = c.depth;
    r.args.assign(c.args, c.args + c.arg_count);
    rows_.push_back(std::move(r));
  }

  Table table(TraceReader& reader) override {
    // A parent starts no later than its children; on a tie the outer call comes first.
    std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.depth < b.depth;
    });
    Table t;
    t.title = "API Trace, all domains (api_trace)";
    t.columns = {"Start (ns)", "Duration (ns)", "Self (ns)", "Depth", "Domain", "Name",
                 "Result", "Args", "Pid", "Tid", "Thread Name"};
    t.rows.reserve(rows_.size());
    ApiCall call;
    for (const Row& r : rows_) {
      const reader::Thread* th = reader.thread(r.thread);
      call.api = r.api;
      call.arg_count = uint8_t(r.args.size());
      std::copy(r.args.begin(), r.args.end(), call.args);
      std::string args;
      for (uint32_t i = 0; i < call.arg_count; ++i) {
        if (i) args += ", ";
        args += reader::arg_name(*r.api, i) + "=" + reader::decode_call_arg(reader, *th, call, i).to_string();
      }
      t.rows.push_back({Cell::integer(r.begin), Cell::integer(r.duration), Cell::integer(r.self),
                        Cell::integer(r.depth), Cell::string(std::string(reader::domain_name(r.api->domain))),
                        Cell::string(r.api->display_name), Cell::string(reader::result_text(*r.api, r.result)),
                        Cell::string(std::move(args)), Cell::integer(th->pid), Cell::integer(th->tid),
                        Cell::string(th->name)});
    }
    rows_.clear();
    rows_.shrink_to_fit();
    return t;
  }

 private:
  struct Row {
    uint64_t begin = 0, duration = 0, self = 0, result = 0;
    const ApiSpec* api = nullptr;
    uint32_t thread = 0;
    uint16_t depth = 0;
    std::vector<uint64_t> args;
  };
  ReportOptions options_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> children_;  // thread -> time of ended calls per depth
  std::vector<Row> rows_;
};

}  // namespace

const std::vector<ReportInfo>& stats_reports() {
  static const std::vector<ReportInfo> kReports = {
      {"cuda_api_sum", "CUDA API Summary: time, calls, average, median, min, max, stddev per API (default)",
       "CUDA trace data"},
      {"cuda_api_trace", "CUDA API Trace: every call by start time, with result, pid, tid and thread name",
       "CUDA trace data"},
      {"cublas_api_sum", "cuBLAS API Summary: cuda_api_sum's columns for cuBLAS and cuBLASLt calls",
       "cuBLAS trace data"},
      {"cudnn_api_sum", "cuDNN API Summary: cuda_api_sum's columns for cuDNN calls", "cuDNN trace data"},
      {"api_trace", "every call of every domain, nested ones too, with depth, self time and decoded arguments",
       "API trace data"},
  };
  return kReports;
}

const ReportInfo* find_report(std::string_view name) {
  for (const ReportInfo& r : stats_reports())
    if (name == r.name) return &r;
  return nullptr;
}

std::unique_ptr<Report> make_report(std::string_view name, const ReportOptions& options) {
  if (name == "cuda_api_sum") return std::make_unique<ApiSum>("CUDA API Summary (cuda_api_sum)", kCudaFamily, options);
  if (name == "cuda_api_trace") return std::make_unique<CudaApiTrace>(options);
  if (name == "cublas_api_sum")
    return std::make_unique<ApiSum>("cuBLAS API Summary (cublas_api_sum)", kCublasFamily, options);
  if (name == "cudnn_api_sum") return std::make_unique<ApiSum>("cuDNN API Summary (cudnn_api_sum)", kCudnnFamily, options);
  if (name == "api_trace") return std::make_unique<ApiTrace>(options);
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
