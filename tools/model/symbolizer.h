// Names the return addresses of a trace's backtraces, from the traced binaries, with elfutils' libdwfl:
// the function (demangled), the source file and line, and the functions inlined at the address, each
// a frame of its own. Modules are read from the paths the trace recorded and must carry the build-id
// it recorded; a missing file, another build of it, or an address no symbol covers leaves the frame as
// module+offset (what addr2line takes), with a note per module, and never a guessed name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/trace_reader.h"

namespace cutrace::model {

struct SourceFrame {
  std::string function;  // demangled; empty when no symbol covers the address
  std::string file;      // as the debug information names it; empty when it has no line for it
  uint32_t line = 0;
  bool inlined = false;  // inlined into the frame that follows
};

// One return address, resolved.
struct ResolvedAddress {
  std::string module;   // file name of the module, or empty for an address in no reported module
  uint64_t offset = 0;  // in the module (link-time address), or the address itself
  // Innermost first: the functions inlined at the call, then the function that holds it. Empty when
  // nothing is known beyond module+offset.
  std::vector<SourceFrame> frames;
};

// "function (file:line)", "function" or "module+0xoffset" (the raw form when nothing is known).
std::string format_frame(const ResolvedAddress& where, const SourceFrame* frame);
// The raw form: "module+0xoffset", or the address in hex.
std::string raw_frame(const ResolvedAddress& where);

// Directories where the tools also look for a module's file, by name, below its recorded path, or by
// build-id (a copy of the traced machine's binaries): --symbol-path, else $CUTRACE_SYMBOL_PATH
// (colon-separated). A copy is used only when its build-id is the recorded one.
void set_symbol_path(const std::vector<std::string>& dirs);
// "DIR:DIR..." as set_symbol_path takes it.
std::vector<std::string> split_symbol_path(const std::string& value);

// A Python frame as "function (file:line)", the names from the process's kPythonFunction strings; a
// function whose names the trace lacks reads "python function 0x<id>".
std::string format_python_frame(const reader::Process& process, const abi::PythonFrame& frame);
// Every Python frame of a call so, innermost first.
std::vector<std::string> python_stack(const reader::Process& process, const abi::PythonFrame* frames, uint32_t count);

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `address` is a frame of a stack of `process` taken at `time` (ns; it picks the object that was at
  // the address then): a return address (the call instruction is the byte before it), or with `exact`
  // the instruction itself (where a CPU sample found the thread). Cached per module and offset.
  const ResolvedAddress& resolve(const reader::Process& process, uint64_t address, uint64_t time, bool exact = false);

  // The frames of a stack as shown: "function (file:line)", " [inlined]" after a function inlined at
  // the call, or module+offset where nothing names it; innermost first. With `first_exact`, the first
  // frame is an instruction (a CPU sample's), the others return addresses.
  std::vector<std::string> named_stack(const reader::Process& process, const uint64_t* frames, uint32_t count,
                                       uint64_t time, bool first_exact = false);

  // The native frames of a call's stack with its Python frames in place of the frames of CPython's
  // eval loop (_PyEval_EvalFrameDefault) that ran them: each eval-loop frame, innermost first, takes the
  // Python frames up to the next one marked kPythonFrameEntry. Python frames left when the native stack
  // ends (its depth is capped) follow it. Empty when that cannot be determined: no Python frames, none
  // marked (a trace from before the marks), or no eval-loop frame named (a stripped interpreter).
  std::vector<std::string> mixed_stack(const reader::Process& process, const uint64_t* frames, uint32_t count,
                                       uint64_t time, const abi::PythonFrame* python, uint32_t python_count);

  // One line per module whose file could not be used ("FILE: not found, ..."), in the order met, then
  // one line for all the modules whose frames were not all named for want of symbols (stripped).
  std::vector<std::string> notes() const;

 private:
  struct ModuleFile;
  ModuleFile& module_file(const reader::Module& m);

  std::unordered_map<std::string, std::unique_ptr<ModuleFile>> modules_;  // by path, build-id and base
  // Modules whose frames stay module+offset, grouped by why: one note per group, not per module
  // (a trace read on another machine, or a system's stripped libraries, has dozens of them).
  struct NoteGroup {
    std::string one;   // the note for a single module: "<path><one>"
    std::string many;  // for several: "<count> modules<many>: <path>, <path>, ..."
    std::vector<std::string> paths;
  };
  void note(std::string one, std::string many, const std::string& path);
  std::vector<NoteGroup> notes_;
  std::vector<std::string> search_path_;
  ResolvedAddress unplaced_;
};

}  // namespace cutrace::model
