// The library test programs (sim_cublas, sim_cudnn, sim_solver) make their calls through these: each
// library call counted by name in the program's own map (printed as its "calls NAME N" lines), and a
// failure reported on stderr as "error: FUNCTION returned CODE[ NAME]" and returned from the calling
// function as 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

// For a library whose status has no name function.
template <class Status>
const char* no_status_name(Status) {
  return nullptr;
}

#define COUNTED_LIBRARY_CALL(counts, success, name_of, fn, ...)                           \
  do {                                                                                    \
    ++(counts)[#fn];                                                                      \
    const auto s_ = fn(__VA_ARGS__);                                                      \
    if (s_ != (success)) {                                                                \
      if (const char* name_ = name_of(s_))                                                \
        std::fprintf(stderr, "error: %s returned %d %s\n", #fn, int(s_), name_);          \
      else                                                                                \
        std::fprintf(stderr, "error: %s returned %d\n", #fn, int(s_));                    \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

#define CUDA_CALL(expr)                                                \
  do {                                                                 \
    cudaError_t e_ = (expr);                                           \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "error: %s returned %d\n", #expr, int(e_)); \
      return 1;                                                        \
    }                                                                  \
  } while (0)
