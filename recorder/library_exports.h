// The functions a shared library file exports, read from its dynamic symbol table: what the recorder
// compares with the functions cutrace wraps, so that a CUDA library newer than the build (functions
// no wrapper exists for, whose calls cannot be recorded) is named in a warning rather than missed.
#pragma once

#include <string>
#include <vector>

namespace cutrace::recorder {

struct LibraryExports {
  std::string soname;                  // DT_SONAME; empty when the file has none
  std::vector<std::string> functions;  // defined, global or weak, default or protected visibility; sorted
};

// Reads a 64-bit little-endian ELF file. The path comes from a ring, so the file is read like any
// untrusted input: every offset and size is checked against the file, and a file that is not such a
// library gives false (with `error` saying why), never a crash.
bool read_library_exports(const std::string& path, LibraryExports* out, std::string* error);

}  // namespace cutrace::recorder
