/* Finds the CUDA runtime the way PyTorch's and JAX's libraries find the one their wheels bring: by
 * soname, through this library's own DT_RUNPATH ($ORIGIN/runtime), with dlopen called from here. A
 * dlopen interposed by a tracer would search the tracer's RUNPATH instead and fail. */
#include <dlfcn.h>
#include <stdio.h>

int runpath_user_run(int iterations) {
  void* h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "error: %s\n", dlerror());
    return -1;
  }
  int (*get_count)(int*) = (int (*)(int*))dlsym(h, "cudaGetDeviceCount");
  int (*sync)(void) = (int (*)(void))dlsym(h, "cudaDeviceSynchronize");
  if (!get_count || !sync) return -1;
  int count = 0, failures = 0;
  for (int i = 0; i < iterations; ++i) failures += get_count(&count) != 0;
  failures += sync() != 0;
  return failures;
}
