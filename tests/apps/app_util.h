// Shared by the test programs: they count every CUDA runtime call they make, so that end-to-end
// tests can compare a trace against exact numbers, and report failures the same way.
//
// Output conventions (stdout, one item per line, sorted where a program prints a table):
//   calls <exported function> <count>   every call the program's code made, failed ones included,
//                                       with the entry points a <<<...>>> launch expands to
//   <key> <value...>                    anything else the program reports
// Failures are reported on stderr as
//   error: <function> returned <code> <name>: <description>
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

class CallCounter {
 public:
  void add(const std::string& api, long n = 1) { counts_[api] += n; }

  // With CUDA 13 a <<<...>>> launch calls __cudaPushCallConfiguration and, in the generated stub,
  // __cudaGetKernel the first time that call site runs, __cudaPopCallConfiguration and
  // __cudaLaunchKernel.
  void add_launch(int call_site) {
    if (launched_sites_.insert(call_site).second) add("__cudaGetKernel");
    add("__cudaPushCallConfiguration");
    add("__cudaPopCallConfiguration");
    add("__cudaLaunchKernel");
  }

  void merge(const CallCounter& other) {
    for (const auto& [api, n] : other.counts_) counts_[api] += n;
    launched_sites_.insert(other.launched_sites_.begin(), other.launched_sites_.end());
  }

  long get(const std::string& api) const {
    auto it = counts_.find(api);
    return it == counts_.end() ? 0 : it->second;
  }

  long total() const {
    long sum = 0;
    for (const auto& [api, n] : counts_) sum += n;
    return sum;
  }

  void print(const char* prefix = "") const {
    for (const auto& [api, n] : counts_) std::printf("%scalls %s %ld\n", prefix, api.c_str(), n);
  }

 private:
  std::map<std::string, long> counts_;
  std::set<int> launched_sites_;
};

// Reports a failed call on stderr; the name and description lookups are runtime calls too.
inline void report_error(CallCounter& calls, const char* api, cudaError_t e) {
  const char* name = cudaGetErrorName(e);
  const char* description = cudaGetErrorString(e);
  calls.add("cudaGetErrorName");
  calls.add("cudaGetErrorString");
  std::fprintf(stderr, "error: %s returned %d %s: %s\n", api, int(e), name, description);
}

// Counts a call made as `api` and reports it if it failed; returns true on success.
inline bool counted(CallCounter& calls, const char* api, cudaError_t e) {
  calls.add(api);
  if (e == cudaSuccess) return true;
  report_error(calls, api, e);
  return false;
}

// Parses a non-negative decimal argument or exits with a usage error.
inline long parse_count(const char* text, const char* what, const char* usage) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0) {
    std::fprintf(stderr, "error: %s must be a non-negative integer, got '%s'\nusage: %s\n", what,
                 text, usage);
    std::exit(64);
  }
  return v;
}
