// Functions of a newer glibc than 2.34 that the GCC and C++ runtimes linked statically into the shim and
// the recorder import, defined for them so that both run on every glibc the wheel's platform tag admits
// (scripts/build-wheel.sh: 2.34, RHEL 9's). In the shim the version script keeps them local; in the
// recorder no library references them. Linked into those two alone, not into the test programs that
// link the shim's objects.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "loaded_objects.h"

// glibc 2.36's arc4random. The copy of libstdc++ linked into the shim brings std::random_device along
// with its exception helpers (__throw_bad_alloc, ...), and random_device's one reference to arc4random
// would alone make the shim need glibc 2.36. This definition binds that reference inside the
// shim and nowhere else: the program's own arc4random is untouched. Nothing calls it.
extern "C" uint32_t arc4random(void) {
  uint32_t value = 0;
  const int saved_errno = errno;
  while (syscall(SYS_getrandom, &value, sizeof value, 0) != long(sizeof value) && errno == EINTR) {
  }
  errno = saved_errno;
  return value;
}

// glibc 2.35's _dl_find_object, which the GCC runtime's unwinder (the shim's stacks, unwind_stack.h,
// and C++ exceptions) calls to find a frame's unwind table. It takes no lock, so a sample taken while
// the interrupted thread holds the loader's lock cannot deadlock; but importing it would keep the shim
// off glibc 2.34 (RHEL 9 and its kin). This definition binds the unwinder's reference: it calls the C
// library's own where there is one, found by reading libc's symbol table as the shim finds real
// functions, and on an older glibc answers from dl_iterate_phdr, as unwinders did before 2.35.
namespace {

using FindObject = int (*)(void*, dl_find_object*);
std::atomic<FindObject> g_libc_find_object{nullptr};
std::atomic<bool> g_find_object_resolved{false};

FindObject resolve_find_object() {
  FindObject found = nullptr;
  cutrace::preload::elf::for_each_object([&found](const cutrace::preload::elf::Object& o) {
    cutrace::preload::elf::Dynamic d;
    if (!cutrace::preload::elf::read_dynamic(o, &d) || !d.soname || std::strcmp(d.soname, "libc.so.6") != 0)
      return false;
    found = reinterpret_cast<FindObject>(cutrace::preload::elf::find_symbol(o, d, "_dl_find_object"));
    return true;
  });
  g_libc_find_object.store(found, std::memory_order_relaxed);
  g_find_object_resolved.store(true, std::memory_order_release);
  return found;
}

// Resolved as the shim loads, before any stack is taken; the first unwind resolves it otherwise.
__attribute__((constructor)) void resolve_find_object_at_load() { resolve_find_object(); }

}  // namespace

extern "C" int _dl_find_object(void* address, dl_find_object* result) {
  const FindObject libc = g_find_object_resolved.load(std::memory_order_acquire)
                              ? g_libc_find_object.load(std::memory_order_relaxed)
                              : resolve_find_object();
  if (libc) return libc(address, result);
  uintptr_t start = 0, end = 0;
  const void* eh_frame = nullptr;
  if (!cutrace::preload::elf::unwind_data_of(reinterpret_cast<uintptr_t>(address), &start, &end, &eh_frame)) return -1;
  std::memset(result, 0, sizeof *result);
  result->dlfo_map_start = reinterpret_cast<void*>(start);
  result->dlfo_map_end = reinterpret_cast<void*>(end);
  result->dlfo_eh_frame = const_cast<void*>(eh_frame);
  return 0;
}
