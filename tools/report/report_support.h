// What the report families share (reports.cpp's table makes them; each family's file defines its
// reports): the statistics of a summary row, the ordering of summaries, the cells every trace
// report fills alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "report/reports.h"
#include "model/spill.h"
#include "report/table.h"

namespace cutrace::report {

// The sample standard deviation, as nsys shows it, from the count, sum and sum of squares.
double sample_deviation(uint64_t n, uint64_t sum, unsigned __int128 squares);

// The result cell of a call, as nsys shows it: the number. Set in place, as rows are written by the
// million.
using reader::kNotReturned;
void set_result(Cell& cell, const reader::ApiSpec& api, uint64_t result, bool not_returned = false);

// One row of an nsys-style summary (cuda_api_sum, nvtx_sum): count, total, min, max and the sum of
// squares (exact, in 128 bits) as running values, and the durations for an exact median
// (SpillingValues).
struct DurationStats {
  uint64_t count = 0, total = 0, min = 0, max = 0;
  unsigned __int128 squares = 0;
  model::SpillingValues durations;

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
  if (++held < model::kSpillBudgetBytes / 2 / model::SpillingValues::kBytesPerHeldValue) return;
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

// The reports of each family, for the table of stats_reports().
// api_reports.cpp
std::unique_ptr<Report> make_api_sum(const char* title, model::CallFamily family, const ReportOptions& options);
std::unique_ptr<Report> make_cuda_api_trace(const ReportOptions& options);
std::unique_ptr<Report> make_api_trace(const ReportOptions& options);
std::unique_ptr<Report> make_mpi_event_trace(const ReportOptions& options);
std::unique_ptr<Report> make_callsite_sum(const ReportOptions& options);
// nvtx_reports.cpp
std::unique_ptr<Report> make_nvtx_sum();
std::unique_ptr<Report> make_nvtx_pushpop_trace();
// sample_reports.cpp
std::unique_ptr<Report> make_cpu_sample_sum();
std::unique_ptr<Report> make_python_sample_sum();
std::unique_ptr<Report> make_cpu_ctxsw_sum();
// gpu_reports.cpp
std::unique_ptr<Report> make_gpu_time_sum(const char* title, bool kernels, model::KernelNames names);
std::unique_ptr<Report> make_gpu_size_sum();
std::unique_ptr<Report> make_gpu_trace(model::KernelNames names);
std::unique_ptr<Report> make_kern_exec_trace(model::KernelNames names);
std::unique_ptr<Report> make_api_gpu_sum(const ReportOptions& options);
// nvtx_gpu_reports.cpp
std::unique_ptr<Report> make_nvtx_gpu_proj_trace();
std::unique_ptr<Report> make_nvtx_gpu_proj_sum();
std::unique_ptr<Report> make_nvtx_kern_sum(model::KernelNames names);

// A kernel's name as a report shows it: demangled (nsys's default), its base name, or mangled.
inline std::string kernel_display_name(const reader::GpuActivityEvent& g,
                                       model::KernelNames style = model::KernelNames::kDemangled) {
  if (!g.name) return "[unnamed kernel]";
  switch (style) {
    case model::KernelNames::kMangled: return g.name->mangled;
    case model::KernelNames::kBase: return model::base_kernel_name(g.name->demangled);
    default: return g.name->demangled;
  }
}

}  // namespace cutrace::report
