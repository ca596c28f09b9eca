// The launcher's last words: the one line it prints about the trace.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/recorder_process.h"

namespace cutrace::launcher {

// "512 B", "12.3 KiB", "4.0 MiB", "1.5 GiB".
std::string human_size(uint64_t bytes);

// "cutrace: 1234 events, 1 process, 2 threads, 0 dropped -> /abs/run1.cutrace (12.3 KiB)". Drops
// come with what would have prevented them; malformed records and records lost for want of a free
// ring are named only when there were any: they mean something went wrong. `rings_capped_by_shm`: the
// session got fewer rings than asked, for want of room in /dev/shm (its share of it).
std::string summary_line(const RecorderSummary& summary, const std::string& path, uint64_t file_bytes,
                         bool rings_capped_by_shm = false);

}  // namespace cutrace::launcher
