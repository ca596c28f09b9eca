#include "loaded_objects.h"

#include <algorithm>
#include <cstring>

namespace cutrace::preload::elf {
namespace {

// The loader relocates the pointers of a dynamic section in place, except where the section is
// read-only (the vDSO's): a value below the load bias is still an offset.
template <class T>
const T* dyn_pointer(const Object& o, ElfW(Addr) value) {
  if (value == 0) return nullptr;
  return reinterpret_cast<const T*>(value < o.bias ? o.bias + value : value);
}

uint32_t gnu_hash(const char* name) {
  uint32_t h = 5381;
  for (auto* p = reinterpret_cast<const unsigned char*>(name); *p; ++p) h = h * 33 + *p;
  return h;
}

uint32_t sysv_hash(const char* name) {
  uint32_t h = 0;
  for (auto* p = reinterpret_cast<const unsigned char*>(name); *p; ++p) {
    h = (h << 4) + *p;
    const uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// A defined, visible function or object whose version (if any) is the default one: what dlsym
// returns for the plain name.
// String comparisons by hand: find_next runs inside dlsym, which a sanitizer runtime calls while it
// initialises, before its interceptors of strcmp and friends can forward anywhere.
bool same_string(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

bool same_prefix(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
    if (!a[i]) return true;
  }
  return true;
}

const char* find_so(const char* s) {
  for (; *s; ++s)
    if (s[0] == '.' && s[1] == 's' && s[2] == 'o') return s;
  return nullptr;
}

size_t length(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

bool usable(const Object& o, const Dynamic& d, uint32_t index, const char* name) {
  const ElfW(Sym)& s = d.symtab[index];
  if (s.st_shndx == SHN_UNDEF || s.st_value == 0) return false;
  const unsigned type = ELF64_ST_TYPE(s.st_info), bind = ELF64_ST_BIND(s.st_info);
  if (type != STT_FUNC && type != STT_OBJECT) return false;
  if (bind != STB_GLOBAL && bind != STB_WEAK) return false;
  if (ELF64_ST_VISIBILITY(s.st_other) != STV_DEFAULT && ELF64_ST_VISIBILITY(s.st_other) != STV_PROTECTED) return false;
  // Bit 15 marks a hidden (non-default) version such as dlsym@GLIBC_2.2.5 beside dlsym@@GLIBC_2.34.
  if (d.versym && (d.versym[index] & 0x8000)) return false;
  if (s.st_name >= d.strsz) return false;
  (void)o;
  return same_string(d.strtab + s.st_name, name);
}

}  // namespace

namespace {

bool read_dynamic_at(const Object& o, const ElfW(Dyn)* dyn, Dynamic* d);

}  // namespace

bool read_dynamic(const Object& o, Dynamic* d) {
  *d = Dynamic{};
  for (uint16_t i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_DYNAMIC)
      return read_dynamic_at(o, reinterpret_cast<const ElfW(Dyn)*>(o.bias + o.phdr[i].p_vaddr), d);
  return false;
}

namespace {

bool read_dynamic_at(const Object& o, const ElfW(Dyn)* dyn, Dynamic* d) {
  *d = Dynamic{};
  d->dyn = dyn;
  if (!d->dyn) return false;
  ElfW(Addr) soname_offset = 0;
  bool has_soname = false;
  for (const ElfW(Dyn)* e = d->dyn; e->d_tag != DT_NULL; ++e) {
    switch (e->d_tag) {
      case DT_SYMTAB: d->symtab = dyn_pointer<ElfW(Sym)>(o, e->d_un.d_ptr); break;
      case DT_STRTAB: d->strtab = dyn_pointer<char>(o, e->d_un.d_ptr); break;
      case DT_STRSZ: d->strsz = e->d_un.d_val; break;
      case DT_GNU_HASH: d->gnu_hash = dyn_pointer<uint32_t>(o, e->d_un.d_ptr); break;
      case DT_HASH: d->sysv_hash = dyn_pointer<uint32_t>(o, e->d_un.d_ptr); break;
      case DT_VERSYM: d->versym = dyn_pointer<ElfW(Versym)>(o, e->d_un.d_ptr); break;
      case DT_RELA: d->rela = dyn_pointer<ElfW(Rela)>(o, e->d_un.d_ptr); break;
      case DT_RELASZ: d->rela_bytes = e->d_un.d_val; break;
      case DT_JMPREL: d->jmprel = dyn_pointer<ElfW(Rela)>(o, e->d_un.d_ptr); break;
      case DT_PLTRELSZ: d->jmprel_bytes = e->d_un.d_val; break;
      case DT_SONAME:
        soname_offset = e->d_un.d_val;
        has_soname = true;
        break;
      default: break;
    }
  }
  if (!d->symtab || !d->strtab) return false;
  if (has_soname && soname_offset < d->strsz) d->soname = d->strtab + soname_offset;
  return true;
}

using IteratePhdr = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);

// libc's own definition, found through the loader's list of objects (_r_debug), which is plain memory:
// no function that a sanitizer intercepts is called on the way.
IteratePhdr libc_dl_iterate_phdr() {
  static IteratePhdr cached = nullptr;
  if (IteratePhdr p = __atomic_load_n(&cached, __ATOMIC_ACQUIRE)) return p;
  IteratePhdr found = nullptr;
  for (const link_map* m = _r_debug.r_map; m && !found; m = m->l_next) {
    Object o;
    o.bias = m->l_addr;
    o.name = m->l_name ? m->l_name : "";
    Dynamic d;
    if (!m->l_ld || !read_dynamic_at(o, m->l_ld, &d) || !d.soname || !same_prefix(d.soname, "libc.so.", 8)) continue;
    found = reinterpret_cast<IteratePhdr>(find_symbol(o, d, "dl_iterate_phdr"));
  }
  if (!found) found = &dl_iterate_phdr;
  __atomic_store_n(&cached, found, __ATOMIC_RELEASE);
  return found;
}

}  // namespace

int iterate_phdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  return libc_dl_iterate_phdr()(callback, data);
}

void* find_symbol(const Object& o, const Dynamic& d, const char* name) {
  if (d.gnu_hash) {
    const uint32_t nbuckets = d.gnu_hash[0], symoffset = d.gnu_hash[1], bloom_size = d.gnu_hash[2],
                   bloom_shift = d.gnu_hash[3];
    if (nbuckets == 0 || bloom_size == 0) return nullptr;
    auto* bloom = reinterpret_cast<const ElfW(Addr)*>(d.gnu_hash + 4);
    auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    const uint32_t h = gnu_hash(name);
    constexpr uint32_t kBits = sizeof(ElfW(Addr)) * 8;
    const ElfW(Addr) word = bloom[(h / kBits) % bloom_size];
    const ElfW(Addr) mask = (ElfW(Addr)(1) << (h % kBits)) | (ElfW(Addr)(1) << ((h >> bloom_shift) % kBits));
    if ((word & mask) != mask) return nullptr;
    uint32_t index = buckets[h % nbuckets];
    if (index < symoffset) return nullptr;
    for (;; ++index) {
      const uint32_t chained = chain[index - symoffset];
      if ((chained | 1) == (h | 1) && usable(o, d, index, name))
        return reinterpret_cast<void*>(o.bias + d.symtab[index].st_value);
      if (chained & 1) return nullptr;  // the end of this bucket's chain
    }
  }
  if (d.sysv_hash) {
    const uint32_t nbucket = d.sysv_hash[0];
    if (nbucket == 0) return nullptr;
    const uint32_t* bucket = d.sysv_hash + 2;
    const uint32_t* chain = bucket + nbucket;
    for (uint32_t index = bucket[sysv_hash(name) % nbucket]; index != STN_UNDEF; index = chain[index])
      if (usable(o, d, index, name)) return reinterpret_cast<void*>(o.bias + d.symtab[index].st_value);
  }
  return nullptr;
}

bool contains(const Object& o, uintptr_t address) {
  for (uint16_t i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& p = o.phdr[i];
    if (p.p_type != PT_LOAD) continue;
    const uintptr_t start = o.bias + p.p_vaddr;
    if (address >= start && address - start < p.p_memsz) return true;
  }
  return false;
}

bool mapped_span(const Object& o, uintptr_t* begin, uintptr_t* end) {
  uintptr_t b = UINTPTR_MAX, e = 0;
  for (uint16_t i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& p = o.phdr[i];
    if (p.p_type != PT_LOAD) continue;
    b = std::min<uintptr_t>(b, o.bias + p.p_vaddr);
    e = std::max<uintptr_t>(e, o.bias + p.p_vaddr + p.p_memsz);
  }
  if (e <= b) return false;
  *begin = b;
  *end = e;
  return true;
}

bool unwind_data_of(uintptr_t address, uintptr_t* map_start, uintptr_t* map_end, const void** eh_frame) {
  Object o;
  if (!object_containing(address, &o) || !mapped_span(o, map_start, map_end)) return false;
  *eh_frame = nullptr;
  for (uint16_t i = 0; i < o.phnum; ++i)
    if (o.phdr[i].p_type == PT_GNU_EH_FRAME) *eh_frame = reinterpret_cast<const void*>(o.bias + o.phdr[i].p_vaddr);
  return true;
}

void load_counts(uint64_t* adds, uint64_t* subs) {
  struct Counts {
    uint64_t adds = 0, subs = 0;
  } counts;
  iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        auto* c = static_cast<Counts*>(data);
        // The counters exist since glibc 2.4; `size` says whether this loader filled them in.
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
          c->adds = info->dlpi_adds;
          c->subs = info->dlpi_subs;
        }
        return 1;  // the counters are the same in every entry: one is enough
      },
      &counts);
  *adds = counts.adds;
  *subs = counts.subs;
}

bool object_containing(uintptr_t address, Object* out) {
  return for_each_object([&](const Object& o) {
    if (!contains(o, address)) return false;
    *out = o;
    return true;
  });
}

void* find_next(uintptr_t caller, const char* name) {
  bool after_caller = false;
  void* found = nullptr;
  for_each_object([&](const Object& o) {
    if (!after_caller) {
      after_caller = contains(o, caller);
      return false;
    }
    Dynamic d;
    if (read_dynamic(o, &d)) found = find_symbol(o, d, name);
    return found != nullptr;
  });
  return found;
}

namespace {

// "libcudart.so.13" and "libcudart.so.12" are one family: the part up to and including ".so".
size_t family_length(const char* soname) {
  const char* so = find_so(soname);
  return so ? size_t(so - soname) + 3 : length(soname);
}

}  // namespace

bool other_version_of(const char* soname, const char* candidate) {
  if (!candidate || same_string(soname, candidate)) return false;
  const size_t n = family_length(soname);
  return family_length(candidate) == n && same_prefix(soname, candidate, n);
}

void* find_in_library(const char* soname, uintptr_t caller, const char* name) {
  void* in_library = nullptr;
  for_each_object([&](const Object& o) {
    Dynamic d;
    if (!read_dynamic(o, &d) || !d.soname || !same_string(d.soname, soname)) return false;
    in_library = find_symbol(o, d, name);
    return true;
  });
  if (in_library) return in_library;
  // Something else the program loaded provides it (a library linked against one of cuDNN's
  // sub-libraries, a renamed build): the first definition after the caller, as RTLD_NEXT would find
  // in the global scope, but also among objects loaded with RTLD_LOCAL. Never another major version
  // of the library itself: its prototypes may differ from the ones the wrapper was built with.
  bool after_caller = false;
  void* found = nullptr;
  for_each_object([&](const Object& o) {
    if (!after_caller) {
      after_caller = contains(o, caller);
      return false;
    }
    Dynamic d;
    if (!read_dynamic(o, &d) || other_version_of(soname, d.soname)) return false;
    found = find_symbol(o, d, name);
    return found != nullptr;
  });
  return found;
}

void* find_in_other_version(const char* soname, const char* name) {
  void* found = nullptr;
  for_each_object([&](const Object& o) {
    Dynamic d;
    if (!read_dynamic(o, &d) || !other_version_of(soname, d.soname)) return false;
    found = find_symbol(o, d, name);
    return found != nullptr;
  });
  return found;
}

const char* soname_of(uintptr_t address) {
  const char* soname = nullptr;
  for_each_object([&](const Object& o) {
    if (!contains(o, address)) return false;
    Dynamic d;
    if (read_dynamic(o, &d)) soname = d.soname;
    return true;
  });
  return soname;
}

}  // namespace cutrace::preload::elf
