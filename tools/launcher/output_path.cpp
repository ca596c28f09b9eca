#include "launcher/output_path.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "launcher/environment.h"

namespace cutrace::launcher {
namespace {

UsageError failure(int exit_code, const std::string& message) {
  return UsageError{exit_code, "cutrace profile: " + message + "."};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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

namespace {

std::set<unsigned> report_numbers_in_use(const std::string& dir) {
  std::set<unsigned> used;
  DIR* d = opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return used;
  // reportN.cutrace, and anything named after it: its lock, the partial file of a run that was cut
  // off, the program's output files. A number with any of them is left alone.
  while (const dirent* entry = readdir(d)) {
    const char* name = entry->d_name;
    if (std::strncmp(name, "report", 6) != 0) continue;
    char* end = nullptr;
    errno = 0;
    const unsigned long n = std::strtoul(name + 6, &end, 10);
    if (end == name + 6 || errno || n == 0 || n > std::numeric_limits<unsigned>::max()) continue;
    if (std::strncmp(end, kTraceExtension, std::strlen(kTraceExtension)) == 0) used.insert(unsigned(n));
  }
  closedir(d);
  return used;
}

std::string report_name(const std::string& dir, unsigned n) {
  std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  return base + "report" + std::to_string(n) + kTraceExtension;
}

}  // namespace

std::string first_free_report_name(const std::string& dir) {
  const std::set<unsigned> used = report_numbers_in_use(dir);
  unsigned n = 1;
  while (used.count(n)) ++n;
  return report_name(dir, n);
}

namespace {

// Claims `path` for this run: refuses a name another run is writing, and without `force` one that
// already holds a trace.
bool claim_name(const std::string& path, bool force, reader::TraceClaim* claim, UsageError* error) {
  switch (claim->acquire(path)) {
    case reader::TraceClaim::Result::kClaimed:
      break;
    case reader::TraceClaim::Result::kHeld:
      *error = failure(kExitSetupFailed, path + " is being written by " + claim->holder() +
                                             "; wait for that run to end, or give each run its own name with -o "
                                             "(for example -o run%p, or -o rank%q{SLURM_PROCID})");
      return false;
    case reader::TraceClaim::Result::kFailed:
      *error = failure(kExitSetupFailed, claim->error() + "; choose another name with -o");
      return false;
  }
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      claim->release();
      *error = failure(kExitSetupFailed, path + " is a directory; choose another name with -o");
      return false;
    }
    if (!force) {
      claim->release();
      *error = failure(kExitSetupFailed,
                       path + " already exists; pass -f true to overwrite it or choose another name with -o");
      return false;
    }
  }
  return true;
}

// The default name: the first reportN.cutrace that nothing in the directory uses and no other run has
// claimed. Runs started together in one directory each get their own number.
bool claim_report_name(const std::string& dir, OutputTarget* target, UsageError* error) {
  const std::set<unsigned> used = report_numbers_in_use(dir);
  for (unsigned n = 1; n != 0; ++n) {
    if (used.count(n)) continue;
    const std::string candidate = report_name(dir, n);
    switch (target->claim.acquire(candidate)) {
      case reader::TraceClaim::Result::kClaimed:
        // Another run may have finished this number between the directory scan and the claim.
        if (probe_exists(candidate) == ENOENT) {
          target->path = candidate;
          return true;
        }
        target->claim.release();
        continue;
      case reader::TraceClaim::Result::kHeld:
        continue;
      case reader::TraceClaim::Result::kFailed:
        *error = failure(kExitSetupFailed, target->claim.error() + "; choose another name with -o");
        return false;
    }
  }
  *error = failure(kExitSetupFailed, "every reportN name in " + dir + " is taken; choose a name with -o");
  return false;
}

}  // namespace

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

  // Either a directory to number a reportN in, or the trace's name.
  std::string report_dir, name;
  if (pattern.empty()) {
    report_dir = cwd.string();
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
      report_dir = p.lexically_normal().string();
    else
      name = std::filesystem::path(with_trace_extension(p.lexically_normal().string())).lexically_normal().string();
  }
  // A name that is a directory is refused before any directory is made for it.
  struct stat st;
  if (!name.empty() && stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    *error = failure(kExitSetupFailed, name + " is a directory; choose another name with -o");
    return false;
  }

  const std::string dir = name.empty() ? report_dir : parent_of(name);
  std::string why;
  if (!make_directories(dir, &target->created_dirs, &why)) {
    discard_created_dirs(*target);
    *error = failure(kExitSetupFailed, why + "; choose another name with -o");
    return false;
  }

  const bool claimed = name.empty() ? claim_report_name(report_dir, target, error)
                                    : claim_name(name, force, &target->claim, error);
  if (!claimed) {
    discard_created_dirs(*target);
    return false;
  }
  if (!name.empty()) target->path = name;

  // The partial file is this run's own, so a run that was cut off never shares one with the next.
  // Creating it here is also the only writability check that holds for root, read-only mounts and
  // names the file system rejects.
  std::string part_template = target->path + ".XXXXXX" + kPartialSuffix;
  int fd = mkostemps(part_template.data(), int(std::strlen(kPartialSuffix)), O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    const std::string shown = target->path + ".XXXXXX" + kPartialSuffix;
    target->claim.release();
    discard_created_dirs(*target);
    *error = failure(kExitSetupFailed,
                     "cannot write " + shown + " (" + std::strerror(e) + "); choose another name with -o");
    return false;
  }
  // mkostemps makes it private; a trace is as readable as any file the user creates.
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  close(fd);
  target->part = part_template;
  return true;
}

void abandon_output(OutputTarget* target) {
  if (!target->part.empty()) unlink(target->part.c_str());
  target->claim.release();
  discard_created_dirs(*target);
}

}  // namespace cutrace::launcher
