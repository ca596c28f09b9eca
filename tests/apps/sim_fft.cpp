// A program linked to cuFFT, planning and running transforms the ways programs and frameworks do: a
// batched 1-D complex transform from cufftPlan1d, forward and inverse; a 2-D real-to-complex one from
// cufftPlan2d; and, as XLA does, a 3-D double-complex plan made in steps (cufftCreate, automatic
// allocation off, cufftMakePlanMany64, its work area from the runtime, cufftSetWorkArea), each plan on
// the program's stream. It asks for the library's version first, as frameworks do at start.
//
// usage: sim_fft n (n >= 2: the size of every dimension; the 1-D transform has a batch of 4)
// stdout: "calls <function> N" for every cuFFT call the program made, sorted,
//         "version <cufftGetVersion>", "workspace <bytes of the 3-D plan>", "status ok".
// exit:   0 on success, 1 when a call fails.
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "library_calls.h"

namespace {

std::map<std::string, long> g_calls;

#define CUFFT_CALL(fn, ...) COUNTED_LIBRARY_CALL(g_calls, CUFFT_SUCCESS, no_status_name, fn, __VA_ARGS__)

int run(int n) {
  int version = 0;
  CUFFT_CALL(cufftGetVersion, &version);
  cudaStream_t stream;
  CUDA_CALL(cudaStreamCreate(&stream));
  const int batch = 4;
  void *complex_data = nullptr, *real_data = nullptr, *double_data = nullptr;
  CUDA_CALL(cudaMalloc(&complex_data, sizeof(cufftComplex) * n * batch));
  CUDA_CALL(cudaMalloc(&real_data, sizeof(cufftComplex) * n * (n / 2 + 1)));
  CUDA_CALL(cudaMalloc(&double_data, sizeof(cufftDoubleComplex) * n * n * n));

  cufftHandle line;
  CUFFT_CALL(cufftPlan1d, &line, n, CUFFT_C2C, batch);
  CUFFT_CALL(cufftSetStream, line, stream);
  auto* c = static_cast<cufftComplex*>(complex_data);
  CUFFT_CALL(cufftExecC2C, line, c, c, CUFFT_FORWARD);
  CUFFT_CALL(cufftExecC2C, line, c, c, CUFFT_INVERSE);

  cufftHandle plane;
  CUFFT_CALL(cufftPlan2d, &plane, n, n, CUFFT_R2C);
  CUFFT_CALL(cufftSetStream, plane, stream);
  CUFFT_CALL(cufftExecR2C, plane, static_cast<cufftReal*>(real_data), static_cast<cufftComplex*>(real_data));

  cufftHandle cube;
  CUFFT_CALL(cufftCreate, &cube);
  CUFFT_CALL(cufftSetAutoAllocation, cube, 0);
  long long dims[] = {n, n, n};
  size_t work_bytes = 0;
  CUFFT_CALL(cufftMakePlanMany64, cube, 3, dims, nullptr, 1, 0, nullptr, 1, 0, CUFFT_Z2Z, 1, &work_bytes);
  void* work = nullptr;
  CUDA_CALL(cudaMalloc(&work, work_bytes));
  CUFFT_CALL(cufftSetWorkArea, cube, work);
  CUFFT_CALL(cufftSetStream, cube, stream);
  auto* z = static_cast<cufftDoubleComplex*>(double_data);
  CUFFT_CALL(cufftExecZ2Z, cube, z, z, CUFFT_FORWARD);

  CUDA_CALL(cudaStreamSynchronize(stream));
  for (cufftHandle plan : {line, plane, cube}) CUFFT_CALL(cufftDestroy, plan);
  for (void* p : {complex_data, real_data, double_data, work}) CUDA_CALL(cudaFree(p));
  CUDA_CALL(cudaStreamDestroy(stream));

  for (const auto& [name, count] : g_calls) std::printf("calls %s %ld\n", name.c_str(), count);
  std::printf("version %d\n", version);
  std::printf("workspace %zu\n", work_bytes);
  std::printf("status ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc == 2 ? std::atoi(argv[1]) : 0;
  if (n < 2) {
    std::fprintf(stderr, "usage: sim_fft n (n >= 2)\n");
    return 1;
  }
  return run(n);
}
