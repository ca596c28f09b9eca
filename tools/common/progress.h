// A progress bar for long reads of a trace (exports, reports over large traces): on stderr, only when
// it is a terminal and the command was not asked to be quiet, redrawn at most ten times a second:
//   cutrace export: [##########..........]  52%  1.3 GB of 2.5 GB  210 MB/s  6 s left
// and erased when the work is done, so that what the command prints afterwards stands alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "reader/trace_reader.h"

namespace cutrace::cli {

class ProgressBar {
 public:
  // `enabled`: the caller's choice (no -q); the bar still shows only on a terminal.
  ProgressBar(const char* command, uint64_t total_bytes, bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(uint64_t done_bytes);
  // Erases the bar (if one was drawn).
  void finish();
  // Draws the bar for `reader` as it reads its chunks.
  void follow(reader::TraceReader& reader);

 private:
  void draw(uint64_t done, bool force);
  std::string command_;
  uint64_t total_;
  bool on_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace cutrace::cli
