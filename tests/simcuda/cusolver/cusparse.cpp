// The simulated cuSPARSE: handles, legacy matrix descriptors, CSR matrix and dense vector
// descriptors of the generic API, and cusparseSpMV as one kernel launched through the driver (see
// simcuda.h and libs/driver_client.h).
#include <cusparse.h>

#include "libs/driver_client.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

struct cusparseContext {
  uint64_t magic;
  cudaStream_t stream;
};

struct cusparseMatDescr {
  cusparseMatrixType_t type = CUSPARSE_MATRIX_TYPE_GENERAL;
  cusparseIndexBase_t base = CUSPARSE_INDEX_BASE_ZERO;
};

struct cusparseSpMatDescr {
  int64_t rows, cols, nnz;
  cudaDataType value_type;
};

struct cusparseDnVecDescr {
  int64_t size;
  cudaDataType value_type;
};

namespace {

using simcuda::lib::DriverClient;

enum KernelIndex : size_t { kSpmv };

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kSpmvKernel});
  return *d;
}

constexpr uint64_t kHandleMagic = 0x6375'5370'6172'7365;

bool valid(cusparseHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

bool valid_index_type(cusparseIndexType_t t) { return t == CUSPARSE_INDEX_32I || t == CUSPARSE_INDEX_64I; }

struct StatusText {
  cusparseStatus_t status;
  const char* name;
  const char* text;
};

// The real library's names and descriptions.
constexpr StatusText kStatuses[] = {
    {CUSPARSE_STATUS_SUCCESS, "CUSPARSE_STATUS_SUCCESS", "success"},
    {CUSPARSE_STATUS_NOT_INITIALIZED, "CUSPARSE_STATUS_NOT_INITIALIZED", "initialization error"},
    {CUSPARSE_STATUS_ALLOC_FAILED, "CUSPARSE_STATUS_ALLOC_FAILED", "out of memory"},
    {CUSPARSE_STATUS_INVALID_VALUE, "CUSPARSE_STATUS_INVALID_VALUE", "invalid value"},
    {CUSPARSE_STATUS_EXECUTION_FAILED, "CUSPARSE_STATUS_EXECUTION_FAILED", "execution failed"},
    {CUSPARSE_STATUS_NOT_SUPPORTED, "CUSPARSE_STATUS_NOT_SUPPORTED", "operation not supported"},
};

const StatusText* find_status(cusparseStatus_t s) {
  for (const StatusText& t : kStatuses) {
    if (t.status == s) return &t;
  }
  return nullptr;
}

}  // namespace

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseCreate(cusparseHandle_t* handle) {
  if (handle == nullptr) return CUSPARSE_STATUS_INVALID_VALUE;
  if (!driver().ready()) return CUSPARSE_STATUS_NOT_INITIALIZED;
  *handle = new cusparseContext{kHandleMagic, nullptr};
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseDestroy(cusparseHandle_t handle) {
  if (!valid(handle)) return CUSPARSE_STATUS_NOT_INITIALIZED;
  handle->magic = 0;
  delete handle;
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseSetStream(cusparseHandle_t handle, cudaStream_t streamId) {
  if (!valid(handle)) return CUSPARSE_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT const char* CUSPARSEAPI cusparseGetErrorName(cusparseStatus_t status) {
  const StatusText* t = find_status(status);
  return t != nullptr ? t->name : "CUSPARSE_STATUS_UNKNOWN";
}

SIMCUDA_EXPORT const char* CUSPARSEAPI cusparseGetErrorString(cusparseStatus_t status) {
  const StatusText* t = find_status(status);
  return t != nullptr ? t->text : "unknown error";
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseCreateMatDescr(cusparseMatDescr_t* descrA) {
  if (descrA == nullptr) return CUSPARSE_STATUS_INVALID_VALUE;
  *descrA = new cusparseMatDescr;
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseDestroyMatDescr(cusparseMatDescr_t descrA) {
  delete descrA;
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseCreateCsr(
    cusparseSpMatDescr_t* spMatDescr, int64_t rows, int64_t cols, int64_t nnz, void* csrRowOffsets,
    void* csrColInd, void* csrValues, cusparseIndexType_t csrRowOffsetsType, cusparseIndexType_t csrColIndType,
    cusparseIndexBase_t idxBase, cudaDataType valueType) {
  if (spMatDescr == nullptr || rows < 0 || cols < 0 || nnz < 0 || !valid_index_type(csrRowOffsetsType) ||
      !valid_index_type(csrColIndType) || (idxBase != CUSPARSE_INDEX_BASE_ZERO && idxBase != CUSPARSE_INDEX_BASE_ONE) ||
      (nnz > 0 && (csrRowOffsets == nullptr || csrColInd == nullptr || csrValues == nullptr))) {
    return CUSPARSE_STATUS_INVALID_VALUE;
  }
  *spMatDescr = new cusparseSpMatDescr{rows, cols, nnz, valueType};
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseDestroySpMat(cusparseConstSpMatDescr_t spMatDescr) {
  delete spMatDescr;
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseCreateDnVec(cusparseDnVecDescr_t* dnVecDescr, int64_t size,
                                                               void* values, cudaDataType valueType) {
  if (dnVecDescr == nullptr || size < 0 || (size > 0 && values == nullptr)) return CUSPARSE_STATUS_INVALID_VALUE;
  *dnVecDescr = new cusparseDnVecDescr{size, valueType};
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseDestroyDnVec(cusparseConstDnVecDescr_t dnVecDescr) {
  delete dnVecDescr;
  return CUSPARSE_STATUS_SUCCESS;
}

namespace {

// The shape checks of the real cusparseSpMV: op(A) maps x onto y.
cusparseStatus_t check_spmv(cusparseHandle_t handle, cusparseOperation_t opA, const void* alpha,
                            cusparseConstSpMatDescr_t matA, cusparseConstDnVecDescr_t vecX, const void* beta,
                            cusparseDnVecDescr_t vecY) {
  if (!valid(handle)) return CUSPARSE_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || matA == nullptr || vecX == nullptr || vecY == nullptr)
    return CUSPARSE_STATUS_INVALID_VALUE;
  const bool transposed = opA != CUSPARSE_OPERATION_NON_TRANSPOSE;
  if (vecX->size != (transposed ? matA->rows : matA->cols) || vecY->size != (transposed ? matA->cols : matA->rows))
    return CUSPARSE_STATUS_INVALID_VALUE;
  return CUSPARSE_STATUS_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseSpMV_bufferSize(
    cusparseHandle_t handle, cusparseOperation_t opA, const void* alpha, cusparseConstSpMatDescr_t matA,
    cusparseConstDnVecDescr_t vecX, const void* beta, cusparseDnVecDescr_t vecY, cudaDataType /*computeType*/,
    cusparseSpMVAlg_t /*alg*/, size_t* bufferSize) {
  if (cusparseStatus_t s = check_spmv(handle, opA, alpha, matA, vecX, beta, vecY); s) return s;
  if (bufferSize == nullptr) return CUSPARSE_STATUS_INVALID_VALUE;
  // One partial sum per row, as a row-split SpMV keeps.
  *bufferSize = size_t(matA->rows) * sizeof(double);
  return CUSPARSE_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cusparseStatus_t CUSPARSEAPI cusparseSpMV(cusparseHandle_t handle, cusparseOperation_t opA,
                                                        const void* alpha, cusparseConstSpMatDescr_t matA,
                                                        cusparseConstDnVecDescr_t vecX, const void* beta,
                                                        cusparseDnVecDescr_t vecY, cudaDataType /*computeType*/,
                                                        cusparseSpMVAlg_t /*alg*/, void* /*externalBuffer*/) {
  if (cusparseStatus_t s = check_spmv(handle, opA, alpha, matA, vecX, beta, vecY); s) return s;
  if (matA->rows == 0) return CUSPARSE_STATUS_SUCCESS;
  CUresult r = driver().launch(kSpmv, simcuda::lib::tiles(uint64_t(matA->rows), 256, 2147483647u), 1, 1, 256,
                               handle->stream);
  return r == CUDA_SUCCESS ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_EXECUTION_FAILED;
}
