/* Uses the CUDA runtime only through dlopen + dlsym/dlvsym on its handle, as ctypes, JAX's stubs and
 * PyTorch's lazy loaders do: nothing is linked, and the library is loaded with RTLD_LOCAL, so symbol
 * interposition alone never sees these calls.
 *
 * usage: dl_runtime <soname or path> <iterations>
 * stdout: "calls <function> <n>" for every runtime call made; "dlerror clean" when every lookup left
 *         dlerror() empty (the idiom of the dlsym manual: clear, look up, check).
 * exit: 0; 1 when the library or a function cannot be found (message on stderr); 64 on a usage error. */
#define _GNU_SOURCE /* dlvsym */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*get_count_fn)(int*);
typedef int (*malloc_fn)(void**, size_t);
typedef int (*free_fn)(void*);
typedef int (*memcpy_fn)(void*, const void*, size_t, int);
typedef int (*sync_fn)(void);

static int dlerror_clean = 1;

static void* lookup(void* handle, const char* name, const char* version) {
  dlerror();
  void* p = version ? dlvsym(handle, name, version) : dlsym(handle, name);
  const char* error = dlerror();
  if (error) {
    dlerror_clean = 0;
    fprintf(stderr, "error: %s: %s\n", name, error);
  }
  if (!p) exit(1);
  return p;
}

int main(int argc, char** argv) {
  if (argc != 3 || atoi(argv[2]) <= 0) {
    fprintf(stderr, "usage: dl_runtime <soname or path> <iterations>\n");
    return 64;
  }
  const int iterations = atoi(argv[2]);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "error: %s\n", dlerror());
    return 1;
  }
  get_count_fn get_count = (get_count_fn)lookup(h, "cudaGetDeviceCount", NULL);
  malloc_fn cuda_malloc = (malloc_fn)lookup(h, "cudaMalloc", NULL);
  free_fn cuda_free = (free_fn)lookup(h, "cudaFree", NULL);
  /* dlvsym with the version node the real library defines (named after its soname). */
  memcpy_fn cuda_memcpy = (memcpy_fn)lookup(h, "cudaMemcpy", "libcudart.so.13");
  sync_fn device_sync = (sync_fn)lookup(h, "cudaDeviceSynchronize", NULL);

  /* A name the library does not have: NULL, and dlerror() says so. */
  dlerror();
  if (dlsym(h, "cudaNoSuchFunction") != NULL || dlerror() == NULL) dlerror_clean = 0;

  int count = 0, failures = 0;
  char host[256] = {0};
  for (int i = 0; i < iterations; ++i) {
    void* device = NULL;
    failures += get_count(&count) != 0;
    failures += cuda_malloc(&device, sizeof host) != 0;
    failures += cuda_memcpy(device, host, sizeof host, 1 /* cudaMemcpyHostToDevice */) != 0;
    failures += cuda_memcpy(host, device, sizeof host, 2 /* cudaMemcpyDeviceToHost */) != 0;
    failures += cuda_free(device) != 0;
  }
  failures += device_sync() != 0;
  printf("calls cudaDeviceSynchronize 1\n");
  printf("calls cudaFree %d\n", iterations);
  printf("calls cudaGetDeviceCount %d\n", iterations);
  printf("calls cudaMalloc %d\n", iterations);
  printf("calls cudaMemcpy %d\n", 2 * iterations);
  printf("failures %d\n", failures);
  if (dlerror_clean) printf("dlerror clean\n");
  return 0;
}
