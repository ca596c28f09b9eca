/* Another tool preloaded beside cutrace: wraps cudaMalloc and cudaFree the usual way, finding the
 * next definition with dlsym(RTLD_NEXT, ...), and reports what it saw at exit on stderr:
 * "stacked: cudaMalloc <n> cudaFree <n>" (or "stacked: RTLD_NEXT found nothing for <name>"). A dlsym
 * interposer that made itself the caller of glibc's dlsym would hand this library its own functions
 * back and the program would recurse until it crashed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int malloc_calls, free_calls;

static void* next(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr, "stacked: RTLD_NEXT found nothing for %s\n", name);
    abort();
  }
  return p;
}

int cudaMalloc(void** p, size_t bytes) {
  static int (*real)(void**, size_t);
  if (!real) real = (int (*)(void**, size_t))next("cudaMalloc");
  ++malloc_calls;
  return real(p, bytes);
}

int cudaFree(void* p) {
  static int (*real)(void*);
  if (!real) real = (int (*)(void*))next("cudaFree");
  ++free_calls;
  return real(p);
}

__attribute__((destructor)) static void report(void) {
  if (malloc_calls || free_calls) fprintf(stderr, "stacked: cudaMalloc %d cudaFree %d\n", malloc_calls, free_calls);
}
