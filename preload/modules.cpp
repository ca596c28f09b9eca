#include "modules.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api_lookup.h"
#include "cutrace/domains.h"
#include "interpose.h"
#include "loaded_objects.h"

namespace cutrace::preload {
namespace {

// Bounded tables (no malloc here): a process with more objects than this still works, and objects
// beyond the bound are neither reported nor examined.
constexpr uint32_t kMaxObjects = 4096;

struct ObjectKey {
  uintptr_t bias;
  uint64_t name_hash;
  bool operator==(const ObjectKey& o) const { return bias == o.bias && name_hash == o.name_hash; }
};

struct KeySet {
  ObjectKey keys[kMaxObjects];
  uint32_t count = 0;
  bool contains(const ObjectKey& k) const {
    for (uint32_t i = 0; i < count; ++i)
      if (keys[i] == k) return true;
    return false;
  }
  void add(const ObjectKey& k) {
    if (count < kMaxObjects) keys[count++] = k;
  }
  void remove_at(uint32_t i) { keys[i] = keys[--count]; }
};

// What a reported object's unload record repeats of its load record: by the time the loader's list
// no longer holds the object, its headers and notes are unmapped.
struct Reported {
  uint64_t base, text_start, text_end;
  uint32_t flags;
  uint8_t build_id_bytes;
  uint8_t build_id[abi::kMaxBuildIdBytes];
};

std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
elf::Object g_objects[kMaxObjects];  // the last walk of the loader's list
ObjectKey g_object_keys[kMaxObjects];  // their keys, taken during the walk (a name's memory may go with a dlclose)
uint32_t g_object_count = 0;
KeySet g_reported;  // module records written by this process
Reported g_reported_fields[kMaxObjects];  // g_reported's objects, index for index
KeySet g_examined;  // imports looked at (objects present at start-up are entered unexamined)
bool g_startup_noted = false;
std::atomic<uint64_t> g_last_adds{~0ull}, g_last_subs{~0ull};

class Locked {
 public:
  Locked() {
    while (g_lock.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~Locked() { g_lock.clear(std::memory_order_release); }
};

uint64_t fnv1a64(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ uint8_t(*s)) * 1099511628211ull;
  return h;
}

ObjectKey key_of(const elf::Object& o) { return {o.bias, fnv1a64(o.name)}; }

const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The CUDA libraries whose calls the shim records, by file name (domains.def's libraries column).
bool is_cuda_library(const char* path) {
  return (abi::library_domain(base_name(path)) & (abi::kCudaDomains | abi::kCudaLibraryDomains)) != 0;
}

// Walks the loader's list into g_objects. Caller holds g_lock; no dl call happens inside the walk, nor
// anywhere else under g_lock (a thread inside dlopen may be waiting for it).
void collect_objects() {
  g_object_count = 0;
  elf::for_each_object([](const elf::Object& o) {
    if (g_object_count < kMaxObjects) {
      g_object_keys[g_object_count] = key_of(o);
      g_objects[g_object_count++] = o;
    }
    return false;
  });
}

bool has_section(const char* path, const char* wanted) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool found = false;
  ElfW(Ehdr) eh;
  if (pread(fd, &eh, sizeof eh, 0) == ssize_t(sizeof eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(ElfW(Shdr)) && eh.e_shnum > 0 &&
      eh.e_shstrndx < eh.e_shnum) {
    ElfW(Shdr) names;
    char strings[4096];
    ssize_t got = 0;
    if (pread(fd, &names, sizeof names, off_t(eh.e_shoff + uint64_t(eh.e_shstrndx) * sizeof names)) ==
        ssize_t(sizeof names)) {
      const size_t want = names.sh_size < sizeof strings ? size_t(names.sh_size) : sizeof strings;
      got = pread(fd, strings, want, off_t(names.sh_offset));
    }
    ElfW(Shdr) batch[32];
    for (uint32_t first = 0; got > 0 && !found && first < eh.e_shnum; first += 32) {
      const uint32_t n = eh.e_shnum - first < 32 ? eh.e_shnum - first : 32;
      const ssize_t bytes = ssize_t(n * sizeof(ElfW(Shdr)));
      if (pread(fd, batch, size_t(bytes), off_t(eh.e_shoff + uint64_t(first) * sizeof(ElfW(Shdr)))) != bytes) break;
      for (uint32_t i = 0; i < n && !found; ++i) {
        const size_t at = batch[i].sh_name;
        if (at < size_t(got) && strnlen(strings + at, size_t(got) - at) < size_t(got) - at)
          found = strcmp(strings + at, wanted) == 0;
      }
    }
  }
  close(fd);
  return found;
}

// Objects whose file is worth opening to look for GPU code: the program, and libraries outside the
// system's own directories (PyTorch's and JAX's live in site-packages, CUDA's in its toolkit).
bool may_carry_gpu_code(const char* path) {
  if (!*path || strstr(path, "linux-vdso")) return false;
  static const char* const kSystemDirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"};
  for (const char* dir : kSystemDirs)
    if (strncmp(path, dir, strlen(dir)) == 0) return is_cuda_library(path);
  return true;
}

const char* path_of(const elf::Object& o, char* buffer, size_t capacity) {
  if (o.index != 0 || *o.name) return o.name;
  const ssize_t n = readlink("/proc/self/exe", buffer, capacity - 1);
  if (n <= 0) return "";
  buffer[n] = '\0';
  return buffer;
}

// What the object's mapped memory says of it; the file is not read (describe_file).
uint32_t module_flags(const elf::Object& o) {
  uint32_t flags = o.index == 0 ? abi::kModuleFlagMainProgram : 0;
  elf::Dynamic d;
  if (elf::read_dynamic(o, &d)) {
    for (const ElfW(Dyn)* e = d.dyn; e->d_tag != DT_NULL; ++e)
      if (e->d_tag == DT_NEEDED && e->d_un.d_val < d.strsz &&
          strncmp(d.strtab + e->d_un.d_val, "libcudart.so", 12) == 0)
        flags |= abi::kModuleFlagNeedsCudart;
  }
  return flags;
}

// From the object's mapped memory, which a dlclose on another thread unmaps: only while the loader's
// list holds it (with_loaded).
Reported describe(const elf::Object& o) {
  Reported d{};
  d.base = o.bias;
  d.flags = module_flags(o);
  for (uint16_t i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& ph = o.phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && d.text_end == 0) {
      d.text_start = o.bias + ph.p_vaddr;
      d.text_end = d.text_start + ph.p_memsz;
    }
    if (ph.p_type != PT_NOTE || d.build_id_bytes) continue;
    // Notes: 4-byte namesz, descsz, type, then the name and the descriptor, each padded to 4.
    auto* n = reinterpret_cast<const uint8_t*>(o.bias + ph.p_vaddr);
    for (size_t at = 0; at + 12 <= ph.p_memsz;) {
      uint32_t namesz, descsz, type;
      std::memcpy(&namesz, n + at, 4);
      std::memcpy(&descsz, n + at + 4, 4);
      std::memcpy(&type, n + at + 8, 4);
      const size_t name_at = at + 12, desc_at = name_at + ((namesz + 3) & ~3u);
      if (desc_at + descsz > ph.p_memsz) break;
      if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(n + name_at, "GNU", 4) == 0) {
        d.build_id_bytes = uint8_t(descsz < abi::kMaxBuildIdBytes ? descsz : abi::kMaxBuildIdBytes);
        std::memcpy(d.build_id, n + desc_at, d.build_id_bytes);
        break;
      }
      at = desc_at + ((descsz + 3) & ~3u);
    }
  }
  return d;
}

// An unload has no path: the reader ends the load with the same base and text range.
void write_module_record(ThreadState& ts, abi::ModuleEvent event, const Reported& d, const char* path,
                         size_t path_bytes) {
  if (!ts.producer.header) return;
  if (path_bytes > abi::kMaxModulePathBytes) path_bytes = abi::kMaxModulePathBytes;
  const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::ModuleRecord) + path_bytes));
  WritingRecord writing(ts);
  uint8_t* p = ts.producer.reserve(bytes);
  if (!p) return;
  auto* r = reinterpret_cast<abi::ModuleRecord*>(p);
  std::memset(r, 0, bytes);
  r->header = {uint16_t(abi::RecordKind::kModuleMap), uint16_t(bytes), uint32_t(event)};
  r->time = now();
  r->base = d.base;
  r->text_start = d.text_start;
  r->text_end = d.text_end;
  r->flags = d.flags;
  r->build_id_bytes = d.build_id_bytes;
  std::memcpy(r->build_id, d.build_id, d.build_id_bytes);
  r->path_bytes = uint32_t(path_bytes);
  std::memcpy(r->path, path, path_bytes);
  ts.producer.commit(bytes);
}

// Runs work(o) on the object `claimed` names while the loader's list is held (inside
// dl_iterate_phdr), so that a dlclose on another thread cannot unmap it meanwhile; nothing if it is
// gone. work must make no dl call: a thread inside dlopen holds the loader's lock and may be waiting
// for the list.
template <class Work>
void with_loaded(const elf::Object& claimed, Work&& work) {
  elf::for_each_object([&](const elf::Object& o) {
    if (o.bias != claimed.bias || o.name != claimed.name) return false;
    work(o);
    return true;
  });
}

// Writes the load record of an object of the last walk and enters it as reported. Its memory (headers,
// notes, name) is read while the loader's list holds it: a dlclose on another thread since the walk
// may have unmapped it, and then there is nothing to report. The file is read after, outside the list.
void report_object(ThreadState& ts, const elf::Object& listed, const ObjectKey& key) {
  char path[1024];
  Reported d{};
  bool loaded = false;
  with_loaded(listed, [&](const elf::Object& o) {
    loaded = true;
    const char* name = path_of(o, path, sizeof path);
    if (name != path) {
      strncpy(path, name, sizeof path - 1);
      path[sizeof path - 1] = '\0';
    }
    d = describe(o);
  });
  if (!loaded) return;
  if (may_carry_gpu_code(path) && has_section(path, ".nv_fatbin")) d.flags |= abi::kModuleFlagDeviceCode;
  if (ts.producer.header) write_module_record(ts, abi::ModuleEvent::kLoaded, d, path, strlen(path));
  if (g_reported.count < kMaxObjects) g_reported_fields[g_reported.count] = d;
  g_reported.add(key);
}

// Whether the loader's list (just collected) holds the object.
bool loaded_now(const ObjectKey& k) {
  for (uint32_t i = 0; i < g_object_count; ++i)
    if (g_object_keys[i] == k) return true;
  return false;
}

// Whether an object was loaded or unloaded since the module records were written.
bool reported_set_changed() {
  for (uint32_t i = 0; i < g_object_count; ++i)
    if (!g_reported.contains(g_object_keys[i])) return true;
  for (uint32_t i = 0; i < g_reported.count; ++i)
    if (!loaded_now(g_reported.keys[i])) return true;
  return false;
}

// Reported objects that the loader's list (just collected) no longer holds: each gets its unload
// record and is forgotten, so that the same file loaded again (often at the same address) is
// reported afresh.
void report_unloads(ThreadState& ts) {
  for (uint32_t i = g_reported.count; i-- > 0;) {
    if (loaded_now(g_reported.keys[i])) continue;
    write_module_record(ts, abi::ModuleEvent::kUnloaded, g_reported_fields[i], "", 0);
    g_reported_fields[i] = g_reported_fields[g_reported.count - 1];
    g_reported.remove_at(i);
  }
}

// The definition of `name` in something loaded ahead of the shim (the program, a library preloaded
// before it), or nullptr: a lazy binding would reach that definition rather than the wrapper.
void* definition_before_shim(const char* name) {
  void* found = nullptr;
  const uintptr_t self = self_address();
  elf::for_each_object([&](const elf::Object& o) {
    if (elf::contains(o, self)) return true;
    elf::Dynamic d;
    if (elf::read_dynamic(o, &d)) found = elf::find_symbol(o, d, name);
    return found != nullptr;
  });
  return found;
}

// Whether the page holding `address` is writable now, from /proc/self/maps (no loader call). An
// object's RELRO pages still writable are those of an object the loader is relocating on another
// thread: it enters the loader's list before that, and protects them once it is done.
bool page_writable(uintptr_t address) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  size_t kept = 0;
  bool writable = false, found = false;
  for (;;) {
    const ssize_t got = read(fd, buffer + kept, sizeof buffer - kept);
    if (got <= 0) break;
    const size_t end = kept + size_t(got);
    size_t line = 0;
    for (size_t i = 0; i < end && !found; ++i) {
      if (buffer[i] != '\n') continue;
      // "start-end perms ...": hexadecimal bounds, then r/w/x/p. Each line ends in '\n', so the
      // numbers end inside the buffer.
      char* after = nullptr;
      const uintptr_t lo = std::strtoull(buffer + line, &after, 16);
      const uintptr_t hi = *after == '-' ? std::strtoull(after + 1, &after, 16) : 0;
      if (address >= lo && address < hi && after + 2 < buffer + i) {
        found = true;
        writable = after[2] == 'w';
      }
      line = i + 1;
    }
    if (found) break;
    // The partial last line moves to the front; a line longer than the buffer is skipped.
    kept = line < end ? end - line : 0;
    if (kept == sizeof buffer) kept = 0;
    std::memmove(buffer, buffer + line, kept);
  }
  close(fd);
  return writable;
}

void write_slot(void** slot, void* value, uintptr_t relro_start, uintptr_t relro_end) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
  if (at < relro_start || at >= relro_end) {
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    return;
  }
  // Made read-only by the loader once relocated (-z relro): opened for the one store.
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  void* start = reinterpret_cast<void*>(at & ~(page - 1));
  if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  mprotect(start, page, PROT_READ);
}

// Calls visit(name, ids, candidates, slot, type) for each import slot of `o` (a jump slot or a GOT
// entry) that names a wrapped function. Reads only `o`'s own tables: no dl call.
template <class Visit>
void for_each_wrapped_import(const elf::Object& o, const elf::Dynamic& d, Visit&& visit) {
  const struct {
    const ElfW(Rela)* table;
    size_t bytes;
  } tables[] = {{d.jmprel, d.jmprel_bytes}, {d.rela, d.rela_bytes}};
  for (const auto& t : tables) {
    for (size_t i = 0; t.table && i < t.bytes / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& rel = t.table[i];
      const uint32_t type = ELF64_R_TYPE(rel.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Sym)& sym = d.symtab[ELF64_R_SYM(rel.r_info)];
      if (sym.st_shndx != SHN_UNDEF || sym.st_name >= d.strsz) continue;
      const char* name = d.strtab + sym.st_name;
      int32_t ids[kMaxMajorVersions];
      const size_t candidates = find_apis(name, ids, kMaxMajorVersions);
      if (candidates == 0) continue;
      visit(name, ids, candidates, reinterpret_cast<void**>(o.bias + rel.r_offset), type);
    }
  }
}

// The real functions of the wrapped functions `claimed` imports that are not known yet, looked up now:
// a lookup is a dl call (dlvsym), so it happens outside the loader's list and any lock of the shim's.
// In passes of a bounded batch, each starting at the import where the last one stopped: a framework's
// library imports thousands of them (PyTorch's libtorch_cuda.so), and one left unknown would keep its
// lazy slot from being pointed at its wrapper, so that its first call went unrecorded.
void resolve_imported_functions(const elf::Object& claimed) {
  constexpr size_t kMaxPerPass = 256;
  uint32_t wanted[kMaxPerPass];
  size_t first_import = 0;
  for (bool more = true; more;) {
    size_t count = 0, import = 0;
    more = false;
    with_loaded(claimed, [&](const elf::Object& o) {
      elf::Dynamic d;
      if (elf::contains(o, self_address()) || !elf::read_dynamic(o, &d)) return;
      for_each_wrapped_import(o, d, [&](const char*, const int32_t* ids, size_t candidates, void**, uint32_t) {
        if (more || import++ < first_import) return;
        for (size_t k = 0; k < candidates; ++k) {
          const uint32_t id = uint32_t(ids[k]);
          if (!g_wrapper_addresses[id] || g_real_functions[id].load(std::memory_order_relaxed)) continue;
          bool listed = false;
          for (size_t j = 0; j < count && !listed; ++j) listed = wanted[j] == id;
          if (listed) continue;
          if (count == kMaxPerPass) {
            // This import starts the next pass.
            more = true;
            first_import = import - 1;
            return;
          }
          wanted[count++] = id;
        }
      });
    });
    for (size_t j = 0; j < count; ++j) real_function<void*>(wanted[j]);
  }
}

// Points the imports of wrapped functions that bypass the shim at the wrappers: slots bound to the
// real function (a library loaded with RTLD_DEEPBIND binds to its own dependencies first) and lazy
// slots not bound yet (they would bind the same way on their first call). Uses the real functions
// already known (resolve_imported_functions), with no dl call: it runs inside the loader's list.
// False, with nothing written, when the object is still being relocated (its RELRO is not protected
// yet): written now, a slot could be overwritten by the loader, or the page made read-only under it.
bool redirect_imports(const elf::Object& o) {
  if (elf::contains(o, self_address())) return true;
  elf::Dynamic d;
  if (!elf::read_dynamic(o, &d)) return true;
  // The pages the loader makes read-only once it has relocated the object: the whole pages from the
  // one where PT_GNU_RELRO starts to the one where it ends (a partial last page stays writable).
  uintptr_t relro_start = 0, relro_end = 0;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (uint16_t i = 0; i < o.phnum; ++i) {
    if (o.phdr[i].p_type != PT_GNU_RELRO) continue;
    relro_start = (o.bias + o.phdr[i].p_vaddr) & ~(page - 1);
    relro_end = (o.bias + o.phdr[i].p_vaddr + o.phdr[i].p_memsz) & ~(page - 1);
  }
  int relocated = -1;  // looked at once, before the first slot is written
  for_each_wrapped_import(o, d, [&](const char* name, const int32_t* ids, size_t candidates, void** slot,
                                    uint32_t type) {
    if (relocated == 0) return;
    void* current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    // Bound past the shim: the same decision as for a lookup through a handle that found `current`.
    // Unbound (lazy): the wrapper of the one major version loaded; with two loaded, the slot's own
    // version is not read here, and the slot is left to bind as it would.
    const bool lazy = type == R_X86_64_JUMP_SLOT && elf::contains(o, reinterpret_cast<uintptr_t>(current));
    // A lazy slot with a definition ahead of the shim will bind to it on its first call: decided
    // now as it will be once bound, so that a library preloaded before cutrace (the simulated CUDA
    // libraries, a build of one's own) loses no first call, while another tool's definition of the
    // name, which is no wrapper's real function, keeps its calls.
    void* bound = lazy ? definition_before_shim(name) : current;
    void* wrapper = nullptr;
    size_t loaded = 0;
    bool already = false;
    for (size_t k = candidates; k-- > 0;) {
      void* candidate = g_wrapper_addresses[ids[k]];
      if (!candidate) continue;
      if (current == candidate) already = true;
      void* real = g_real_functions[ids[k]].load(std::memory_order_relaxed);
      if (!real) continue;
      ++loaded;
      if (bound && wrapper_for(ids[k], bound, real) == candidate) wrapper = candidate;
      if (!bound && !wrapper) wrapper = candidate;
    }
    if (already || !wrapper) return;
    if (!bound && loaded != 1) return;
    if (relocated < 0) relocated = relro_end > relro_start && page_writable(relro_start) ? 0 : 1;
    if (relocated == 1) write_slot(slot, wrapper, relro_start, relro_end);
  });
  return relocated != 0;
}

bool any_cuda_library() {
  for (uint32_t i = 0; i < g_object_count; ++i)
    if (is_cuda_library(g_objects[i].name)) return true;
  return false;
}

}  // namespace

void report_all_objects(ThreadState& ts) {
  Locked lock;
  collect_objects();
  g_reported.count = 0;
  for (uint32_t i = 0; i < g_object_count; ++i) report_object(ts, g_objects[i], g_object_keys[i]);
}

void note_loaded_objects(ThreadState& ts) {
  if (!g_session || ts.in_tracer) return;
  uint64_t adds = 0, subs = 0;
  elf::load_counts(&adds, &subs);
  if (adds == g_last_adds.load(std::memory_order_relaxed) && subs == g_last_subs.load(std::memory_order_relaxed))
    return;
  const bool announced = process_announced();
  bool need_ring = false;
  ts.in_tracer++;
  // Each new object is claimed under g_lock and redirected after it is released: looking up real
  // functions (dlvsym) waits for the loader's lock, and a thread holding that lock (inside dlopen,
  // running a constructor) may be waiting for g_lock here.
  bool deferred = false;
  elf::Object claimed;
  while (!deferred) {
    bool redirect = false;
    {
      Locked lock;
      collect_objects();
      for (uint32_t i = g_examined.count; i-- > 0;)
        if (!loaded_now(g_examined.keys[i])) g_examined.remove_at(i);
      for (uint32_t i = 0; i < g_object_count && !redirect; ++i) {
        const ObjectKey k = g_object_keys[i];
        if (g_examined.contains(k)) continue;
        g_examined.add(k);
        // What was loaded before the first look was bound with the shim in the global scope already.
        if (g_startup_noted) claimed = g_objects[i], redirect = true;
      }
      g_startup_noted = true;
    }
    if (!redirect) break;
    resolve_imported_functions(claimed);
    with_loaded(claimed, [&](const elf::Object& o) { deferred = !redirect_imports(o); });
  }
  {
    Locked lock;
    collect_objects();
    // Still being relocated: looked at again by a later call (the load counts are not marked seen).
    if (deferred) {
      const ObjectKey k = key_of(claimed);
      for (uint32_t i = g_examined.count; i-- > 0;)
        if (g_examined.keys[i] == k) g_examined.remove_at(i);
    }
    // Before the process has recorded anything, only a CUDA library makes it start reporting.
    need_ring = announced ? reported_set_changed() : any_cuda_library();
  }
  ts.in_tracer--;
  // Claiming a ring may announce the process, which reports every object itself (and takes the lock).
  if (need_ring && !ts.producer.header) prepare_thread(ts);
  if (announced && ts.producer.header) {
    ts.in_tracer++;
    {
      Locked lock;
      collect_objects();
      report_unloads(ts);
      for (uint32_t i = 0; i < g_object_count; ++i)
        if (!g_reported.contains(g_object_keys[i])) report_object(ts, g_objects[i], g_object_keys[i]);
    }
    ts.in_tracer--;
    // A runtime loaded after the process announced itself (a framework's plug-in dlopens it). Outside
    // g_lock: it looks up the runtime's version function (dlvsym).
    report_cuda_runtime(ts);
  }
  if (deferred) return;
  g_last_adds.store(adds, std::memory_order_relaxed);
  g_last_subs.store(subs, std::memory_order_relaxed);
}

bool process_uses_cuda() {
  bool uses = false;
  char exe[1024];
  {
    Locked lock;
    collect_objects();
    uses = any_cuda_library();
    if (!uses && g_object_count > 0) uses = has_section(path_of(g_objects[0], exe, sizeof exe), ".nv_fatbin");
  }
  return uses;
}

void forget_reported_objects() {
  g_lock.clear(std::memory_order_relaxed);
  g_reported.count = 0;
  g_last_adds.store(~0ull, std::memory_order_relaxed);
  g_last_subs.store(~0ull, std::memory_order_relaxed);
}

}  // namespace cutrace::preload
