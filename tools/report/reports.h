// The `cutrace stats` reports. Each consumes the reader's events in one shared pass and then produces a
// table, so asking for several reports reads the trace once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"
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

// How reports that name GPU kernels name them: demangled (the default), the function's name alone
// (`:base`, as nsys: "axpy" for "void ns::axpy<float>(int, float*)"), or as compiled (`:mangled`).
enum class KernelNames { kDemangled, kBase, kMangled };

struct ReportOptions {
  KernelNames kernel_names = KernelNames::kDemangled;  // set from the report's :argument
  // Show calls of apis the trace's table flags internal (kernel registration, the <<<>>> call
  // configuration), which nsys leaves out and so do we by default: `--show-internal true`.
  bool show_internal = false;
};

// nullptr for a name stats_reports() does not list.
std::unique_ptr<Report> make_report(std::string_view name, const ReportOptions& options = {});

// Which calls a per-library report counts: calls of `domains` that were not made inside a recorded
// call of `within`. A call made inside one of its own library's calls is that library's business, not
// the program's, and counting it as well would count the same time twice.
struct CallFamily {
  abi::DomainSet domains;  // abi::domain_bit() set
  abi::DomainSet within;
};
// The family of a -t value as domains.def describes it: its domains, not counted inside the calls of
// those of them that hide their nested calls (for CUDA, as nsys counts it: runtime calls not inside
// another runtime call, and driver calls not made by the runtime; made by the program, cuBLAS or
// cuDNN, those show under their cu* names).
inline constexpr CallFamily family_of(std::string_view group) {
  return {abi::group_domains(group), abi::group_hiding_domains(group)};
}
inline constexpr CallFamily kCudaFamily = family_of("cuda");
inline constexpr CallFamily kCublasFamily = family_of("cublas");  // cuBLAS with cuBLASLt
inline constexpr CallFamily kCudnnFamily = family_of("cudnn");
// Every OS runtime call, also those a CUDA call made (the driver's ioctl inside cudaMalloc), as nsys counts.
inline constexpr CallFamily kOsrtFamily = family_of("osrt");
// Every MPI call the program made (those the MPI library makes inside one are its business).
inline constexpr CallFamily kMpiFamily = family_of("mpi");
static_assert(kCudaFamily.domains == abi::kCudaDomains &&
              kCudaFamily.within == abi::domain_bit(abi::ApiDomain::kCudaRuntime) &&
              kCublasFamily.within == abi::kCublasDomains && kCudnnFamily.within == abi::kCudnnDomains &&
              kOsrtFamily.domains == abi::domain_bit(abi::ApiDomain::kOsRuntime) &&
              kOsrtFamily.within == kOsrtFamily.domains,
              "the report families count as nsys does");

// Whether a report of `family` counts `call`. Records kept only to name later calls (recorded while
// capture was off) are never counted; internal apis only with `show_internal`.
bool is_counted_call(const reader::ApiCall& call, const CallFamily& family, bool show_internal = false);
inline bool is_counted_cuda_call(const reader::ApiCall& call, bool show_internal = false) {
  return is_counted_call(call, kCudaFamily, show_internal);
}
// Whether a report or export shows `call` at all (every domain): timed, and not internal unless asked.
bool is_shown_call(const reader::ApiCall& call, bool show_internal);

}  // namespace cutrace::report
