// The table of `cutrace export`'s formats (exporter.h).
#include <cstdlib>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "export/exporter.h"
#include "export/perfetto.h"
#include "export/sqlite_export.h"

namespace cutrace::exporting {
namespace {

using model::ExportOptions;

std::string count(uint64_t n, const char* one, const char* many) { return reader::thousands(n) + " " + (n == 1 ? one : many); }

ExportResult timeline_result(const PerfettoCounts& counts) {
  ExportResult result;
  std::string more = counts.nvtx ? ", " + count(counts.nvtx, "NVTX range or mark", "NVTX ranges and marks") : "";
  if (counts.samples) more += ", " + count(counts.samples, "CPU sample", "CPU samples");
  if (counts.python_samples) more += ", " + count(counts.python_samples, "Python sample", "Python samples");
  if (counts.gpu) more += ", " + count(counts.gpu, "GPU operation", "GPU operations");
  result.written = count(counts.calls, "call", "calls") + more + ", " + count(counts.processes, "process", "processes") +
                   ", " + count(counts.threads, "thread", "threads");
  result.notes = counts.symbol_notes;
  return result;
}

ExportResult write_perfetto_protobuf(reader::TraceReader& reader, FILE* out, const ExportOptions& options) {
  return timeline_result(write_perfetto(reader, out, options, PerfettoFormat::kProtobuf));
}

ExportResult write_perfetto_json(reader::TraceReader& reader, FILE* out, const ExportOptions& options) {
  return timeline_result(write_perfetto(reader, out, options, PerfettoFormat::kJson));
}

ExportResult job_result(const std::vector<reader::TraceReader*>& traces, FILE* out, const ExportOptions& options,
                        PerfettoFormat format) {
  ExportResult result;
  const PerfettoCounts counts = write_perfetto_job(traces, out, options, format, result.notes);
  result.notes.insert(result.notes.end(), counts.symbol_notes.begin(), counts.symbol_notes.end());
  result.written = std::to_string(traces.size()) + " traces: " + reader::thousands(counts.calls) + " calls, " +
                   reader::thousands(counts.processes) + " processes, " + reader::thousands(counts.threads) + " threads";
  return result;
}

ExportResult write_perfetto_protobuf_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                         const ExportOptions& options) {
  return job_result(traces, out, options, PerfettoFormat::kProtobuf);
}

ExportResult write_perfetto_json_job(const std::vector<reader::TraceReader*>& traces, FILE* out,
                                     const ExportOptions& options) {
  return job_result(traces, out, options, PerfettoFormat::kJson);
}

// The Perfetto UI keeps a trace in the browser's memory (about 2 GB); CUTRACE_PERFETTO_UI_LIMIT_BYTES
// moves the line (default 1 GiB of JSON, which the UI parses into several times its size, or 2 GiB of
// protobuf).
std::vector<std::string> size_warnings(const std::string& path, uint64_t bytes, uint64_t limit, const char* what) {
  if (const char* text = std::getenv("CUTRACE_PERFETTO_UI_LIMIT_BYTES"); text && *text) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (*end == '\0') limit = v;
  }
  if (bytes <= limit) return {};
  return {path + " holds " + reader::thousands(bytes) + " bytes of " + what + ", more than the Perfetto UI can load "
          "in a browser; export a part with --from and --to, or open it with trace_processor --httpd"};
}

std::vector<std::string> json_size_warnings(const std::string& path, uint64_t bytes) {
  return size_warnings(path, bytes, uint64_t(1) << 30, "JSON");
}

std::vector<std::string> protobuf_size_warnings(const std::string& path, uint64_t bytes) {
  return size_warnings(path, bytes, uint64_t(2) << 30, "protobuf");
}

}  // namespace

const std::vector<ExporterInfo>& exporters() {
  static const std::vector<ExporterInfo> kExporters = {
      // type, description, extension, made of tables,
      //   write (a stream), write_file (a file of its own), python_module, write_job, size_warnings
      {"perfetto", "Perfetto's protobuf trace, for ui.perfetto.dev and trace_processor", ".pftrace", false,
       write_perfetto_protobuf, nullptr, nullptr, write_perfetto_protobuf_job, protobuf_size_warnings},
      {"perfetto-json", "Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing", ".json", false,
       write_perfetto_json, nullptr, nullptr, write_perfetto_json_job, json_size_warnings},
      {"sqlite", "an SQLite database with nsys's tables and columns (docs/sql.md)", ".sqlite", true,
       nullptr, write_sqlite, nullptr, nullptr, nullptr},
      {"parquetdir", "a directory of Parquet files, one per table of the SQLite export (needs pyarrow)", "_pqtdir", true,
       nullptr, nullptr, "cutrace", nullptr, nullptr},
      {"arrowdir", "a directory of Arrow IPC files, one per table of the SQLite export (needs pyarrow)", "_arwdir", true,
       nullptr, nullptr, "cutrace", nullptr, nullptr},
      {"arrow", "the same tables in one file, NAME.arrows, an Arrow IPC stream each (needs pyarrow)", ".arrows", true,
       nullptr, nullptr, "cutrace", nullptr, nullptr},
      {"kineto", "PyTorch's Kineto JSON, NAME_kineto/rank-N.json per rank, for HTA (needs pyarrow)", "_kineto", false,
       nullptr, nullptr, "cutrace", nullptr, nullptr},
  };
  return kExporters;
}

std::string exporter_types(bool (*which)(const ExporterInfo&), const char* last) {
  std::vector<const char*> types;
  for (const ExporterInfo& e : exporters())
    if (which(e)) types.push_back(e.type);
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) out += (i == 0 ? "" : i + 1 == types.size() ? last : ", ") + std::string(types[i]);
  return out;
}

const ExporterInfo* find_exporter(const std::string& type) {
  for (const ExporterInfo& e : exporters())
    if (type == e.type) return &e;
  return nullptr;
}

}  // namespace cutrace::exporting
