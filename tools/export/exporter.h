// The output formats of `cutrace export`: one table row each, which `--type`, the help, the default
// output name and the writing all go through, so that another format (SQLite, Parquet, ...) is one
// row and one writer. A writer reads the trace once, in the reader's streaming loop, and writes to the
// stream it is given: `cutrace export` opens the output (a temporary file renamed into place once the
// writer is done, or stdout), compresses it when asked, and prints what the writer reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "reader/trace_reader.h"
#include "model/export_options.h"

namespace cutrace::exporting {

struct ExportResult {
  std::string written;                // what went out, for "wrote FILE (...)": "12 calls, 1 process, 2 threads"
  std::vector<std::string> notes;     // one line each, "cutrace export: note: " before it
};

// One format: the row is all that names it, says what it is and writes it. What it is decides the
// options it takes, the help and the refusals, so none of them lists types by name.
struct ExporterInfo {
  const char* type;         // the --type value
  const char* description;  // one line for --help
  const char* extension;    // the default output's suffix after the trace's name (".json")
  // Made of the SQLite export's tables (docs/sql.md), as nsys's sqlite, parquet and arrow exports:
  // takes --tables, --lazy, --times, --ts-normalize and --ts-shift.
  bool made_of_tables;
  // It is written one of three ways; the other two are nullptr.
  // A stream: to a file or stdout, gzip-compressed when asked. Reads `reader` to its end.
  ExportResult (*write)(reader::TraceReader& reader, FILE* out, const model::ExportOptions& options);
  // A file of its own (a database): written to `path`, which exists and is empty; sets `error` to one
  // sentence when it cannot.
  ExportResult (*write_file)(reader::TraceReader& reader, const std::string& path, const model::ExportOptions& options,
                             std::string& error);
  // By the Python package (python/cutrace, with pyarrow): `cutrace export` hands its checked command
  // line, the output resolved, to `python3 -m <module> export ...`.
  const char* python_module;
  // Several traces into one stream (a job's ranks on one timeline); nullptr: one trace at a time.
  ExportResult (*write_job)(const std::vector<reader::TraceReader*>& traces, FILE* out,
                            const model::ExportOptions& options);
  // Warnings about the finished output of `bytes` bytes (before any compression), one sentence each;
  // nullptr: none.
  std::vector<std::string> (*size_warnings)(const std::string& path, uint64_t bytes);
};

const std::vector<ExporterInfo>& exporters();
// nullptr for a type exporters() does not list.
const ExporterInfo* find_exporter(const std::string& type);
// The types of the exporters `which` is true of, as "a, b and c" (`last` joins the last two).
std::string exporter_types(bool (*which)(const ExporterInfo&), const char* last = " and ");
inline bool any_exporter(const ExporterInfo&) { return true; }
inline bool is_made_of_tables(const ExporterInfo& e) { return e.made_of_tables; }
inline bool merges_traces(const ExporterInfo& e) { return e.write_job != nullptr; }

}  // namespace cutrace::exporting
