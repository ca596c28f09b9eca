/* Imports the "framework" (libcuda12_framework.so) as Python imports an extension module. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FRAMEWORK.so CALLS\n", argv[0]);
    return 2;
  }
  void* framework = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!framework) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*start)(int) = (int (*)(int))dlsym(framework, "framework_start");
  return start ? start(atoi(argv[2])) : 1;
}
