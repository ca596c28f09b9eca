// Functions of a newer glibc than the shim may otherwise need, defined local to the shim so that it
// loads into programs on every glibc the wheel's platform tag admits (scripts/build-wheel.sh).
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

// glibc 2.36's arc4random. The copy of libstdc++ linked into the shim brings std::random_device along
// with its exception helpers (__throw_bad_alloc, ...), and random_device's one reference to arc4random
// would alone make the shim need glibc 2.36. Hidden, this definition binds that reference inside the
// shim and nowhere else: the program's own arc4random is untouched. Nothing in the shim calls it.
extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value = 0;
  const int saved_errno = errno;
  while (syscall(SYS_getrandom, &value, sizeof value, 0) != long(sizeof value) && errno == EINTR) {
  }
  errno = saved_errno;
  return value;
}
