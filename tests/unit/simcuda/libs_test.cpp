// The simulated cuBLAS, cuBLASLt and cuDNN: which kernels each call queues, in order and with the
// durations simcuda.h promises, and the arguments they refuse.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/kernels.h"
#include "core/sync.h"
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

TEST(Cudnn, AConvolutionIsIm2colThenAGemmAndAnActivationIsOneKernel) {
  cudnnHandle_t h = nullptr;
  ASSERT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnGetVersion(), size_t(CUDNN_VERSION));
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
