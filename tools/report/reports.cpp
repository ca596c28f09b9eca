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

// cuda_api_sum keeps every duration of every API so the median is exact, as nsys's is: 8 bytes per
// counted call. Everything else in the reader stays bounded; a trace of a billion calls needs 8 GB here.
class CudaApiSum : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_cuda_call(ev.call)) return;
    durations_[ev.call.api].push_back(ev.call.duration_ns());
  }

  Table table(TraceReader&) override {
    struct Row {
      const std::string* name;
      uint64_t total = 0, count = 0, min = 0, max = 0;
      double avg = 0, median = 0, stddev = 0;
    };
    // Two ids with one name (a table listing an alias twice) are one row, as nsys groups by name.
    std::unordered_map<std::string_view, std::vector<uint64_t>> by_name;
    std::unordered_map<std::string_view, const std::string*> names;
    for (auto& [api, d] : durations_) {
      auto& v = by_name[api->name];
      if (v.empty()) v = std::move(d);
      else v.insert(v.end(), d.begin(), d.end());
      names[api->name] = &api->name;
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
    t.title = "CUDA API Summary (cuda_api_sum)";
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
  std::unordered_map<const ApiSpec*, std::vector<uint64_t>> durations_;
};

// cuda_api_trace lists calls by start time. Threads reach the file in drain order, not time order, so
// rows are held and sorted at the end: about 40 bytes per counted call.
class CudaApiTrace : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kApiCall || !is_counted_cuda_call(ev.call)) return;
    rows_.push_back({ev.call.begin_ns, ev.call.duration_ns(), ev.call.result, ev.call.api, ev.thread->index,
                     ev.call.correlation});
  }

  Table table(TraceReader& reader) override {
    std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.begin < b.begin; });
    Table t;
    t.title = "CUDA API Trace (cuda_api_trace)";
    t.columns = {"Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "Thread Name"};
    t.rows.reserve(rows_.size());
    for (const Row& r : rows_) {
      const reader::Thread* th = reader.thread(r.thread);
      Cell result = r.api->result_kind == format::ResultKind::kErrorCode ? Cell::signed_integer(int64_t(r.result))
                    : r.api->result_kind == format::ResultKind::kVoid    ? Cell::string("")
                    : r.api->result_kind == format::ResultKind::kPointer ? Cell::string(reader::hex(r.result), true)
                                                                         : Cell::integer(r.result);
      t.rows.push_back({Cell::integer(r.begin), Cell::integer(r.duration), Cell::string(r.api->name), result,
                        Cell::integer(r.correlation), Cell::integer(th->pid), Cell::integer(th->tid),
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
  std::vector<Row> rows_;
};

}  // namespace

const std::vector<ReportInfo>& stats_reports() {
  static const std::vector<ReportInfo> kReports = {
      {"cuda_api_sum", "CUDA API Summary: time, calls, average, median, min, max, stddev per API (default)"},
      {"cuda_api_trace", "CUDA API Trace: every call by start time, with result, pid, tid and thread name"},
  };
  return kReports;
}

std::unique_ptr<Report> make_report(std::string_view name) {
  if (name == "cuda_api_sum") return std::make_unique<CudaApiSum>();
  if (name == "cuda_api_trace") return std::make_unique<CudaApiTrace>();
  return nullptr;
}

bool is_counted_cuda_call(const ApiCall& call) {
  if (call.outside_capture()) return false;
  if (call.api->domain == abi::ApiDomain::kCudaRuntime) return true;
  return call.api->domain == abi::ApiDomain::kCudaDriver && call.depth == 0;
}

}  // namespace cutrace::report
