/* Asks the driver's cuGetProcAddress_v2 three times for cuSimFutureFunction, an entry point of a driver
   newer than the toolkit (the simulated driver hands it out from version 13020; no header declares
   it), and calls it each time: what a newer runtime does with a newer driver. Prints one line per
   lookup: the lookup's result and the call's. Then asks once for cuGLInit, a graphics interop entry
   point, which the real driver hands out to every runtime at start-up, and calls it. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*GetProcAddress)(const char*, void**, int, uint64_t, int*);

int main(void) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(driver, "cuInit");
  GetProcAddress get = (GetProcAddress)dlsym(driver, "cuGetProcAddress_v2");
  if (!init || !get || init(0) != 0) return 1;
  for (int i = 0; i < 3; ++i) {
    void* fn = NULL;
    int status = 0;
    const int found = get("cuSimFutureFunction", &fn, 13020, 0, &status);
    printf("lookup %d call %d\n", found, fn ? ((int (*)(void))fn)() : -1);
  }
  void* gl_init = NULL;
  const int found = get("cuGLInit", &gl_init, 13000, 0, NULL);
  printf("interop lookup %d call %d\n", found, gl_init ? ((int (*)(void))gl_init)() : -1);
  return 0;
}
