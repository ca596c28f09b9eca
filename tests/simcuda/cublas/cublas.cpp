// The simulated cuBLAS: handles with their stream, workspace, pointer and math modes, a few GEMMs and
// an axpy, each one kernel launched through the driver (see simcuda.h and libs/driver_client.h).
// The GEMMs compute their result on the host when their kernel ends (libs/host_gemm.h).
// cublasGemmEx, cublasSgemmEx and cublasGemmStridedBatchedEx go through cuBLASLt's exports, so a
// tracer sees cublasLtMatmul nested inside them.
#include <cublasLt.h>
#include <cublas_api.h>

#include <algorithm>

#include "core/config.h"
#include "libs/blas_handles.h"
#include "libs/driver_client.h"
#include "libs/host_gemm.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

struct cublasContext {
  uint64_t magic;
  cudaStream_t stream;
  cublasMath_t math_mode;
  cublasLtHandle_t lt;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  void* workspace = nullptr;
  size_t workspace_size = 0;
  int sm_count_target = 0;
};

namespace {

using simcuda::lib::DriverClient;

enum KernelIndex : size_t { kSgemm, kDgemm, kSaxpy };

using simcuda::lib::HostGemm;

DriverClient& driver() {
  static DriverClient* d =
      new DriverClient({simcuda::kSgemmKernel, simcuda::kDgemmKernel, simcuda::kSaxpyKernel});
  return *d;
}

constexpr uint64_t kHandleMagic = simcuda::lib::kCublasHandleMagic;

bool valid(cublasHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// The argument checks of the real ?gemm: the leading dimensions must cover op(A), op(B) and C.
cublasStatus_t check_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const void* alpha, const void* beta, int lda, int ldb,
                          int ldc, int batch = 1) {
  if (!valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_op(ta) || !valid_op(tb) || m < 0 || n < 0 || k < 0 || batch < 0 ||
      alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k) || ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) ||
      ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t launch_gemm(cublasHandle_t h, KernelIndex kernel, const HostGemm& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;
  uint64_t ns = simcuda::gemm_duration_ns(uint64_t(g.m), uint64_t(g.n), uint64_t(g.k), uint64_t(g.batch),
                                          simcuda::config().kernel_ns);
  CUresult r = driver().launch(kernel, simcuda::lib::tiles(uint64_t(g.m), 128),
                               simcuda::lib::tiles(uint64_t(g.n), 64),
                               simcuda::lib::tiles(uint64_t(g.batch), 1), 256, h->stream, ns,
                               simcuda::lib::host_gemm_effect(g));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

// cublas?gemm and cublas?gemmStridedBatched: a GEMM of one real type whose scalars have the
// matrices' type, checked, then launched with its result computed on the host.
template <class T>
cublasStatus_t typed_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                          const T* alpha, const T* A, int lda, long long stride_a, const T* B, int ldb,
                          long long stride_b, const T* beta, T* C, int ldc, long long stride_c, int batch) {
  if (cublasStatus_t s = check_gemm(h, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc, batch); s) return s;
  constexpr cudaDataType type = sizeof(T) == 8 ? CUDA_R_64F : CUDA_R_32F;
  HostGemm g;
  g.transa = ta;
  g.transb = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.a = {type, A, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, stride_a};
  g.b = {type, B, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, stride_b};
  g.c = {type, C, m, n, ldc, stride_c};
  g.d = g.c;
  // Read when the GEMM is issued, in either pointer mode (device memory is host memory).
  g.alpha = double(*alpha);
  g.beta = double(*beta);
  return launch_gemm(h, sizeof(T) == 8 ? kDgemm : kSgemm, g);
}

// The scale type of cublasGemmEx's scalars: that of the compute type, complex when C is.
cudaDataType scale_type(cublasComputeType_t compute, cudaDataType c_type) {
  bool complex = c_type == CUDA_C_32F || c_type == CUDA_C_64F || c_type == CUDA_C_16F || c_type == CUDA_C_16BF;
  switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: return CUDA_R_16F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
#if CUBLAS_VER_MAJOR >= 13
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
#endif
      return complex ? CUDA_C_64F : CUDA_R_64F;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC: return CUDA_R_32I;
    default: return complex ? CUDA_C_32F : CUDA_R_32F;
  }
}

// A GEMM handed to cuBLASLt through its exports, as cuBLAS does for the Ex entry points.
cublasStatus_t lt_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void* alpha, const void* A, cudaDataType at, int lda, long long stride_a,
                       const void* B, cudaDataType bt, int ldb, long long stride_b, const void* beta, void* C,
                       cudaDataType ct, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                       cudaDataType scale) {
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasStatus_t s = cublasLtMatmulDescCreate(&desc, compute, scale);
  if (s == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    int32_t mode = h->pointer_mode;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode);
    s = cublasLtMatrixLayoutCreate(&a, at, uint64_t(ta == CUBLAS_OP_N ? m : k),
                                   uint64_t(ta == CUBLAS_OP_N ? k : m), lda);
  }
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatrixLayoutCreate(&b, bt, uint64_t(tb == CUBLAS_OP_N ? k : n),
                                   uint64_t(tb == CUBLAS_OP_N ? n : k), ldb);
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&c, ct, uint64_t(m), uint64_t(n), ldc);
  if (s == CUBLAS_STATUS_SUCCESS && batch != 1) {
    const long long strides[] = {stride_a, stride_b, stride_c};
    cublasLtMatrixLayout_t layouts[] = {a, b, c};
    for (int i = 0; i < 3; ++i) {
      int64_t stride = strides[i];
      cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
      cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                       sizeof stride);
    }
  }
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmul(h->lt, desc, alpha, A, a, B, b, beta, C, c, C, c, nullptr, h->workspace,
                       h->workspace_size, h->stream);
  }
  if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
  if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
  if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  return s;
}

struct StatusText {
  cublasStatus_t status;
  const char* name;
  const char* text;
};

// The real library's names and descriptions.
constexpr StatusText kStatuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "an error was detected when checking the current licensing"},
};

const StatusText* find_status(cublasStatus_t s) {
  for (const StatusText& t : kStatuses) {
    if (t.status == s) return &t;
  }
  return nullptr;
}

}  // namespace

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!driver().ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasLtHandle_t lt = nullptr;
  if (cublasStatus_t s = cublasLtCreate(&lt); s != CUBLAS_STATUS_SUCCESS) return s;
  *handle = new cublasContext{kHandleMagic, nullptr, CUBLAS_DEFAULT_MATH, lt};
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasLtDestroy(handle->lt);
  handle->magic = 0;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// The real library answers without a handle, and frameworks ask so before creating one (JAX's CUDA
// plug-in checks library versions first with cublasGetVersion(nullptr, &version)).
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGetVersion_v2(cublasHandle_t, int* version) {
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle,
                                                              cudaStream_t stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle,
                                                              cudaStream_t* stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle,
                                                             cublasMath_t mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t handle,
                                                                  cublasPointerMode_t mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGetPointerMode_v2(cublasHandle_t handle,
                                                                  cublasPointerMode_t* mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

// The documented rule: a user workspace must be aligned to 256 bytes.
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                                size_t size) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0 || (workspace == nullptr && size != 0)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->workspace = workspace;
  handle->workspace_size = size;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSetSmCountTarget(cublasHandle_t handle, int target) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (target < 0) return CUBLAS_STATUS_INVALID_VALUE;
  handle->sm_count_target = target;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGetSmCountTarget(cublasHandle_t handle, int* target) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (target == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *target = handle->sm_count_target;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  const StatusText* t = find_status(status);
  return t != nullptr ? t->name : "<unknown>";
}

SIMCUDA_EXPORT const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  const StatusText* t = find_status(status);
  return t != nullptr ? t->text : "<unknown>";
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle,
                                                          cublasOperation_t transa,
                                                          cublasOperation_t transb, int m, int n,
                                                          int k, const float* alpha, const float* A,
                                                          int lda, const float* B, int ldb,
                                                          const float* beta, float* C, int ldc) {
  return typed_gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc,
                    0, 1);
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasDgemm_v2(cublasHandle_t handle,
                                                          cublasOperation_t transa,
                                                          cublasOperation_t transb, int m, int n,
                                                          int k, const double* alpha,
                                                          const double* A, int lda, const double* B,
                                                          int ldb, const double* beta, double* C,
                                                          int ldc) {
  return typed_gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc,
                    0, 1);
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const float* alpha, const float* A, int lda, long long int strideA, const float* B, int ldb,
    long long int strideB, const float* beta, float* C, int ldc, long long int strideC, int batchCount) {
  return typed_gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                    strideC, batchCount);
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasDgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const double* alpha, const double* A, int lda, long long int strideA, const double* B, int ldb,
    long long int strideB, const double* beta, double* C, int ldc, long long int strideC, int batchCount) {
  return typed_gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                    strideC, batchCount);
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                                        cublasOperation_t transb, int m, int n, int k,
                                                        const float* alpha, const void* A, cudaDataType Atype,
                                                        int lda, const void* B, cudaDataType Btype, int ldb,
                                                        const float* beta, void* C, cudaDataType Ctype, int ldc) {
  if (cublasStatus_t s = check_gemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc); s) {
    return s;
  }
  return lt_gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc,
                 0, 1, CUBLAS_COMPUTE_32F, CUDA_R_32F);
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGemmEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
    int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
    cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  if (cublasStatus_t s = check_gemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc); s) {
    return s;
  }
  return lt_gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
                 Ctype, ldc, 0, 1, computeType, scale_type(computeType, Ctype));
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
    const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta,
    void* C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  if (cublasStatus_t s =
          check_gemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc, batchCount);
      s) {
    return s;
  }
  return lt_gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                 Ctype, ldc, strideC, batchCount, computeType, scale_type(computeType, Ctype));
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasSaxpy_v2(cublasHandle_t handle, int n,
                                                          const float* alpha, const float* x,
                                                          int incx, float* y, int incy) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  (void)x, (void)y;
  CUresult r = driver().launch(kSaxpy, simcuda::lib::tiles(uint64_t(n), 256, 2147483647u), 1, 1,
                               256, handle->stream);
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
