// Registers kernels with the simulated runtime the way nvcc-generated start-up code does, so tests
// written in plain C++ can launch them.
#pragma once

#include "cudart/nvcc_abi.h"

namespace simcuda::test {

// To the runtime a host stub is only a key: distinct bytes of one array give distinct keys that no
// identical-code folding can merge, as it could merge empty functions.
inline char g_stub_keys[64];

inline void** test_module() {
  static char image[16];
  static void** module = __cudaRegisterFatBinary(image);
  return module;
}

inline const void* register_kernel(int slot, const char* mangled_name) {
  const void* stub = &g_stub_keys[slot];
  __cudaRegisterFunction(test_module(), static_cast<const char*>(stub),
                         const_cast<char*>(mangled_name), mangled_name, -1, nullptr, nullptr,
                         nullptr, nullptr, nullptr);
  return stub;
}

}  // namespace simcuda::test
