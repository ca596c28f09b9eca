// A library loaded by one thread while another makes OS runtime calls that carry backtraces: the loader's
// lock (held by the loading thread while the library's constructor runs) and the shim's lock on its list
// of loaded objects must never be taken in opposite orders.
//
// usage: dlopen_race LIBRARY CYCLES
//   the main thread dlopens and dlcloses LIBRARY CYCLES times, while a second thread sleeps in
//   usleep(300) until the main thread is done.
// stdout: "cycles N" and "sleeps N" (the second thread's usleep calls).
// exit: 0; 1 when LIBRARY cannot be loaded; 64 on a usage error.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<bool> g_done{false};

void* sleeper(void* count) {
  long n = 0;
  while (!g_done.load()) {
    usleep(300);
    ++n;
  }
  *static_cast<long*>(count) = n;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dlopen_race LIBRARY CYCLES\n");
    return 64;
  }
  const int cycles = std::atoi(argv[2]);
  long sleeps = 0;
  pthread_t thread;
  pthread_create(&thread, nullptr, sleeper, &sleeps);
  usleep(5000);  // the sleeper has recorded its first calls
  for (int i = 0; i < cycles; ++i) {
    void* library = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
    if (!library) {
      std::fprintf(stderr, "dlopen_race: %s\n", dlerror());
      g_done = true;
      pthread_join(thread, nullptr);
      return 1;
    }
    dlclose(library);
  }
  g_done = true;
  pthread_join(thread, nullptr);
  std::printf("cycles %d\nsleeps %ld\n", cycles, sleeps);
  return 0;
}
