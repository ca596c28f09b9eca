#include "launcher/output_path.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace cutrace::launcher {
namespace {

UsageError failure(int exit_code, const std::string& message) {
  return UsageError{exit_code, "cutrace profile: " + message + "."};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string host_name() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

// 0: exists; ENOENT: free; anything else: cannot tell.
int probe_exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? 0 : errno;
}

std::string parent_of(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "/" : parent;
}

}  // namespace

bool expand_output_pattern(const std::string& pattern, pid_t pid, std::string* expanded, UsageError* error) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i + 1 >= pattern.size()) {
      *error = failure(kExitUsage, "-o ends with a lone %; write %% for a literal %");
      return false;
    }
    char code = pattern[++i];
    switch (code) {
      case '%':
        out += '%';
        break;
      case 'h':
        out += host_name();
        break;
      case 'p':
        out += std::to_string(pid);
        break;
      case 'q': {
        size_t close = pattern.find('}', i + 1);
        if (i + 1 >= pattern.size() || pattern[i + 1] != '{' || close == std::string::npos || close == i + 2) {
          *error = failure(kExitUsage, "-o has %q without a variable name; write %q{VAR}");
          return false;
        }
        std::string name = pattern.substr(i + 2, close - i - 2);
        const char* value = std::getenv(name.c_str());
        if (!value) {
          *error = failure(kExitSetupFailed, "-o uses %q{" + name + "} but the environment variable " + name +
                                                 " is not set; set it or change -o");
          return false;
        }
        out += value;
        i = close;
        break;
      }
      default:
        *error = failure(kExitUsage, std::string("-o contains %") + code +
                                         ", which cutrace does not know; use %q{VAR}, %h, %p or %%");
        return false;
    }
  }
  *expanded = std::move(out);
  return true;
}

std::string with_trace_extension(const std::string& name) {
  return ends_with(name, kTraceExtension) ? name : name + kTraceExtension;
}

std::string first_free_report_name(const std::string& dir) {
  std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (unsigned n = 1;; ++n) {
    std::string candidate = base + "report" + std::to_string(n) + kTraceExtension;
    int file = probe_exists(candidate);
    int part = probe_exists(candidate + kPartialSuffix);
    // An unreadable directory answers neither "exists" nor "free"; the writability check that follows
    // reports it, so stop here instead of probing forever.
    if ((file != 0 && file != ENOENT) || (part != 0 && part != ENOENT)) return candidate;
    if (file == ENOENT && part == ENOENT) return candidate;
  }
}

bool make_directories(const std::string& dir, std::vector<std::string>* created, std::string* error) {
  std::filesystem::path target = std::filesystem::path(dir).lexically_normal();
  std::filesystem::path current;
  for (const auto& component : target) {
    current /= component;
    if (component == "/" || component.empty()) continue;
    struct stat st;
    if (stat(current.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        *error = current.string() + " is not a directory";
        return false;
      }
      continue;
    }
    if (errno != ENOENT) {
      *error = "cannot look at " + current.string() + ": " + std::strerror(errno);
      return false;
    }
    if (mkdir(current.c_str(), 0777) != 0 && errno != EEXIST) {
      *error = "cannot create directory " + current.string() + ": " + std::strerror(errno);
      return false;
    }
    created->push_back(current.string());
  }
  return true;
}

void discard_created_dirs(const OutputTarget& target) {
  for (auto it = target.created_dirs.rbegin(); it != target.created_dirs.rend(); ++it) rmdir(it->c_str());
}

bool prepare_output(const std::string& pattern, bool force, pid_t pid, OutputTarget* target, UsageError* error) {
  *target = OutputTarget{};
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  if (ec) {
    *error = failure(kExitSetupFailed,
                     "cannot determine the current directory (" + ec.message() + "); give -o an absolute path");
    return false;
  }

  std::string name;
  if (pattern.empty()) {
    name = first_free_report_name(cwd.string());
  } else {
    std::string expanded;
    if (!expand_output_pattern(pattern, pid, &expanded, error)) return false;
    if (expanded.empty()) {
      *error = failure(kExitUsage, "-o " + pattern + " expands to an empty name; give a file name");
      return false;
    }
    std::filesystem::path p(expanded);
    if (p.is_relative()) p = cwd / p;
    // A trailing slash names a directory to put the next free reportN in, as a bare directory would.
    if (expanded.back() == '/')
      name = first_free_report_name(p.lexically_normal().string());
    else
      name = with_trace_extension(p.lexically_normal().string());
  }
  target->path = std::filesystem::path(name).lexically_normal().string();
  const std::string part = target->part();

  struct stat st;
  if (stat(target->path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      *error = failure(kExitSetupFailed, target->path + " is a directory; choose another name with -o");
      return false;
    }
    if (!force) {
      *error = failure(kExitSetupFailed,
                       target->path + " already exists; pass -f true to overwrite it or choose another name with -o");
      return false;
    }
  }
  const bool part_exists = probe_exists(part) == 0;
  if (part_exists && !force) {
    *error = failure(kExitSetupFailed,
                     part +
                         " exists, so another cutrace run is writing this trace or one crashed while writing it; "
                         "remove it, pass -f true, or choose another name with -o");
    return false;
  }

  const std::string dir = parent_of(target->path);
  std::string why;
  if (!make_directories(dir, &target->created_dirs, &why)) {
    discard_created_dirs(*target);
    *error = failure(kExitSetupFailed, why + "; choose another name with -o");
    return false;
  }

  // Creating the very file the recorder will create is the only check that also holds for root, for
  // read-only mounts and for names the file system rejects.
  int fd = part_exists ? open(part.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
                       : open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    int e = errno;
    discard_created_dirs(*target);
    *error =
        failure(kExitSetupFailed, "cannot write " + part + " (" + std::strerror(e) + "); choose another name with -o");
    return false;
  }
  close(fd);
  if (!part_exists) unlink(part.c_str());
  return true;
}

}  // namespace cutrace::launcher
