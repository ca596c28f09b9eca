#include "recorder/library_exports.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cutrace::recorder {
namespace {

// A read-only mapping of the whole file, unmapped when it goes out of scope.
class MappedFile {
 public:
  bool open(const std::string& path, std::string* error) {
    // Non-blocking: a FIFO named like a library must not stall the recorder at the end of a run.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      *error = std::strerror(errno);
      return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < off_t(sizeof(Elf64_Ehdr))) {
      ::close(fd);
      *error = "not a regular file of ELF size";
      return false;
    }
    size_ = size_t(st.st_size);
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      *error = std::strerror(errno);
      return false;
    }
    data_ = static_cast<const uint8_t*>(p);
    return true;
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  // Whether [offset, offset + count * size) lies inside the file, without overflow.
  bool holds(uint64_t offset, uint64_t count, uint64_t size) const {
    if (offset > size_ || (size && count > (size_ - offset) / size)) return false;
    return true;
  }
  template <class T>
  T at(uint64_t offset) const {
    T v;
    std::memcpy(&v, data_ + offset, sizeof v);
    return v;
  }
  // The NUL-terminated string at `offset` of a string table [table, table + table_size), or nullptr.
  const char* string(uint64_t table, uint64_t table_size, uint64_t offset) const {
    if (!holds(table, 1, table_size) || offset >= table_size) return nullptr;
    const char* s = reinterpret_cast<const char*>(data_ + table + offset);
    return std::memchr(s, '\0', table_size - offset) ? s : nullptr;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

bool read_library_exports(const std::string& path, LibraryExports* out, std::string* error) {
  out->soname.clear();
  out->functions.clear();
  MappedFile f;
  if (!f.open(path, error)) return false;
  const auto eh = f.at<Elf64_Ehdr>(0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !f.holds(eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr))) {
    *error = "not a 64-bit little-endian ELF file with section headers";
    return false;
  }
  auto section = [&](uint32_t index) { return f.at<Elf64_Shdr>(eh.e_shoff + uint64_t(index) * sizeof(Elf64_Shdr)); };
  bool found_symbols = false;
  for (uint32_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = section(i);
    if ((sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_DYNAMIC) || sh.sh_link >= eh.e_shnum) continue;
    const Elf64_Shdr strings = section(sh.sh_link);
    if (strings.sh_type != SHT_STRTAB || !f.holds(strings.sh_offset, 1, strings.sh_size)) continue;
    if (sh.sh_type == SHT_DYNAMIC) {
      if (!f.holds(sh.sh_offset, sh.sh_size / sizeof(Elf64_Dyn), sizeof(Elf64_Dyn))) continue;
      for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Dyn); ++k) {
        const auto d = f.at<Elf64_Dyn>(sh.sh_offset + k * sizeof(Elf64_Dyn));
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag != DT_SONAME) continue;
        if (const char* s = f.string(strings.sh_offset, strings.sh_size, d.d_un.d_val)) out->soname = s;
      }
      continue;
    }
    const uint64_t count = sh.sh_size / sizeof(Elf64_Sym);
    if (!f.holds(sh.sh_offset, count, sizeof(Elf64_Sym))) continue;
    found_symbols = true;
    for (uint64_t k = 0; k < count; ++k) {
      const auto sym = f.at<Elf64_Sym>(sh.sh_offset + k * sizeof(Elf64_Sym));
      const unsigned type = ELF64_ST_TYPE(sym.st_info), bind = ELF64_ST_BIND(sym.st_info);
      const unsigned visibility = ELF64_ST_VISIBILITY(sym.st_other);
      if (sym.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
          (bind != STB_GLOBAL && bind != STB_WEAK) || (visibility != STV_DEFAULT && visibility != STV_PROTECTED))
        continue;
      if (const char* name = f.string(strings.sh_offset, strings.sh_size, sym.st_name); name && *name)
        out->functions.emplace_back(name);
    }
  }
  if (!found_symbols) {
    *error = "no dynamic symbol table";
    return false;
  }
  std::sort(out->functions.begin(), out->functions.end());
  out->functions.erase(std::unique(out->functions.begin(), out->functions.end()), out->functions.end());
  return true;
}

}  // namespace cutrace::recorder
