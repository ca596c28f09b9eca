/* Loads libdeep_user.so with RTLD_DEEPBIND and runs it.
 * usage: deepbind_main <path of libdeep_user.so> <iterations>
 * stdout: "calls <function> <n>"; exit 0, 1 when the library cannot be loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: deepbind_main <library> <iterations>\n");
    return 64;
  }
  const int iterations = atoi(argv[2]);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_DEEPBIND);
  if (!h) {
    fprintf(stderr, "error: %s\n", dlerror());
    return 1;
  }
  int (*run)(int) = (int (*)(int))dlsym(h, "deep_user_run");
  if (!run) {
    fprintf(stderr, "error: %s\n", dlerror());
    return 1;
  }
  printf("failures %d\n", run(iterations));
  printf("calls cudaFree %d\ncalls cudaGetDeviceCount %d\ncalls cudaMalloc %d\n", iterations, iterations, iterations);
  return 0;
}
