// `--show-output false`: the program's stdout and stderr go to files beside the trace instead of the
// terminal (nsys keeps them in its report), so nothing the program printed is lost.
//
// The files are named after the trace, and the trace's name can depend on the program's pid (%p in
// -o), which exists only once the program is forked. So the program writes into pipes, and a thread
// of the launcher copies each pipe into its file once the file could be opened.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace cutrace::launcher {

class OutputRelay {
 public:
  OutputRelay() = default;
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  ~OutputRelay();

  // Before the program is forked: the pipes it will write into.
  bool create_pipes(std::string* error);
  int stdout_write_end() const { return out_[1]; }
  int stderr_write_end() const { return err_[1]; }
  // After the fork: the launcher's copies of the write ends, so that the pipes end when the program
  // (and whatever inherited its output) has closed them.
  void close_write_ends();

  // `trace_path` ends in .cutrace; the files are <name>.stdout and <name>.stderr. Refuses existing
  // files unless `force`, in one sentence.
  bool open_files(const std::string& trace_path, bool force, std::string* error);
  void start();
  // Waits until both pipes have ended, or at most `grace` for a process that kept the program's
  // output open after it exited, copies what is there by then, and stops.
  void finish(std::chrono::milliseconds grace);
  // The run did not start after all: stops and removes the files, so nothing is left behind.
  void discard();

  const std::string& stdout_path() const { return out_path_; }
  const std::string& stderr_path() const { return err_path_; }
  // A write to a file failed (disk full): its sentence; empty otherwise. Valid after finish().
  const std::string& error() const { return error_; }

 private:
  void run();
  int out_[2] = {-1, -1}, err_[2] = {-1, -1};
  int out_file_ = -1, err_file_ = -1;
  int stop_[2] = {-1, -1};  // the thread's wake-up pipe
  std::string out_path_, err_path_, error_;
  std::thread thread_;
  std::atomic<bool> done_{false};
};

}  // namespace cutrace::launcher
