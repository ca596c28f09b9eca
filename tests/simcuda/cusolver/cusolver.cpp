// The simulated cuSOLVER: dense handles (each owning a cuBLAS handle), sparse handles (each owning a
// cuSPARSE handle), a blocked Cholesky factorization in the classic and the 64-bit API, and a sparse
// QR solve. Like the real library it links cuBLAS and cuSPARSE and calls their exports, so a tracer
// sees those calls nested inside the cuSOLVER call that made them; its own kernels go through the
// driver (see simcuda.h and libs/driver_client.h).
#include <cublas_api.h>
#include <cusolverDn.h>
#include <cusolverSp.h>

#include <algorithm>

#include "libs/driver_client.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

struct cusolverDnContext {
  uint64_t magic;
  cudaStream_t stream;
  cublasHandle_t blas;
};

struct cusolverDnParams {
  cusolverAlgMode_t potrf_algorithm = CUSOLVER_ALG_0;
};

struct cusolverSpContext {
  uint64_t magic;
  cudaStream_t stream;
  cusparseHandle_t sparse;
};

namespace {

using simcuda::lib::DriverClient;

enum KernelIndex : size_t { kCholesky, kSparseQr };

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kCholeskyKernel, simcuda::kSparseQrKernel});
  return *d;
}

constexpr uint64_t kDnMagic = 0x6375'536f'6c44'6e48;
constexpr uint64_t kSpMagic = 0x6375'536f'6c53'7048;

bool valid(cusolverDnHandle_t h) { return h != nullptr && h->magic == kDnMagic; }
bool valid(cusolverSpHandle_t h) { return h != nullptr && h->magic == kSpMagic; }

// What the factorization keeps between blocks: one panel of the block width per column.
int64_t cholesky_workspace_elements(int64_t n) { return std::max<int64_t>(1, n) * simcuda::kCholeskyBlock; }

cusolverStatus_t check_potrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int64_t n, const void* A,
                             int64_t lda) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if ((uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) || n < 0 || lda < std::max<int64_t>(1, n) ||
      (n > 0 && A == nullptr)) {
    return CUSOLVER_STATUS_INVALID_VALUE;
  }
  return CUSOLVER_STATUS_SUCCESS;
}

// Right-looking blocked Cholesky: factor a diagonal block (one kernel), then update the trailing
// matrix with a GEMM through cuBLAS, block after block.
template <class Real, class Gemm>
cusolverStatus_t blocked_cholesky(cusolverDnHandle_t handle, int64_t n, Real* A, int64_t lda, Gemm gemm) {
  const int64_t block = simcuda::kCholeskyBlock;
  for (int64_t j = 0; j < n; j += block) {
    const int64_t width = std::min(block, n - j);
    if (driver().launch(kCholesky, 1, 1, 1, unsigned(width), handle->stream) != CUDA_SUCCESS)
      return CUSOLVER_STATUS_EXECUTION_FAILED;
    const int64_t rest = n - j - width;
    if (rest == 0) break;
    const Real minus_one = -1, one = 1;
    Real* panel = A + j * lda + j + width;
    Real* trailing = A + (j + width) * lda + j + width;
    if (gemm(handle->blas, CUBLAS_OP_N, CUBLAS_OP_T, int(rest), int(rest), int(width), &minus_one, panel, int(lda),
             panel, int(lda), &one, trailing, int(lda)) != CUBLAS_STATUS_SUCCESS) {
      return CUSOLVER_STATUS_EXECUTION_FAILED;
    }
  }
  return CUSOLVER_STATUS_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnCreate(cusolverDnHandle_t* handle) {
  if (handle == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  if (!driver().ready()) return CUSOLVER_STATUS_NOT_INITIALIZED;
  cublasHandle_t blas = nullptr;
  if (cublasCreate_v2(&blas) != CUBLAS_STATUS_SUCCESS) return CUSOLVER_STATUS_NOT_INITIALIZED;
  *handle = new cusolverDnContext{kDnMagic, nullptr, blas};
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnDestroy(cusolverDnHandle_t handle) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  cublasDestroy_v2(handle->blas);
  handle->magic = 0;
  delete handle;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if (cublasSetStream_v2(handle->blas, streamId) != CUBLAS_STATUS_SUCCESS) return CUSOLVER_STATUS_INTERNAL_ERROR;
  handle->stream = streamId;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnCreateParams(cusolverDnParams_t* params) {
  if (params == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  *params = new cusolverDnParams;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnDestroyParams(cusolverDnParams_t params) {
  delete params;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle,
                                                                      cublasFillMode_t uplo, int n, float* A,
                                                                      int lda, int* Lwork) {
  if (cusolverStatus_t s = check_potrf(handle, uplo, n, A, lda); s) return s;
  if (Lwork == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  *Lwork = int(cholesky_workspace_elements(n));
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo,
                                                           int n, float* A, int lda, float* Workspace, int Lwork,
                                                           int* devInfo) {
  if (cusolverStatus_t s = check_potrf(handle, uplo, n, A, lda); s) return s;
  if (Workspace == nullptr || Lwork < cholesky_workspace_elements(n) || devInfo == nullptr)
    return CUSOLVER_STATUS_INVALID_VALUE;
  return blocked_cholesky<float>(handle, n, A, lda, cublasSgemm_v2);
}

namespace {

size_t real_bytes(cudaDataType t) { return t == CUDA_R_32F ? sizeof(float) : t == CUDA_R_64F ? sizeof(double) : 0; }

}  // namespace

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnXpotrf_bufferSize(
    cusolverDnHandle_t handle, cusolverDnParams_t params, cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA,
    const void* A, int64_t lda, cudaDataType computeType, size_t* workspaceInBytesOnDevice,
    size_t* workspaceInBytesOnHost) {
  if (cusolverStatus_t s = check_potrf(handle, uplo, n, A, lda); s) return s;
  if (params == nullptr || workspaceInBytesOnDevice == nullptr || workspaceInBytesOnHost == nullptr)
    return CUSOLVER_STATUS_INVALID_VALUE;
  if (real_bytes(dataTypeA) == 0 || computeType != dataTypeA) return CUSOLVER_STATUS_NOT_SUPPORTED;
  *workspaceInBytesOnDevice = size_t(cholesky_workspace_elements(n)) * real_bytes(dataTypeA);
  *workspaceInBytesOnHost = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverDnXpotrf(cusolverDnHandle_t handle, cusolverDnParams_t params,
                                                           cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA,
                                                           void* A, int64_t lda, cudaDataType computeType,
                                                           void* bufferOnDevice, size_t workspaceInBytesOnDevice,
                                                           void* /*bufferOnHost*/, size_t /*workspaceInBytesOnHost*/,
                                                           int* info) {
  if (cusolverStatus_t s = check_potrf(handle, uplo, n, A, lda); s) return s;
  if (params == nullptr || info == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  if (real_bytes(dataTypeA) == 0 || computeType != dataTypeA) return CUSOLVER_STATUS_NOT_SUPPORTED;
  if (bufferOnDevice == nullptr ||
      workspaceInBytesOnDevice < size_t(cholesky_workspace_elements(n)) * real_bytes(dataTypeA)) {
    return CUSOLVER_STATUS_INVALID_VALUE;
  }
  if (dataTypeA == CUDA_R_32F) return blocked_cholesky(handle, n, static_cast<float*>(A), lda, cublasSgemm_v2);
  return blocked_cholesky(handle, n, static_cast<double*>(A), lda, cublasDgemm_v2);
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverSpCreate(cusolverSpHandle_t* handle) {
  if (handle == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  if (!driver().ready()) return CUSOLVER_STATUS_NOT_INITIALIZED;
  cusparseHandle_t sparse = nullptr;
  if (cusparseCreate(&sparse) != CUSPARSE_STATUS_SUCCESS) return CUSOLVER_STATUS_NOT_INITIALIZED;
  *handle = new cusolverSpContext{kSpMagic, nullptr, sparse};
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverSpDestroy(cusolverSpHandle_t handle) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  cusparseDestroy(handle->sparse);
  handle->magic = 0;
  delete handle;
  return CUSOLVER_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverSpSetStream(cusolverSpHandle_t handle, cudaStream_t streamId) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if (cusparseSetStream(handle->sparse, streamId) != CUSPARSE_STATUS_SUCCESS) return CUSOLVER_STATUS_INTERNAL_ERROR;
  handle->stream = streamId;
  return CUSOLVER_STATUS_SUCCESS;
}

// One kernel on the sparse handle's stream; `singularity` is a host value, -1 when A is invertible.
SIMCUDA_EXPORT cusolverStatus_t CUSOLVERAPI cusolverSpScsrlsvqr(cusolverSpHandle_t handle, int m, int nnz,
                                                              const cusparseMatDescr_t descrA, const float* csrVal,
                                                              const int* csrRowPtr, const int* csrColInd,
                                                              const float* b, float tol, int reorder, float* x,
                                                              int* singularity) {
  if (!valid(handle)) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if (m < 0 || nnz < 0 || descrA == nullptr || tol < 0 || reorder < 0 || reorder > 3 || singularity == nullptr ||
      (m > 0 && (csrRowPtr == nullptr || b == nullptr || x == nullptr)) ||
      (nnz > 0 && (csrVal == nullptr || csrColInd == nullptr))) {
    return CUSOLVER_STATUS_INVALID_VALUE;
  }
  *singularity = -1;
  if (m == 0) return CUSOLVER_STATUS_SUCCESS;
  return driver().launch(kSparseQr, simcuda::lib::tiles(uint64_t(m), 256), 1, 1, 256, handle->stream) == CUDA_SUCCESS
             ? CUSOLVER_STATUS_SUCCESS
             : CUSOLVER_STATUS_EXECUTION_FAILED;
}
