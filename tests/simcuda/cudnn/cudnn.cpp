// The simulated cuDNN: handles, 4-d tensor, filter, convolution and activation descriptors, and
// a convolution as the classic im2col + GEMM: one im2col kernel launched through the driver, then
// one cublasSgemm_v2 found at run time with dlopen("libcublas.so.13") + dlsym, which launches its
// own kernel through the driver. A tracer sees that nesting: cuDNN -> cuBLAS -> driver.
#include <cublas_api.h>
#include <cudnn.h>

#include "libs/driver_client.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, h = 0, w = 0;
};

struct cudnnConvolutionStruct {
  bool set = false;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
};

struct cudnnActivationStruct {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
};

namespace {

using simcuda::lib::DriverClient;

enum KernelIndex : size_t { kIm2col, kActivation };

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kIm2colKernel, simcuda::kActivationKernel});
  return *d;
}

// cuBLAS as cuDNN finds it: by name, at run time.
struct Cublas {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSgemm_v2) sgemm = nullptr;
};

const Cublas* cublas() {
  static const Cublas* c = []() -> const Cublas* {
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    auto* f = new Cublas;
    f->create = reinterpret_cast<decltype(f->create)>(dlsym(lib, "cublasCreate_v2"));
    f->destroy = reinterpret_cast<decltype(f->destroy)>(dlsym(lib, "cublasDestroy_v2"));
    f->set_stream = reinterpret_cast<decltype(f->set_stream)>(dlsym(lib, "cublasSetStream_v2"));
    f->sgemm = reinterpret_cast<decltype(f->sgemm)>(dlsym(lib, "cublasSgemm_v2"));
    if (!f->create || !f->destroy || !f->set_stream || !f->sgemm) {
      delete f;
      return nullptr;
    }
    return f;
  }();
  return c;
}

constexpr uint64_t kHandleMagic = 0x6375'444e'4e48'444c;

struct Dims {
  int n, k, h, w;
};

// The output of a convolution, or false when the descriptors do not fit together.
bool output_dims(const cudnnTensorStruct& x, const cudnnFilterStruct& f,
                 const cudnnConvolutionStruct& conv, Dims* out) {
  if (!x.set || !f.set || !conv.set || x.c != f.c) return false;
  int eff_h = conv.dilation_h * (f.h - 1) + 1;
  int eff_w = conv.dilation_w * (f.w - 1) + 1;
  int span_h = x.h + 2 * conv.pad_h - eff_h;
  int span_w = x.w + 2 * conv.pad_w - eff_w;
  if (span_h < 0 || span_w < 0) return false;
  *out = Dims{x.n, f.k, span_h / conv.stride_h + 1, span_w / conv.stride_w + 1};
  return true;
}

size_t im2col_bytes(const cudnnTensorStruct& x, const cudnnFilterStruct& f, const Dims& y) {
  return size_t(x.n) * y.h * y.w * size_t(f.c) * f.h * f.w * sizeof(float);
}

struct StatusText {
  cudnnStatus_t status;
  const char* name;
};

constexpr StatusText kStatuses[] = {
    {CUDNN_STATUS_SUCCESS, "CUDNN_STATUS_SUCCESS"},
    {CUDNN_STATUS_NOT_INITIALIZED, "CUDNN_STATUS_NOT_INITIALIZED"},
    {CUDNN_STATUS_BAD_PARAM, "CUDNN_STATUS_BAD_PARAM"},
    {CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "CUDNN_STATUS_BAD_PARAM_NULL_POINTER"},
    {CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_STATUS_NOT_SUPPORTED"},
    {CUDNN_STATUS_INTERNAL_ERROR, "CUDNN_STATUS_INTERNAL_ERROR"},
    {CUDNN_STATUS_EXECUTION_FAILED, "CUDNN_STATUS_EXECUTION_FAILED"},
};

}  // namespace

struct cudnnContext {
  uint64_t magic;
  cudaStream_t stream;
  cublasHandle_t blas;
};

namespace {
bool valid(cudnnHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }
}  // namespace

SIMCUDA_EXPORT size_t CUDNNWINAPI cudnnGetVersion(void) { return CUDNN_VERSION; }

// XLA takes the library's version from here, and without it runs with no DNN support at all.
SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUDNN_STATUS_BAD_PARAM;
  switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUDNN_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; return CUDNN_STATUS_SUCCESS;
  }
  return CUDNN_STATUS_BAD_PARAM;
}

SIMCUDA_EXPORT const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  for (const StatusText& t : kStatuses) {
    if (t.status == status) return t.name;
  }
  return "CUDNN_STATUS_UNKNOWN";
}

// The kernels and cuBLAS are loaded with the first handle, and each handle has a cuBLAS handle of
// its own, created here (so cublasCreate_v2 runs inside cudnnCreate).
SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const Cublas* blas = cublas();
  if (!driver().ready() || blas == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  cublasHandle_t b = nullptr;
  if (blas->create(&b) != CUBLAS_STATUS_SUCCESS) return CUDNN_STATUS_NOT_INITIALIZED;
  *handle = new cudnnContext{kHandleMagic, nullptr, b};
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
  if (!valid(handle)) return CUDNN_STATUS_BAD_PARAM;
  cublas()->destroy(handle->blas);
  handle->magic = 0;
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!valid(handle)) return CUDNN_STATUS_BAD_PARAM;
  if (cublas()->set_stream(handle->blas, stream) != CUBLAS_STATUS_SUCCESS) {
    return CUDNN_STATUS_INTERNAL_ERROR;
  }
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- descriptors ----

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *d = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                                   cudnnTensorFormat_t format,
                                                                   cudnnDataType_t type, int n,
                                                                   int c, int h, int w) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || format < CUDNN_TENSOR_NCHW ||
      format > CUDNN_TENSOR_NCHW_VECT_C) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  *d = cudnnTensorStruct{true, type, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *d = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d,
                                                                   cudnnDataType_t type,
                                                                   cudnnTensorFormat_t /*format*/,
                                                                   int k, int c, int h, int w) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnFilterStruct{true, type, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI
cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *d = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnSetConvolution2dDescriptor(
    cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v, int dilation_h,
    int dilation_w, cudnnConvolutionMode_t /*mode*/, cudnnDataType_t /*computeType*/) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  *d = cudnnConvolutionStruct{true, pad_h, pad_w, u, v, dilation_h, dilation_w};
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI
cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI
cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  *d = new cudnnActivationStruct;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnSetActivationDescriptor(
    cudnnActivationDescriptor_t d, cudnnActivationMode_t mode, cudnnNanPropagation_t /*nan*/,
    double /*coef*/) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  d->mode = mode;
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI
cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

// ---- compute ----

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y,
    cudnnConvolutionFwdAlgo_t /*algo*/, size_t* size) {
  if (!valid(handle)) return CUDNN_STATUS_BAD_PARAM;
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr || size == nullptr) {
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  }
  Dims out;
  if (!output_dims(*x, *w, *conv, &out)) return CUDNN_STATUS_BAD_PARAM;
  *size = im2col_bytes(*x, *w, out);
  return CUDNN_STATUS_SUCCESS;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc, const void* x,
    const cudnnFilterDescriptor_t w_desc, const void* w, const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t /*algo*/, void* workspace, size_t /*workspace_size*/,
    const void* beta, const cudnnTensorDescriptor_t y_desc, void* y) {
  if (!valid(handle)) return CUDNN_STATUS_BAD_PARAM;
  if (alpha == nullptr || beta == nullptr || x_desc == nullptr || w_desc == nullptr ||
      conv == nullptr || y_desc == nullptr || x == nullptr || w == nullptr || y == nullptr) {
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  }
  Dims out;
  if (!output_dims(*x_desc, *w_desc, *conv, &out) || !y_desc->set || y_desc->n != out.n ||
      y_desc->c != out.k || y_desc->h != out.h || y_desc->w != out.w) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  // im2col: the columns matrix of (c*r*s) x (n*p*q).
  int rows = w_desc->c * w_desc->h * w_desc->w;
  int cols = out.n * out.h * out.w;
  if (driver().launch(kIm2col, simcuda::lib::tiles(uint64_t(cols), 256, 2147483647u), 1, 1, 256,
                      handle->stream) != CUDA_SUCCESS) {
    return CUDNN_STATUS_EXECUTION_FAILED;
  }
  // y (k x n*p*q) = w (k x c*r*s) * columns, column-major as cuBLAS sees it.
  const float one = 1.0f, zero = 0.0f;
  const float* columns = workspace != nullptr ? static_cast<const float*>(workspace)
                                              : static_cast<const float*>(x);
  cublasStatus_t s = cublas()->sgemm(handle->blas, CUBLAS_OP_N, CUBLAS_OP_N, out.k, cols, rows,
                                     &one, static_cast<const float*>(w), out.k, columns, rows,
                                     &zero, static_cast<float*>(y), out.k);
  return s == CUBLAS_STATUS_SUCCESS ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

SIMCUDA_EXPORT cudnnStatus_t CUDNNWINAPI cudnnActivationForward(
    cudnnHandle_t handle, cudnnActivationDescriptor_t activation, const void* alpha,
    const cudnnTensorDescriptor_t x_desc, const void* x, const void* beta,
    const cudnnTensorDescriptor_t y_desc, void* y) {
  if (!valid(handle)) return CUDNN_STATUS_BAD_PARAM;
  if (activation == nullptr || alpha == nullptr || beta == nullptr || x_desc == nullptr ||
      y_desc == nullptr || x == nullptr || y == nullptr) {
    return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  }
  if (!x_desc->set || !y_desc->set || x_desc->n != y_desc->n || x_desc->c != y_desc->c ||
      x_desc->h != y_desc->h || x_desc->w != y_desc->w) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  uint64_t elements = uint64_t(x_desc->n) * x_desc->c * x_desc->h * x_desc->w;
  if (driver().launch(kActivation, simcuda::lib::tiles(elements, 256, 2147483647u), 1, 1, 256,
                      handle->stream) != CUDA_SUCCESS) {
    return CUDNN_STATUS_EXECUTION_FAILED;
  }
  return CUDNN_STATUS_SUCCESS;
}
