#include "report/table.h"

#include <algorithm>
#include <cmath>

#include "reader/decode.h"

namespace cutrace::report {
namespace {

std::string plain_decimal(double v, int decimals) {
  if (!std::isfinite(v)) v = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "1234567.8" -> "1,234,567.8"
std::string grouped_decimal(double v, int decimals) {
  std::string s = plain_decimal(v, decimals);
  const bool negative = s[0] == '-';
  const size_t start = negative ? 1 : 0;
  size_t dot = s.find('.');
  if (dot == std::string::npos) dot = s.size();
  std::string digits = s.substr(start, dot - start);
  std::string out = negative ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out + s.substr(dot);
}

std::string grouped_signed(int64_t v) {
  if (v >= 0) return reader::thousands(uint64_t(v));
  return "-" + reader::thousands(uint64_t(0) - uint64_t(v));
}

std::string column_text(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::kText: return c.text;
    case Cell::Kind::kInteger: return reader::thousands(c.u);
    case Cell::Kind::kSignedInteger: return grouped_signed(c.s);
    case Cell::Kind::kDecimal: return grouped_decimal(c.d, c.decimals);
  }
  return {};
}

std::string raw_text(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::kText: return c.text;
    case Cell::Kind::kInteger: return std::to_string(c.u);
    case Cell::Kind::kSignedInteger: return std::to_string(c.s);
    case Cell::Kind::kDecimal: return plain_decimal(c.d, c.decimals);
  }
  return {};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += "\"\"";
    else out.push_back(ch);
  }
  return out + "\"";
}

// Display width in terminal columns: UTF-8 continuation bytes take none.
size_t width(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char ch) { return (uint8_t(ch) & 0xc0) != 0x80; }));
}

void write_line(FILE* out, std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), out);
}

std::string tsv_field(std::string s) {
  for (char& ch : s)
    if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

// `bordered`: nsys's "table" format, columns between '|'.
void write_column(FILE* out, const Table& t, bool bordered) {
  const size_t n = t.columns.size();
  std::vector<std::vector<std::string>> cells(t.rows.size());
  std::vector<size_t> w(n);
  for (size_t c = 0; c < n; ++c) w[c] = width(t.columns[c]);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    for (size_t c = 0; c < n && c < t.rows[r].size(); ++c) {
      cells[r].push_back(column_text(t.rows[r][c]));
      w[c] = std::max(w[c], width(cells[r].back()));
    }
    cells[r].resize(n);
  }
  std::fprintf(out, " ** %s:\n\n", t.title.c_str());
  std::string header, rule;
  const char* sep = bordered ? "|" : "";
  for (size_t c = 0; c < n; ++c) {
    const size_t pad = w[c] - width(t.columns[c]);
    header += (c ? sep : "") + (' ' + std::string(pad / 2, ' ') + t.columns[c] + std::string(pad - pad / 2, ' ') + ' ');
    rule += (c && bordered ? "+" : "") + (bordered ? std::string(w[c] + 2, '-') : ' ' + std::string(w[c], '-') + ' ');
  }
  write_line(out, header);
  write_line(out, rule);
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < n; ++c) {
      const std::string& s = cells[r][c];
      const size_t pad = w[c] - width(s);
      const bool right = c < t.rows[r].size() && t.rows[r][c].right;
      if (c) line += sep;
      line += ' ';
      line += right ? std::string(pad, ' ') + s : s + std::string(pad, ' ');
      line += ' ';
    }
    write_line(out, line);
  }
}

void write_csv(FILE* out, const Table& t) {
  std::string line;
  for (size_t c = 0; c < t.columns.size(); ++c) line += (c ? "," : "") + csv_field(t.columns[c]);
  std::fprintf(out, "%s\n", line.c_str());
  for (const auto& row : t.rows) {
    line.clear();
    for (size_t c = 0; c < row.size(); ++c) line += (c ? "," : "") + csv_field(raw_text(row[c]));
    std::fprintf(out, "%s\n", line.c_str());
  }
}

void write_tsv(FILE* out, const Table& t) {
  std::string line;
  for (size_t c = 0; c < t.columns.size(); ++c) line += (c ? "\t" : "") + tsv_field(t.columns[c]);
  std::fprintf(out, "%s\n", line.c_str());
  for (const auto& row : t.rows) {
    line.clear();
    for (size_t c = 0; c < row.size(); ++c) line += (c ? "\t" : "") + tsv_field(raw_text(row[c]));
    std::fprintf(out, "%s\n", line.c_str());
  }
}

void write_json(FILE* out, const Table& t) {
  std::fputs("[", out);
  std::string obj;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    obj = r ? ",\n  {" : "\n  {";
    for (size_t c = 0; c < t.columns.size() && c < t.rows[r].size(); ++c) {
      if (c) obj += ", ";
      append_json_string(obj, t.columns[c]);
      obj += ": ";
      const Cell& cell = t.rows[r][c];
      if (cell.kind == Cell::Kind::kText) append_json_string(obj, cell.text);
      else obj += raw_text(cell);
    }
    obj += "}";
    std::fwrite(obj.data(), 1, obj.size(), out);
  }
  std::fputs(t.rows.empty() ? "]\n" : "\n]\n", out);
}

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

void convert_time_unit(Table& table, TimeUnit unit) {
  if (unit == TimeUnit::kNanoseconds) return;
  const char* label = unit == TimeUnit::kMicroseconds ? "(us)" : unit == TimeUnit::kMilliseconds ? "(ms)" : "(s)";
  const uint8_t digits = unit == TimeUnit::kMicroseconds ? 3 : unit == TimeUnit::kMilliseconds ? 6 : 9;
  const double divisor = unit == TimeUnit::kMicroseconds ? 1e3 : unit == TimeUnit::kMilliseconds ? 1e6 : 1e9;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const size_t at = table.columns[c].find("(ns)");
    if (at == std::string::npos) continue;
    table.columns[c].replace(at, 4, label);
    for (auto& row : table.rows) {
      if (c >= row.size()) continue;
      Cell& cell = row[c];
      if (cell.kind == Cell::Kind::kInteger) cell = Cell::decimal(double(cell.u) / divisor, digits);
      else if (cell.kind == Cell::Kind::kSignedInteger) cell = Cell::decimal(double(cell.s) / divisor, digits);
      else if (cell.kind == Cell::Kind::kDecimal) cell = Cell::decimal(cell.d / divisor, uint8_t(digits + cell.decimals));
    }
  }
}

void write_table(FILE* out, const Table& table, TableFormat format) {
  switch (format) {
    case TableFormat::kColumn: write_column(out, table, false); break;
    case TableFormat::kTable: write_column(out, table, true); break;
    case TableFormat::kCsv: write_csv(out, table); break;
    case TableFormat::kTsv: write_tsv(out, table); break;
    case TableFormat::kJson: write_json(out, table); break;
  }
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
