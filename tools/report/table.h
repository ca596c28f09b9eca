// Report tables and the three output formats of `cutrace stats`, laid out like nsys's:
//   column: centred headers, a dashed rule, numbers right-aligned with thousands separators;
//   csv:    RFC 4180, plain numbers;
//   json:   an array of objects keyed by column title, numbers as JSON numbers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace cutrace::report {

enum class TableFormat { kColumn, kCsv, kJson };
bool parse_table_format(std::string_view name, TableFormat& out);

struct Cell {
  enum class Kind : uint8_t { kText, kInteger, kSignedInteger, kDecimal } kind = Kind::kText;
  std::string text;
  uint64_t u = 0;
  int64_t s = 0;
  double d = 0;
  bool right = false;  // text aligned like a number (hex values) in column output

  static Cell integer(uint64_t v) { return {Kind::kInteger, {}, v, 0, 0, true}; }
  static Cell signed_integer(int64_t v) { return {Kind::kSignedInteger, {}, 0, v, 0, true}; }
  static Cell decimal(double v) { return {Kind::kDecimal, {}, 0, 0, v, true}; }  // printed with one decimal
  static Cell string(std::string v, bool right = false) { return {Kind::kText, std::move(v), 0, 0, 0, right}; }
};

struct Table {
  std::string title;  // e.g. "CUDA API Summary (cuda_api_sum)"
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};

// Writes `table` in `format`. Column output starts with the " ** title:" line nsys prints.
void write_table(FILE* out, const Table& table, TableFormat format);

// A JSON string literal with escapes; invalid UTF-8 becomes U+FFFD so the output always parses.
void append_json_string(std::string& out, std::string_view s);

}  // namespace cutrace::report
