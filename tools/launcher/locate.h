// Finding the program to run and cutrace's own helper files.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace cutrace::launcher {

inline constexpr const char* kPreloadFileName = "libcutrace-preload.so";
// The OS runtime wrappers (-t osrt), always in the preload library's directory.
inline constexpr const char* kOsrtFileName = "libcutrace-osrt.so";
// The wrappers of CUDA 12's runtime and cuBLAS, in the preload library's directory where the build has
// them (CUTRACE_CUDA12).
inline constexpr const char* kCuda12FileName = "libcutrace-cuda12.so";
inline constexpr const char* kRecorderFileName = "cutrace-recorder";
// --pytorch's start-up hook (python/bootstrap/), a directory in the preload library's directory, and
// the variable that tells it what to annotate.
inline constexpr const char* kPytorchBootstrapDir = "cutrace-python";
inline constexpr const char* kPytorchEnvVar = "CUTRACE_PYTORCH";
inline constexpr const char* kPythonFunctionsEnvVar = "CUTRACE_PYTHON_FUNCTIONS";  // --python-functions-trace's file
inline constexpr const char* kPreloadEnvVar = "CUTRACE_PRELOAD_LIB";
inline constexpr const char* kRecorderEnvVar = "CUTRACE_RECORDER";

// Resolves `name` the way execvp would with `path_env` as PATH (nullptr: PATH unset, which execvp
// treats as "/bin:/usr/bin"): a name with a '/' is taken as it is; otherwise each PATH entry is tried
// in turn (an empty entry is the current directory), skipping entries where the file exists but cannot
// be executed. Fails with exit code 127 when nothing is found and 126 when only non-executable files
// (or directories) were.
bool find_command(const std::string& name, const char* path_env, std::string* resolved, UsageError* error);

// The directory of the running executable (from /proc/self/exe).
std::string executable_dir();

// The places looked at, in order, for the preload library and the recorder of an executable in
// `exe_dir`. The environment overrides are not part of these lists.
std::vector<std::string> preload_candidates(const std::string& exe_dir);
std::vector<std::string> recorder_candidates(const std::string& exe_dir);

// The environment override if set (it must exist), else the first candidate that exists. The result is
// an absolute path.
bool find_preload(const std::string& exe_dir, std::string* path, UsageError* error);
bool find_recorder(const std::string& exe_dir, std::string* path, UsageError* error);

}  // namespace cutrace::launcher
