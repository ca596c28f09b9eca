// What a GEMM of the simulated cuBLAS and cuBLASLt computes: D = alpha * op(A) op(B) + beta * C
// (+ bias, then an activation, for cuBLASLt's epilogues), done on the host by the device thread when
// the GEMM's kernel ends (the launch's effect, kLaunchParamEffect in simcuda.h), so that a program
// reading its result back sees what a GPU would have computed, to rounding. Sums are taken in double
// whatever the compute type, so a result may differ from a GPU's in its last bits (a GPU in TF32 or
// FP16 accumulation differs more); tests compare with a tolerance.
//
// Computed: real types FP64, FP32, FP16 and BF16 in column-major order, with the scalars in the
// GEMM's scale type. Not computed (the kernel only takes its time, as every other simulated kernel):
// complex and integer types, operands that do not lie inside one allocation of the simulated device
// (a real GPU would fault), and GEMMs of more than kMaxHostMacs multiply-adds (a test that checks a
// result has no reason to be large; a benchmark that is large has no reason to wait for the host).
#pragma once

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>

#include "core/memory.h"

namespace simcuda::lib {

inline constexpr uint64_t kMaxHostMacs = uint64_t(1) << 24;

inline bool host_computable(cudaDataType t) {
  return t == CUDA_R_64F || t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

inline size_t element_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_64F: return 8;
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
  }
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise it
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as the GPU's conversions do.
inline uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
  if (exponent == 0xff) return uint16_t(sign | 0x7c00 | (mantissa != 0 ? 0x200 : 0));
  int e = int(exponent) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mantissa >> shift, rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(e) << 10) | (mantissa >> 13), rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: right
  return uint16_t(sign | half);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffff) > 0x7f800000) return uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

inline double load_element(cudaDataType t, const void* base, int64_t index) {
  switch (t) {
    case CUDA_R_64F: return static_cast<const double*>(base)[index];
    case CUDA_R_32F: return static_cast<const float*>(base)[index];
    case CUDA_R_16F: return half_to_float(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_16BF: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    default: return 0;
  }
}

inline void store_element(cudaDataType t, void* base, int64_t index, double v) {
  switch (t) {
    case CUDA_R_64F: static_cast<double*>(base)[index] = v; break;
    case CUDA_R_32F: static_cast<float*>(base)[index] = float(v); break;
    case CUDA_R_16F: static_cast<uint16_t*>(base)[index] = float_to_half(float(v)); break;
    case CUDA_R_16BF: static_cast<uint16_t*>(base)[index] = float_to_bf16(float(v)); break;
    default: break;
  }
}

// A scalar (alpha, beta) in its scale type; false for a type the host does not compute in.
inline bool load_scalar(cudaDataType t, const void* p, double* out) {
  if (t == CUDA_R_32I) {
    *out = *static_cast<const int32_t*>(p);
    return true;
  }
  if (!host_computable(t)) return false;
  *out = load_element(t, p, 0);
  return true;
}

struct HostMatrix {
  cudaDataType type = CUDA_R_32F;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;  // as stored
  int64_t ld = 0;
  int64_t batch_stride = 0;  // in elements
};

enum class Activation { kNone, kRelu, kGelu };

struct HostGemm {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  HostMatrix a, b, c, d;
  double alpha = 1, beta = 0;
  // cuBLASLt's epilogue: a bias of m elements added to every column, then the activation.
  const void* bias = nullptr;
  cudaDataType bias_type = CUDA_R_32F;
  int64_t bias_batch_stride = 0;
  Activation activation = Activation::kNone;
};

// The extent of a column-major matrix batch, in bytes; 0 if empty.
inline uint64_t extent_bytes(const HostMatrix& x, int64_t batch) {
  if (x.rows == 0 || x.cols == 0 || batch == 0) return 0;
  uint64_t last = uint64_t(x.rows - 1) + uint64_t(x.cols - 1) * uint64_t(x.ld) +
                  uint64_t(batch - 1) * uint64_t(x.batch_stride);
  return (last + 1) * element_size(x.type);
}

inline bool inside_one_allocation(const void* p, uint64_t bytes) {
  if (bytes == 0) return true;
  std::optional<Allocation> a = memory().find(p);
  return a.has_value() && a->contains(p, bytes);
}

// Whether the host can compute this GEMM (see the header comment); checked when it is launched, so
// that the effect never reads memory outside the simulated device's allocations.
inline bool host_can_compute(const HostGemm& g) {
  for (const HostMatrix* x : {&g.a, &g.b, &g.c, &g.d}) {
    if (!host_computable(x->type) || x->ld < std::max<int64_t>(1, x->rows) || x->batch_stride < 0) return false;
  }
  if (g.bias != nullptr && (!host_computable(g.bias_type) ||
                            !inside_one_allocation(g.bias, uint64_t(g.m + (g.batch - 1) * g.bias_batch_stride) *
                                                                   element_size(g.bias_type)))) {
    return false;
  }
  uint64_t macs = uint64_t(g.m) * uint64_t(g.n) * uint64_t(std::max<int64_t>(g.k, 1)) * uint64_t(g.batch);
  if (macs > kMaxHostMacs) return false;
  bool reads_c = g.beta != 0;
  return (g.k == 0 || (inside_one_allocation(g.a.data, extent_bytes(g.a, g.batch)) &&
                       inside_one_allocation(g.b.data, extent_bytes(g.b, g.batch)))) &&
         (!reads_c || inside_one_allocation(g.c.data, extent_bytes(g.c, g.batch))) &&
         inside_one_allocation(g.d.data, extent_bytes(g.d, g.batch));
}

inline double activate(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x > 0 ? x : 0;
    // cuBLASLt's GELU is the tanh approximation.
    case Activation::kGelu: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

// As BLAS: C is not read when beta is 0, so whatever it holds (NaN included) does not reach D.
inline void compute_on_host(const HostGemm& g) {
  auto element = [](const HostMatrix& x, cublasOperation_t op, int64_t batch, int64_t row, int64_t col) {
    int64_t index = batch * x.batch_stride + (op == CUBLAS_OP_N ? row + col * x.ld : col + row * x.ld);
    return load_element(x.type, x.data, index);
  };
  for (int64_t l = 0; l < g.batch; ++l) {
    for (int64_t j = 0; j < g.n; ++j) {
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          sum += element(g.a, g.transa, l, i, p) * element(g.b, g.transb, l, p, j);
        }
        double v = g.alpha * sum;
        if (g.beta != 0) v += g.beta * element(g.c, CUBLAS_OP_N, l, i, j);
        if (g.bias != nullptr) v += load_element(g.bias_type, g.bias, l * g.bias_batch_stride + i);
        store_element(g.d.type, const_cast<void*>(g.d.data), l * g.d.batch_stride + i + j * g.d.ld,
                      activate(g.activation, v));
      }
    }
  }
}

// The launch's effect, or an empty function where the host does not compute the GEMM.
inline std::function<void()> host_gemm_effect(const HostGemm& g) {
  if (!host_can_compute(g)) return {};
  return [g] { compute_on_host(g); };
}

}  // namespace simcuda::lib
