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

namespace cutrace::report {

struct ExportResult {
  std::string written;                // what went out, for "wrote FILE (...)": "12 calls, 1 process, 2 threads"
  std::vector<std::string> notes;     // one line each, "cutrace export: note: " before it
};

struct ExporterInfo {
  const char* type;         // the --type value
  const char* description;  // one line for --help
  const char* extension;    // the default output's suffix after the trace's name (".json")
  // Writes the export of `reader` (read to its end) to `out`; nullptr for a format written by name.
  ExportResult (*write)(reader::TraceReader& reader, FILE* out, const ExportOptions& options);
  // A format that writes a file of its own (a database): writes the export to `path`, which exists and
  // is empty, and sets `error` to one sentence when it cannot. nullptr for a stream format.
  ExportResult (*write_file)(reader::TraceReader& reader, const std::string& path, const ExportOptions& options,
                             std::string& error);
  // A format the Python package writes (python/cutrace, with pyarrow): `cutrace export` hands its whole
  // command line to `python3 -m <module> export ...`. nullptr for the formats written here.
  const char* python_module;
  // Warnings about the finished output of `bytes` bytes (before any compression), one sentence each;
  // nullptr: none.
  std::vector<std::string> (*size_warnings)(const std::string& path, uint64_t bytes);
};

const std::vector<ExporterInfo>& exporters();
// nullptr for a type exporters() does not list.
const ExporterInfo* find_exporter(const std::string& type);

}  // namespace cutrace::report
