// What reports and exports alike must agree on about the calls of a trace: which calls each shows and
// counts, whether the trace has GPU activity to link calls by, and how kernels are named. Reports
// (report/) and exports (export/) both build on it, so that `cutrace stats` and `cutrace export` of
// one trace count the same calls.
#pragma once

#include <string>
#include <string_view>

#include "cutrace/domains.h"
#include "reader/trace_reader.h"

namespace cutrace::model {

// How reports that name GPU kernels name them: demangled (the default), the function's name alone
// (`:base`, as nsys: "axpy" for "void ns::axpy<float>(int, float*)"), or as compiled (`:mangled`).
enum class KernelNames { kDemangled, kBase, kMangled };

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

// Whether the trace was recorded with GPU activity (CUPTI), whose API link records give calls their
// CorrID (call_links.h); without it, calls are numbered by the reader.
inline bool trace_has_gpu_activity(reader::TraceReader& reader) {
  const std::string* gpu = reader.metadata_value("gpu_activity");
  return gpu && *gpu == "cupti";
}

// The function's own name in a demangled kernel name, as nsys's shortName and :base
// ("void ns::axpy<float>(int, float*)" -> "axpy").
std::string base_kernel_name(std::string_view demangled);

}  // namespace cutrace::model
