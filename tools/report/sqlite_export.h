// `cutrace export --type sqlite`: the trace as an SQLite database with the tables and columns of nsys's
// export (its SQLite schema reference), so that queries written for nsys reports run on cutrace
// traces, plus cutrace's own data in tables named CUTRACE_*. docs/sql.md describes both.
#pragma once

#include <string>

#include "report/exporter.h"

namespace cutrace::report {

// The nsys schema version whose names the tables follow (META_DATA_EXPORT's EXPORT_SCHEMA_VERSION): the
// version Nsight Systems 2026.1's exports report, whose User Guide's schema reference the tables follow.
inline constexpr const char* kNsysSchemaVersion = "3.24.14";

// Writes the database to `path` (an empty or new file). On failure `error` says why, in one sentence.
ExportResult write_sqlite(reader::TraceReader& reader, const std::string& path, const ExportOptions& options,
                          std::string& error);

}  // namespace cutrace::report
