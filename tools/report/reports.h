// The `cutrace stats` reports. Each consumes the reader's events in one shared pass and then produces a
// table, so asking for several reports reads the trace once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"
#include "model/calls.h"
#include "report/table.h"

namespace cutrace::report {

struct ReportOptions;
class Report;

// One report: the table's one row is the only place a report is named, described and made.
struct ReportInfo {
  const char* name;         // as given to --report, nsys's spelling
  const char* description;  // one line for --help
  const char* data;         // what a trace lacks when the report is empty: "SKIPPED: T does not contain ..."
  bool names_kernels;       // takes nsys's argument :base or :mangled (cuda_gpu_kern_sum:base)
  std::unique_ptr<Report> (*make)(const ReportOptions& options);
};
// nullptr for a name stats_reports() does not list. `name` may carry the report's argument
// ("cuda_gpu_kern_sum:base"); an argument the report does not take makes it unknown, and `why` says so.
const ReportInfo* find_report(std::string_view name, std::string* why = nullptr);
const std::vector<ReportInfo>& stats_reports();
// nsys stats' default reports (and `nsys profile --stats true`'s), of those cutrace has, in its order.
inline constexpr const char* kDefaultReports[] = {"nvtx_sum", "osrt_sum", "cuda_api_sum", "cuda_gpu_kern_sum",
                                                  "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum"};

class Report {
 public:
  virtual ~Report() = default;
  virtual void add(reader::TraceReader& reader, const reader::Event& ev) = 0;
  // Rows the table has, once every event was added; 0: nothing to show (SKIPPED).
  virtual uint64_t row_count(reader::TraceReader& reader) = 0;
  // Streams the table into `sink`; may be called again (the column layouts measure first). False when
  // a temporary file could not be written or read back.
  virtual bool write(reader::TraceReader& reader, TableSink& sink) = 0;
  // What the table could not show as asked (modules whose frames stay module+offset), one line each.
  virtual std::vector<std::string> notes() const { return {}; }
};

struct ReportOptions {
  model::KernelNames kernel_names = model::KernelNames::kDemangled;  // set from the report's :argument
  // Show calls of apis the trace's table flags internal (kernel registration, the <<<>>> call
  // configuration), which nsys leaves out and so do we by default: `--show-internal true`.
  bool show_internal = false;
};

// nullptr for a name stats_reports() does not list.
std::unique_ptr<Report> make_report(std::string_view name, const ReportOptions& options = {});

}  // namespace cutrace::report
