#include "report/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "reader/decode.h"

namespace cutrace::report {
namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string demangle(const char* name) {
  int status = 0;
  char* out = ::abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string result(out);
  std::free(out);
  return result;
}

// A DIE's name as a person wrote it: the demangled linkage name where there is one (a C++ function,
// qualified), else its plain name (C); through DW_AT_abstract_origin and DW_AT_specification, which
// an inlined instance and an out-of-line definition use.
std::string die_function_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
      if (const char* linkage = dwarf_formstring(&attr)) return demangle(linkage);
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* name = dwarf_formstring(&attr)) return name;
  }
  return {};
}

// The default search for separate debug files: beside the file, its .debug directory, /usr/lib/debug.
char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kOfflineCallbacks = {
    nullptr,  // find_elf: every module is reported with its file
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    &g_debuginfo_path,
};

}  // namespace

std::string raw_frame(const ResolvedAddress& where) {
  if (where.module.empty()) return reader::hex(where.offset);
  return where.module + "+" + reader::hex(where.offset);
}

std::string format_frame(const ResolvedAddress& where, const SourceFrame* frame) {
  if (frame == nullptr || frame->function.empty()) return raw_frame(where);
  std::string out = frame->function;
  if (!frame->file.empty()) out += " (" + base_name(frame->file) + ":" + std::to_string(frame->line) + ")";
  return out;
}

std::string format_python_frame(const reader::Process& process, const abi::PythonFrame& frame) {
  auto it = process.python_functions.find(frame.function);
  if (it == process.python_functions.end())
    return "python function " + reader::hex(frame.function) + " (line " + std::to_string(frame.line) + ")";
  return it->second.name + " (" + base_name(it->second.file) + ":" + std::to_string(frame.line) + ")";
}

struct Symbolizer::ModuleFile {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;  // null when the file cannot be used: frames stay module+offset
  std::string path;
  std::string name;
  bool noted_unnamed = false;
  std::unordered_map<uint64_t, ResolvedAddress> by_offset;

  ~ModuleFile() {
    if (dwfl) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Symbolizer::ModuleFile& Symbolizer::module_file(const reader::Module& m) {
  std::string key = m.path;
  key += '\0';
  key += m.build_id;
  key += '\0';
  key += std::to_string(m.base);
  auto it = modules_.find(key);
  if (it != modules_.end()) return *it->second;
  auto file = std::make_unique<ModuleFile>();
  file->path = m.path;
  file->name = base_name(m.path);
  // Non-blocking, and only a regular file: a FIFO or device named like the library must not stall
  // the tool.
  const int fd = ::open(m.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    notes_.push_back(m.path + ": " + (fd < 0 ? std::string(std::strerror(errno)) : "not a regular file") +
                     "; its frames are shown as module+offset (symbolise on the machine that ran the program, "
                     "or where the same build of it is at that path)");
    return *modules_.emplace(key, std::move(file)).first->second;
  }
  file->dwfl = dwfl_begin(&kOfflineCallbacks);
  // Placed at 0: module addresses are the file's own link-time addresses, which is what a frame's
  // offset from the load bias is. The descriptor is the library's from here on.
  Dwfl_Module* mod = file->dwfl ? dwfl_report_elf(file->dwfl, file->name.c_str(), m.path.c_str(), fd, 0, false) : nullptr;
  if (file->dwfl) dwfl_report_end(file->dwfl, nullptr, nullptr);
  if (mod == nullptr) {
    if (!file->dwfl) ::close(fd);
    notes_.push_back(m.path + ": not a readable ELF file (" + std::string(dwfl_errmsg(-1)) +
                     "); its frames are shown as module+offset");
  } else if (!m.build_id.empty()) {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    const int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (n <= 0 || size_t(n) != m.build_id.size() || std::memcmp(bits, m.build_id.data(), size_t(n)) != 0) {
      notes_.push_back(m.path + ": not the build the trace recorded (its GNU build-id differs): rebuilt or "
                       "replaced since; its frames are shown as module+offset rather than named from another build");
      mod = nullptr;
    }
  }
  file->mod = mod;
  return *modules_.emplace(key, std::move(file)).first->second;
}

const ResolvedAddress& Symbolizer::resolve(const reader::Process& process, uint64_t address, bool exact) {
  const reader::Module* m = process.module_at(address);
  if (m == nullptr) {
    unplaced_ = ResolvedAddress{{}, address, {}};
    return unplaced_;
  }
  ModuleFile& file = module_file(*m);
  const uint64_t offset = address - m->base;
  auto [it, added] = file.by_offset.try_emplace(offset | (exact ? uint64_t(1) << 63 : 0));
  ResolvedAddress& r = it->second;
  if (!added) return r;
  r.module = file.name;
  r.offset = offset;
  if (file.mod == nullptr || (offset == 0 && !exact)) return r;
  // A return address follows its call: the call instruction is the byte before it.
  const Dwarf_Addr pc = exact ? offset : offset - 1;

  std::string symbol;
  GElf_Sym sym{};
  GElf_Off into = 0;
  if (const char* name = dwfl_module_addrinfo(file.mod, pc, &into, &sym, nullptr, nullptr, nullptr)) {
    // Only a symbol that covers the address names it: in a stripped file the nearest exported symbol
    // before a static function is another function.
    if (sym.st_size != 0 ? into < sym.st_size : into == 0) {
      // A versioned dynamic symbol reads "name@@VERSION": the version is no part of the function's name.
      const char* at = std::strchr(name, '@');
      symbol = demangle(at ? std::string(name, at).c_str() : name);
    }
  }

  Dwarf_Addr bias = 0;
  if (Dwarf_Die* cu = dwfl_module_addrdie(file.mod, pc, &bias)) {
    std::string file_name;
    int line = 0;
    if (Dwfl_Line* l = dwfl_module_getsrc(file.mod, pc)) {
      if (const char* src = dwfl_lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr)) file_name = src;
    }
    Dwarf_Files* files = nullptr;
    size_t file_count = 0;
    if (dwarf_getsrcfiles(cu, &files, &file_count) != 0) files = nullptr;
    Dwarf_Die* scopes = nullptr;
    const int n = dwarf_getscopes(cu, pc - bias, &scopes);
    for (int i = 0; i < n; ++i) {
      const int tag = dwarf_tag(&scopes[i]);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
      SourceFrame frame{die_function_name(&scopes[i]), file_name, uint32_t(line > 0 ? line : 0),
                        tag == DW_TAG_inlined_subroutine};
      if (tag == DW_TAG_subprogram) {
        // The debug information names the function as written; a compiler's clone of it
        // (".constprop.0") is named after the original there. The symbol table serves where it has no name.
        if (frame.function.empty()) frame.function = symbol;
        r.frames.push_back(std::move(frame));
        break;
      }
      r.frames.push_back(std::move(frame));
      // The caller's location is where this instance was inlined.
      Dwarf_Attribute attr;
      Dwarf_Word value = 0;
      file_name.clear();
      line = 0;
      if (files && dwarf_attr(&scopes[i], DW_AT_call_file, &attr) && dwarf_formudata(&attr, &value) == 0) {
        if (const char* src = dwarf_filesrc(files, value, nullptr, nullptr)) file_name = src;
      }
      if (dwarf_attr(&scopes[i], DW_AT_call_line, &attr) && dwarf_formudata(&attr, &value) == 0) line = int(value);
    }
    std::free(scopes);
    // Debug information without a subprogram for the address (assembly): the symbol, with the line.
    if ((r.frames.empty() || r.frames.back().inlined) && !symbol.empty())
      r.frames.push_back(SourceFrame{symbol, file_name, uint32_t(line > 0 ? line : 0), false});
  } else if (!symbol.empty()) {
    r.frames.push_back(SourceFrame{symbol, {}, 0, false});
  }
  if (r.frames.empty() || r.frames.back().function.empty()) {
    r.frames.clear();
    if (!file.noted_unnamed) {
      file.noted_unnamed = true;
      notes_.push_back(file.path + ": no symbol or debug information covers some of its frames (stripped, "
                       "and no separate debug file found); those are shown as module+offset");
    }
  }
  return r;
}

}  // namespace cutrace::report
