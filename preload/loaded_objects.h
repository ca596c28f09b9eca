// Reading the objects the dynamic linker has loaded, straight from their mapped ELF structures.
//
// The shim must find real functions, tell which library an address belongs to and redirect a library's
// imports without calling dlsym, dlopen or dladdr: those calls change the thread's dlerror() state,
// and a program that checks dlerror() after its own successful dlsym (the idiom the dlsym manual
// teaches) would then see an error the shim caused. dl_iterate_phdr leaves that state alone, and
// everything else here is plain reading of memory the loader mapped.
//
// Nothing here allocates: it runs inside arbitrary programs, in forked children and before their
// own initialisation.
#pragma once

#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstdint>

namespace cutrace::preload::elf {

// The parts of an object's dynamic section the shim reads. Pointers are absolute.
struct Dynamic {
  const ElfW(Dyn)* dyn = nullptr;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* sysv_hash = nullptr;
  const ElfW(Versym)* versym = nullptr;
  const ElfW(Rela)* rela = nullptr;  // DT_RELA, DT_RELASZ
  size_t rela_bytes = 0;
  const ElfW(Rela)* jmprel = nullptr;  // DT_JMPREL, DT_PLTRELSZ (x86-64 uses RELA for both)
  size_t jmprel_bytes = 0;
  const char* soname = nullptr;  // nullptr when the object has none
};

// One object as dl_iterate_phdr reports it. Valid while the object stays loaded.
struct Object {
  uintptr_t bias = 0;
  const char* name = "";  // the loader's name: "" for the main program, a path or soname otherwise
  const ElfW(Phdr)* phdr = nullptr;
  uint16_t phnum = 0;
  uint32_t index = 0;     // position in the loader's list (0: the main program)
};

// Parses `o`'s dynamic section; false when it has none.
bool read_dynamic(const Object& o, Dynamic* d);

// The address of the default version of the defined function or object `name` in one object, or
// nullptr. GNU indirect functions are not resolved (the CUDA libraries have none): nullptr too.
void* find_symbol(const Object& o, const Dynamic& d, const char* name);

// Whether `address` lies in one of `o`'s loaded segments.
bool contains(const Object& o, uintptr_t address);

// The span [*begin, *end) from the object's first loaded byte to its last; false when it has none.
bool mapped_span(const Object& o, uintptr_t* begin, uintptr_t* end);

// glibc's dl_iterate_phdr, called directly: a sanitizer runtime (TSan) intercepts the name, and its
// interceptor crashes when it runs before the runtime has initialised, which is exactly when the
// runtime calls the shim's dlsym to find the functions it intercepts.
int iterate_phdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data);

// Calls `visit(const Object&)` for every loaded object in the loader's order until it returns true.
// Returns whether a visit returned true. Takes the loader's list lock for the walk: do not load or
// unload objects from `visit`.
template <class Visit>
bool for_each_object(Visit&& visit) {
  struct Context {
    Visit* visit;
    uint32_t index;
  } context{&visit, 0};
  return iterate_phdr(
             [](dl_phdr_info* info, size_t, void* data) -> int {
               auto* c = static_cast<Context*>(data);
               Object o;
               o.bias = info->dlpi_addr;
               o.name = info->dlpi_name ? info->dlpi_name : "";
               o.phdr = info->dlpi_phdr;
               o.phnum = info->dlpi_phnum;
               o.index = c->index++;
               return (*c->visit)(o) ? 1 : 0;
             },
             &context) != 0;
}

// The loader's count of objects ever loaded and unloaded: a change means the list changed.
void load_counts(uint64_t* adds, uint64_t* subs);

// The object that contains `address`; false when none does.
bool object_containing(uintptr_t address, Object* out);

// The definition a call from the object containing `caller` would reach through RTLD_NEXT: the first
// object after it in load order that defines `name` (default version). nullptr when none does.
void* find_next(uintptr_t caller, const char* name);

// The definition of `name` for a function of library `soname`: in the loaded object whose DT_SONAME
// is `soname` when there is one (the library the program asked for, also when it was loaded with
// RTLD_LOCAL), otherwise in the first object after the one containing `caller` that defines it and is
// not another major version of that library. nullptr when none has it.
void* find_in_library(const char* soname, uintptr_t caller, const char* name);

// Whether `candidate` is the same library as `soname` in another major version (libcudart.so.12
// against libcudart.so.13).
bool other_version_of(const char* soname, const char* candidate);

// The definition of `name` in the first loaded object, in load order, that is another major version of
// library `soname` (libcusolver.so.11 for libcusolver.so.12), also one loaded with RTLD_LOCAL. nullptr
// when none has it.
void* find_in_other_version(const char* soname, const char* name);

// What glibc 2.35's _dl_find_object tells an unwinder of the object containing `address`, for a glibc
// that lacks it (libc_compat.cpp): its mapped span and its PT_GNU_EH_FRAME segment (nullptr when it
// has none). false when no object contains the address. Takes the loader's lock, as dl_iterate_phdr.
bool unwind_data_of(uintptr_t address, uintptr_t* map_start, uintptr_t* map_end, const void** eh_frame);

// The DT_SONAME of the object containing `address`, or nullptr (no object, or no soname).
const char* soname_of(uintptr_t address);

}  // namespace cutrace::preload::elf
