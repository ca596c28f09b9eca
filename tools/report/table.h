// Report tables and the output formats of `cutrace stats`, laid out like nsys's:
//   column: centred headers, a dashed rule, numbers right-aligned with thousands separators;
//   table:  the same with the columns between '|' and a rule under the header;
//   csv:    RFC 4180, plain numbers;
//   tsv:    tab-separated, plain numbers, tabs and line breaks in text replaced by spaces;
//   json:   an array of objects keyed by column title, numbers as JSON numbers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace cutrace::report {

enum class TableFormat { kColumn, kTable, kCsv, kTsv, kJson };
// nsys's name of a format, also the extension of the files `cutrace stats -o BASE` writes.
const char* table_format_name(TableFormat format);
bool parse_table_format(std::string_view name, TableFormat& out);

struct Cell {
  enum class Kind : uint8_t { kText, kInteger, kSignedInteger, kDecimal } kind = Kind::kText;
  std::string text;
  uint64_t u = 0;
  int64_t s = 0;
  double d = 0;
  bool right = false;  // text aligned like a number (hex values) in column output
  uint8_t decimals = 1;  // digits after the point of a decimal

  static Cell integer(uint64_t v) { return {Kind::kInteger, {}, v, 0, 0, true}; }
  static Cell signed_integer(int64_t v) { return {Kind::kSignedInteger, {}, 0, v, 0, true}; }
  static Cell decimal(double v, uint8_t decimals = 1) { return {Kind::kDecimal, {}, 0, 0, v, true, decimals}; }
  static Cell string(std::string v, bool right = false) { return {Kind::kText, std::move(v), 0, 0, 0, right}; }
};

// nsys's --timeunit: the unit of every "(ns)" column.
enum class TimeUnit { kNanoseconds, kMicroseconds, kMilliseconds, kSeconds };
// nsec, usec, msec, sec (and nanoseconds, microseconds, milliseconds, seconds).
bool parse_time_unit(std::string_view name, TimeUnit& out);

struct Table {
  std::string title;  // e.g. "CUDA API Summary (cuda_api_sum)"
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};

// Rewrites the "(ns)" columns of `table` in `unit`: "(us)", "(ms)" or "(s)" with the values divided
// and as many decimals as keep every nanosecond.
void convert_time_unit(Table& table, TimeUnit unit);

// Writes `table` in `format`. Column and table output start with the " ** title:" line nsys prints.
void write_table(FILE* out, const Table& table, TableFormat format);

// A JSON string literal with escapes; invalid UTF-8 becomes U+FFFD so the output always parses.
void append_json_string(std::string& out, std::string_view s);

}  // namespace cutrace::report
