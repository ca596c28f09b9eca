// What part of a trace an export or a timeline takes, and how it states times: the options of
// `cutrace export` that the model's passes (timeline.h) read as well as the writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/time_ranges.h"

namespace cutrace::model {

struct ExportOptions {
  bool show_internal = false;  // also export calls of internal apis (format::kApiFlagInternal)
  // Only what overlaps [window_begin_ns, window_end_ns), counted from the file's creation (the session
  // start, the export's time 0).
  uint64_t window_begin_ns = 0;
  uint64_t window_end_ns = UINT64_MAX;
  // --tables: only the tables whose whole name matches this ECMAScript regular expression, in any case
  // ("": all), for the formats made of tables.
  std::string tables;
  // nsys's --ts-normalize (times since the epoch, from the session's wall-clock start) and --ts-shift
  // (ns added): for the formats made of tables, whose times otherwise count from the session's start.
  bool ts_normalize = false;
  int64_t ts_shift_ns = 0;
  // nsys's --times: only the events some range keeps, by their times as exported (none: all).
  std::vector<TimeRange> times;
  // nsys's --lazy: only the tables that have rows; by default every table (as nsys's --lazy=false).
  bool lazy = false;
};

}  // namespace cutrace::model
