#include "common/json.h"

#include <cstdint>

namespace cutrace::json {

void append_json_strings(std::string& out, const std::vector<std::string>& strings) {
  out += '[';
  for (size_t i = 0; i < strings.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, strings[i]);
  }
  out += ']';
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

}  // namespace cutrace::json
