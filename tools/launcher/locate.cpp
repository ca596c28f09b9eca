#include "launcher/locate.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#ifndef CUTRACE_INSTALL_LIBDIR
#define CUTRACE_INSTALL_LIBDIR "lib"
#endif
#ifndef CUTRACE_INSTALL_LIBEXECDIR
#define CUTRACE_INSTALL_LIBEXECDIR "libexec"
#endif

namespace cutrace::launcher {
namespace {

UsageError failure(int exit_code, const std::string& message) {
  return UsageError{exit_code, "cutrace profile: " + message + "."};
}

enum class Candidate { kMissing, kExecutable, kNotExecutable };

Candidate check_executable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno == EACCES ? Candidate::kNotExecutable : Candidate::kMissing;
  if (!S_ISREG(st.st_mode)) return Candidate::kNotExecutable;
  return access(path.c_str(), X_OK) == 0 ? Candidate::kExecutable : Candidate::kNotExecutable;
}

// Joins an install directory to `exe_dir/..`; an absolute install directory is used as it is.
std::string under_prefix(const std::string& exe_dir, const std::string& install_dir) {
  std::filesystem::path dir(install_dir);
  if (dir.is_absolute()) return dir.lexically_normal().string();
  return (std::filesystem::path(exe_dir) / ".." / dir).lexically_normal().string();
}

std::string absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved)) return resolved;
  return std::filesystem::absolute(path).lexically_normal().string();
}

void add_unique(std::vector<std::string>* list, std::string path) {
  for (const auto& existing : *list)
    if (existing == path) return;
  list->push_back(std::move(path));
}

bool find_helper(const char* what, const char* env_var, const std::vector<std::string>& candidates, bool need_exec,
                 std::string* path, UsageError* error) {
  auto usable = [&](const std::string& p) {
    return need_exec ? check_executable(p) == Candidate::kExecutable : access(p.c_str(), R_OK) == 0;
  };
  if (const char* override_path = std::getenv(env_var); override_path && *override_path) {
    if (!usable(override_path)) {
      *error = failure(kExitSetupFailed, std::string(env_var) + " names " + override_path + ", which is not " +
                                             (need_exec ? "an executable file" : "a readable file") + "; point it at " +
                                             what + " or unset it");
      return false;
    }
    *path = absolute(override_path);
    return true;
  }
  for (const auto& candidate : candidates) {
    if (usable(candidate)) {
      *path = absolute(candidate);
      return true;
    }
  }
  std::string looked;
  for (const auto& candidate : candidates) looked += (looked.empty() ? "" : ", ") + candidate;
  *error = failure(kExitSetupFailed, std::string("cannot find ") + what + " (looked at " + looked +
                                         "); reinstall cutrace or set " + env_var + " to its path");
  return false;
}

}  // namespace

bool find_command(const std::string& name, const char* path_env, std::string* resolved, UsageError* error) {
  if (name.empty()) {
    *error = failure(kExitCommandNotFound, "the command is an empty string; give the program to run");
    return false;
  }
  if (name.find('/') != std::string::npos) {
    switch (check_executable(name)) {
      case Candidate::kExecutable:
        *resolved = name;
        return true;
      case Candidate::kNotExecutable:
        *error = failure(kExitNotExecutable, name + " is not an executable file; check its permissions");
        return false;
      case Candidate::kMissing:
        *error = failure(kExitCommandNotFound, name + " does not exist; check the path");
        return false;
    }
  }
  // glibc's execvp uses this search path when PATH is unset.
  std::string path = path_env ? path_env : "/bin:/usr/bin";
  bool found_unusable = false;
  size_t start = 0;
  while (true) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = dir.empty() ? name : dir + (dir.back() == '/' ? "" : "/") + name;
    switch (check_executable(candidate)) {
      case Candidate::kExecutable:
        *resolved = candidate;
        return true;
      case Candidate::kNotExecutable:
        found_unusable = true;
        break;
      case Candidate::kMissing:
        break;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (found_unusable) {
    *error =
        failure(kExitNotExecutable, "'" + name + "' was found in PATH but is not executable; check its permissions");
  } else {
    *error = failure(kExitCommandNotFound, "command '" + name + "' not found; check its spelling or PATH");
  }
  return false;
}

std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

std::vector<std::string> preload_candidates(const std::string& exe_dir) {
  std::vector<std::string> list;
  add_unique(&list, under_prefix(exe_dir, "lib") + "/" + kPreloadFileName);
  add_unique(&list, under_prefix(exe_dir, CUTRACE_INSTALL_LIBDIR) + "/" + kPreloadFileName);
  add_unique(&list, under_prefix(exe_dir, "lib/cutrace") + "/" + kPreloadFileName);
  add_unique(&list, under_prefix(exe_dir, std::string(CUTRACE_INSTALL_LIBDIR) + "/cutrace") + "/" + kPreloadFileName);
  return list;
}

std::vector<std::string> recorder_candidates(const std::string& exe_dir) {
  std::vector<std::string> list;
  add_unique(&list, std::filesystem::path(exe_dir).lexically_normal().string() + "/" + kRecorderFileName);
  add_unique(&list, under_prefix(exe_dir, "libexec/cutrace") + "/" + kRecorderFileName);
  add_unique(&list,
             under_prefix(exe_dir, std::string(CUTRACE_INSTALL_LIBEXECDIR) + "/cutrace") + "/" + kRecorderFileName);
  return list;
}

bool find_preload(const std::string& exe_dir, std::string* path, UsageError* error) {
  if (!find_helper(kPreloadFileName, kPreloadEnvVar, preload_candidates(exe_dir), false, path, error)) return false;
  // The dynamic loader splits LD_PRELOAD at spaces and colons, so such a path cannot be passed on.
  if (path->find_first_of(" :\t\n") != std::string::npos) {
    *error =
        failure(kExitSetupFailed,
                "the preload library's path " + *path +
                    " contains a space or colon, which LD_PRELOAD cannot carry; install cutrace elsewhere or set " +
                    kPreloadEnvVar);
    return false;
  }
  return true;
}

bool find_recorder(const std::string& exe_dir, std::string* path, UsageError* error) {
  return find_helper(kRecorderFileName, kRecorderEnvVar, recorder_candidates(exe_dir), true, path, error);
}

}  // namespace cutrace::launcher
