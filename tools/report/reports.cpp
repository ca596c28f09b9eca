#include "report/reports.h"

#include <cmath>

#include "reader/decode.h"
#include "report/report_support.h"

namespace cutrace::report {

using model::KernelNames;
using model::kCublasFamily;
using model::kCudaFamily;
using model::kCudnnFamily;
using model::kMpiFamily;
using model::kOsrtFamily;
using reader::ApiCall;
using reader::ApiSpec;

// The sample standard deviation: (n * squares - sum^2) / (n * (n - 1)), exact in 128 bits where it fits.
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

void set_result(Cell& cell, const ApiSpec& api, uint64_t result, bool not_returned) {
  if (not_returned) {
    cell.set_borrowed(kNotReturned);
    return;
  }
  switch (api.result_kind) {
    case format::ResultKind::kErrorCode: cell.set_signed(int64_t(result)); break;
    case format::ResultKind::kVoid: cell.set_borrowed(""); break;
    case format::ResultKind::kPointer: cell = Cell::string(reader::hex(result), true); break;
    default: cell.set_integer(result); break;
  }
}

const std::vector<ReportInfo>& stats_reports() {
  static const std::vector<ReportInfo> kReports = {
      {"cuda_api_sum", "CUDA API Summary: time, calls, average, median, min, max, stddev per API (default)",
       "CUDA trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_sum("CUDA API Summary (cuda_api_sum)", kCudaFamily, o);
       }},
      {"cuda_api_trace", "CUDA API Trace: every call by start time, with result, pid, tid and thread name",
       "CUDA trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_cuda_api_trace(o);
       }},
      {"cublas_api_sum", "cuBLAS API Summary: cuda_api_sum's columns for cuBLAS and cuBLASLt calls",
       "cuBLAS trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_sum("cuBLAS API Summary (cublas_api_sum)", kCublasFamily, o);
       }},
      {"cudnn_api_sum", "cuDNN API Summary: cuda_api_sum's columns for cuDNN calls", "cuDNN trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_sum("cuDNN API Summary (cudnn_api_sum)", kCudnnFamily, o);
       }},
      {"osrt_sum", "OS Runtime Summary: cuda_api_sum's columns for the blocking libc calls -t osrt recorded",
       "OS Runtime trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_sum("OS Runtime Summary (osrt_sum)", kOsrtFamily, o);
       }},
      {"mpi_event_sum", "MPI Event Summary: cuda_api_sum's columns for the MPI calls -t mpi recorded",
       "MPI trace data (profile with -t mpi)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_sum("MPI Event Summary (mpi_event_sum)", kMpiFamily, o);
       }},
      {"mpi_event_trace", "MPI Event Trace: every MPI call by start time, with its rank, communicator, tag, peer, "
       "root, datatype and bytes", "MPI trace data (profile with -t mpi)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_mpi_event_trace(o);
       }},
      {"api_trace", "every call of every domain, nested ones too, with depth, self time and decoded arguments",
       "API trace data", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_trace(o);
       }},
      {"nvtx_sum", "NVTX Range Summary: time, instances, average, median, min, max, stddev per range name and style",
       "NVTX data", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_nvtx_sum();
       }},
      {"nvtx_pushpop_trace", "NVTX Push/Pop Range Trace: every push/pop range by start time, with its level, parent "
       "and the time of its children", "NVTX push/pop range data", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_nvtx_pushpop_trace();
       }},
      {"nvtx_gpu_proj_sum", "NVTX GPU Projection Summary: per range name and style, the GPU time of the operations "
       "launched inside each range (first start to last end), its instances and GPU operations",
       "NVTX range data with GPU operations launched inside (profile with -t cuda,nvtx and GPU activity)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_nvtx_gpu_proj_sum();
       }},
      {"nvtx_gpu_proj_trace", "NVTX GPU Projection Trace: each range that launched GPU operations, projected onto "
       "the GPU, with its CPU time, level, parent and range stack",
       "NVTX range data with GPU operations launched inside (profile with -t cuda,nvtx and GPU activity)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_nvtx_gpu_proj_trace();
       }},
      {"nvtx_kern_sum", "NVTX Range Kernel Summary: per range, thread and kernel, the kernels launched inside the "
       "range and their time (--pytorch: each op's and module's kernels)",
       "NVTX range and CUDA kernel data (profile with -t cuda,nvtx and GPU activity)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_nvtx_kern_sum(o.kernel_names);
       }},
      {"callsite_sum", "Call Sites of Slow Calls: the calls that carry a backtrace (--cudabacktrace, "
       "--osrt-backtrace-threshold), per API and stack named from the binaries, ranked by total time",
       "backtrace data (profile with --cudabacktrace or -t osrt)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_callsite_sum(o);
       }},
      {"cpu_sample_sum", "CPU Samples by Function: where -s cpu found the threads, per function and module, most "
       "samples first", "CPU sample data (profile with -s cpu)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_cpu_sample_sum();
       }},
      {"cuda_gpu_kern_sum", "CUDA GPU Kernel Summary: time, instances, average, median, min, max, stddev per kernel "
       "name, from CUPTI", "CUDA kernel data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_gpu_time_sum("CUDA GPU Kernel Summary (cuda_gpu_kern_sum)", true, o.kernel_names);
       }},
      {"cuda_gpu_mem_time_sum", "CUDA GPU MemOps Summary (by Time): per memory operation (copy direction, memset)",
       "GPU memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", false,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_gpu_time_sum("CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum)", false, o.kernel_names);
       }},
      {"cuda_gpu_mem_size_sum", "CUDA GPU MemOps Summary (by Size): bytes per memory operation, in MB",
       "GPU memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_gpu_size_sum();
       }},
      {"cuda_gpu_trace", "CUDA GPU Trace: every kernel, copy and set the GPU ran, by start time",
       "CUDA kernel or memory operation data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_gpu_trace(o.kernel_names);
       }},
      {"cuda_kern_exec_trace", "CUDA Kernel Launch & Exec Time Trace: each kernel with the call that launched it, its "
       "time queued and running", "CUDA kernel data (profile with -t cuda on a machine with a GPU and CUPTI)", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_kern_exec_trace(o.kernel_names);
       }},
      {"cuda_api_gpu_sum", "CUDA Summary (API/Kernels/MemOps): API calls, kernels and memory operations in one table",
       "CUDA API, kernel or memory operation data", true,
       [](const ReportOptions& o) -> std::unique_ptr<Report> {
         return make_api_gpu_sum(o);
       }},
      {"python_sample_sum", "Python Samples by Function: where --python-sampling found the threads, per Python "
       "function, as the running function (self) and anywhere on the stack (total)",
       "Python sample data (profile with --python-sampling true)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_python_sample_sum();
       }},
      {"cpu_ctxsw_sum", "CPU Context Switches per Thread: times each thread left its CPU (blocked or preempted) and "
       "its time off CPU", "context switch data (profile with --cpuctxsw process-tree)", false,
       [](const ReportOptions&) -> std::unique_ptr<Report> {
         return make_cpu_ctxsw_sum();
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

}  // namespace cutrace::report
