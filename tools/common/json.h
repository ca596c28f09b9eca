// JSON text as the tables (report/table.h) and the Perfetto JSON export (export/perfetto.h) write it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cutrace::json {

// A JSON string literal with escapes; invalid UTF-8 becomes U+FFFD so the output always parses.
void append_json_string(std::string& out, std::string_view s);
// A JSON array of strings.
void append_json_strings(std::string& out, const std::vector<std::string>& strings);

}  // namespace cutrace::json
