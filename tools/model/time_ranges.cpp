#include "model/time_ranges.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/command_line.h"

namespace cutrace::model {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Nanoseconds in one of the unit; 0 for a word that is none.
int64_t unit_ns(std::string_view unit) {
  constexpr struct {
    std::string_view name;
    int64_t ns;
  } kUnits[] = {{"", 1},           {"ns", 1},           {"nsec", 1},           {"us", 1000},
                {"usec", 1000},    {"ms", 1000000},     {"msec", 1000000},     {"s", 1000000000},
                {"sec", 1000000000}, {"m", 60000000000}, {"min", 60000000000}, {"h", 3600000000000},
                {"hour", 3600000000000}};
  for (const auto& u : kUnits)
    if (u.name == unit) return u.ns;
  return 0;
}

}  // namespace

bool parse_time_value(std::string_view text, int64_t& ns, std::string& error) {
  auto refuse = [&](const std::string& why) {
    error = why;
    return false;
  };
  if (text.empty()) return refuse("it is empty");
  int64_t total = 0;
  size_t at = 0;
  while (at < text.size()) {
    // A number: [+-]digits[.digits][e[+-]digits], at least one digit before the exponent.
    const size_t begin = at;
    if (text[at] == '+' || text[at] == '-') ++at;
    size_t digits = 0;
    bool fractional = false;
    while (at < text.size() && is_digit(text[at])) ++at, ++digits;
    if (at < text.size() && text[at] == '.') {
      fractional = true;
      ++at;
      while (at < text.size() && is_digit(text[at])) ++at, ++digits;
    }
    if (!digits) return refuse("a number is expected at '" + std::string(text.substr(begin)) + "'");
    if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
      size_t exponent = at + 1;
      if (exponent < text.size() && (text[exponent] == '+' || text[exponent] == '-')) ++exponent;
      if (exponent < text.size() && is_digit(text[exponent])) {
        fractional = true;
        at = exponent;
        while (at < text.size() && is_digit(text[at])) ++at;
      }
    }
    const std::string_view number = text.substr(begin, at - begin);
    const size_t unit_begin = at;
    while (at < text.size() && is_letter(text[at])) ++at;
    const std::string_view unit = text.substr(unit_begin, at - unit_begin);
    const int64_t scale = unit_ns(unit);
    if (!scale)
      return refuse("'" + std::string(unit) + "' is not a unit: ns, us, ms, s, m or h (or nsec, usec, msec, sec, min "
                    "or hour)");
    int64_t part;
    if (fractional) {
      const double value = std::strtod(std::string(number).c_str(), nullptr) * double(scale);
      if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) return refuse("it is beyond about 292 years");
      part = std::llround(value);
    } else {
      const char* first = number.data() + (number.front() == '+');
      int64_t value = 0;
      const auto [end, failure] = std::from_chars(first, number.data() + number.size(), value);
      if (failure != std::errc() || end != number.data() + number.size() || __builtin_mul_overflow(value, scale, &part))
        return refuse("it is beyond about 292 years");
    }
    if (__builtin_add_overflow(total, part, &total)) return refuse("it is beyond about 292 years");
  }
  ns = total;
  return true;
}

bool parse_time_ranges(std::string_view text, std::vector<TimeRange>& ranges, std::string& error) {
  const std::string_view whole = text;
  auto refuse = [&](std::string_view range, const std::string& why) {
    error = "--times: '" + std::string(range) + "'" + (range == whole ? "" : " (in '" + std::string(whole) + "')") +
            " " + why + "; a range is START/END, either left out at will (e.g. 1s/2s, 1.5s/ or /200ms), with ':' "
            "before START or after END to keep the events that cross that bound, several separated by commas";
    return false;
  };
  std::vector<TimeRange> parsed;
  for (const std::string& item : cli::comma_items(text)) {
    std::string_view range = item;
    const std::string_view written = range;
    TimeRange r;
    if (!range.empty() && range.front() == ':') r.loose_start = true, range.remove_prefix(1);
    if (!range.empty() && range.back() == ':') r.loose_end = true, range.remove_suffix(1);
    const size_t slash = range.find('/');
    if (slash == std::string_view::npos || range.find('/', slash + 1) != std::string_view::npos)
      return refuse(written, "needs one '/' between its start and its end");
    const std::string_view start = range.substr(0, slash), end = range.substr(slash + 1);
    if (start.empty() && end.empty()) return refuse(written, "gives neither a start nor an end");
    std::string why;
    if (!start.empty() && !parse_time_value(start, r.start, why))
      return refuse(written, "has a start that is not a time (" + why + ")");
    if (!end.empty() && !parse_time_value(end, r.end, why))
      return refuse(written, "has an end that is not a time (" + why + ")");
    if (r.start > r.end) return refuse(written, "ends before it starts");
    parsed.push_back(r);
  }
  ranges.insert(ranges.end(), parsed.begin(), parsed.end());
  return true;
}

}  // namespace cutrace::model
