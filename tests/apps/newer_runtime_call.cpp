// A program built against a runtime that has a function the runtime it meets lacks: it is linked
// against newer_cudart.c, a libcudart.so.13 with cudaSimNewerFunction, which no real runtime and not
// the simulated one (that exports every function of the real one) has. Without cutrace the loader's
// lazy binding ends it at that call ("symbol lookup error: ... undefined symbol:
// cudaSimNewerFunction, version libcudart.so.13", exit 127), after the output before it; under
// cutrace it must end the same way.
//
// usage: newer_runtime_call
#include <cuda_runtime_api.h>

#include <cstdio>

extern "C" cudaError_t cudaSimNewerFunction(int value);

int main() {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  std::printf("cudaGetDeviceCount %d count %d\n", int(counted), count);
  std::fflush(stdout);
  const cudaError_t newer = cudaSimNewerFunction(4096);
  std::printf("cudaSimNewerFunction %d\n", int(newer));
  return newer == cudaSuccess ? 0 : 1;
}
