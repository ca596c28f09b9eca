#include "launcher/outcome.h"

#include <cstdio>
#include <iterator>

namespace cutrace::launcher {
namespace {

std::string count(uint64_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

}  // namespace

std::string human_size(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string summary_line(const RecorderSummary& s, const std::string& path, uint64_t file_bytes,
                         bool rings_capped_by_shm) {
  std::string line = "cutrace: " + count(s.events, "event", "events") + ", " +
                     count(s.processes, "process", "processes") + ", " + count(s.threads, "thread", "threads") + ", " +
                     std::to_string(s.dropped) + " dropped";
  // Drops mean the trace has gaps; say what would have prevented them.
  if (s.dropped && s.dropped_no_memory >= s.dropped)
    line += " (no room left in /dev/shm for the rings; free some)";
  else if (s.dropped && s.dropped_no_memory)
    line += " (" + std::to_string(s.dropped_no_memory) +
            " for want of room in /dev/shm, the rest in full rings; raise --ring-size)";
  else if (s.dropped && s.stalled_ms) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", double(s.stalled_ms) / 1000);
    line += std::string(" (rings full: the recorder went ") + seconds +
            " s at once without reading them, stopped, without a CPU or behind, while the program went on; keep it "
            "running, or raise --ring-size to ride out such pauses)";
  } else if (s.dropped) {
    line += " (rings full; raise --ring-size)";
  }
  if (s.malformed) line += ", " + std::to_string(s.malformed) + " malformed";
  if (s.lost && rings_capped_by_shm)
    line += ", " + std::to_string(s.lost) +
            " lost (all the rings /dev/shm had room for were taken; give the container a larger /dev/shm with "
            "docker run --shm-size, or pass a smaller --ring-size)";
  else if (s.lost)
    line += ", " + std::to_string(s.lost) + " lost (all rings taken; raise --ring-slots)";
  return line + " -> " + path + " (" + human_size(file_bytes) + ")";
}

}  // namespace cutrace::launcher
