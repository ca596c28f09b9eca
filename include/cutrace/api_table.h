// The table of intercepted functions. Its contents are generated at build time (preload/gen) from the
// CUDA headers, the exports of the installed libraries and annotations/*.toml; the preload library
// indexes it by api id, and the recorder copies it into every trace so the file names its own calls.
#pragma once

#include <cstdint>

#include "cutrace/abi.h"
#include "cutrace/format.h"

namespace cutrace {

struct ApiArgInfo {
  const char* name;
  abi::ArgFormat format;
  uint8_t flags = 0;                // format::kArgFlag*
  const char* type_name = nullptr;  // the parameter's C type for kEnum (e.g. "cublasOperation_t")
};

struct ApiInfo {
  const char* name;            // the exported symbol, e.g. "cudaMemcpyAsync_ptsz"
  const char* library;         // soname the real function lives in, e.g. "libcudart.so.13"
  abi::ApiDomain domain;
  abi::ApiClass api_class;
  format::ResultKind result_kind;
  uint8_t arg_count;
  const ApiArgInfo* args;
  // The name reports show, where users know the call by another name than its entry point
  // (__cudaLaunchKernel is the <<<>>> launch, cudaLaunchKernel to nsys users); nullptr: `name`.
  const char* display_name = nullptr;
  uint8_t flags = 0;           // format::kApiFlag*
};

extern const ApiInfo kApiTable[];
extern const uint32_t kApiTableSize;
// A hash of the generated table (never 0): equal in a shim and a recorder of the same build, so that
// one from another build, whose api ids name other functions, is told apart (SessionHeader).
extern const uint32_t kApiTableHash;

}  // namespace cutrace
