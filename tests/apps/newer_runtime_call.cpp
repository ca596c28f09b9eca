// A program built against a runtime that has a function the runtime it meets lacks: the simulated
// runtime has no cudaDeviceSetLimit. Without cutrace the loader's lazy binding ends it at that call
// ("symbol lookup error: ... undefined symbol: cudaDeviceSetLimit, version libcudart.so.13", exit
// 127), after the output before it; under cutrace it must end the same way.
//
// usage: newer_runtime_call
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  std::printf("cudaGetDeviceCount %d count %d\n", int(counted), count);
  std::fflush(stdout);
  const cudaError_t limited = cudaDeviceSetLimit(cudaLimitStackSize, 4096);
  std::printf("cudaDeviceSetLimit %d\n", int(limited));
  return limited == cudaSuccess ? 0 : 1;
}
