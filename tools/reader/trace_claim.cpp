#include "reader/trace_claim.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cutrace::reader {
namespace {

struct flock whole_file(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;
  return lock;
}

// The descriptor still names the file at `path`: nobody removed or replaced it since we opened it.
bool still_named(int fd, const std::string& path) {
  struct stat by_fd {}, by_name {};
  return fstat(fd, &by_fd) == 0 && stat(path.c_str(), &by_name) == 0 && by_fd.st_dev == by_name.st_dev &&
         by_fd.st_ino == by_name.st_ino;
}

std::string read_holder(int fd) {
  // The holder writes its description just after it took the lock, so a run refused in between finds
  // the file empty: wait for it a little (100 ms at most) rather than name no one.
  std::string s;
  for (int attempt = 0; attempt < 100 && s.empty(); ++attempt) {
    if (attempt) usleep(1000);
    char text[256] = {};
    const ssize_t n = pread(fd, text, sizeof text - 1, 0);
    s = n > 0 ? std::string(text, size_t(n)) : std::string();
    // Only a whole line counts: the holder may be in the middle of writing it.
    if (s.empty() || s.back() != '\n') s.clear();
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "another cutrace run" : s;
}

std::string this_run() {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  return "cutrace run " + std::to_string(getpid()) + (host[0] ? std::string(" on host ") + host : std::string());
}

}  // namespace

std::string claim_path(const std::string& trace_path) { return trace_path + kClaimSuffix; }

std::string trace_of_partial(const std::string& path) {
  if (!path.ends_with(".part")) return {};
  std::string stem = path.substr(0, path.size() - 5);
  if (stem.ends_with(".cutrace")) return stem;
  size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size()) return {};
  std::string trace = stem.substr(0, dot);
  return trace.ends_with(".cutrace") ? trace : std::string();
}

TraceClaim::Result TraceClaim::acquire(const std::string& trace_path) {
  release();
  lock_path_ = claim_path(trace_path);
  holder_.clear();
  error_.clear();
  // A holder removes the file when it is done; a descriptor opened on the removed file locks nothing
  // anyone else will look at, so open the name again. Bounded: each retry means another run finished.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      error_ = "cannot write " + lock_path_ + " (" + std::strerror(errno) + ")";
      return Result::kFailed;
    }
    struct flock lock = whole_file(F_WRLCK);
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
      const int e = errno;
      if (e == EAGAIN || e == EACCES) {
        holder_ = read_holder(fd);
        close(fd);
        return Result::kHeld;
      }
      close(fd);
      error_ = "cannot lock " + lock_path_ + " (" + std::strerror(e) + ")";
      return Result::kFailed;
    }
    if (!still_named(fd, lock_path_)) {
      close(fd);
      continue;
    }
    const std::string me = this_run() + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != ssize_t(me.size())) {
      // Only the description of the holder is missing; the lock itself holds.
    }
    fd_ = fd;
    return Result::kClaimed;
  }
  error_ = "cannot claim " + lock_path_ + ": it is removed and created again faster than it can be locked";
  return Result::kFailed;
}

void TraceClaim::release() {
  if (fd_ < 0) return;
  if (still_named(fd_, lock_path_)) unlink(lock_path_.c_str());
  close(fd_);
  fd_ = -1;
}

void TraceClaim::abandon() {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
}

bool claim_is_held(const std::string& trace_path, std::string* holder) {
  const std::string lock_path = claim_path(trace_path);
  int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  // F_OFD_GETLK only asks: unlike taking a lock to test, it cannot make a run that is claiming the
  // name at this moment believe someone else holds it.
  struct flock lock = whole_file(F_WRLCK);
  const bool held = fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  if (held && holder) *holder = read_holder(fd);
  close(fd);
  return held;
}

void remove_claim_file_if_ours(int fd, const std::string& lock_path) {
  if (fd < 0) return;
  struct flock lock = whole_file(F_WRLCK);
  // Our own lock never conflicts with our descriptor: GETLK answers F_UNLCK when we hold it, and
  // still_named makes sure the name is the file we hold.
  if (fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type == F_UNLCK && still_named(fd, lock_path))
    unlink(lock_path.c_str());
}

}  // namespace cutrace::reader
