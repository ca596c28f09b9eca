// A program linked to cuDNN: one convolution forward and one activation on a stream of its own,
// with memory from the runtime. On the simulated stack the convolution is an im2col kernel and a
// cublasSgemm_v2 that cuDNN finds at run time, both reaching the driver without the runtime.
//
// usage: sim_cudnn
// stdout: "output N C H W", "workspace bytes N", "calls <function> N" for every cuDNN call, sorted,
//         "status ok".
// exit:   0 on success, 1 when a call fails.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdio>
#include <map>
#include <string>
#include "library_calls.h"

namespace {

std::map<std::string, long> g_calls;

#define CUDNN_CALL(fn, ...) COUNTED_LIBRARY_CALL(g_calls, CUDNN_STATUS_SUCCESS, cudnnGetErrorString, fn, __VA_ARGS__)

int run() {
  constexpr int kN = 2, kC = 3, kH = 32, kW = 32, kK = 8, kR = 3, kS = 3;
  cudaStream_t stream;
  CUDA_CALL(cudaStreamCreate(&stream));
  cudnnHandle_t handle;
  CUDNN_CALL(cudnnCreate, &handle);
  CUDNN_CALL(cudnnSetStream, handle, stream);

  cudnnTensorDescriptor_t x_desc, y_desc;
  cudnnFilterDescriptor_t w_desc;
  cudnnConvolutionDescriptor_t conv;
  cudnnActivationDescriptor_t relu;
  CUDNN_CALL(cudnnCreateTensorDescriptor, &x_desc);
  CUDNN_CALL(cudnnCreateTensorDescriptor, &y_desc);
  CUDNN_CALL(cudnnCreateFilterDescriptor, &w_desc);
  CUDNN_CALL(cudnnCreateConvolutionDescriptor, &conv);
  CUDNN_CALL(cudnnCreateActivationDescriptor, &relu);
  CUDNN_CALL(cudnnSetTensor4dDescriptor, x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kN, kC, kH, kW);
  CUDNN_CALL(cudnnSetFilter4dDescriptor, w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, kK, kC, kR, kS);
  CUDNN_CALL(cudnnSetConvolution2dDescriptor, conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
             CUDNN_DATA_FLOAT);
  CUDNN_CALL(cudnnSetTensor4dDescriptor, y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kN, kK, kH, kW);
  CUDNN_CALL(cudnnSetActivationDescriptor, relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0);

  size_t workspace_bytes = 0;
  CUDNN_CALL(cudnnGetConvolutionForwardWorkspaceSize, handle, x_desc, w_desc, conv, y_desc,
             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &workspace_bytes);
  void *x, *w, *y, *workspace;
  CUDA_CALL(cudaMalloc(&x, sizeof(float) * kN * kC * kH * kW));
  CUDA_CALL(cudaMalloc(&w, sizeof(float) * kK * kC * kR * kS));
  CUDA_CALL(cudaMalloc(&y, sizeof(float) * kN * kK * kH * kW));
  CUDA_CALL(cudaMalloc(&workspace, workspace_bytes));

  const float one = 1.0f, zero = 0.0f;
  CUDNN_CALL(cudnnConvolutionForward, handle, &one, x_desc, x, w_desc, w, conv,
             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, workspace, workspace_bytes, &zero,
             y_desc, y);
  CUDNN_CALL(cudnnActivationForward, handle, relu, &one, y_desc, y, &zero, y_desc, y);
  CUDA_CALL(cudaStreamSynchronize(stream));

  CUDNN_CALL(cudnnDestroyActivationDescriptor, relu);
  CUDNN_CALL(cudnnDestroyConvolutionDescriptor, conv);
  CUDNN_CALL(cudnnDestroyFilterDescriptor, w_desc);
  CUDNN_CALL(cudnnDestroyTensorDescriptor, y_desc);
  CUDNN_CALL(cudnnDestroyTensorDescriptor, x_desc);
  CUDNN_CALL(cudnnDestroy, handle);
  for (void* p : {x, w, y, workspace}) CUDA_CALL(cudaFree(p));
  CUDA_CALL(cudaStreamDestroy(stream));

  std::printf("output %d %d %d %d\n", kN, kK, kH, kW);
  std::printf("workspace bytes %zu\n", workspace_bytes);
  for (const auto& [name, count] : g_calls) std::printf("calls %s %ld\n", name.c_str(), count);
  std::printf("status ok\n");
  return 0;
}

}  // namespace

int main(int argc, char**) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: sim_cudnn\n");
    return 1;
  }
  return run();
}
