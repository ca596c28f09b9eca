/* Linked against the CUDA runtime and loaded by deepbind_main with RTLD_DEEPBIND, which binds this
 * library's imports to its own dependencies ahead of the global scope (and so ahead of LD_PRELOAD). */
#include <cuda_runtime_api.h>

int deep_user_run(int iterations) {
  int count = 0, failures = 0;
  for (int i = 0; i < iterations; ++i) {
    void* p = 0;
    failures += cudaGetDeviceCount(&count) != cudaSuccess;
    failures += cudaMalloc(&p, 64) != cudaSuccess;
    failures += cudaFree(p) != cudaSuccess;
  }
  return failures;
}
