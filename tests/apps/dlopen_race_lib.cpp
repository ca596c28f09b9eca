// The library dlopen_race loads: while its constructor runs, the loading thread holds the loader's lock.
// The constructor first spins (no OS call) long enough for the other thread of dlopen_race to notice the
// new object and redirect its imports, then sleeps through usleep, an OS runtime call long enough to
// carry a backtrace, which notes the loaded objects on this thread too. It imports cublasCreate_v2,
// which no loaded library defines: looking for its real function is a loader call every time.
#include <time.h>
#include <unistd.h>

extern "C" int cublasCreate_v2(void** handle);

namespace {

void spin_ms(long ms) {
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do clock_gettime(CLOCK_MONOTONIC, &now);
  while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

__attribute__((constructor)) void while_the_loader_lock_is_held() {
  spin_ms(5);
  usleep(2000);
}

}  // namespace

// Never called (the import stays lazy and unresolved); it keeps the import in the library.
extern "C" __attribute__((visibility("default"), noinline)) int dlopen_race_never_called(void** handle) {
  return cublasCreate_v2(handle);
}
