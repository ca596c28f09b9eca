// Handing a command over to the Python package, in place of this process.
#include "common/python_handoff.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/commands.h"

namespace cutrace::cli {
namespace {

// This executable ("" when /proc does not say).
std::string executable_path() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return {};
  return std::string(path, size_t(n));
}

// The directory of this executable ("" when /proc does not say).
std::string executable_dir() {
  const std::string p = executable_path();
  return p.substr(0, p.rfind('/'));
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

// The package and its library are those of the interpreter that ran the pip-installed `cutrace`
// command, or are the checkout's python/ and the build's lib/ (a build tree). $CUTRACE_PYTHON chooses
// the interpreter.
int run_python_module(const char* module, const char* command, const char* what, int argc, char** argv) {
  const std::string here = executable_dir();
  std::string python = "python3";
  if (const char* given = std::getenv("CUTRACE_PYTHON"); given && *given) python = given;
  else if (const char* package = std::getenv(kPackagePythonEnvVar); package && *package) python = package;
  else if (!here.empty() && is_file(here + "/python3")) python = here + "/python3";
  // A build tree: the library in the build's lib/, the package in the checkout.
  const bool build_tree = !here.empty() && is_file(here + "/../lib/libcutrace-tables.so");
  if (build_tree && !std::getenv("CUTRACE_TABLES_LIBRARY"))
    ::setenv("CUTRACE_TABLES_LIBRARY", (here + "/../lib/libcutrace-tables.so").c_str(), 1);
#ifdef CUTRACE_SOURCE_PYTHON_DIR
  if (build_tree && is_file(std::string(CUTRACE_SOURCE_PYTHON_DIR) + "/cutrace/__init__.py")) {
    const char* path = std::getenv("PYTHONPATH");
    const std::string joined = std::string(CUTRACE_SOURCE_PYTHON_DIR) + (path && *path ? std::string(":") + path : "");
    ::setenv("PYTHONPATH", joined.c_str(), 1);
  }
#endif
  // The package runs this same executable for what the C++ side does (cutrace view's export).
  if (const std::string self = executable_path(); !self.empty()) ::setenv("CUTRACE_EXE", self.c_str(), 1);
  std::vector<char*> args = {python.data(), const_cast<char*>("-m"), const_cast<char*>(module)};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp(python.c_str(), args.data());
  std::fprintf(stderr, "cutrace %s: %s by Python, and %s cannot be run (%s); install Python 3 or set CUTRACE_PYTHON.\n",
               command, what, python.c_str(), std::strerror(errno));
  return kExitFailure;
}

int recipe_main(int argc, char** argv) { return run_python_module("cutrace", "recipe", "recipes are run", argc, argv); }

int analyze_main(int argc, char** argv) {
  return run_python_module("cutrace", "analyze", "the rules are run", argc, argv);
}

int view_main(int argc, char** argv) { return run_python_module("cutrace", "view", "traces are served", argc, argv); }

}  // namespace cutrace::cli
