/* Loads CUDA 12's runtime and cuBLAS the way the framework wheels do: dlopen by soname from a library
   whose DT_RPATH names the directory the nvidia-*-cu12 wheels installed them in, then dlsym. The
   framework itself is loaded with dlopen(RTLD_LOCAL), as Python loads an extension module. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*GetDevice)(int*);
typedef int (*PrefetchV12)(const void*, size_t, int, void*);
typedef int (*CublasCreate)(void**);

int framework_start(int calls) {
  void* runtime = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  void* blas = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!runtime || !blas) {
    fprintf(stderr, "framework: %s\n", dlerror());
    return 1;
  }
  GetDevice get_device = (GetDevice)dlsym(runtime, "cudaGetDevice");
  PrefetchV12 prefetch = (PrefetchV12)dlsym(runtime, "cudaMemPrefetchAsync");
  CublasCreate create = (CublasCreate)dlsym(blas, "cublasCreate_v2");
  int device = -1, result = 0;
  for (int i = 0; i < calls; ++i) result = get_device(&device);
  printf("cudaGetDevice %d x%d\n", result, calls);
  printf("cudaMemPrefetchAsync %d\n", prefetch((const void*)0x1000, 4096, 1, (void*)(uintptr_t)0x5eed1234));
  void* handle = NULL;
  printf("cublasCreate_v2 %d\n", create(&handle));
  return 0;
}
