// A program linked to cuSOLVER and cuSPARSE: a Cholesky factorization of an n x n matrix through the
// classic API (single precision) and the 64-bit API (double precision), a sparse matrix-vector
// product of a tridiagonal n x n CSR matrix, and a sparse QR solve with it, on a stream of its own
// with memory from the runtime. On the simulated stack cuSOLVER's dense handle owns a cuBLAS handle
// and its sparse handle a cuSPARSE handle, and the factorization runs GEMMs through cuBLAS.
//
// usage: sim_solver n
// stdout: "calls <function> N" for every cuSOLVER and cuSPARSE call the program made, sorted,
//         "workspace <Lwork> <device bytes>", "status ok".
// exit:   0 on success, 1 when a call fails.
// cuSOLVERSp is deprecated in CUDA 13 (cuDSS replaces it) but still exported, and programs still call it.
#define DISABLE_CUSOLVER_DEPRECATED
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <cusolverSp.h>
#include <cusparse.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include "library_calls.h"

namespace {

std::map<std::string, long> g_calls;

#define CUSOLVER_CALL(fn, ...) COUNTED_LIBRARY_CALL(g_calls, CUSOLVER_STATUS_SUCCESS, no_status_name, fn, __VA_ARGS__)
#define CUSPARSE_CALL(fn, ...) COUNTED_LIBRARY_CALL(g_calls, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorName, fn, __VA_ARGS__)

int run(int n) {
  cudaStream_t stream;
  CUDA_CALL(cudaStreamCreate(&stream));
  void *a = nullptr, *info = nullptr;
  CUDA_CALL(cudaMalloc(&a, sizeof(double) * n * n));
  CUDA_CALL(cudaMalloc(&info, sizeof(int)));

  // Dense: the classic single-precision API, then the 64-bit API in double precision.
  cusolverDnHandle_t dn;
  CUSOLVER_CALL(cusolverDnCreate, &dn);
  CUSOLVER_CALL(cusolverDnSetStream, dn, stream);
  int lwork = 0;
  CUSOLVER_CALL(cusolverDnSpotrf_bufferSize, dn, CUBLAS_FILL_MODE_LOWER, n, static_cast<float*>(a), n, &lwork);
  void* work = nullptr;
  CUDA_CALL(cudaMalloc(&work, sizeof(float) * lwork));
  CUSOLVER_CALL(cusolverDnSpotrf, dn, CUBLAS_FILL_MODE_LOWER, n, static_cast<float*>(a), n, static_cast<float*>(work),
                lwork, static_cast<int*>(info));
  cusolverDnParams_t params;
  CUSOLVER_CALL(cusolverDnCreateParams, &params);
  size_t device_bytes = 0, host_bytes = 0;
  CUSOLVER_CALL(cusolverDnXpotrf_bufferSize, dn, params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, a, n, CUDA_R_64F,
                &device_bytes, &host_bytes);
  void* device_work = nullptr;
  CUDA_CALL(cudaMalloc(&device_work, device_bytes));
  CUSOLVER_CALL(cusolverDnXpotrf, dn, params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, a, n, CUDA_R_64F, device_work,
                device_bytes, nullptr, host_bytes, static_cast<int*>(info));
  CUSOLVER_CALL(cusolverDnDestroyParams, params);

  // Sparse: a tridiagonal matrix in CSR, y = A x.
  const int nnz = 3 * n - 2;
  void *row_offsets, *columns, *values, *x, *y;
  CUDA_CALL(cudaMalloc(&row_offsets, sizeof(int) * (n + 1)));
  CUDA_CALL(cudaMalloc(&columns, sizeof(int) * nnz));
  CUDA_CALL(cudaMalloc(&values, sizeof(float) * nnz));
  CUDA_CALL(cudaMalloc(&x, sizeof(float) * n));
  CUDA_CALL(cudaMalloc(&y, sizeof(float) * n));
  cusparseHandle_t sparse;
  CUSPARSE_CALL(cusparseCreate, &sparse);
  CUSPARSE_CALL(cusparseSetStream, sparse, stream);
  cusparseSpMatDescr_t mat;
  cusparseDnVecDescr_t vec_x, vec_y;
  CUSPARSE_CALL(cusparseCreateCsr, &mat, n, n, nnz, row_offsets, columns, values, CUSPARSE_INDEX_32I,
                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F);
  CUSPARSE_CALL(cusparseCreateDnVec, &vec_x, n, x, CUDA_R_32F);
  CUSPARSE_CALL(cusparseCreateDnVec, &vec_y, n, y, CUDA_R_32F);
  const float one = 1.0f, zero = 0.0f;
  size_t spmv_bytes = 0;
  CUSPARSE_CALL(cusparseSpMV_bufferSize, sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vec_x, &zero, vec_y,
                CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, &spmv_bytes);
  void* spmv_work = nullptr;
  CUDA_CALL(cudaMalloc(&spmv_work, spmv_bytes));
  CUSPARSE_CALL(cusparseSpMV, sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vec_x, &zero, vec_y, CUDA_R_32F,
                CUSPARSE_SPMV_CSR_ALG1, spmv_work);
  CUSPARSE_CALL(cusparseDestroyDnVec, vec_y);
  CUSPARSE_CALL(cusparseDestroyDnVec, vec_x);
  CUSPARSE_CALL(cusparseDestroySpMat, mat);
  CUSPARSE_CALL(cusparseDestroy, sparse);

  // A sparse solve through cuSOLVER, whose handle makes its own cuSPARSE handle.
  cusolverSpHandle_t sp;
  CUSOLVER_CALL(cusolverSpCreate, &sp);
  CUSOLVER_CALL(cusolverSpSetStream, sp, stream);
  cusparseMatDescr_t descr;
  CUSPARSE_CALL(cusparseCreateMatDescr, &descr);
  int singularity = 0;
  CUSOLVER_CALL(cusolverSpScsrlsvqr, sp, n, nnz, descr, static_cast<float*>(values), static_cast<int*>(row_offsets),
                static_cast<int*>(columns), static_cast<float*>(x), 1e-6f, 0, static_cast<float*>(y), &singularity);
  CUSPARSE_CALL(cusparseDestroyMatDescr, descr);
  CUSOLVER_CALL(cusolverSpDestroy, sp);
  CUSOLVER_CALL(cusolverDnDestroy, dn);

  CUDA_CALL(cudaStreamSynchronize(stream));
  for (void* p : {a, info, work, device_work, row_offsets, columns, values, x, y, spmv_work}) CUDA_CALL(cudaFree(p));
  CUDA_CALL(cudaStreamDestroy(stream));

  for (const auto& [name, count] : g_calls) std::printf("calls %s %ld\n", name.c_str(), count);
  std::printf("workspace %d %zu\n", lwork, device_bytes);
  std::printf("singularity %d\n", singularity);
  std::printf("status ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc == 2 ? std::atoi(argv[1]) : 0;
  if (n < 2) {
    std::fprintf(stderr, "usage: sim_solver n (n >= 2)\n");
    return 1;
  }
  return run(n);
}
