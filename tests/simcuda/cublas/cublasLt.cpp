// The simulated cuBLASLt: handles, matmul and matrix layout descriptors, and cublasLtMatmul as one
// kernel launched through the driver (see simcuda.h and libs/driver_client.h).
#include <cublasLt.h>

#include <cstring>
#include <new>

#include "core/config.h"
#include "libs/driver_client.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using simcuda::lib::DriverClient;

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kLtMatmulKernel});
  return *d;
}

constexpr uint64_t kHandleMagic = 0x4c74'4861'6e64'6c65;  // "LtHandle"

struct LtContext {
  uint64_t magic = kHandleMagic;
};

// What the semi-opaque descriptors hold here.
struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transa;
  cublasOperation_t transb;
};
static_assert(sizeof(MatmulDesc) <= sizeof(cublasLtMatmulDescOpaque_t));

struct Layout {
  cudaDataType type;
  uint64_t rows;
  uint64_t cols;
  int64_t ld;
  int32_t batch;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));

MatmulDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<MatmulDesc*>(d->data); }
Layout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l->data); }

bool valid(cublasLtHandle_t h) {
  return h != nullptr && reinterpret_cast<LtContext*>(h)->magic == kHandleMagic;
}

template <class T>
cublasStatus_t write_attribute(T* field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // The kernels are loaded with the first handle, as the real library loads its cubins.
  if (!driver().ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = reinterpret_cast<cublasLtHandle_t>(new LtContext);
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* c = reinterpret_cast<LtContext*>(handle);
  c->magic = 0;
  delete c;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT size_t CUBLASWINAPI cublasLtGetVersion(void) { return CUBLAS_VERSION; }

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                                                   cublasComputeType_t compute,
                                                                   cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new cublasLtMatmulDescOpaque_t{};
  *desc_of(d) = MatmulDesc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N};
  *desc = d;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return write_attribute(&desc_of(desc)->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return write_attribute(&desc_of(desc)->transb, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                                                     cudaDataType type,
                                                                     uint64_t rows, uint64_t cols,
                                                                     int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* l = new cublasLtMatrixLayoutOpaque_t{};
  *layout_of(l) = Layout{type, rows, cols, ld, 1};
  *layout = l;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
    size_t size) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return write_attribute(&layout_of(layout)->batch, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// D = alpha * op(A) op(B) + beta * C, one kernel of gemm_duration_ns(m, n, k, batch).
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
    cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc, const void* beta,
    const void* /*C*/, cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
    const cublasLtMatmulAlgo_t* /*algo*/, void* /*workspace*/, size_t /*workspace_size*/,
    cudaStream_t stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr ||
      d_desc == nullptr || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const MatmulDesc& op = *desc_of(desc);
  const Layout& a = *layout_of(a_desc);
  const Layout& b = *layout_of(b_desc);
  const Layout& d = *layout_of(d_desc);
  uint64_t m = d.rows, n = d.cols;
  uint64_t k = op.transa == CUBLAS_OP_N ? a.cols : a.rows;
  uint64_t kb = op.transb == CUBLAS_OP_N ? b.rows : b.cols;
  if (k != kb || (op.transa == CUBLAS_OP_N ? a.rows : a.cols) != m ||
      (op.transb == CUBLAS_OP_N ? b.cols : b.rows) != n || d.batch < 1) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if ((A == nullptr || B == nullptr) && k != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (D == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t ns = simcuda::gemm_duration_ns(m, n, k, uint64_t(d.batch), simcuda::config().kernel_ns);
  CUresult r = driver().launch(0, simcuda::lib::tiles(m, 128), simcuda::lib::tiles(n, 128),
                               simcuda::lib::tiles(uint64_t(d.batch), 1), 256, stream, ns);
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
