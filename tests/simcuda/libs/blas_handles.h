// The first word of each simulated BLAS handle. cuBLAS documents that a cublasHandle_t may be used
// in place of a cublasLtHandle_t with a cast (PyTorch does so for every cuBLASLt call), so the
// simulated cuBLASLt accepts a handle starting with either word.
#pragma once

#include <cstdint>

namespace simcuda::lib {

inline constexpr uint64_t kCublasHandleMagic = 0x6375'426c'6173'4844;    // "cuBlasHD"
inline constexpr uint64_t kCublasLtHandleMagic = 0x4c74'4861'6e64'6c65;  // "LtHandle"

}  // namespace simcuda::lib
