#include "report/table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "reader/decode.h"

namespace cutrace::report {
namespace {

void append_decimal(std::string& out, double v, int decimals) {
  if (!std::isfinite(v)) v = 0;
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  out.append(buf, size_t(std::max(0, std::min<int>(n, sizeof buf - 1))));
}

template <class T>
void append_number(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, size_t(r.ptr - buf));
}

// Inserts thousands separators into the integer part of the number text at out[from...].
void group_digits(std::string& out, size_t from) {
  size_t start = from + (out.size() > from && out[from] == '-' ? 1 : 0);
  size_t end = out.find('.', start);
  if (end == std::string::npos) end = out.size();
  for (size_t pos = end; pos > start + 3;) {
    pos -= 3;
    out.insert(pos, 1, ',');
  }
}

// The text of a cell: plain (csv, tsv, json) or as the column layouts show numbers.
void append_cell(std::string& out, const Cell& c, bool grouped) {
  const size_t from = out.size();
  switch (c.kind) {
    case Cell::Kind::kText: {
      const std::string_view t = c.text_view();
      out.append(t.data(), t.size());
      return;
    }
    case Cell::Kind::kInteger: append_number(out, c.u); break;
    case Cell::Kind::kSignedInteger: append_number(out, c.s); break;
    case Cell::Kind::kDecimal: append_decimal(out, c.d, c.decimals); break;
  }
  if (grouped) group_digits(out, from);
}

// Display width in terminal columns: UTF-8 continuation bytes take none.
size_t width(std::string_view s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char ch) { return (uint8_t(ch) & 0xc0) != 0x80; }));
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
    // A double printed with "%.*f" takes up to 309 integer digits.
    for (const Cell& c : cells)
      bound += 1 + (c.kind == Cell::Kind::kText ? 2 * c.text_view().size() + 2
                    : c.kind == Cell::Kind::kDecimal ? 400 : 24);
    if (line_.size() < bound) line_.resize(std::max(bound, line_.size() * 2));
    char* p = line_.data();
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) *p++ = sep_;
      const Cell& cell = cells[c];
      switch (cell.kind) {
        case Cell::Kind::kText: p = field(p, cell.text_view()); break;
        case Cell::Kind::kInteger: p = std::to_chars(p, p + 24, cell.u).ptr; break;
        case Cell::Kind::kSignedInteger: p = std::to_chars(p, p + 24, cell.s).ptr; break;
        case Cell::Kind::kDecimal: {
          std::string text;
          append_cell(text, cell, false);
          std::memcpy(p, text.data(), std::min<size_t>(text.size(), 400));
          p += std::min<size_t>(text.size(), 400);
          break;
        }
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
  void write_row(const std::vector<Cell>& cells) override {
    std::string& l = scratch_;
    l.clear();
    for (size_t c = 0; c < columns_.size(); ++c) {
      text_.clear();
      if (c < cells.size()) append_cell(text_, cells[c], true);
      const size_t pad = widths_[c] > width(text_) ? widths_[c] - width(text_) : 0;
      const bool right = c < cells.size() && cells[c].right;
      if (c && bordered_) l += '|';
      l += ' ';
      if (right) l.append(pad, ' ');
      l += text_;
      if (!right) l.append(pad, ' ');
      l += ' ';
    }
    line(l);
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
  std::string scratch_, text_;
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
  std::string text;
  for (size_t c = 0; c < cells.size() && c < widths_.size(); ++c) {
    text.clear();
    append_cell(text, cells[c], true);
    widths_[c] = std::max(widths_[c], width(text));
  }
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

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    // Most names are plain ASCII: copy runs that need no escape in one append.
    size_t run = i;
    while (run < s.size() && uint8_t(s[run]) >= 0x20 && uint8_t(s[run]) < 0x7f && s[run] != '"' && s[run] != '\\')
      ++run;
    if (run > i) {
      out.append(s.data() + i, run - i);
      i = run;
      continue;
    }
    const uint8_t b = uint8_t(s[i]);
    if (b < 0x80) {
      switch (b) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (b < 0x20 || b == 0x7f) {
            out += "\\u00";
            out.push_back(kHex[b >> 4]);
            out.push_back(kHex[b & 15]);
          } else {
            out.push_back(char(b));
          }
      }
      ++i;
      continue;
    }
    // Validate one UTF-8 sequence (no overlongs, no surrogates, nothing above U+10FFFF).
    size_t len = 0;
    uint32_t cp = 0;
    if (b >= 0xc2 && b <= 0xdf) len = 2, cp = b & 0x1f;
    else if (b >= 0xe0 && b <= 0xef) len = 3, cp = b & 0x0f;
    else if (b >= 0xf0 && b <= 0xf4) len = 4, cp = b & 0x07;
    bool ok = len && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const uint8_t cb = uint8_t(s[i + k]);
      if ((cb & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cb & 0x3f);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
      ok = false;
    if (ok) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    }
  }
  out.push_back('"');
}

}  // namespace cutrace::report
