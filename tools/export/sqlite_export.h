// `cutrace export --type sqlite`: the tables of export_tables.h in an SQLite database, as nsys's
// export lays them out (docs/sql.md).
#pragma once

#include <string>

#include "export/exporter.h"

namespace cutrace::exporting {

// Writes the database to `path` (an empty or new file). On failure `error` says why, in one sentence.
ExportResult write_sqlite(reader::TraceReader& reader, const std::string& path, const model::ExportOptions& options,
                          std::string& error);

}  // namespace cutrace::exporting
