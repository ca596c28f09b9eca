#include "model/symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "reader/decode.h"

namespace cutrace::model {
namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

using reader::demangle;

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
    return "python function " + reader::hex(frame.function) + " (line " + std::to_string(abi::python_frame_line(frame)) + ")";
  return it->second.name + " (" + base_name(it->second.file) + ":" + std::to_string(abi::python_frame_line(frame)) + ")";
}

std::vector<std::string> python_stack(const reader::Process& process, const abi::PythonFrame* frames, uint32_t count) {
  std::vector<std::string> named;
  for (uint32_t i = 0; i < count; ++i) named.push_back(format_python_frame(process, frames[i]));
  return named;
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

namespace {

// Where to look for a module's file: the path the trace recorded, then in each directory of the
// symbol path the file's name, the recorded path below it (a copy of the traced machine's tree) and
// the build-id's debug file (.build-id/ab/cdef....debug).
std::vector<std::string> candidate_paths(const reader::Module& m, const std::vector<std::string>& search) {
  std::vector<std::string> paths{m.path};
  if (m.build_id.empty()) return paths;  // nothing would tell another copy's build from this one
  std::string hex_id;
  for (unsigned char c : m.build_id) {
    static constexpr char kDigits[] = "0123456789abcdef";
    hex_id += kDigits[c >> 4];
    hex_id += kDigits[c & 15];
  }
  for (const std::string& dir : search) {
    paths.push_back(dir + "/" + base_name(m.path));
    paths.push_back(dir + (m.path.empty() || m.path[0] != '/' ? "/" : "") + m.path);
    if (hex_id.size() > 2) paths.push_back(dir + "/.build-id/" + hex_id.substr(0, 2) + "/" + hex_id.substr(2) + ".debug");
  }
  return paths;
}

std::vector<std::string>& default_symbol_path() {
  static std::vector<std::string> path = [] {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("CUTRACE_SYMBOL_PATH")) dirs = split_symbol_path(env);
    return dirs;
  }();
  return path;
}

}  // namespace

void set_symbol_path(const std::vector<std::string>& dirs) { default_symbol_path() = dirs; }

std::vector<std::string> split_symbol_path(const std::string& value) {
  std::vector<std::string> dirs;
  for (size_t from = 0; from <= value.size();) {
    const size_t colon = std::min(value.find(':', from), value.size());
    if (colon > from) dirs.push_back(value.substr(from, colon - from));
    from = colon + 1;
  }
  return dirs;
}

Symbolizer::Symbolizer() : search_path_(default_symbol_path()) {}
Symbolizer::~Symbolizer() = default;

namespace {

enum class Opened { kOk, kMissing, kNotElf, kOtherBuild };

// Opens `path` as module `m` into `file`: kOk only when it is an ELF file with the build-id the trace
// recorded (or the trace recorded none).
Opened open_module(const std::string& path, const reader::Module& m, Dwfl*& dwfl, Dwfl_Module*& mod,
                   std::string* why) {
  // Non-blocking, and only a regular file: a FIFO or device named like the library must not stall
  // the tool.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = fd < 0 ? std::string(std::strerror(errno)) : "not a regular file";
    if (fd >= 0) ::close(fd);
    return Opened::kMissing;
  }
  dwfl = dwfl_begin(&kOfflineCallbacks);
  // Placed at 0: module addresses are the file's own link-time addresses, which is what a frame's
  // offset from the load bias is. The descriptor is the library's from here on.
  mod = dwfl ? dwfl_report_elf(dwfl, base_name(m.path).c_str(), path.c_str(), fd, 0, false) : nullptr;
  if (dwfl) dwfl_report_end(dwfl, nullptr, nullptr);
  if (mod == nullptr) {
    *why = dwfl_errmsg(-1);
    if (!dwfl) ::close(fd);
    return Opened::kNotElf;
  }
  if (!m.build_id.empty()) {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    const int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (n <= 0 || size_t(n) != m.build_id.size() || std::memcmp(bits, m.build_id.data(), size_t(n)) != 0)
      return Opened::kOtherBuild;
  }
  return Opened::kOk;
}

}  // namespace

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
  Opened first = Opened::kMissing;
  std::string first_why;
  const std::vector<std::string> paths = candidate_paths(m, search_path_);
  for (size_t i = 0; i < paths.size(); ++i) {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* mod = nullptr;
    std::string why;
    const Opened opened = open_module(paths[i], m, dwfl, mod, &why);
    if (opened == Opened::kOk) {
      file->dwfl = dwfl;
      file->mod = mod;
      file->path = paths[i];
      return *modules_.emplace(key, std::move(file)).first->second;
    }
    if (dwfl) dwfl_end(dwfl);
    if (i == 0) {
      first = opened;
      first_why = why;
    }
  }
  // The kernel's vDSO is no file: its frames stay module+offset, which is all there is to say.
  if (m.path.rfind("linux-vdso.so", 0) == 0 || m.path.rfind("linux-gate.so", 0) == 0)
    return *modules_.emplace(key, std::move(file)).first->second;
  const std::string elsewhere = search_path_.empty() ? "" : " nor anywhere in the symbol path";
  switch (first) {
    case Opened::kMissing:
      note(": " + first_why + elsewhere +
               "; its frames are shown as module+offset (symbolise where the same build is at that path, or give a "
               "copy's directory with --symbol-path)",
           ": " + first_why + elsewhere +
               "; their frames are shown as module+offset (symbolise where the same builds are at those paths, or "
               "give a directory of copies with --symbol-path)",
           m.path);
      break;
    case Opened::kNotElf:
      note(": not a readable ELF file (" + first_why + ")" + elsewhere + "; its frames are shown as module+offset",
           ": not readable ELF files (" + first_why + ")" + elsewhere + "; their frames are shown as module+offset",
           m.path);
      break;
    default: {
      const std::string no_copy = search_path_.empty() ? "" : ", and no copy in the symbol path matches";
      note(": not the build the trace recorded (its GNU build-id differs): rebuilt or replaced since" + no_copy +
               "; its frames are shown as module+offset rather than named from another build",
           ": not the builds the trace recorded (their GNU build-ids differ): rebuilt or replaced since" + no_copy +
               "; their frames are shown as module+offset rather than named from other builds",
           m.path);
      break;
    }
  }
  return *modules_.emplace(key, std::move(file)).first->second;
}

std::vector<std::string> Symbolizer::named_stack(const reader::Process& process, const uint64_t* frames,
                                                uint32_t count, uint64_t time, bool first_exact) {
  std::vector<std::string> named;
  for (uint32_t i = 0; i < count; ++i) {
    const ResolvedAddress& where = resolve(process, frames[i], time, first_exact && i == 0);
    if (where.frames.empty()) named.push_back(raw_frame(where));
    for (const SourceFrame& f : where.frames) named.push_back(format_frame(where, &f) + (f.inlined ? " [inlined]" : ""));
  }
  return named;
}

std::vector<std::string> Symbolizer::mixed_stack(const reader::Process& process, const uint64_t* frames,
                                                uint32_t count, uint64_t time, const abi::PythonFrame* python,
                                                uint32_t python_count) {
  bool marked = false;
  for (uint32_t i = 0; i < python_count; ++i) marked |= (python[i].line & abi::kPythonFrameEntry) != 0;
  if (!marked) return {};
  std::vector<std::string> mixed;
  uint32_t next_python = 0;
  bool placed = false;
  for (uint32_t i = 0; i < count; ++i) {
    const ResolvedAddress& where = resolve(process, frames[i], time);
    // The eval loop's own frame (or its part the compiler moved out, "_PyEval_EvalFrameDefault.cold"); the
    // functions inlined into it at the call stay.
    const std::string_view holder = where.frames.empty() ? std::string_view() : where.frames.back().function;
    constexpr std::string_view kEvalLoop = "_PyEval_EvalFrameDefault";
    const bool eval_loop = holder.substr(0, kEvalLoop.size()) == kEvalLoop &&
                           (holder.size() == kEvalLoop.size() || holder[kEvalLoop.size()] == '.');
    if (eval_loop && next_python < python_count) {
      placed = true;
      for (size_t k = 0; k + 1 < where.frames.size(); ++k)
        mixed.push_back(format_frame(where, &where.frames[k]) + " [inlined]");
      bool entry = false;
      while (next_python < python_count && !entry) {
        entry = (python[next_python].line & abi::kPythonFrameEntry) != 0;
        mixed.push_back(format_python_frame(process, python[next_python++]));
      }
      continue;
    }
    if (where.frames.empty()) mixed.push_back(raw_frame(where));
    for (const SourceFrame& f : where.frames) mixed.push_back(format_frame(where, &f) + (f.inlined ? " [inlined]" : ""));
  }
  if (!placed) return {};
  while (next_python < python_count) mixed.push_back(format_python_frame(process, python[next_python++]));
  return mixed;
}

const ResolvedAddress& Symbolizer::resolve(const reader::Process& process, uint64_t address, uint64_t time,
                                           bool exact) {
  const reader::Module* m = process.module_at(address, time);
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
      note(": no symbol or debug information covers some of its frames (stripped, and no separate debug file "
           "found); those are shown as module+offset",
           " have frames no symbol or debug information covers (stripped, and no separate debug file found); those "
           "are shown as module+offset",
           file.path);
    }
  }
  return r;
}

void Symbolizer::note(std::string one, std::string many, const std::string& path) {
  for (NoteGroup& g : notes_) {
    if (g.one == one) {
      g.paths.push_back(path);
      return;
    }
  }
  notes_.push_back(NoteGroup{std::move(one), std::move(many), {path}});
}

std::vector<std::string> Symbolizer::notes() const {
  std::vector<std::string> lines;
  for (const NoteGroup& g : notes_) {
    if (g.paths.size() == 1) {
      lines.push_back(g.paths[0] + g.one);
      continue;
    }
    std::string line = std::to_string(g.paths.size()) + " modules" + g.many + ":";
    for (size_t i = 0; i < g.paths.size(); ++i) line += (i ? ", " : " ") + g.paths[i];
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace cutrace::model
