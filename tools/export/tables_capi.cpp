// libcutrace-tables.so: the C interface through which the Python package (python/cutrace) reads a
// trace's tables, with the project's own reader, as Arrow record batches (arrow_batches.h). Plain C
// types only, so that ctypes binds it and no Python headers are needed to build it.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "reader/trace_reader.h"
#include "cutrace/domains.h"
#include "export/arrow_batches.h"
#include "export/export_tables.h"

namespace {

using cutrace::exporting::ArrowBatchSink;
using cutrace::exporting::TableId;
using cutrace::exporting::TableStream;
using cutrace::model::ExportOptions;

}  // namespace

struct cutrace_tables {
  cutrace::reader::TraceReader reader;
  ArrowBatchSink sink;
  std::unique_ptr<TableStream> stream;
  std::string status;
  bool finished = false;
};

#define CUTRACE_TABLES_API extern "C" __attribute__((visibility("default")))

// Bumped when a function below changes; the package refuses a library of another version.
CUTRACE_TABLES_API int cutrace_tables_abi_version() { return 4; }

// The file-name prefixes of the CUDA libraries cutrace traces (CUDA's own and those traced with it), as
// domains.def lists them, separated by spaces: for the package's view of which frames are not the
// program's (cutrace analyze).
CUTRACE_TABLES_API const char* cutrace_tables_cuda_library_prefixes() {
  static const std::string prefixes = [] {
    std::string out;
    namespace abi = cutrace::abi;
    for (const abi::DomainInfo& info : abi::kDomains)
      if ((abi::domain_bit(info.domain) & (abi::kCudaDomains | abi::kCudaLibraryDomains)) && !info.libraries.empty())
        out += (out.empty() ? "" : " ") + std::string(info.libraries);
    return out;
  }();
  return prefixes.c_str();
}

CUTRACE_TABLES_API int cutrace_tables_count() { return int(TableId::kCount); }

CUTRACE_TABLES_API const char* cutrace_tables_name(int table) {
  if (table < 0 || table >= int(TableId::kCount)) return nullptr;
  return cutrace::exporting::table_def(TableId(table)).name;
}

CUTRACE_TABLES_API void cutrace_tables_schema(int table, ArrowSchema* out) {
  cutrace::exporting::export_arrow_schema(TableId(table), out);
}

// Opens a trace; null with `error` set to one sentence when it cannot be read or `times` is not
// understood. show_internal, from_ns, to_ns, times (null for none), ts_normalize and ts_shift_ns are
// `cutrace export`'s --show-internal, --from, --to, --times, --ts-normalize and --ts-shift.
CUTRACE_TABLES_API cutrace_tables* cutrace_tables_open(const char* path, int show_internal, uint64_t from_ns,
                                                       uint64_t to_ns, const char* times, int ts_normalize,
                                                       int64_t ts_shift_ns, char* error, size_t error_bytes) {
  ExportOptions options;
  options.show_internal = show_internal != 0;
  options.window_begin_ns = from_ns;
  options.window_end_ns = to_ns;
  options.ts_normalize = ts_normalize != 0;
  options.ts_shift_ns = ts_shift_ns;
  if (std::string why; times && !cutrace::model::parse_time_ranges(times, options.times, why)) {
    if (error && error_bytes) std::snprintf(error, error_bytes, "%s.", why.c_str());
    return nullptr;
  }
  auto t = std::make_unique<cutrace_tables>();
  if (!t->reader.open(path)) {
    if (error && error_bytes) std::snprintf(error, error_bytes, "%s", t->reader.error().c_str());
    return nullptr;
  }
  t->stream = std::make_unique<TableStream>(t->reader, options, t->sink);
  return t.release();
}

// The metadata the trace starts with (the launcher's and the recorder's: host, job.*, start.*), read
// without reading its events: "key\0value\0" for each pair, in file order. Returns the bytes that
// takes, copied into `out` only when they fit (call again with more room); -1 with `error` set to one
// sentence when the trace cannot be read.
CUTRACE_TABLES_API int64_t cutrace_tables_metadata(const char* path, char* out, size_t out_bytes, char* error,
                                                   size_t error_bytes) {
  cutrace::reader::TraceReader reader;
  if (!reader.open(path)) {
    if (error && error_bytes) std::snprintf(error, error_bytes, "%s", reader.error().c_str());
    return -1;
  }
  cutrace::reader::Event ev;
  while (reader.next(ev))
    if (ev.kind != cutrace::reader::EventKind::kMetadata && ev.kind != cutrace::reader::EventKind::kApiTable) break;
  std::string pairs;
  for (const auto& [key, value] : reader.metadata()) {
    pairs.append(key).push_back('\0');
    pairs.append(value).push_back('\0');
  }
  if (out && pairs.size() <= out_bytes) std::memcpy(out, pairs.data(), pairs.size());
  return int64_t(pairs.size());
}

// The next batch: fills `out` (the caller releases it) and returns its table, or returns -1 once every
// row was handed out.
CUTRACE_TABLES_API int cutrace_tables_next(cutrace_tables* t, ArrowArray* out) {
  while (!t->sink.has_batch() && !t->finished) {
    if (!t->stream->step()) {
      t->finished = true;
      t->sink.flush();
    }
  }
  if (!t->sink.has_batch()) return -1;
  return int(t->sink.take(out));
}

// After the last batch: 1 when the trace was whole, 0 when it was cut off or damaged (its intact part
// was read), and in `status` the reader's sentence about it.
CUTRACE_TABLES_API int cutrace_tables_complete(cutrace_tables* t) { return t->reader.status().complete() ? 1 : 0; }

CUTRACE_TABLES_API const char* cutrace_tables_status(cutrace_tables* t) {
  t->status = t->reader.status().describe();
  return t->status.c_str();
}

// How far reading has come, and the file's size, in bytes (a progress bar).
CUTRACE_TABLES_API void cutrace_tables_progress(cutrace_tables* t, uint64_t* done, uint64_t* total) {
  *done = t->reader.bytes_read();
  *total = t->reader.file_bytes();
}

CUTRACE_TABLES_API void cutrace_tables_close(cutrace_tables* t) { delete t; }
