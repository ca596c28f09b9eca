// The simulated cuBLAS, cuBLASLt and cuDNN: which kernels each call queues, in order and with the
// durations simcuda.h promises, and the arguments they refuse.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/kernels.h"
#include "core/sync.h"
#include "libs/host_gemm.h"
#include "process.h"
#include "simcuda.h"

namespace simcuda {
namespace {

using Launches = std::vector<std::pair<std::string, uint64_t>>;

std::mutex g_mu;
Launches g_launches;

void record_launch(const Kernel& k, uint64_t ns) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_launches.emplace_back(k.name, ns);
}

// Collects the kernels queued while it lives.
class LaunchLog {
 public:
  LaunchLog() {
    std::lock_guard<std::mutex> lock(g_mu);
    g_launches.clear();
    observe_launches(record_launch);
  }
  ~LaunchLog() { observe_launches(nullptr); }
  Launches take() {
    std::lock_guard<std::mutex> lock(g_mu);
    return std::exchange(g_launches, {});
  }
};

uint64_t gemm_ns(uint64_t m, uint64_t n, uint64_t k, uint64_t batch = 1) {
  return gemm_duration_ns(m, n, k, batch, config().kernel_ns);
}

TEST(Cublas, EachGemmIsOneKernelThroughTheDriverWithASizeDependentDuration) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate_v2(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cublasSetStream_v2(h, s), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got = nullptr;
  ASSERT_EQ(cublasGetStream_v2(h, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, s);
  ASSERT_EQ(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  int version = 0;
  ASSERT_EQ(cublasGetVersion_v2(h, &version), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(version, CUBLAS_VERSION);
  // As the real library, also without a handle.
  version = 0;
  ASSERT_EQ(cublasGetVersion_v2(nullptr, &version), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(version, CUBLAS_VERSION);
  EXPECT_EQ(cublasLtGetVersion(), size_t(CUBLAS_VERSION));

  float f[4] = {};
  double d[4] = {};
  const float one = 1, zero = 0;
  const double done = 1, dzero = 0;
  LaunchLog log;
  ASSERT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 256, 128, 64, &one, f, 256, f, 64, &zero,
                           f, 256),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, 32, 16, 8, &done, d, 8, d, 8, &dzero, d, 32),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, f, 64, 0, f,
                                      64, 0, &zero, f, 64, 0, 3),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 512, 512, 512, &one, f, CUDA_R_32F, 512, f,
                         CUDA_R_32F, 512, &zero, f, CUDA_R_32F, 512, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 8, 8, 8, &one, f, CUDA_R_32F,
                                       8, 0, f, CUDA_R_32F, 8, 0, &zero, f, CUDA_R_32F, 8, 0, 5,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSaxpy_v2(h, 1000, &one, f, 1, f, 1), CUBLAS_STATUS_SUCCESS);
  // Empty products launch nothing.
  ASSERT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 128, 64, &one, f, 1, f, 64, &zero, f, 1),
            CUBLAS_STATUS_SUCCESS);
  Launches expected = {
      {kSgemmKernel, gemm_ns(256, 128, 64)},
      {kDgemmKernel, gemm_ns(32, 16, 8)},
      {kSgemmKernel, gemm_ns(64, 64, 64, 3)},
      {kLtMatmulKernel, gemm_ns(512, 512, 512)},
      {kLtMatmulKernel, gemm_ns(8, 8, 8, 5)},
      {kSaxpyKernel, config().kernel_ns},
  };
  EXPECT_EQ(log.take(), expected);

  // Refused arguments launch nothing.
  EXPECT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 256, 128, 64, &one, f, 255, f, 64, &zero,
                           f, 256),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, &one, f, 1, f, 1, &zero, f, 1),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, f, 1, f, 1, &zero, f, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_TRUE(log.take().empty());
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "success");

  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Cublas, AGemmTakesExactlyItsModelledDeviceTime) {
  // A 40 ms blocker first, so that the stream is never idle between the events.
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, "SIMCUDA-MODULE-1\0blocker_sleep_us_40000\0"), CUDA_SUCCESS);
  CUfunction blocker;
  ASSERT_EQ(cuModuleGetFunction(&blocker, m, "blocker_sleep_us_40000"), CUDA_SUCCESS);
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate_v2(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s;
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cublasSetStream_v2(h, s), CUBLAS_STATUS_SUCCESS);
  float f[1] = {};
  const float one = 1, zero = 0;
  uint64_t t0 = now_ns();
  ASSERT_EQ(cuLaunchKernel(blocker, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 1024, &one, f, 1024, f, 1024,
                           &zero, f, 1024),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  bool issued_while_busy = now_ns() < t0 + 40 * 1000000ull;
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  double expected = double(gemm_ns(1024, 1024, 1024));
  if (issued_while_busy) {
    EXPECT_NEAR(double(ms) * 1e6, expected, 1000.0);
  } else {
    EXPECT_GE(double(ms) * 1e6, expected - 1000.0);
  }
  ASSERT_EQ(cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaEventDestroy(start), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(stop), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

// Column-major reference: D = act(alpha * op(A) op(B) + beta * C + bias).
std::vector<double> reference_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const std::vector<double>& a,
                                   int lda, const std::vector<double>& b, int ldb, double beta,
                                   const std::vector<double>& c, int ldc, const std::vector<double>& bias = {},
                                   bool relu = false) {
  std::vector<double> d(size_t(ldc) * n);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += (ta ? a[p + i * lda] : a[i + p * lda]) * (tb ? b[j + p * ldb] : b[p + j * ldb]);
      double v = alpha * sum + (beta != 0 ? beta * c[i + j * ldc] : 0) + (bias.empty() ? 0 : bias[i]);
      d[i + j * ldc] = relu && v < 0 ? 0 : v;
    }
  }
  return d;
}

// Small integers and halves: exact in FP16, so every type's result is exact too.
std::vector<double> sample(size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = double(int((i * 7 + size_t(seed) * 13) % 9) - 4) / 2;
  return v;
}

template <class T>
T* to_device(const std::vector<double>& host, std::vector<T>* staging = nullptr) {
  std::vector<T> typed(host.begin(), host.end());
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), typed.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, typed.data(), typed.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  if (staging != nullptr) *staging = typed;
  return p;
}

template <class T>
std::vector<double> from_device(const T* p, size_t n) {
  std::vector<T> typed(n);
  EXPECT_EQ(cudaMemcpy(typed.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return std::vector<double>(typed.begin(), typed.end());
}

TEST(Cublas, GemmsWriteTheirResultWhenTheirKernelEnds) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate_v2(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cublasSetStream_v2(h, s), CUBLAS_STATUS_SUCCESS);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, 1 << 20), cudaSuccess);
  EXPECT_EQ(cublasSetWorkspace_v2(h, static_cast<char*>(workspace) + 16, 1024), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasSetWorkspace_v2(h, workspace, 1 << 20), CUBLAS_STATUS_SUCCESS);
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_DEVICE;
  ASSERT_EQ(cublasGetPointerMode_v2(h, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_POINTER_MODE_HOST);

  // op(A) = A^T (A stored k x m), op(B) = B, beta reads C.
  const int m = 5, n = 3, k = 4;
  std::vector<double> a = sample(size_t(k) * m, 1), b = sample(size_t(k) * n, 2), c = sample(size_t(m) * n, 3);
  float* da = to_device<float>(a);
  float* db = to_device<float>(b);
  float* dc = to_device<float>(c);
  const float alpha = 2, beta = -1;
  ASSERT_EQ(cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, da, k, db, k, &beta, dc, m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(from_device(dc, c.size()), reference_gemm(true, false, m, n, k, 2, a, k, b, k, -1, c, m));

  // Two batches in double; beta 0 never reads C, so NaN there does not reach the result.
  std::vector<double> a2 = sample(2 * size_t(m) * k, 4), b2 = sample(2 * size_t(k) * n, 5);
  std::vector<double> nan(2 * size_t(m) * n, std::nan(""));
  double* da2 = to_device<double>(a2);
  double* db2 = to_device<double>(b2);
  double* dc2 = to_device<double>(nan);
  const double one = 1, zero = 0;
  ASSERT_EQ(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da2, m, m * k, db2, k, k * n,
                                      &zero, dc2, m, m * n, 2),
            CUBLAS_STATUS_SUCCESS);
  std::vector<double> got = from_device(dc2, nan.size());
  for (int l = 0; l < 2; ++l) {
    std::vector<double> al(a2.begin() + l * m * k, a2.begin() + (l + 1) * m * k);
    std::vector<double> bl(b2.begin() + l * k * n, b2.begin() + (l + 1) * k * n);
    EXPECT_EQ(std::vector<double>(got.begin() + l * m * n, got.begin() + (l + 1) * m * n),
              reference_gemm(false, false, m, n, k, 1, al, m, bl, k, 0, {}, m))
        << "batch " << l;
  }

  // FP16 operands, FP32 result, through cuBLASLt (cublasGemmEx).
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ha[i] = lib::float_to_half(float(a[i]));
  for (size_t i = 0; i < b.size(); ++i) hb[i] = lib::float_to_half(float(b[i]));
  uint16_t *dha = nullptr, *dhb = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dha), ha.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dhb), hb.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dha, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dhb, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  float* dout = to_device<float>(std::vector<double>(size_t(m) * n, 0));
  const float fone = 1, fzero = 0;
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &fone, dha, CUDA_R_16F, k, dhb, CUDA_R_16F, k, &fzero,
                         dout, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(from_device(dout, size_t(m) * n), reference_gemm(true, false, m, n, k, 1, a, k, b, k, 0, {}, m));

  // Operands outside the device's allocations are not computed (a GPU would fault): no crash.
  float host[4] = {};
  ASSERT_EQ(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &fone, host, 2, host, 2, &fzero, host, 2),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(da2), static_cast<void*>(db2), static_cast<void*>(dc2),
                  static_cast<void*>(dha), static_cast<void*>(dhb), static_cast<void*>(dout), workspace}) {
    EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
  ASSERT_EQ(cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// What PyTorch does for a linear layer with a bias: a heuristic, then one matmul with the bias epilogue.
TEST(CublasLt, AHeuristicAlgorithmRunsAMatmulWithABiasAndReluEpilogue) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  const int m = 4, n = 3, k = 5;
  std::vector<double> a = sample(size_t(m) * k, 6), b = sample(size_t(k) * n, 7), bias = sample(m, 8);
  float* da = to_device<float>(a);
  float* db = to_device<float>(b);
  float* dbias = to_device<float>(bias);
  float* dd = to_device<float>(std::vector<double>(size_t(m) * n, 0));
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias),
            CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t read_back = CUBLASLT_EPILOGUE_DEFAULT;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &read_back, sizeof read_back,
                                           &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(read_back, epilogue);
  EXPECT_EQ(written, sizeof read_back);
  cublasLtMatrixLayout_t la, lb, ld;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  uint64_t max_workspace = 1 << 22;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                 sizeof max_workspace),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result[2] = {};
  int returned = -1;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 2, result, &returned),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(returned, 1);
  EXPECT_EQ(result[0].state, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(result[0].workspaceSize, 0u);
  cublasLtMatmulHeuristicResult_t checked = {};
  EXPECT_EQ(cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &result[0].algo, &checked), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  LaunchLog log;
  ASSERT_EQ(cublasLtMatmul(lt, desc, &one, da, la, db, lb, &zero, dd, ld, dd, ld, &result[0].algo, nullptr, 0,
                           nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(log.take(), (Launches{{kLtMatmulKernel, gemm_ns(m, n, k)}}));
  EXPECT_EQ(from_device(dd, size_t(m) * n), reference_gemm(false, false, m, n, k, 1, a, m, b, k, 0, {}, m, bias, true));

  // An epilogue the simulation does not compute has no algorithm, as on a GPU lacking it.
  epilogue = CUBLASLT_EPILOGUE_DRELU_BGRAD;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, result, &returned),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(returned, 0);
  EXPECT_EQ(cublasLtMatmul(lt, desc, &one, da, la, db, lb, &zero, dd, ld, dd, ld, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_TRUE(log.take().empty());

  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  for (cublasLtMatrixLayout_t l : {la, lb, ld}) EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  for (float* p : {da, db, dbias, dd}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

TEST(HostGemm, HalfAndBfloat16ConversionsRoundToNearestEven) {
  EXPECT_EQ(lib::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(lib::float_to_half(-2.5f), 0xc100);
  EXPECT_EQ(lib::float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(lib::float_to_half(1e6f), 0x7c00);                     // overflow: infinity
  EXPECT_EQ(lib::float_to_half(1.0f + 1.0f / 2048), 0x3c00);       // a tie rounds to even
  EXPECT_EQ(lib::float_to_half(1.0f + 3.0f / 2048), 0x3c02);       // the other tie, up to even
  EXPECT_EQ(lib::float_to_half(5.960464477539063e-08f), 0x0001);   // the smallest subnormal
  EXPECT_EQ(lib::half_to_float(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(lib::half_to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(lib::half_to_float(lib::float_to_half(std::nanf("")))));
  EXPECT_EQ(lib::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(lib::float_to_bf16(1.00390625f), 0x3f80);  // halfway: to even
  EXPECT_EQ(lib::bf16_to_float(0x4049), 3.140625f);
}

TEST(Cudnn, AConvolutionIsIm2colThenAGemmAndAnActivationIsOneKernel) {
  cudnnHandle_t h = nullptr;
  ASSERT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnGetVersion(), size_t(CUDNN_VERSION));
  int major = -1, minor = -1, patch = -1;
  ASSERT_EQ(cudnnGetProperty(MAJOR_VERSION, &major), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnGetProperty(MINOR_VERSION, &minor), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnGetProperty(PATCH_LEVEL, &patch), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(size_t(major * 10000 + minor * 100 + patch), size_t(CUDNN_VERSION));
  EXPECT_EQ(cudnnGetProperty(MAJOR_VERSION, nullptr), CUDNN_STATUS_BAD_PARAM);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudnnSetStream(h, s), CUDNN_STATUS_SUCCESS);
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnActivationDescriptor_t act;
  ASSERT_EQ(cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnCreateTensorDescriptor(&y), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnCreateFilterDescriptor(&w), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnCreateConvolutionDescriptor(&conv), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnCreateActivationDescriptor(&act), CUDNN_STATUS_SUCCESS);
  // 4 images of 3 x 16 x 16, 8 filters of 3 x 5 x 5, stride 2, no padding: 8 x 6 x 6 out.
  ASSERT_EQ(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 4, 3, 16, 16),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 8, 3, 5, 5),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetConvolution2dDescriptor(conv, 0, 0, 2, 2, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 4, 8, 6, 6),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0),
            CUDNN_STATUS_SUCCESS);
  size_t workspace = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &workspace),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(workspace, size_t(4 * 6 * 6) * (3 * 5 * 5) * sizeof(float));
  float buf[4] = {};
  const float one = 1, zero = 0;
  LaunchLog log;
  ASSERT_EQ(cudnnConvolutionForward(h, &one, x, buf, w, buf, conv, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                    nullptr, 0, &zero, y, buf),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnActivationForward(h, act, &one, y, buf, &zero, y, buf), CUDNN_STATUS_SUCCESS);
  Launches expected = {
      {kIm2colKernel, config().kernel_ns},
      {kSgemmKernel, gemm_ns(8, 4 * 6 * 6, 3 * 5 * 5)},
      {kActivationKernel, config().kernel_ns},
  };
  EXPECT_EQ(log.take(), expected);

  // An output descriptor that does not match the convolution is refused before any launch.
  ASSERT_EQ(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 4, 8, 7, 7),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnConvolutionForward(h, &one, x, buf, w, buf, conv, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                    nullptr, 0, &zero, y, buf),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnActivationForward(h, act, &one, x, buf, &zero, y, buf), CUDNN_STATUS_BAD_PARAM);
  EXPECT_TRUE(log.take().empty());
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");

  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudnnDestroyActivationDescriptor(act), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnDestroyConvolutionDescriptor(conv), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnDestroyFilterDescriptor(w), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnDestroyTensorDescriptor(x), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnDestroyTensorDescriptor(y), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

std::string app(const std::string& name) { return std::string(SIM_APPS_DIR) + "/" + name; }

TEST(LibraryApps, SimCublasAndSimCudnnRunCleanly) {
  test::Result blas = test::run({app("sim_cublas"), "64", "32", "16", "4"}, test::on_simulator());
  ASSERT_EQ(blas.exit_code, 0) << blas.out << blas.err;
  EXPECT_EQ(blas.err, "");
  EXPECT_EQ(test::field_long(blas.out, "calls cublasSgemm_v2"), 4);
  EXPECT_EQ(test::field_long(blas.out, "calls cublasGemmEx"), 1);
  EXPECT_EQ(test::field(blas.out, "status"), "ok");
  test::Result dnn = test::run({app("sim_cudnn")}, test::on_simulator());
  ASSERT_EQ(dnn.exit_code, 0) << dnn.out << dnn.err;
  EXPECT_EQ(dnn.err, "");
  EXPECT_EQ(test::field(dnn.out, "output"), "2 8 32 32");
  EXPECT_EQ(test::field_long(dnn.out, "calls cudnnConvolutionForward"), 1);
  EXPECT_EQ(test::field(dnn.out, "status"), "ok");
}

}  // namespace
}  // namespace simcuda
