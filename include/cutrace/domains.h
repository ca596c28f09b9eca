// The libraries and interfaces cutrace records (abi::ApiDomain), as domains.def lists them, and the
// sets of them that the session, the records and the tools pass around.
#pragma once

#include <cstdint>
#include <string_view>

namespace cutrace::abi {

// One bit per domain (domain_bit()): the session's capture word, a call's enclosing domains, -t.
using DomainSet = uint64_t;
inline constexpr uint32_t kMaxDomains = 64;

enum class ApiDomain : uint16_t {
#define CUTRACE_DOMAIN(enumerator, id, name, group, needs, status_type, libraries, symbols, hides_nested) \
  enumerator = id,
#include "cutrace/domains.def"
#undef CUTRACE_DOMAIN
};

struct DomainInfo {
  ApiDomain domain;
  std::string_view name;         // "cuda_runtime": the annotations' key and the tools' word
  std::string_view group;        // the -t value and report family ("cuda"); "" for none
  std::string_view needs;        // the -t value its group also records; "" for none
  std::string_view status_type;  // the enum naming its error results; "" for none
  std::string_view libraries;    // file-name prefixes of its shared objects, space-separated
  std::string_view symbols;      // the shim's exports for it, version-script globs, space-separated
  bool hides_nested;             // calls of its group inside one of its calls are not counted again
};

inline constexpr DomainInfo kDomains[] = {
#define CUTRACE_DOMAIN(enumerator, id, name, group, needs, status_type, libraries, symbols, hides_nested) \
  {ApiDomain::enumerator, name, group, needs, status_type, libraries, symbols, hides_nested != 0},
#include "cutrace/domains.def"
#undef CUTRACE_DOMAIN
};

// 0 for a value beyond the set (an api table read from a damaged trace).
inline constexpr DomainSet domain_bit(ApiDomain d) {
  return uint32_t(d) < kMaxDomains ? DomainSet(1) << uint32_t(d) : 0;
}

// nullptr for a value no row has (a trace of a newer build).
inline constexpr const DomainInfo* domain_info(ApiDomain d) {
  for (const DomainInfo& info : kDomains)
    if (info.domain == d) return &info;
  return nullptr;
}

// The domains of a -t value / report family ("cuda": the runtime and the driver); 0 for none.
inline constexpr DomainSet group_domains(std::string_view group) {
  DomainSet set = 0;
  for (const DomainInfo& info : kDomains)
    if (!group.empty() && info.group == group) set |= domain_bit(info.domain);
  return set;
}

// The domains of `group` whose calls hide the group's calls made inside them from the group's reports.
inline constexpr DomainSet group_hiding_domains(std::string_view group) {
  DomainSet set = 0;
  for (const DomainInfo& info : kDomains)
    if (!group.empty() && info.group == group && info.hides_nested) set |= domain_bit(info.domain);
  return set;
}

// What `-t value` records: its group's domains and those of the group they need; 0 for no such value.
inline constexpr DomainSet trace_value_domains(std::string_view value) {
  DomainSet set = group_domains(value);
  for (const DomainInfo& info : kDomains)
    if (!value.empty() && info.group == value) set |= group_domains(info.needs);
  return set;
}

// The domain whose shared object a file is, by its name ("libcublasLt.so.13"); 0 for none.
inline constexpr DomainSet library_domain(std::string_view file) {
  for (const DomainInfo& info : kDomains) {
    std::string_view rest = info.libraries;
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      const std::string_view prefix = rest.substr(0, space);
      if (!prefix.empty() && file.substr(0, prefix.size()) == prefix) return domain_bit(info.domain);
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
  }
  return 0;
}

namespace detail {
inline constexpr bool domains_well_formed() {
  DomainSet seen = 0;
  for (const DomainInfo& info : kDomains) {
    if (uint32_t(info.domain) >= kMaxDomains || (seen & domain_bit(info.domain))) return false;
    seen |= domain_bit(info.domain);
    for (const DomainInfo& other : kDomains)
      if (&other != &info && other.name == info.name) return false;
    if (!info.needs.empty() && group_domains(info.needs) == 0) return false;
    // Rows of one group agree on what it needs, so -t means one thing.
    for (const DomainInfo& other : kDomains)
      if (other.group == info.group && other.needs != info.needs) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::domains_well_formed(),
              "domains.def: ids are below 64 and distinct, names distinct, and a group needs a group that exists");

inline constexpr DomainSet kCudaDomains = group_domains("cuda");
inline constexpr DomainSet kCublasDomains = group_domains("cublas");
inline constexpr DomainSet kCudnnDomains = group_domains("cudnn");

// The domains of the groups that need `needs` ("cuda": the CUDA libraries, cuBLAS, cuDNN, cuSOLVER, ...).
inline constexpr DomainSet needing_domains(std::string_view needs) {
  DomainSet set = 0;
  for (const DomainInfo& info : kDomains)
    if (!needs.empty() && info.needs == needs) set |= domain_bit(info.domain);
  return set;
}
inline constexpr DomainSet kCudaLibraryDomains = needing_domains("cuda");

}  // namespace cutrace::abi
