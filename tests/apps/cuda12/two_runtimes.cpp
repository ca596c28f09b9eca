// A CUDA 13 program that also loads CUDA 12's runtime (as a plug-in built for CUDA 12 would): each
// version's calls must reach that version's function with its own prototype.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

static_assert(CUDART_VERSION / 1000 == 13, "built against CUDA 13's headers");

int main() {
  int device = -1;
  const cudaError_t own = cudaGetDevice(&device);
  void* buffer = nullptr;
  cudaMalloc(&buffer, 4096);
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id = 0;
  const cudaError_t own_prefetch = cudaMemPrefetchAsync(buffer, 4096, location, 0, nullptr);
  void* cuda12 = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!cuda12) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  using GetDevice = int (*)(int*);
  using PrefetchV12 = int (*)(const void*, size_t, int, cudaStream_t);
  using GetVersion = int (*)(int*);
  auto get_device = reinterpret_cast<GetDevice>(dlsym(cuda12, "cudaGetDevice"));
  auto prefetch = reinterpret_cast<PrefetchV12>(dlsym(cuda12, "cudaMemPrefetchAsync"));
  auto version = reinterpret_cast<GetVersion>(dlsym(cuda12, "cudaRuntimeGetVersion"));
  int v12 = 0, v13 = 0;
  cudaRuntimeGetVersion(&v13);
  version(&v12);
  // CUDA 12's runtime has its own device memory: allocate through it for its prefetch.
  using Malloc = int (*)(void**, size_t);
  auto malloc12 = reinterpret_cast<Malloc>(dlsym(cuda12, "cudaMalloc"));
  void* buffer12 = nullptr;
  malloc12(&buffer12, 4096);
  std::printf("cuda13 cudaGetDevice %d cudaMemPrefetchAsync %d version %d\n", int(own), int(own_prefetch), v13);
  std::printf("cuda12 cudaGetDevice %d cudaMemPrefetchAsync %d version %d\n", get_device(&device),
              prefetch(buffer12, 4096, 0, nullptr), v12);
  return 0;
}
