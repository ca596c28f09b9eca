// Who is writing a trace file. A run of `cutrace profile` claims NAME.cutrace before it starts the
// program by holding an open-file-description lock (F_OFD_SETLK) on NAME.cutrace.lock, and keeps it
// until the trace is in place; the recorder inherits the same open file description, so the claim
// lasts as long as either of them and ends by itself when both are gone, however they end. Readers ask
// the same lock whether a trace is still being written.
//
// The lock file is removed by the holder while it holds the lock; whoever opened the old file before
// that notices (its inode no longer has the name) and opens the name again.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace cutrace::reader {

inline constexpr const char* kClaimSuffix = ".lock";

// NAME.cutrace.lock for NAME.cutrace.
std::string claim_path(const std::string& trace_path);

// The trace a partial file belongs to: "NAME.cutrace" for "NAME.cutrace.XXXXXX.part" (or the older
// "NAME.cutrace.part"); empty for any other name.
std::string trace_of_partial(const std::string& path);

class TraceClaim {
 public:
  enum class Result { kClaimed, kHeld, kFailed };

  TraceClaim() = default;
  ~TraceClaim() { release(); }
  TraceClaim(const TraceClaim&) = delete;
  TraceClaim& operator=(const TraceClaim&) = delete;
  TraceClaim(TraceClaim&& other) noexcept { *this = std::move(other); }
  TraceClaim& operator=(TraceClaim&& other) noexcept {
    if (this != &other) {
      release();
      fd_ = std::exchange(other.fd_, -1);
      lock_path_ = std::move(other.lock_path_);
      holder_ = std::move(other.holder_);
      error_ = std::move(other.error_);
    }
    return *this;
  }

  // Claims `trace_path` without waiting. kHeld: another live run holds it, and holder() says which
  // (e.g. "cutrace run 1234 on host node7"); kFailed: the lock file cannot be created or locked, and
  // error() says why in a phrase. The directory must exist.
  Result acquire(const std::string& trace_path);

  bool held() const { return fd_ >= 0; }
  // The locked descriptor, for a child that must keep the claim alive (it shares the lock).
  int fd() const { return fd_; }
  const std::string& path() const { return lock_path_; }
  const std::string& holder() const { return holder_; }
  const std::string& error() const { return error_; }

  // Removes the lock file and drops the claim. A child that inherited fd() still holds the lock on
  // the removed file, which no later run will open.
  void release();
  // Drops this process's descriptor only: a child that inherited it keeps the claim, and the lock
  // file stays for it to remove.
  void abandon();

 private:
  int fd_ = -1;
  std::string lock_path_, holder_, error_;
};

// Whether a live run holds the claim of `trace_path`; `holder` (optional) is set as by acquire().
bool claim_is_held(const std::string& trace_path, std::string* holder = nullptr);

// Removes `lock_path` if the descriptor `fd` holds the lock on the file that has that name now.
// For the recorder, whose launcher died and left the claim to it.
void remove_claim_file_if_ours(int fd, const std::string& lock_path);

}  // namespace cutrace::reader
