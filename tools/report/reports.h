// The `cutrace stats` reports. Each consumes the reader's events in one shared pass and then produces a
// table, so asking for several reports reads the trace once.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"
#include "report/table.h"

namespace cutrace::report {

struct ReportInfo {
  const char* name;         // as given to --report, nsys's spelling
  const char* description;  // one line for --help
};
const std::vector<ReportInfo>& stats_reports();
inline constexpr const char* kDefaultReport = "cuda_api_sum";

class Report {
 public:
  virtual ~Report() = default;
  virtual void add(reader::TraceReader& reader, const reader::Event& ev) = 0;
  virtual Table table(reader::TraceReader& reader) = 0;
};

// nullptr for a name stats_reports() does not list.
std::unique_ptr<Report> make_report(std::string_view name);

// The calls the CUDA API reports count: CUDA runtime calls, and driver calls the program made itself
// (depth 0; nsys leaves out the driver calls the runtime makes on the program's behalf). Records kept
// only to name later calls (recorded while capture was off) are never counted.
bool is_counted_cuda_call(const reader::ApiCall& call);

}  // namespace cutrace::report
