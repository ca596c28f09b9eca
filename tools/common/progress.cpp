#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace cutrace::cli {

namespace {

std::string size_text(double bytes) {
  char buf[32];
  if (bytes >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f kB", bytes / 1e3);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(const char* command, uint64_t total_bytes, bool enabled)
    : command_(command), total_(total_bytes), on_(enabled && total_bytes > 0 && isatty(STDERR_FILENO)) {
  start_ = last_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::follow(reader::TraceReader& reader) {
  if (!on_) return;
  reader.on_chunk([this](uint64_t done) { update(done); });
}

void ProgressBar::update(uint64_t done) { draw(done, false); }

void ProgressBar::draw(uint64_t done, bool force) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  if (done > total_) done = total_;
  const double fraction = double(done) / double(total_);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? double(done) / seconds : 0;
  constexpr int kWidth = 20;
  const int filled = int(fraction * kWidth);
  std::string bar(size_t(filled), '#');
  bar.append(size_t(kWidth - filled), '.');
  std::string left = "";
  if (rate > 0 && done < total_) left = "  " + std::to_string(int((double(total_ - done) / rate) + 0.5)) + " s left";
  std::fprintf(stderr, "\r%s: [%s] %3d%%  %s of %s  %s/s%s\033[K", command_.c_str(), bar.c_str(), int(fraction * 100),
               size_text(double(done)).c_str(), size_text(double(total_)).c_str(), size_text(rate).c_str(),
               left.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!on_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace cutrace::cli
