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
};

struct ApiInfo {
  const char* name;            // the exported symbol, e.g. "cudaMemcpyAsync_ptsz"
  const char* library;         // soname the real function lives in, e.g. "libcudart.so.13"
  abi::ApiDomain domain;
  abi::ApiClass api_class;
  format::ResultKind result_kind;
  uint8_t arg_count;
  const ApiArgInfo* args;
};

extern const ApiInfo kApiTable[];
extern const uint32_t kApiTableSize;

}  // namespace cutrace
