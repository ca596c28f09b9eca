// Turning recorded values into what people read: CUDA enum names, demangled kernel names, argument
// values by their ArgFormat. Shared by every report and exporter so a value reads the same everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cutrace/abi.h"
#include "reader/trace_reader.h"

namespace cutrace::reader {

// Names from the CUDA headers this build was made with (generated at build time); empty when the value
// has no name there (a newer CUDA, or not an error code at all).
std::string_view cuda_error_name(int64_t value);   // cudaError_t
std::string_view cu_result_name(int64_t value);    // CUresult
std::string_view memcpy_kind_name(int64_t value);  // cudaMemcpyKind
// The enumerator of `value` in the C enum `type_name` (any spelling the headers give it: "cudaDataType"
// and "cudaDataType_t" alike); empty for an enum the build's headers do not define or a value it does
// not name. A value that only names an enumerator read as 32 bits (-1 recorded zero-extended) is found.
std::string_view enum_name(std::string_view type_name, uint64_t value);

// The name of a call's result where its domain has a status enum (cudaError_t, CUresult,
// cublasStatus_t, cudnnStatus_t), else empty.
std::string_view result_name(const ApiSpec& api, uint64_t result);

// abi::ApiDomain as a short lower-case word ("cuda_runtime", "cuda_driver", ...).
std::string_view domain_name(abi::ApiDomain domain);

// GPU activity as nsys names it: a copy or set ("[CUDA memcpy Host-to-Device]", "[CUDA memset]") and
// CUPTI's memory kinds ("Pageable", "Device", ...).
std::string gpu_memory_operation(abi::GpuActivity kind, uint8_t copy_kind);
const char* gpu_memory_kind_name(uint32_t kind);

// The C++ name of a mangled symbol, or the input unchanged when it does not demangle (C kernels).
std::string demangle(std::string_view mangled);

std::string thousands(uint64_t v);  // 1234567 -> "1,234,567"
// The name of a special rank of an abi::ArgFormat::kMpiRank slot (MPI_ANY_SOURCE, ...), "" for a rank.
std::string_view mpi_rank_name(int64_t rank);
std::string hex(uint64_t v);        // "0x7f3a..."

// One argument decoded by its format. Numbers stay numbers (JSON, CSV); everything else is text.
struct ArgValue {
  enum class Type : uint8_t { kUnsigned, kSigned, kText } type = Type::kUnsigned;
  uint64_t u = 0;
  int64_t s = 0;
  std::string text;

  std::string to_string() const;  // for plain-text output
};

// Decodes one slot: bytes and counts as numbers, pointers/streams/flags as hex, memcpy kinds by name,
// dim3 as "(x,y,z)", kernel stubs, handles and functions as demangled kernel names (hex when the trace
// does not name them), enums by enumerator name (the number when the name is unknown).
ArgValue decode_arg(const TraceReader& reader, const Thread& thread, const ApiArgSpec& spec, uint64_t value);
// The same for an argument known only by its format (an enum then stays a number).
ArgValue decode_arg(const TraceReader& reader, const Thread& thread, abi::ArgFormat format, uint64_t value);
// Slot `i` of a call: by its spec, or raw when the api table describes fewer arguments (a newer writer).
ArgValue decode_call_arg(const TraceReader& reader, const Thread& thread, const ApiCall& call, uint32_t i);
// The name of slot `i`: the spec's, or "arg<i>".
std::string arg_name(const ApiSpec& api, uint32_t i);

// The result of a call for display: "cudaSuccess (0)", "0x7f3a0000" for pointers, "" for void.
std::string result_text(const ApiSpec& api, uint64_t result);

}  // namespace cutrace::reader
