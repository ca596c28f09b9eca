// The simulated cuBLASLt: handles, matmul, matrix layout and preference descriptors, one algorithm
// that heuristics and checks hand out, and cublasLtMatmul as one kernel launched through the driver
// (see simcuda.h and libs/driver_client.h) that computes its result on the host (libs/host_gemm.h).
#include <cublasLt.h>

#include <cstring>
#include <new>

#include "core/config.h"
#include "libs/blas_handles.h"
#include "libs/driver_client.h"
#include "libs/host_gemm.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using simcuda::lib::DriverClient;

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kLtMatmulKernel});
  return *d;
}

constexpr uint64_t kHandleMagic = simcuda::lib::kCublasLtHandleMagic;

struct LtContext {
  uint64_t magic = kHandleMagic;
};

// What the semi-opaque descriptors hold here. Attributes a GEMM's result does not depend on (the SM
// count target, fast accumulation) are kept so that they read back; others that would change what is
// computed and are not modelled are refused with CUBLAS_STATUS_NOT_SUPPORTED.
struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transa;
  cublasOperation_t transb;
  int32_t pointer_mode;
  uint32_t epilogue;
  const void* bias;
  int64_t bias_batch_stride;
  int32_t bias_type;  // -1: D's type
  int32_t sm_count_target;
  int8_t fast_accum;
};
static_assert(sizeof(MatmulDesc) <= sizeof(cublasLtMatmulDescOpaque_t));

struct Layout {
  cudaDataType type;
  int32_t order;
  uint64_t rows;
  uint64_t cols;
  int64_t ld;
  int32_t batch;
  int64_t batch_stride;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));

struct Preference {
  uint32_t search_mode;
  uint64_t max_workspace_bytes;
  uint32_t min_alignment[4];  // A, B, C, D
};
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t));

MatmulDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<MatmulDesc*>(d->data); }
Layout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l->data); }
Preference* preference_of(cublasLtMatmulPreference_t p) { return reinterpret_cast<Preference*>(p->data); }

bool valid(cublasLtHandle_t h) {
  if (h == nullptr) return false;
  uint64_t magic = reinterpret_cast<LtContext*>(h)->magic;
  return magic == kHandleMagic || magic == simcuda::lib::kCublasHandleMagic;
}

template <class T>
cublasStatus_t write_attribute(T* field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// As the real Get*Attribute functions: with size 0 only the size is reported (sizeWritten).
template <class T>
cublasStatus_t read_attribute(const T& field, void* buf, size_t size, size_t* written) {
  if (size == 0 && written != nullptr) {
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}

// The epilogues whose result the host computes: bias and the two activations, alone or together.
bool supported_epilogue(uint32_t e, simcuda::lib::Activation* activation, bool* bias) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: *activation = simcuda::lib::Activation::kNone; *bias = false; return true;
    case CUBLASLT_EPILOGUE_RELU: *activation = simcuda::lib::Activation::kRelu; *bias = false; return true;
    case CUBLASLT_EPILOGUE_GELU: *activation = simcuda::lib::Activation::kGelu; *bias = false; return true;
    case CUBLASLT_EPILOGUE_BIAS: *activation = simcuda::lib::Activation::kNone; *bias = true; return true;
    case CUBLASLT_EPILOGUE_RELU_BIAS: *activation = simcuda::lib::Activation::kRelu; *bias = true; return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS: *activation = simcuda::lib::Activation::kGelu; *bias = true; return true;
    default: return false;
  }
}

// The scale type a compute type implies when the descriptor's is the default.
bool scalar_type_ok(cudaDataType_t t) {
  return t == CUDA_R_32F || t == CUDA_R_64F || t == CUDA_R_16F || t == CUDA_R_32I || t == CUDA_C_32F ||
         t == CUDA_C_64F;
}

// The shapes of a matmul: D (m x n) = op(A) (m x k) op(B) (k x n), C like D. Everything the real
// library checks before choosing an algorithm.
cublasStatus_t check_matmul(const MatmulDesc& op, const Layout& a, const Layout& b, const Layout& c,
                            const Layout& d, uint64_t* k_out) {
  uint64_t m = d.rows, n = d.cols;
  uint64_t k = op.transa == CUBLAS_OP_N ? a.cols : a.rows;
  uint64_t kb = op.transb == CUBLAS_OP_N ? b.rows : b.cols;
  if (k != kb || (op.transa == CUBLAS_OP_N ? a.rows : a.cols) != m ||
      (op.transb == CUBLAS_OP_N ? b.cols : b.rows) != n || c.rows != m || c.cols != n || d.batch < 1 ||
      a.batch != d.batch || b.batch != d.batch || c.batch != d.batch) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const Layout* l : {&a, &b, &c, &d}) {
    if (l->order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  simcuda::lib::Activation activation;
  bool bias;
  if (!supported_epilogue(op.epilogue, &activation, &bias)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *k_out = k;
  return CUBLAS_STATUS_SUCCESS;
}

simcuda::lib::HostMatrix host_matrix(const Layout& l, const void* data) {
  return {l.type, data, int64_t(l.rows), int64_t(l.cols), l.ld, l.batch_stride};
}

constexpr int kAlgoId = 1;

// The sizes cublasLt.h gives the algorithm's config attributes (the shape ids are uint16_t).
size_t algo_config_size(cublasLtMatmulAlgoConfigAttributes_t attr) {
  return attr == CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID || attr == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID ? 2 : 4;
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
  // A cuBLAS handle is cuBLAS's to destroy.
  if (handle == nullptr || reinterpret_cast<LtContext*>(handle)->magic != kHandleMagic) {
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  auto* c = reinterpret_cast<LtContext*>(handle);
  c->magic = 0;
  delete c;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT size_t CUBLASWINAPI cublasLtGetVersion(void) { return CUBLAS_VERSION; }

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc,
                                                                          size_t size,
                                                                          cublasComputeType_t compute,
                                                                          cudaDataType_t scale) {
  if (desc == nullptr || size < sizeof(MatmulDesc)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!scalar_type_ok(scale)) return CUBLAS_STATUS_INVALID_VALUE;
  *desc_of(desc) = MatmulDesc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_POINTER_MODE_HOST,
                              CUBLASLT_EPILOGUE_DEFAULT, nullptr, 0, -1, 0, 0};
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                                                   cublasComputeType_t compute,
                                                                   cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new cublasLtMatmulDescOpaque_t{};
  if (cublasStatus_t s = cublasLtMatmulDescInit_internal(d, sizeof *d, compute, scale); s) {
    delete d;
    return s;
  }
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
  MatmulDesc& d = *desc_of(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return write_attribute(&d.compute, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return write_attribute(&d.scale, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: {
      int32_t mode;
      if (cublasStatus_t s = write_attribute(&mode, buf, size); s) return s;
      if (mode != CUBLASLT_POINTER_MODE_HOST && mode != CUBLASLT_POINTER_MODE_DEVICE) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
      }
      d.pointer_mode = mode;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_TRANSA: return write_attribute(&d.transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return write_attribute(&d.transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return write_attribute(&d.epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return write_attribute(&d.bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return write_attribute(&d.bias_batch_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return write_attribute(&d.bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return write_attribute(&d.sm_count_target, buf, size);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return write_attribute(&d.fast_accum, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(
    cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void* buf, size_t size,
    size_t* written) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDesc& d = *desc_of(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return read_attribute(d.compute, buf, size, written);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return read_attribute(d.scale, buf, size, written);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return read_attribute(d.pointer_mode, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attribute(d.transa, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attribute(d.transb, buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attribute(d.epilogue, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attribute(d.bias, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return read_attribute(d.bias_batch_stride, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read_attribute(d.bias_type, buf, size, written);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return read_attribute(d.sm_count_target, buf, size, written);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return read_attribute(d.fast_accum, buf, size, written);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout,
                                                                            size_t size, cudaDataType type,
                                                                            uint64_t rows, uint64_t cols,
                                                                            int64_t ld) {
  if (layout == nullptr || size < sizeof(Layout)) return CUBLAS_STATUS_INVALID_VALUE;
  *layout_of(layout) = Layout{type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                                                     cudaDataType type,
                                                                     uint64_t rows, uint64_t cols,
                                                                     int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* l = new cublasLtMatrixLayoutOpaque_t{};
  cublasLtMatrixLayoutInit_internal(l, sizeof *l, type, rows, cols, ld);
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
  Layout& l = *layout_of(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return write_attribute(&l.type, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return write_attribute(&l.order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return write_attribute(&l.rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return write_attribute(&l.cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return write_attribute(&l.ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return write_attribute(&l.batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return write_attribute(&l.batch_stride, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(
    cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t size,
    size_t* written) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Layout& l = *layout_of(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return read_attribute(l.type, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return read_attribute(l.order, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return read_attribute(l.rows, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return read_attribute(l.cols, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_LD: return read_attribute(l.ld, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return read_attribute(l.batch, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return read_attribute(l.batch_stride, buf, size, written);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref,
                                                                                size_t size) {
  if (pref == nullptr || size < sizeof(Preference)) return CUBLAS_STATUS_INVALID_VALUE;
  *preference_of(pref) = Preference{0, 0, {256, 256, 256, 256}};
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* p = new cublasLtMatmulPreferenceOpaque_t{};
  cublasLtMatmulPreferenceInit_internal(p, sizeof *p);
  *pref = p;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t size) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Preference& p = *preference_of(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return write_attribute(&p.search_mode, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return write_attribute(&p.max_workspace_bytes, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return write_attribute(&p.min_alignment[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return write_attribute(&p.min_alignment[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return write_attribute(&p.min_alignment[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return write_attribute(&p.min_alignment[3], buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t size,
    size_t* written) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Preference& p = *preference_of(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return read_attribute(p.search_mode, buf, size, written);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read_attribute(p.max_workspace_bytes, buf, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return read_attribute(p.min_alignment[0], buf, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return read_attribute(p.min_alignment[1], buf, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return read_attribute(p.min_alignment[2], buf, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return read_attribute(p.min_alignment[3], buf, size, written);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// One algorithm serves every problem: data[0] holds its id, data[1..] the config attributes.
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoInit(cublasLtHandle_t handle, cublasComputeType_t,
                                                                 cudaDataType_t, cudaDataType_t, cudaDataType_t,
                                                                 cudaDataType_t, cudaDataType_t, int algo_id,
                                                                 cublasLtMatmulAlgo_t* algo) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo_id != kAlgoId) return CUBLAS_STATUS_NOT_SUPPORTED;
  *algo = cublasLtMatmulAlgo_t{};
  algo->data[0] = uint64_t(algo_id);
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(
    cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf, size_t size) {
  if (algo == nullptr || buf == nullptr || unsigned(attr) > CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID ||
      size != algo_config_size(attr)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  uint64_t value = 0;
  std::memcpy(&value, buf, size);
  if (attr == CUBLASLT_ALGO_CONFIG_ID && value != uint64_t(kAlgoId)) return CUBLAS_STATUS_INVALID_VALUE;
  algo->data[attr] = value;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t size,
    size_t* written) {
  if (algo == nullptr || unsigned(attr) > CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) return CUBLAS_STATUS_INVALID_VALUE;
  size_t own = algo_config_size(attr);
  if (size == 0 && written != nullptr) {
    *written = own;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != own) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &algo->data[attr], own);  // little-endian: the low bytes hold the value
  if (written != nullptr) *written = own;
  return CUBLAS_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
    cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
    const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr || d_desc == nullptr ||
      algo == nullptr || result == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (algo->data[0] != uint64_t(kAlgoId)) return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t k;
  if (cublasStatus_t s = check_matmul(*desc_of(desc), *layout_of(a_desc), *layout_of(b_desc), *layout_of(c_desc),
                                      *layout_of(d_desc), &k);
      s) {
    return s;
  }
  cublasLtMatmulAlgo_t copy = *algo;  // algo may point at result->algo
  *result = cublasLtMatmulHeuristicResult_t{};
  result->algo = copy;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

// The one algorithm, needing no workspace, for every problem the simulation computes.
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
    cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* returned) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr || d_desc == nullptr ||
      pref == nullptr || requested <= 0 || results == nullptr || returned == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returned = 0;
  uint64_t k;
  if (cublasStatus_t s = check_matmul(*desc_of(desc), *layout_of(a_desc), *layout_of(b_desc), *layout_of(c_desc),
                                      *layout_of(d_desc), &k);
      s) {
    return s;
  }
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = uint64_t(kAlgoId);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// D = epilogue(alpha * op(A) op(B) + beta * C), one kernel of gemm_duration_ns(m, n, k, batch) whose
// effect computes D on the host (libs/host_gemm.h).
SIMCUDA_EXPORT cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
    cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc, const void* beta,
    const void* C, cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
    const cublasLtMatmulAlgo_t* algo, void* /*workspace*/, size_t /*workspace_size*/,
    cudaStream_t stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr ||
      d_desc == nullptr || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (algo != nullptr && algo->data[0] != uint64_t(kAlgoId)) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDesc& op = *desc_of(desc);
  const Layout& a = *layout_of(a_desc);
  const Layout& b = *layout_of(b_desc);
  const Layout& c = *layout_of(c_desc);
  const Layout& d = *layout_of(d_desc);
  uint64_t k;
  if (cublasStatus_t s = check_matmul(op, a, b, c, d, &k); s) return s;
  uint64_t m = d.rows, n = d.cols;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if ((A == nullptr || B == nullptr) && k != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (D == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  simcuda::lib::HostGemm g;
  g.transa = op.transa;
  g.transb = op.transb;
  g.m = int64_t(m);
  g.n = int64_t(n);
  g.k = int64_t(k);
  g.batch = d.batch;
  g.a = host_matrix(a, A);
  g.b = host_matrix(b, B);
  g.c = host_matrix(c, C);
  g.d = host_matrix(d, D);
  bool bias;
  supported_epilogue(op.epilogue, &g.activation, &bias);
  if (bias) {
    if (op.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    g.bias = op.bias;
    g.bias_type = op.bias_type < 0 ? d.type : cudaDataType(op.bias_type);
    g.bias_batch_stride = op.bias_batch_stride;
  }
  // Scalars are read when the GEMM is issued, in either pointer mode (device memory is host memory).
  std::function<void()> effect;
  if (simcuda::lib::load_scalar(op.scale, alpha, &g.alpha) && simcuda::lib::load_scalar(op.scale, beta, &g.beta)) {
    effect = simcuda::lib::host_gemm_effect(g);
  }
  uint64_t ns = simcuda::gemm_duration_ns(m, n, k, uint64_t(d.batch), simcuda::config().kernel_ns);
  CUresult r = driver().launch(0, simcuda::lib::tiles(m, 128), simcuda::lib::tiles(n, 128),
                               simcuda::lib::tiles(uint64_t(d.batch), 1), 256, stream, ns, std::move(effect));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
