// read_library_exports: what a CUDA library file exports, from an untrusted path. Checked against nm's
// reading of the real runtime, and on files that are not libraries or are cut short.
#include "recorder/library_exports.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;
using cutrace::recorder::LibraryExports;
using cutrace::recorder::read_library_exports;

std::set<std::string> nm_functions(const std::string& path) {
  std::set<std::string> out;
  FILE* p = popen(("nm -D --defined-only '" + path + "'").c_str(), "r");
  if (!p) return out;
  char line[1024];
  while (std::fgets(line, sizeof line, p)) {
    char kind = 0, name[1000];
    if (std::sscanf(line, "%*s %c %999s", &kind, name) != 2 || (kind != 'T' && kind != 'W' && kind != 'i')) continue;
    std::string n = name;
    out.insert(n.substr(0, n.find('@')));
  }
  pclose(p);
  return out;
}

class LibraryExportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cutrace-exports-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LibraryExportsTest, TheRealRuntimeExportsWhatNmLists) {
  LibraryExports e;
  std::string error;
  ASSERT_TRUE(read_library_exports(CUTRACE_TEST_CUDART, &e, &error)) << error;
  EXPECT_EQ(e.soname, "libcudart.so." + std::to_string(CUTRACE_TEST_CUDA_MAJOR));
  const std::set<std::string> expected = nm_functions(CUTRACE_TEST_CUDART);
  ASSERT_GT(expected.size(), 100u);
  EXPECT_EQ(std::set<std::string>(e.functions.begin(), e.functions.end()), expected);
}

// The generator and scripts/coverage.py read exports with the Python reader (preload/gen/elf_symbols.py,
// pyelftools): the two readers must agree, or the recorder would warn of functions the build wrapped.
TEST_F(LibraryExportsTest, ThePythonReaderListsTheSameSonameAndFunctions) {
  LibraryExports e;
  std::string error;
  ASSERT_TRUE(read_library_exports(CUTRACE_TEST_CUDART, &e, &error)) << error;
  FILE* p = popen((std::string("'") + CUTRACE_TEST_PYTHON + "' '" + CUTRACE_TEST_ELF_READER + "' '" +
                   CUTRACE_TEST_CUDART + "'")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  std::string soname;
  std::set<std::string> functions;
  char line[1024];
  while (std::fgets(line, sizeof line, p)) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.rfind("soname ", 0) == 0) soname = text.substr(7);
    else functions.insert(text);
  }
  ASSERT_EQ(pclose(p), 0);
  EXPECT_EQ(soname, e.soname);
  ASSERT_GT(functions.size(), 100u);
  EXPECT_EQ(functions, std::set<std::string>(e.functions.begin(), e.functions.end()));
}

TEST_F(LibraryExportsTest, WhatIsNoLibraryIsRefusedWithAReason) {
  LibraryExports e;
  std::string error;
  EXPECT_FALSE(read_library_exports((dir_ / "missing.so").string(), &e, &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  std::ofstream(dir_ / "text.so") << "not an ELF file, but long enough to hold an ELF header's 64 bytes............";
  error.clear();
  EXPECT_FALSE(read_library_exports((dir_ / "text.so").string(), &e, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(read_library_exports(dir_.string(), &e, &error));  // a directory
  // A FIFO with a library's name: refused at once, not waited on.
  ASSERT_EQ(mkfifo((dir_ / "libcudart.so.13").c_str(), 0600), 0);
  EXPECT_FALSE(read_library_exports((dir_ / "libcudart.so.13").string(), &e, &error));
}

// Every prefix of a real library, and the library with bytes overwritten throughout: never a crash or
// a read outside the file (the sanitizer builds check), and a whole library still reads as one.
TEST_F(LibraryExportsTest, CutAndDamagedFilesNeverCrash) {
  std::ifstream in(CUTRACE_TEST_CUDART, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 4096u);
  LibraryExports e;
  std::string error;
  const fs::path cut = dir_ / "cut.so";
  for (size_t size : {size_t(0), size_t(63), size_t(64), size_t(4096), bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(size));
    read_library_exports(cut.string(), &e, &error);  // true or false, but no crash
  }
  std::string damaged = bytes;
  for (size_t i = 0x40; i < damaged.size(); i += 997) damaged[i] = char(0xff);
  std::ofstream(cut, std::ios::binary | std::ios::trunc).write(damaged.data(), std::streamsize(damaged.size()));
  read_library_exports(cut.string(), &e, &error);
  std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  EXPECT_TRUE(read_library_exports(cut.string(), &e, &error)) << error;
}

}  // namespace
