/* Loads libruntime_user.so by path and runs it; the CUDA runtime is on no search path but that
 * library's RUNPATH.
 * usage: runpath_main <path of libruntime_user.so> <iterations>
 * stdout: "calls <function> <n>"; exit 0, 1 when a library cannot be loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: runpath_main <library> <iterations>\n");
    return 64;
  }
  const int iterations = atoi(argv[2]);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "error: %s\n", dlerror());
    return 1;
  }
  int (*run)(int) = (int (*)(int))dlsym(h, "runpath_user_run");
  const int failures = run ? run(iterations) : -1;
  if (failures < 0) return 1;
  printf("failures %d\ncalls cudaDeviceSynchronize 1\ncalls cudaGetDeviceCount %d\n", failures, iterations);
  return 0;
}
