// nsys export's --times: the time ranges an export keeps its events from, written as nsys writes them
// ("[:][START]/[END][:]", comma-separated; "1s2ms3us4ns"-style values), so that scripts written for
// `nsys export` filter the same events here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cutrace::model {

struct TimeRange {
  int64_t start = INT64_MIN, end = INT64_MAX;  // an omitted bound is the farthest time
  // A strict bound keeps only events wholly on its side; a loose one (":" written beside it) also
  // keeps events that cross it.
  bool loose_start = false, loose_end = false;

  // An event of [begin, end] (an end before the begin counts as the begin, as an instant does).
  bool keeps(int64_t begin, int64_t end) const {
    if (end < begin) end = begin;
    return (loose_start ? end >= start : begin >= start) && (loose_end ? begin <= this->end : end <= this->end);
  }
};

// One value: numbers, each with an optional unit (ns, nsec, us, usec, ms, msec, s, sec, m, min, h,
// hour; none is ns), summed: "2ns5us2" is 5004. False with `error` set to why it is not one.
bool parse_time_value(std::string_view text, int64_t& ns, std::string& error);

// Appends the ranges of one --times value ("R[,R...]"); false with `error` set to one sentence naming
// the part that is wrong.
bool parse_time_ranges(std::string_view text, std::vector<TimeRange>& ranges, std::string& error);

// Whether any of `ranges` keeps the event; true when there are none (no --times).
inline bool any_keeps(const std::vector<TimeRange>& ranges, int64_t begin, int64_t end) {
  if (ranges.empty()) return true;
  for (const TimeRange& r : ranges)
    if (r.keeps(begin, end)) return true;
  return false;
}

}  // namespace cutrace::model
