#include "reader/decode.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>

namespace cutrace::reader {
namespace {

struct EnumName {
  int64_t value;
  const char* name;
};

struct EnumTable {
  std::string_view type_name;
  const EnumName* names;
  size_t size;
};

#include "cuda_enums.inc"

std::string_view lookup(const EnumName* begin, const EnumName* end, int64_t value) {
  auto it = std::lower_bound(begin, end, value, [](const EnumName& e, int64_t v) { return e.value < v; });
  if (it == end || it->value != value) return {};
  return it->name;
}

template <size_t N>
std::string_view lookup(const EnumName (&table)[N], int64_t value) {
  return lookup(std::begin(table), std::end(table), value);
}

}  // namespace

std::string_view cuda_error_name(int64_t value) { return lookup(kEnum_cudaError, value); }
std::string_view cu_result_name(int64_t value) { return lookup(kEnum_CUresult, value); }
std::string_view memcpy_kind_name(int64_t value) { return lookup(kEnum_cudaMemcpyKind, value); }

namespace {

const EnumTable* enum_table(std::string_view type_name) {
  auto t = std::lower_bound(std::begin(kEnumTables), std::end(kEnumTables), type_name,
                            [](const EnumTable& e, std::string_view n) { return e.type_name < n; });
  return t == std::end(kEnumTables) || t->type_name != type_name ? nullptr : t;
}

std::string_view name_in(const EnumTable* t, uint64_t value) {
  if (!t) return {};
  std::string_view name = lookup(t->names, t->names + t->size, int64_t(value));
  // An enum recorded through a 32-bit slot arrives zero-extended: CUBLAS_GEMM_DEFAULT (-1) as 0xffffffff.
  if (name.empty() && value <= 0xffffffffu) name = lookup(t->names, t->names + t->size, int32_t(uint32_t(value)));
  return name;
}

}  // namespace

std::string_view enum_name(std::string_view type_name, uint64_t value) { return name_in(enum_table(type_name), value); }

std::string_view result_name(const ApiSpec& api, uint64_t result) {
  if (api.result_kind != format::ResultKind::kErrorCode) return {};
  // Every call's result is named: each domain's status table is found once, not by name per call.
  static const std::array<const EnumTable*, 64> kStatusTables = [] {
    std::array<const EnumTable*, 64> tables{};
    for (size_t id = 0; id < tables.size(); ++id) {
      const abi::DomainInfo* domain = abi::domain_info(abi::ApiDomain(id));
      if (domain && !domain->status_type.empty()) tables[id] = enum_table(domain->status_type);
    }
    return tables;
  }();
  const size_t id = size_t(api.domain);
  return id < kStatusTables.size() ? name_in(kStatusTables[id], result) : std::string_view();
}

std::string_view domain_name(abi::ApiDomain domain) {
  const abi::DomainInfo* info = abi::domain_info(domain);
  return info ? info->name : "unknown";
}

std::string gpu_memory_operation(abi::GpuActivity kind, uint8_t copy_kind) {
  if (kind == abi::GpuActivity::kMemset) return "[CUDA memset]";
  // CUpti_ActivityMemcpyKind's values.
  static const char* const kCopies[] = {"Unknown",         "Host-to-Device",   "Device-to-Host",  "Host-to-Array",
                                        "Array-to-Host",   "Array-to-Array",   "Array-to-Device", "Device-to-Array",
                                        "Device-to-Device", "Host-to-Host",    "Peer-to-Peer"};
  const char* copy = copy_kind < std::size(kCopies) ? kCopies[copy_kind] : "Unknown";
  return std::string("[CUDA memcpy ") + copy + "]";
}

const char* gpu_memory_kind_name(uint32_t kind) {
  // CUpti_ActivityMemoryKind's values.
  static const char* const kKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                       "Array",   "Managed",  "Device Static", "Managed Static"};
  return kind < std::size(kKinds) ? kKinds[kind] : "Unknown";
}

std::string demangle(std::string_view mangled) {
  std::string in(mangled);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(::abi::__cxa_demangle(in.c_str(), nullptr, nullptr, &status),
                                                  &std::free);
  if (status != 0 || !out) return in;
  return out.get();
}

std::string thousands(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string_view mpi_rank_name(int64_t rank) {
  switch (rank) {
    case abi::kMpiRankAnySource: return "MPI_ANY_SOURCE";
    case abi::kMpiRankProcNull: return "MPI_PROC_NULL";
    case abi::kMpiRankRoot: return "MPI_ROOT";
    case abi::kMpiRankUnknown: return "unknown";
  }
  return {};
}

std::string hex(uint64_t v) {
  char buf[24] = {'0', 'x'};
  auto r = std::to_chars(buf + 2, buf + sizeof buf, v, 16);
  return std::string(buf, r.ptr);
}

std::string ArgValue::to_string() const {
  switch (type) {
    case Type::kUnsigned: return std::to_string(u);
    case Type::kSigned: return std::to_string(s);
    case Type::kText: return text;
  }
  return {};
}

ArgValue decode_arg(const TraceReader& reader, const Thread& thread, abi::ArgFormat format, uint64_t value) {
  ArgValue out;
  out.u = value;
  auto text = [&](std::string t) {
    out.type = ArgValue::Type::kText;
    out.text = std::move(t);
    return out;
  };
  switch (format) {
    case abi::ArgFormat::kUnsigned:
    case abi::ArgFormat::kBytes:
    case abi::ArgFormat::kDevice:
      return out;
    case abi::ArgFormat::kSigned:
      out.type = ArgValue::Type::kSigned;
      out.s = int64_t(value);
      return out;
    case abi::ArgFormat::kPointer:
    case abi::ArgFormat::kStream:
    case abi::ArgFormat::kFlags:
      return text(hex(value));
    case abi::ArgFormat::kMemcpyKind: {
      std::string_view name = memcpy_kind_name(int64_t(value));
      return text(name.empty() ? std::to_string(value) : std::string(name));
    }
    case abi::ArgFormat::kKernelStub:
    case abi::ArgFormat::kKernelHandle:
    case abi::ArgFormat::kFunction: {
      const KernelName* k = reader.kernel(thread, format, value);
      return text(k ? k->demangled : hex(value));
    }
    case abi::ArgFormat::kDim3: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "(%u,%u,%u)", unsigned(value & 0xffffffffu), unsigned((value >> 32) & 0xffff),
                    unsigned(value >> 48));
      return text(buf);
    }
    case abi::ArgFormat::kEnum:
      out.type = ArgValue::Type::kSigned;  // enums are C ints: -1 reads as -1
      out.s = value <= 0xffffffffu ? int64_t(int32_t(uint32_t(value))) : int64_t(value);
      return out;
    case abi::ArgFormat::kMpiRank: {
      std::string_view name = mpi_rank_name(int64_t(value));
      if (!name.empty()) return text(std::string(name));
      out.type = ArgValue::Type::kSigned;
      out.s = int64_t(value);
      return out;
    }
    case abi::ArgFormat::kMpiDatatype:
      if (value > 0 && value < abi::kMpiDatatypeCount) return text(abi::kMpiDatatypeNames[value]);
      return text(value == 0 ? "other" : std::to_string(value));  // derived, null, or one a later list names
  }
  return out;  // a format from a later writer: the raw number is the honest rendering
}

ArgValue decode_arg(const TraceReader& reader, const Thread& thread, const ApiArgSpec& spec, uint64_t value) {
  if (spec.format == abi::ArgFormat::kEnum) {
    std::string_view name = enum_name(spec.type_name, value);
    if (!name.empty()) {
      ArgValue out;
      out.u = value;
      out.type = ArgValue::Type::kText;
      out.text = std::string(name);
      return out;
    }
  }
  return decode_arg(reader, thread, spec.format, value);
}

ArgValue decode_call_arg(const TraceReader& reader, const Thread& thread, const ApiCall& call, uint32_t i) {
  const ApiSpec& api = *call.api;
  if (i < api.args.size()) return decode_arg(reader, thread, api.args[i], call.args[i]);
  return decode_arg(reader, thread, abi::ArgFormat::kUnsigned, call.args[i]);
}

std::string arg_name(const ApiSpec& api, uint32_t i) {
  return i < api.args.size() ? api.args[i].name : "arg" + std::to_string(i);
}

std::string result_text(const ApiSpec& api, uint64_t result) {
  switch (api.result_kind) {
    case format::ResultKind::kVoid: return {};
    case format::ResultKind::kPointer: return hex(result);
    case format::ResultKind::kUnsigned: return std::to_string(result);
    case format::ResultKind::kSigned: return std::to_string(int64_t(result));
    case format::ResultKind::kErrorCode: break;
  }
  std::string_view name = result_name(api, result);
  std::string code = std::to_string(int64_t(result));
  return name.empty() ? code : std::string(name) + " (" + code + ")";
}

}  // namespace cutrace::reader
