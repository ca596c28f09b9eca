#include "report/table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "reader/decode.h"

namespace cutrace::report {
namespace {

using json::append_json_string;

// Display width in terminal columns: UTF-8 continuation bytes take none.
size_t width(std::string_view s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char ch) { return (uint8_t(ch) & 0xc0) != 0x80; }));
}

// Copies the number text s[0..n) to `out` with thousands separators in its integer part
// ("-1234567.5" -> "-1,234,567.5"); `out` has room for n + n / 3 bytes. Returns the end.
char* write_grouped(char* out, const char* s, size_t n) {
  const size_t sign = n && s[0] == '-' ? 1 : 0;
  size_t int_end = sign;
  while (int_end < n && s[int_end] != '.') ++int_end;
  const size_t digits = int_end - sign;
  char* p = out;
  if (sign) *p++ = '-';
  for (size_t i = 0; i < digits; ++i) {
    if (i && (digits - i) % 3 == 0) *p++ = ',';
    *p++ = s[sign + i];
  }
  std::memcpy(p, s + int_end, n - int_end);
  return p + (n - int_end);
}

// Room a number cell's text may need: "%.*f" of a finite double takes at most 309 integer digits, a
// sign, a point and the decimals; grouped, a third more.
constexpr size_t kNumberRoom = 400;
constexpr size_t kGroupedNumberRoom = kNumberRoom + kNumberRoom / 3;

// Writes the text of a number cell (any kind but kText) at `out`, which has room for
// kGroupedNumberRoom bytes. Returns the end.
char* write_number(char* out, const Cell& c, bool grouped) {
  char buf[kNumberRoom] = {};  // every path that reads it writes it first; the compiler cannot tell
  size_t n = 0;
  switch (c.kind) {
    case Cell::Kind::kText: return out;
    case Cell::Kind::kInteger: n = size_t(std::to_chars(buf, buf + sizeof buf, c.u).ptr - buf); break;
    case Cell::Kind::kSignedInteger: n = size_t(std::to_chars(buf, buf + sizeof buf, c.s).ptr - buf); break;
    case Cell::Kind::kDecimal: {
      const int written = std::snprintf(buf, sizeof buf, "%.*f", int(c.decimals), std::isfinite(c.d) ? c.d : 0.0);
      n = size_t(std::max(0, std::min<int>(written, sizeof buf - 1)));
      break;
    }
  }
  if (n == 0) return out;
  if (grouped) return write_grouped(out, buf, n);
  std::memcpy(out, buf, n);
  return out + n;
}

// The text of a cell: plain (csv, tsv, json) or as the column layouts show numbers.
void append_cell(std::string& out, const Cell& c, bool grouped) {
  if (c.kind == Cell::Kind::kText) {
    const std::string_view t = c.text_view();
    out.append(t.data(), t.size());
    return;
  }
  char buf[kGroupedNumberRoom];
  out.append(buf, size_t(write_number(buf, c, grouped) - buf));
}

// The width of a cell as the column layouts show it; integers are measured, not formatted.
size_t grouped_width(const Cell& c) {
  auto digits = [](uint64_t v) {
    size_t d = 1;
    while (v >= 10) v /= 10, ++d;
    return d;
  };
  switch (c.kind) {
    case Cell::Kind::kInteger: {
      const size_t d = digits(c.u);
      return d + (d - 1) / 3;
    }
    case Cell::Kind::kSignedInteger: {
      const size_t d = digits(c.s < 0 ? 0 - uint64_t(c.s) : uint64_t(c.s));
      return (c.s < 0) + d + (d - 1) / 3;
    }
    default: {
      std::string text;
      append_cell(text, c, true);
      return width(text);
    }
  }
}

// The "(ns)" columns and their titles in `unit`.
std::vector<bool> time_columns(std::vector<std::string>& columns, TimeUnit unit) {
  std::vector<bool> is_time(columns.size(), false);
  if (unit == TimeUnit::kNanoseconds) return is_time;
  const char* label = unit == TimeUnit::kMicroseconds ? "(us)" : unit == TimeUnit::kMilliseconds ? "(ms)" : "(s)";
  for (size_t c = 0; c < columns.size(); ++c) {
    const size_t at = columns[c].find("(ns)");
    if (at == std::string::npos) continue;
    columns[c].replace(at, 4, label);
    is_time[c] = true;
  }
  return is_time;
}

void convert_row(std::vector<Cell>& row, const std::vector<bool>& is_time, TimeUnit unit) {
  if (unit == TimeUnit::kNanoseconds) return;
  const uint8_t digits = unit == TimeUnit::kMicroseconds ? 3 : unit == TimeUnit::kMilliseconds ? 6 : 9;
  const double divisor = unit == TimeUnit::kMicroseconds ? 1e3 : unit == TimeUnit::kMilliseconds ? 1e6 : 1e9;
  for (size_t c = 0; c < row.size() && c < is_time.size(); ++c) {
    if (!is_time[c]) continue;
    Cell& cell = row[c];
    if (cell.kind == Cell::Kind::kInteger) cell = Cell::decimal(double(cell.u) / divisor, digits);
    else if (cell.kind == Cell::Kind::kSignedInteger) cell = Cell::decimal(double(cell.s) / divisor, digits);
    else if (cell.kind == Cell::Kind::kDecimal) cell = Cell::decimal(cell.d / divisor, uint8_t(digits + cell.decimals));
  }
}

// Rows are gathered into a buffer and written in large pieces.
class BufferedSink : public TableSink {
 public:
  BufferedSink(FILE* out, TimeUnit unit) : out_(out), unit_(unit) {}
  void begin(const std::string& title, const std::vector<std::string>& columns) override {
    columns_ = columns;
    is_time_ = time_columns(columns_, unit_);
    header(title);
  }
  void row(std::vector<Cell>& cells) override {
    convert_row(cells, is_time_, unit_);
    write_row(cells);
    if (buf_.size() >= (size_t(1) << 16)) flush();
  }
  void end() override {
    footer();
    flush();
  }

 protected:
  virtual void header(const std::string& title) = 0;
  virtual void write_row(const std::vector<Cell>& cells) = 0;
  virtual void footer() {}
  void flush() {
    if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), out_);
    buf_.clear();
  }

  FILE* out_;
  TimeUnit unit_;
  std::vector<std::string> columns_;
  std::vector<bool> is_time_;
  std::string buf_;
};

class CsvSink : public BufferedSink {
 public:
  CsvSink(FILE* out, TimeUnit unit, char separator) : BufferedSink(out, unit), sep_(separator) {}

 protected:
  void header(const std::string&) override {
    std::vector<Cell> titles;
    for (const std::string& column : columns_) titles.push_back(Cell::string(column));
    write_row(titles);
  }
  // Rows come by the million: each is formatted into a line buffer with plain pointer writes and
  // appended whole, instead of a string append (and its capacity check) per field and separator.
  void write_row(const std::vector<Cell>& cells) override {
    size_t bound = 1;
    for (const Cell& c : cells) bound += 1 + (c.kind == Cell::Kind::kText ? 2 * c.text_view().size() + 2 : kNumberRoom);
    if (line_.size() < bound) line_.resize(std::max(bound, line_.size() * 2));
    char* p = line_.data();
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) *p++ = sep_;
      const Cell& cell = cells[c];
      switch (cell.kind) {
        case Cell::Kind::kText: p = field(p, cell.text_view()); break;
        default: p = write_number(p, cell, false); break;
      }
    }
    *p++ = '\n';
    buf_.append(line_.data(), size_t(p - line_.data()));
  }

 private:
  // Writes one field at `p` (room for twice its size plus quotes), quoted as RFC 4180 asks where it
  // holds a separator, a quote or a line break; a TSV field has those turned into spaces instead.
  char* field(char* p, std::string_view s) {
    if (sep_ == '\t') {
      for (char ch : s) *p++ = (ch == '\t' || ch == '\n' || ch == '\r') ? ' ' : ch;
      return p;
    }
    bool plain = true;
    for (char ch : s) plain &= ch != ',' && ch != '"' && ch != '\r' && ch != '\n';
    if (plain) {
      std::memcpy(p, s.data(), s.size());
      return p + s.size();
    }
    *p++ = '"';
    for (char ch : s) {
      if (ch == '"') *p++ = '"';
      *p++ = ch;
    }
    *p++ = '"';
    return p;
  }
  char sep_;
  std::vector<char> line_;
};

class JsonSink : public BufferedSink {
 public:
  using BufferedSink::BufferedSink;

 protected:
  void header(const std::string&) override { buf_ += '['; }
  void write_row(const std::vector<Cell>& cells) override {
    buf_ += rows_++ ? ",\n  {" : "\n  {";
    for (size_t c = 0; c < columns_.size() && c < cells.size(); ++c) {
      if (c) buf_ += ", ";
      append_json_string(buf_, columns_[c]);
      buf_ += ": ";
      if (cells[c].kind == Cell::Kind::kText) append_json_string(buf_, cells[c].text_view());
      else append_cell(buf_, cells[c], false);
    }
    buf_ += '}';
  }
  void footer() override { buf_ += rows_ ? "\n]\n" : "]\n"; }

 private:
  uint64_t rows_ = 0;
};

// `bordered`: nsys's "table" format, columns between '|'.
class ColumnSink : public BufferedSink {
 public:
  ColumnSink(FILE* out, TimeUnit unit, bool bordered, const std::vector<size_t>& widths)
      : BufferedSink(out, unit), bordered_(bordered), widths_(widths) {}

 protected:
  void header(const std::string& title) override {
    widths_.resize(columns_.size(), 0);
    for (size_t c = 0; c < columns_.size(); ++c) widths_[c] = std::max(widths_[c], width(columns_[c]));
    buf_ += " ** " + title + ":\n\n";
    std::string header, rule;
    const char* sep = bordered_ ? "|" : "";
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t pad = widths_[c] - width(columns_[c]);
      header += (c ? sep : "") + (' ' + std::string(pad / 2, ' ') + columns_[c] + std::string(pad - pad / 2, ' ') + ' ');
      rule += (c && bordered_ ? "+" : "") +
              (bordered_ ? std::string(widths_[c] + 2, '-') : ' ' + std::string(widths_[c], '-') + ' ');
    }
    line(header);
    line(rule);
  }
  // Pointer writes into one line per row, as CsvSink does: rows come by the million.
  void write_row(const std::vector<Cell>& cells) override {
    size_t bound = 1;
    for (size_t c = 0; c < columns_.size(); ++c)
      bound += widths_[c] + 3 +
               (c >= cells.size() ? 0 : cells[c].kind == Cell::Kind::kText ? cells[c].text_view().size() : kGroupedNumberRoom);
    if (line_.size() < bound) line_.resize(std::max(bound, line_.size() * 2));
    char* p = line_.data();
    char number[kGroupedNumberRoom];
    for (size_t c = 0; c < columns_.size(); ++c) {
      std::string_view text;
      size_t text_width = 0;
      if (c < cells.size() && cells[c].kind == Cell::Kind::kText) {
        text = cells[c].text_view();
        text_width = width(text);
      } else if (c < cells.size()) {
        text = std::string_view(number, size_t(write_number(number, cells[c], true) - number));
        text_width = text.size();
      }
      const size_t pad = widths_[c] > text_width ? widths_[c] - text_width : 0;
      const bool right = c < cells.size() && cells[c].right;
      if (c && bordered_) *p++ = '|';
      *p++ = ' ';
      if (right) p = std::fill_n(p, pad, ' ');
      p = std::copy(text.begin(), text.end(), p);
      if (!right) p = std::fill_n(p, pad, ' ');
      *p++ = ' ';
    }
    while (p > line_.data() && p[-1] == ' ') --p;
    *p++ = '\n';
    buf_.append(line_.data(), size_t(p - line_.data()));
  }

 private:
  void line(const std::string& text) {
    size_t end = text.size();
    while (end && text[end - 1] == ' ') --end;
    buf_.append(text, 0, end);
    buf_ += '\n';
  }
  bool bordered_;
  std::vector<size_t> widths_;
  std::vector<char> line_;
};

}  // namespace

bool parse_table_format(std::string_view name, TableFormat& out) {
  for (TableFormat f : {TableFormat::kColumn, TableFormat::kTable, TableFormat::kCsv, TableFormat::kTsv, TableFormat::kJson})
    if (name == table_format_name(f)) {
      out = f;
      return true;
    }
  return false;
}

const char* table_format_name(TableFormat format) {
  switch (format) {
    case TableFormat::kColumn: return "column";
    case TableFormat::kTable: return "table";
    case TableFormat::kCsv: return "csv";
    case TableFormat::kTsv: return "tsv";
    case TableFormat::kJson: return "json";
  }
  return "";
}

bool parse_time_unit(std::string_view name, TimeUnit& out) {
  if (name == "nsec" || name == "nanoseconds") out = TimeUnit::kNanoseconds;
  else if (name == "usec" || name == "microseconds") out = TimeUnit::kMicroseconds;
  else if (name == "msec" || name == "milliseconds") out = TimeUnit::kMilliseconds;
  else if (name == "sec" || name == "seconds") out = TimeUnit::kSeconds;
  else return false;
  return true;
}

std::unique_ptr<TableSink> make_table_sink(FILE* out, TableFormat format, TimeUnit unit,
                                           const std::vector<size_t>* widths) {
  static const std::vector<size_t> kNone;
  switch (format) {
    case TableFormat::kColumn: return std::make_unique<ColumnSink>(out, unit, false, widths ? *widths : kNone);
    case TableFormat::kTable: return std::make_unique<ColumnSink>(out, unit, true, widths ? *widths : kNone);
    case TableFormat::kCsv: return std::make_unique<CsvSink>(out, unit, ',');
    case TableFormat::kTsv: return std::make_unique<CsvSink>(out, unit, '\t');
    case TableFormat::kJson: return std::make_unique<JsonSink>(out, unit);
  }
  return nullptr;
}

void WidthSink::begin(const std::string&, const std::vector<std::string>& columns) {
  std::vector<std::string> titles = columns;
  time_columns_ = time_columns(titles, unit_);
  widths_.assign(titles.size(), 0);
  for (size_t c = 0; c < titles.size(); ++c) widths_[c] = width(titles[c]);
}

void WidthSink::row(std::vector<Cell>& cells) {
  convert_row(cells, time_columns_, unit_);
  for (size_t c = 0; c < cells.size() && c < widths_.size(); ++c)
    widths_[c] = std::max(widths_[c], cells[c].kind == Cell::Kind::kText ? width(cells[c].text_view())
                                                                          : grouped_width(cells[c]));
}

void replay(Table& table, TableSink& sink) {
  sink.begin(table.title, table.columns);
  std::vector<Cell> row;
  for (const auto& r : table.rows) {
    row = r;
    sink.row(row);
  }
  sink.end();
}


}  // namespace cutrace::report
