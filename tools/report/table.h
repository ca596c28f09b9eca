// Report tables and the output formats of `cutrace stats`, laid out like nsys's:
//   column: centred headers, a dashed rule, numbers right-aligned with thousands separators;
//   table:  the same with the columns between '|' and a rule under the header;
//   csv:    RFC 4180, plain numbers;
//   tsv:    tab-separated, plain numbers, tabs and line breaks in text replaced by spaces;
//   json:   an array of objects keyed by column title, numbers as JSON numbers.
//
// Rows are streamed into a TableSink one at a time, so a table of any length is written in bounded
// memory. The column layouts need every column's width first: the rows are fed to a WidthSink in a
// first pass (reports can replay their rows).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace cutrace::report {

enum class TableFormat { kColumn, kTable, kCsv, kTsv, kJson };
bool parse_table_format(std::string_view name, TableFormat& out);
// nsys's name of a format, also the extension of the files `cutrace stats -o BASE` writes.
const char* table_format_name(TableFormat format);
// Formats whose layout needs the widths of all rows before the first is written.
inline bool needs_widths(TableFormat f) { return f == TableFormat::kColumn || f == TableFormat::kTable; }

struct Cell {
  enum class Kind : uint8_t { kText, kInteger, kSignedInteger, kDecimal } kind = Kind::kText;
  std::string text;       // kText, when `view` is not used
  std::string_view view;  // kText pointing at storage that outlives the row (names in the reader)
  uint64_t u = 0;
  int64_t s = 0;
  double d = 0;
  bool right = false;    // text aligned like a number (hex values) in column output
  uint8_t decimals = 1;  // digits after the point of a decimal
  bool uses_view = false;

  static Cell integer(uint64_t v) { return {Kind::kInteger, {}, {}, v, 0, 0, true}; }
  static Cell signed_integer(int64_t v) { return {Kind::kSignedInteger, {}, {}, 0, v, 0, true}; }
  static Cell decimal(double v, uint8_t decimals = 1) { return {Kind::kDecimal, {}, {}, 0, 0, v, true, decimals}; }
  static Cell string(std::string v, bool right = false) { return {Kind::kText, std::move(v), {}, 0, 0, 0, right}; }
  // Text that stays valid while the table is written: no copy.
  static Cell borrowed(std::string_view v, bool right = false) {
    Cell c{Kind::kText, {}, v, 0, 0, 0, right};
    c.uses_view = true;
    return c;
  }
  std::string_view text_view() const { return uses_view ? view : std::string_view(text); }

  // In-place setters for rows written by the million: no temporary Cell, no string copied.
  void set_integer(uint64_t v) {
    kind = Kind::kInteger;
    u = v;
    right = true;
  }
  void set_signed(int64_t v) {
    kind = Kind::kSignedInteger;
    s = v;
    right = true;
  }
  void set_borrowed(std::string_view v, bool right_aligned = false) {
    kind = Kind::kText;
    view = v;
    uses_view = true;
    right = right_aligned;
  }
};

// nsys's --timeunit: the unit of every "(ns)" column.
enum class TimeUnit { kNanoseconds, kMicroseconds, kMilliseconds, kSeconds };
// nsec, usec, msec, sec (and nanoseconds, microseconds, milliseconds, seconds).
bool parse_time_unit(std::string_view name, TimeUnit& out);

class TableSink {
 public:
  virtual ~TableSink() = default;
  // Once, before the rows.
  virtual void begin(const std::string& title, const std::vector<std::string>& columns) = 0;
  virtual void row(std::vector<Cell>& cells) = 0;  // may rewrite the cells (time units)
  virtual void end() = 0;
};

// Writes a table in `format` to `out`, every "(ns)" column in `unit` ("(us)", "(ms)", "(s)" with the
// values divided and as many decimals as keep every nanosecond). Column and table output start with
// the " ** title:" line nsys prints and need `widths` from a WidthSink fed the same rows (in `unit`).
std::unique_ptr<TableSink> make_table_sink(FILE* out, TableFormat format, TimeUnit unit,
                                           const std::vector<size_t>* widths = nullptr);

// Measures the column widths the column and table layouts need.
class WidthSink : public TableSink {
 public:
  explicit WidthSink(TimeUnit unit) : unit_(unit) {}
  void begin(const std::string& title, const std::vector<std::string>& columns) override;
  void row(std::vector<Cell>& cells) override;
  void end() override {}
  const std::vector<size_t>& widths() const { return widths_; }

 private:
  TimeUnit unit_;
  std::vector<bool> time_columns_;
  std::vector<size_t> widths_;
};

// A whole table in memory, for the reports whose rows are few (one per API).
struct Table {
  std::string title;  // e.g. "CUDA API Summary (cuda_api_sum)"
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};
// Streams `table` into `sink`.
void replay(Table& table, TableSink& sink);

}  // namespace cutrace::report
