#include "launcher/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cutrace::launcher {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

OutputRelay::~OutputRelay() {
  if (thread_.joinable()) finish(std::chrono::milliseconds(0));
  for (int* fd : {&out_[0], &out_[1], &err_[0], &err_[1], &out_file_, &err_file_, &stop_[0], &stop_[1]}) close_fd(*fd);
}

bool OutputRelay::create_pipes(std::string* error) {
  if (pipe2(out_, O_CLOEXEC) != 0 || pipe2(err_, O_CLOEXEC) != 0 || pipe2(stop_, O_CLOEXEC) != 0) {
    *error = std::string("cannot create pipes for the program's output: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void OutputRelay::close_write_ends() {
  close_fd(out_[1]);
  close_fd(err_[1]);
}

bool OutputRelay::open_files(const std::string& trace_path, bool force, std::string* error) {
  const std::string suffix = ".cutrace";
  std::string base = trace_path;
  if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    base.resize(base.size() - suffix.size());
  out_path_ = base + ".stdout";
  err_path_ = base + ".stderr";
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (force ? O_TRUNC : O_EXCL);
  for (auto [path, fd] : {std::pair{&out_path_, &out_file_}, std::pair{&err_path_, &err_file_}}) {
    *fd = ::open(path->c_str(), flags, 0644);
    if (*fd < 0) {
      const int e = errno;
      *error = e == EEXIST ? *path + " exists (the output of an earlier run); pass -f true to overwrite it"
                           : "cannot create " + *path + " (" + std::strerror(e) + ")";
      if (&out_path_ != path) ::unlink(out_path_.c_str());  // the first file was ours
      close_fd(out_file_);
      return false;
    }
  }
  return true;
}

void OutputRelay::start() { thread_ = std::thread([this] { run(); }); }

void OutputRelay::run() {
  char buf[64 << 10];
  pollfd fds[3] = {{out_[0], POLLIN, 0}, {err_[0], POLLIN, 0}, {stop_[0], POLLIN, 0}};
  const int files[2] = {out_file_, err_file_};
  bool stopping = false;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    // Once asked to stop, only what is already in the pipes is copied.
    const int ready = ::poll(fds, 3, stopping ? 0 : -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    if (fds[2].revents) stopping = true;
    // Asked to stop and nothing left in the pipes: whatever still holds them writes to no one.
    if (stopping && !(fds[0].fd >= 0 && fds[0].revents) && !(fds[1].fd >= 0 && fds[1].revents)) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;  // poll ignores negative fds
        continue;
      }
      if (!write_all(files[i], buf, size_t(n)) && error_.empty())
        error_ = "writing " + (i == 0 ? out_path_ : err_path_) + " failed (" + std::strerror(errno) +
                 "); the program's output there is incomplete";
    }
  }
  done_.store(true, std::memory_order_release);
}

void OutputRelay::discard() {
  finish(std::chrono::milliseconds(0));
  if (out_file_ >= 0) ::unlink(out_path_.c_str());
  if (err_file_ >= 0) ::unlink(err_path_.c_str());
}

void OutputRelay::finish(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const char byte = 1;
  if (!done_.load(std::memory_order_acquire)) (void)!::write(stop_[1], &byte, 1);
  thread_.join();
}

}  // namespace cutrace::launcher
