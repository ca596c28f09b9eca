// A program that finds cuBLAS at run time, as frameworks do: dlopen("libcublas.so.13") and
// dlsym for each entry point, with device memory and a stream from the runtime. It runs
// cublasSgemm_v2 with the sizes given, then one cublasGemmEx (which cuBLAS hands to cuBLASLt).
//
// usage: sim_cublas m n k [repeats=1]
// stdout: "sgemm M N K", "calls <function> N" for every cuBLAS call made, sorted, "status ok".
// exit:   0 on success, 1 when a call fails or the library cannot be loaded.
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include "library_calls.h"

namespace {

constexpr const char kUsage[] = "sim_cublas m n k [repeats=1]";

std::map<std::string, long> g_calls;

#define CUBLAS_CALL(fn, ...) COUNTED_LIBRARY_CALL(g_calls, CUBLAS_STATUS_SUCCESS, no_status_name, fn, __VA_ARGS__)

template <class Fn>
Fn symbol(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) std::fprintf(stderr, "error: %s not found: %s\n", name, dlerror());
  return fn;
}

int run(int m, int n, int k, long repeats) {
  void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "error: cannot load libcublas.so.13: %s\n", dlerror());
    return 1;
  }
  auto cublasCreate_v2 = symbol<decltype(&::cublasCreate_v2)>(lib, "cublasCreate_v2");
  auto cublasSetStream_v2 = symbol<decltype(&::cublasSetStream_v2)>(lib, "cublasSetStream_v2");
  auto cublasSgemm_v2 = symbol<decltype(&::cublasSgemm_v2)>(lib, "cublasSgemm_v2");
  // cublas_api.h overloads cublasGemmEx in C++; the export is the one with a compute type.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  auto cublasGemmEx = symbol<GemmEx>(lib, "cublasGemmEx");
  auto cublasDestroy_v2 = symbol<decltype(&::cublasDestroy_v2)>(lib, "cublasDestroy_v2");
  if (!cublasCreate_v2 || !cublasSetStream_v2 || !cublasSgemm_v2 || !cublasGemmEx ||
      !cublasDestroy_v2) {
    return 1;
  }

  size_t a_bytes = size_t(m) * k * sizeof(float), b_bytes = size_t(k) * n * sizeof(float),
         c_bytes = size_t(m) * n * sizeof(float);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_CALL(cudaMalloc(&a, a_bytes == 0 ? 1 : a_bytes));
  CUDA_CALL(cudaMalloc(&b, b_bytes == 0 ? 1 : b_bytes));
  CUDA_CALL(cudaMalloc(&c, c_bytes == 0 ? 1 : c_bytes));
  cudaStream_t stream;
  CUDA_CALL(cudaStreamCreate(&stream));

  cublasHandle_t handle;
  CUBLAS_CALL(cublasCreate_v2, &handle);
  CUBLAS_CALL(cublasSetStream_v2, handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  int lda = m > 1 ? m : 1, ldb = k > 1 ? k : 1, ldc = m > 1 ? m : 1;
  for (long i = 0; i < repeats; ++i) {
    CUBLAS_CALL(cublasSgemm_v2, handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb, &beta,
                static_cast<float*>(c), ldc);
  }
  CUBLAS_CALL(cublasGemmEx, handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_32F, lda,
              b, CUDA_R_32F, ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT);
  CUDA_CALL(cudaStreamSynchronize(stream));
  CUBLAS_CALL(cublasDestroy_v2, handle);
  CUDA_CALL(cudaStreamDestroy(stream));
  CUDA_CALL(cudaFree(a));
  CUDA_CALL(cudaFree(b));
  CUDA_CALL(cudaFree(c));

  std::printf("sgemm %d %d %d\n", m, n, k);
  for (const auto& [name, count] : g_calls) std::printf("calls %s %ld\n", name.c_str(), count);
  std::printf("status ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 1;
  }
  int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
  long repeats = argc == 5 ? std::atol(argv[4]) : 1;
  if (m < 0 || n < 0 || k < 0 || repeats < 0) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 1;
  }
  return run(m, n, k, repeats);
}
