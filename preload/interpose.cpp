// dlsym/dlvsym interposition and the handing out of wrappers for driver entry points.
//
// A lookup through a handle searches only that object's dependency scope, so LD_PRELOAD alone never
// sees calls made through ctypes, dlopen-based loaders or the libraries that dlopen their parts (the
// brief, section 3). The shim therefore defines dlsym and dlvsym itself. The catch is RTLD_NEXT:
// glibc resolves it relative to the caller's return address, so a wrapper that calls the real dlsym
// makes itself the caller and breaks every other preloaded library that uses RTLD_NEXT (it would find
// its own definition again). The entry points below are written in assembly for that reason: for
// RTLD_NEXT and RTLD_DEFAULT they jump to glibc's dlsym with the caller's return address still on the
// stack; only lookups through a real handle come to C++.
#include "interpose.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api_ids.h"
#include "api_lookup.h"
#include "cutrace/api_table.h"
#include "loaded_objects.h"
#include "gpu_activity.h"
#include "modules.h"
#include "runtime.h"

extern "C" {
// Filled on first use; read by the assembly entry points. Hidden: never interposable.
__attribute__((visibility("hidden"))) void* cutrace_real_dlsym = nullptr;
__attribute__((visibility("hidden"))) void* cutrace_real_dlvsym = nullptr;
__attribute__((visibility("hidden"))) void* cutrace_resolve_dl_function(int which);
__attribute__((visibility("hidden"))) void* cutrace_dlsym_handle(void* handle, const char* name);
__attribute__((visibility("hidden"))) void* cutrace_dlvsym_handle(void* handle, const char* name, const char* version);
__attribute__((visibility("hidden"))) const char* cutrace_unprovided_version(const char* name);
}

// On entry %rsp is 8 mod 16; the slow path pushes the argument registers (and pads) so that the call
// to the resolver sees a 16-byte aligned stack, then restores them and jumps as the fast path does.
// A missing glibc function (impossible in practice) makes the lookup return NULL.
asm(R"(
    .text
    .p2align 4
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
    endbr64
    cmpq $-1, %rdi
    je 1f
    testq %rdi, %rdi
    jne cutrace_dlsym_handle
1:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    movq %rsi, %rdi
    call cutrace_unprovided_version
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 4f
    movq cutrace_real_dlsym(%rip), %r11
    testq %r11, %r11
    jz 2f
    jmp *%r11
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    xorl %edi, %edi
    call cutrace_resolve_dl_function
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 3f
    jmp *%rax
3:
    ret
4:
    movq %rax, %rdx
    jmp dlvsym
    .cfi_endproc
    .size dlsym, .-dlsym

    .p2align 4
    .globl dlvsym
    .type dlvsym, @function
dlvsym:
    .cfi_startproc
    endbr64
    cmpq $-1, %rdi
    je 1f
    testq %rdi, %rdi
    jne cutrace_dlvsym_handle
1:
    movq cutrace_real_dlvsym(%rip), %r11
    testq %r11, %r11
    jz 2f
    jmp *%r11
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    movl $1, %edi
    call cutrace_resolve_dl_function
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 3f
    jmp *%rax
3:
    ret
    .cfi_endproc
    .size dlvsym, .-dlvsym
)");

namespace cutrace::preload {
namespace {

// Entry points already reported, by a hash of their name: each is sent once per process image. Bounded;
// a driver hands out a few hundred entry points in all.
constexpr size_t kReportedEntryPoints = 512;
std::atomic<uint64_t> g_reported_entry_points[kReportedEntryPoints];

// Whether `name` was not reported yet (and now is): open addressing over the table, lock-free.
bool first_report_of(const char* name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* c = name; *c; ++c) h = (h ^ uint8_t(*c)) * 1099511628211ull;
  if (h == 0) h = 1;
  for (size_t i = 0; i < kReportedEntryPoints; ++i) {
    std::atomic<uint64_t>& slot = g_reported_entry_points[(h + i) % kReportedEntryPoints];
    uint64_t seen = slot.load(std::memory_order_relaxed);
    if (seen == h) return false;
    if (seen == 0 && slot.compare_exchange_strong(seen, h, std::memory_order_relaxed)) return true;
    if (seen == h) return false;
  }
  return false;  // full: the warning already names plenty
}

// The driver handed out an entry point no wrapper exists for (one a newer runtime or library asks a
// newer driver for): calls through it cannot be recorded, which the trace says (the recorder warns).
void note_unwrapped_entry_point(const char* symbol, int cuda_version) {
  ThreadState& ts = t_thread;
  if (ts.in_tracer || !first_report_of(symbol)) return;
  if (!ts.producer.header && !prepare_thread(ts)) return;
  emit_string(ts, abi::StringKind::kUnwrappedEntryPoint, uint64_t(cuda_version), symbol,
              strnlen(symbol, abi::kMaxStringBytes));
}

int runtime_version() {
  static std::atomic<int> cached{0};
  int v = cached.load(std::memory_order_relaxed);
  if (v) return v;
  using RuntimeGetVersion = int (*)(int*);
  if (auto get = real_function<RuntimeGetVersion>(kApi_cudaRuntimeGetVersion)) {
    const int saved_errno = errno;
    if (get(&v) != 0) v = 0;
    errno = saved_errno;
  }
  if (v) cached.store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace

DlsymFn real_dlsym() { return reinterpret_cast<DlsymFn>(cutrace_resolve_dl_function(0)); }
DlvsymFn real_dlvsym() { return reinterpret_cast<DlvsymFn>(cutrace_resolve_dl_function(1)); }

uintptr_t self_address() { return reinterpret_cast<uintptr_t>(&cutrace_resolve_dl_function); }

bool is_wrapper(const void* p) {
  if (!p) return false;
  Dl_info info{};
  // dladdr leaves dlerror() alone (it reports failure by its result only).
  if (!dladdr(p, &info) || info.dli_saddr != p || !info.dli_sname) return false;
  int32_t ids[kMaxMajorVersions];
  const size_t count = find_apis(info.dli_sname, ids, kMaxMajorVersions);
  for (size_t k = 0; k < count; ++k)
    if (g_wrapper_addresses[ids[k]] == p) return true;
  return false;
}

void* wrapper_for(int32_t api_id, void* found, void* real) {
  if (api_id < 0 || uint32_t(api_id) >= kApiCount || !found) return found;
  void* wrapper = g_wrapper_addresses[api_id];
  if (!wrapper || found == wrapper) return found;
  if (!real && elf::other_version_of(kApiTable[api_id].library, elf::soname_of(reinterpret_cast<uintptr_t>(found))))
    return found;  // its prototypes may differ from those the wrapper was built with
  if (!real) {
    // Not resolvable by name from here (a library loaded under a name the shim does not look for):
    // the wrapper takes what the program's own lookup found, unless another lookup got there first.
    void* expected = nullptr;
    if (!g_real_functions[api_id].compare_exchange_strong(expected, found, std::memory_order_relaxed))
      real = expected;
    else
      real = found;
  }
  // Anything else (cuDNN's shim looking up its sub-libraries' functions, a stub that forwards to the
  // real library, another major version, a tool preloaded after cutrace by hand) keeps what it found:
  // a wrapper there would record a call twice, or call something the lookup did not find.
  return real == found ? wrapper : found;
}

void hand_out_driver_wrapper(const char* symbol, void** pfn, int cuda_version, uint64_t flags) {
  if (!pfn || !*pfn) return;
  void* found = *pfn;
  int32_t id = -1;
  Dl_info info{};
  if (dladdr(found, &info) && info.dli_saddr == found && info.dli_sname) {
    id = find_api(info.dli_sname);
    // Already a wrapper: the runtime's cudaGetDriverEntryPoint asks the driver through a pointer the
    // shim handed out before.
    if (id >= 0 && g_wrapper_addresses[id] == found) return;
  }
  // The driver may return an address that is no export of its own; then the export the request
  // means is known from the versions cudaTypedefs.h lists.
  if (id < 0 && symbol) id = driver_proc_api(symbol, cuda_version, flags);
  if (id < 0) {
    if (symbol && !untimed_graphics_interop(symbol)) note_unwrapped_entry_point(symbol, cuda_version);
    return;
  }
  void* real = real_function<void*>(uint32_t(id));
  // The driver hands out its internal implementations, not its exports (the exports are thin entry
  // points to the same code). A function inside the library whose export the wrapper calls is that
  // export's implementation; one in another object (a tool's replacement) is kept as it is.
  elf::Object found_in{}, real_in{};
  if (real && real != found && elf::object_containing(reinterpret_cast<uintptr_t>(found), &found_in) &&
      elf::object_containing(reinterpret_cast<uintptr_t>(real), &real_in) && found_in.bias == real_in.bias) {
    *pfn = g_wrapper_addresses[id];
    return;
  }
  *pfn = wrapper_for(id, found, real);
}

namespace hooks {

void driver_entry_point(const char* symbol, void** pfn, int version, unsigned long long flags) {
  const int saved_errno = errno;
  hand_out_driver_wrapper(symbol, pfn, version, flags);
  errno = saved_errno;
}

void runtime_entry_point(const char* symbol, void** pfn, unsigned long long flags) {
  const int saved_errno = errno;
  // cudaGetDriverEntryPoint asks for the version of the runtime making the call.
  hand_out_driver_wrapper(symbol, pfn, runtime_version(), flags);
  errno = saved_errno;
}

void runtime_entry_point_by_version(const char* symbol, void** pfn, int version, unsigned long long flags) {
  const int saved_errno = errno;
  hand_out_driver_wrapper(symbol, pfn, version, flags);
  errno = saved_errno;
}

}  // namespace hooks
}  // namespace cutrace::preload

using namespace cutrace::preload;

extern "C" void* cutrace_resolve_dl_function(int which) {
  void** slot = which ? &cutrace_real_dlvsym : &cutrace_real_dlsym;
  void* p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (p) return p;
  // The definition after the shim in load order: glibc's, or another preloaded library's that comes
  // after cutrace (which then gets to see the lookup too).
  p = elf::find_next(self_address(), which ? "dlvsym" : "dlsym");
  if (p) __atomic_store_n(slot, p, __ATOMIC_RELEASE);
  return p;
}

namespace {

// The shim's own work (noting newly loaded objects, resolving the real function, which may itself
// call dlsym) comes first and the program's lookup last: glibc clears the thread's previous dlerror()
// at the start of every dl call, so what the program reads afterwards is exactly what its own lookup
// left. What follows the lookup makes no dl call.
// A name wrapped for two major versions (cudaMalloc in libcudart.so.13 and .12) has two candidates;
// the lookup's result picks the one whose real function it found.
struct Prepared {
  int32_t ids[kMaxMajorVersions];
  void* reals[kMaxMajorVersions];
  size_t count = 0;
};

Prepared prepare_lookup(const char* name) {
  const int saved_errno = errno;
  note_loaded_objects(t_thread);
  Prepared p;
  p.count = name ? find_apis(name, p.ids, kMaxMajorVersions) : 0;
  for (size_t k = 0; k < p.count; ++k) p.reals[k] = real_function<void*>(uint32_t(p.ids[k]));
  errno = saved_errno;
  return p;
}

void* finish_lookup(const Prepared& p, void* found) {
  if (p.count == 0 || !found) return found;
  const int saved_errno = errno;
  // The versioned candidate first: a plain wrapper may fall back to the same function (resolve_real).
  // A versioned wrapper its library has not registered is never handed out.
  size_t pick = 0;
  for (size_t k = p.count; k-- > 0;) {
    if (p.reals[k] == found && g_wrapper_addresses[p.ids[k]]) {
      pick = k;
      break;
    }
  }
  void* result = wrapper_for(p.ids[pick], found, p.reals[pick]);
  errno = saved_errno;
  return result;
}

}  // namespace

// dlsym(RTLD_DEFAULT or RTLD_NEXT, name) finds the shim's own export of every wrapped name, also where
// no loaded library defines the function (a runtime older than the build's headers): without cutrace
// the lookup would fail, and the program would take the path it takes when a function is absent.
// For such a name this returns a symbol version to look it up under instead (the real library's, else
// its soname), which the shim's unversioned exports never match (glibc's dlvsym does not take an
// unversioned definition for a version it names), so the caller gets glibc's own NULL and dlerror().
// Anything else returns null, and the lookup goes on untouched, relative to its caller as before.
extern "C" const char* cutrace_unprovided_version(const char* name) {
  // Before anything else: a sanitizer runtime looks up its interceptors' functions through here before
  // its shadow memory exists, and none of those names starts with "cu" or nvcc's "__cu".
  if (!name || t_thread.in_tracer) return nullptr;
  const char* stem = name[0] == '_' && name[1] == '_' ? name + 2 : name;
  if (stem[0] != 'c' || stem[1] != 'u') return nullptr;
  int32_t ids[kMaxMajorVersions];
  const size_t count = find_apis(name, ids, kMaxMajorVersions);
  if (count == 0) return nullptr;
  const int saved_errno = errno;
  // A name wrapped for two major versions is provided when either version's library provides it.
  const char* unprovided = nullptr;
  for (size_t k = 0; k < count; ++k) {
    if (real_function<void*>(uint32_t(ids[k]))) {
      unprovided = nullptr;
      break;
    }
    if (g_wrapper_addresses[ids[k]] && !unprovided) {
      const char* version = g_real_versions[ids[k]];
      unprovided = version ? version : cutrace::kApiTable[ids[k]].library;
    }
  }
  errno = saved_errno;
  return unprovided;
}

extern "C" void* cutrace_dlsym_handle(void* handle, const char* name) {
  // The tracer's own lookups, and those of the CUPTI it loaded, get what glibc finds: CUPTI's calls
  // into the driver are not the program's.
  if (t_thread.in_tracer || in_shims_cupti(uintptr_t(__builtin_return_address(0))))
    return real_dlsym()(handle, name);
  const Prepared p = prepare_lookup(name);
  return route_programs_cupti_lookup(name, finish_lookup(p, real_dlsym()(handle, name)));
}

extern "C" void* cutrace_dlvsym_handle(void* handle, const char* name, const char* version) {
  if (t_thread.in_tracer || in_shims_cupti(uintptr_t(__builtin_return_address(0))))
    return real_dlvsym()(handle, name, version);
  const Prepared p = prepare_lookup(name);
  return route_programs_cupti_lookup(name, finish_lookup(p, real_dlvsym()(handle, name, version)));
}

// An object unloaded by dlclose gets its unload record at once, while the time still says when it went:
// a later object may be mapped at its addresses, and frames taken before must not be named from that
// one. The real dlclose runs first and its result and dlerror() state are the program's; the look
// afterwards makes no dl call that could disturb them (dl_iterate_phdr leaves dlerror() alone).
namespace {

// The definition the shim's wrapper of libc function `name` stands in front of, found once, without a
// dl call (dlerror() and the loader's lock are left as they were); nullptr when there is none.
template <class Fn>
Fn next_definition(std::atomic<Fn>& found, const char* name) {
  Fn fn = found.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<Fn>(elf::find_next(self_address(), name));
    if (fn) found.store(fn, std::memory_order_release);
  }
  return fn;
}

}  // namespace

extern "C" CUTRACE_EXPORT int dlclose(void* handle) {
  static std::atomic<int (*)(void*)> real{nullptr};
  const auto close = next_definition(real, "dlclose");
  if (!close) {
    errno = ENOSYS;
    return -1;
  }
  const int result = close(handle);
  const int saved_errno = errno;
  note_loaded_objects(t_thread);
  errno = saved_errno;
  return result;
}

// _exit (and _Exit) run no exit handlers, so the atexit flush of GPU activity never runs: Python's
// multiprocessing children leave through os._exit. CUPTI's records are handed to the trace first, by
// the flusher thread and for a bounded time, so that a process calling _exit from a bad state (a crash
// handler, with CUPTI's locks held) still ends.
namespace {

using ExitFn = void (*)(int);
std::atomic<ExitFn> g_real_exit{nullptr}, g_real_exit_upper{nullptr};

[[noreturn]] void leave(const char* name, std::atomic<ExitFn>& real, int status) {
  flush_gpu_activity_before_exit(500);
  if (const ExitFn exit_now = next_definition(real, name)) exit_now(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

}  // namespace

extern "C" CUTRACE_EXPORT [[noreturn]] void _exit(int status) noexcept { leave("_exit", g_real_exit, status); }
extern "C" CUTRACE_EXPORT [[noreturn]] void _Exit(int status) noexcept { leave("_Exit", g_real_exit_upper, status); }
