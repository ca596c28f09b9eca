// A program built against CUDA 12's headers and linked to libcudart.so.12 and libcublas.so.12, as a
// CUDA 12 application or framework is. It runs on the simulated CUDA 12 libraries or on the real ones
// from the wheels (which fail without a driver), and prints what each call returned.
//   cuda12_app calls N     N cudaGetDevice calls
//   cuda12_app prefetch    cudaMemPrefetchAsync with CUDA 12's prototype (a device number) and _v2
//   cuda12_app cublas      cublasCreate and cublasDestroy
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static_assert(CUDART_VERSION / 1000 == 12, "built against CUDA 12's headers");

namespace {

int calls(int n) {
  int device = -1;
  cudaError_t last = cudaSuccess;
  for (int i = 0; i < n; ++i) last = cudaGetDevice(&device);
  std::printf("cudaGetDevice %d x%d\n", int(last), n);
  return 0;
}

int prefetch() {
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  const cudaError_t malloc_result = cudaMalloc(&buffer, 4096);
  const cudaError_t stream_result = cudaStreamCreate(&stream);
  // Device 0 and a stream of the program's: arguments that CUDA 13's prototype (a cudaMemLocation and
  // flags before the stream) would read differently.
  const cudaError_t by_device = cudaMemPrefetchAsync(buffer, 4096, 0, stream);
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id = 0;
  const cudaError_t by_location = cudaMemPrefetchAsync_v2(buffer, 4096, location, 0, stream);
  std::printf("cudaMalloc %d cudaStreamCreate %d\n", int(malloc_result), int(stream_result));
  std::printf("cudaMemPrefetchAsync %d cudaMemPrefetchAsync_v2 %d\n", int(by_device), int(by_location));
  std::printf("buffer %p stream %p\n", buffer, static_cast<void*>(stream));
  if (stream) cudaStreamDestroy(stream);
  if (buffer) cudaFree(buffer);
  return 0;
}

int cublas() {
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = cublasCreate(&handle);
  std::printf("cublasCreate %d\n", int(created));
  if (created == CUBLAS_STATUS_SUCCESS) std::printf("cublasDestroy %d\n", int(cublasDestroy(handle)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "calls") == 0) return calls(std::atoi(argv[2]));
  if (argc == 2 && std::strcmp(argv[1], "prefetch") == 0) return prefetch();
  if (argc == 2 && std::strcmp(argv[1], "cublas") == 0) return cublas();
  std::fprintf(stderr, "usage: %s calls N | prefetch | cublas\n", argv[0]);
  return 2;
}
