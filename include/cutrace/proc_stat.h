// /proc/<pid>/stat, the fields cutrace uses, read the one way the shim, the recorder and the launcher
// share: no allocation (the shim reads it inside the program's calls and in forked children), and the
// command name (field 2), which may hold spaces and parentheses, skipped by the last ')'.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cutrace::proc {

struct Stat {
  char state = 0;            // field 3: R, S, D, Z, X, ...
  uint32_t ppid = 0;         // field 4
  uint64_t start_ticks = 0;  // field 22: start time in clock ticks after boot
};

// Parses the text of a stat file (NUL-terminated). False when it is not one.
inline bool parse_stat(const char* text, Stat* out) {
  const char* p = std::strrchr(text, ')');
  if (!p || p[1] != ' ' || p[2] == '\0') return false;
  p += 2;
  Stat st;
  st.state = *p++;
  for (int field = 4; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    char* end;
    if (field == 22) {
      st.start_ticks = std::strtoull(p, &end, 10);
    } else {
      const long long v = std::strtoll(p, &end, 10);
      if (field == 4) st.ppid = uint32_t(v);
    }
    if (end == p) return false;
    p = end;
  }
  *out = st;
  return true;
}

// Reads /proc/<pid>/stat (pid 0: /proc/self/stat). False when the process does not exist or the file
// cannot be parsed. Leaves errno as it found it.
inline bool read_stat(uint32_t pid, Stat* out) {
  const int saved_errno = errno;
  char path[32];
  if (pid) std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  else std::memcpy(path, "/proc/self/stat", sizeof "/proc/self/stat");
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  bool parsed = false;
  if (fd >= 0) {
    // comm is at most 16 bytes and the fields up to 22 are numbers, so 1 KiB always holds them.
    char buf[1024];
    ssize_t n;
    do n = ::read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    ::close(fd);
    if (n > 0) {
      buf[n] = '\0';
      parsed = parse_stat(buf, out);
    }
  }
  errno = saved_errno;
  return parsed;
}

}  // namespace cutrace::proc
