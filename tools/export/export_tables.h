// The tables of `cutrace export --type sqlite|parquetdir|arrow` and of the Python package: one
// definition of every table and column, and one pass over a trace that produces their rows. Each
// output format is a RowSink; the tables, their columns and their rows are the same in all of them
// (docs/sql.md). The names and columns are nsys's export schema's where cutrace has the data, then
// cutrace's own tables, CUTRACE_*.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"
#include "export/exporter.h"

namespace cutrace::exporting {

// The nsys schema version whose names the tables follow (META_DATA_EXPORT's EXPORT_SCHEMA_VERSION): the
// version Nsight Systems 2026.1's exports report, whose User Guide's schema reference the tables follow.
inline constexpr const char* kNsysSchemaVersion = "3.24.14";

enum class ColumnType : uint8_t { kInt64, kDouble, kText };

struct ColumnDef {
  const char* name;
  ColumnType type;
  bool not_null;  // as nsys's schema declares it; a missing value is then 0, as nsys exports it
};

// In the order of export_tables().
enum class TableId : uint16_t {
  kStringIds,
  kThreadNames,
  kProcessStreams,
  kSessionStartTime,
  kSystemEnv,
  kTargetInfoGpu,
  kTargetInfoCudaDevice,
  kAnalysisDetails,
  kMetaDataCapture,
  kMetaDataExport,
  kEnumEventClass,
  kEnumEventType,
  kEnumMemcpyOper,
  kEnumMemKind,
  kEnumSyncType,
  kEnumDevMemEventOper,
  kRuntime,
  kCublasEvents,
  kCudnnEvents,
  kOsrtApi,
  kMpiP2pEvents,
  kMpiCollectivesEvents,
  kMpiStartWaitEvents,
  kMpiOtherEvents,
  kMpiRanks,
  kCudaCallchains,
  kOsrtCallchains,
  kKernel,
  kMemcpy,
  kMemset,
  kSynchronization,
  kGraphTrace,
  kGpuMemoryUsage,
  kNvtxEvents,
  kCompositeEvents,
  kSamplingCallchains,
  kSchedEvents,
  kApiCalls,
  kApiArguments,
  kPythonCallchains,
  kPythonSamples,
  kProcesses,
  kThreads,
  kSummary,
  kCount,
};

struct TableDef {
  TableId id;
  const char* name;
  std::vector<ColumnDef> columns;
  const char* primary_key;  // "id, stackDepth" as nsys declares it; nullptr: none
};

const std::vector<TableDef>& export_tables();
inline const TableDef& table_def(TableId id) { return export_tables()[size_t(id)]; }

// One cell. Text is borrowed: valid until the sink's row() returns.
struct Value {
  enum class Kind : uint8_t { kNull, kInt, kReal, kText } kind = Kind::kNull;
  int64_t i = 0;
  double d = 0;
  std::string_view t;
};
inline Value null_value() { return {}; }
inline Value int_value(int64_t v) { return {Value::Kind::kInt, v, 0, {}}; }
inline Value real_value(double v) { return {Value::Kind::kReal, 0, v, {}}; }
inline Value text_value(std::string_view v) { return {Value::Kind::kText, 0, 0, v}; }

class RowSink {
 public:
  virtual ~RowSink() = default;
  // One row of `table`: one value per column of its definition. False stops the export (a full disk).
  virtual bool row(TableId table, const Value* values) = 0;
};

struct TableCounts {
  uint64_t calls = 0, gpu = 0, nvtx = 0, samples = 0;
  std::vector<std::string> notes;  // what could not be named (symbolizer notes), one line each
};

class TableProducer;

// The same, a step at a time, for a consumer that takes rows as they come (the Python package's
// record batches): each step reads one event of the trace; the last gives the tables written at the end.
class TableStream {
 public:
  TableStream(reader::TraceReader& reader, const model::ExportOptions& options, RowSink& sink);
  ~TableStream();
  TableStream(const TableStream&) = delete;
  TableStream& operator=(const TableStream&) = delete;
  // False once the trace is read to its end, or the sink refused a row (ok() tells which).
  bool step();
  bool ok() const;
  TableCounts counts() const;

 private:
  reader::TraceReader& reader_;
  std::unique_ptr<TableProducer> producer_;
  bool done_ = false;
};

// Reads `reader` to its end and gives every row of every table to `sink`. Rows of a table come in the
// order the trace gives them, but for calls that wait for their CorrID (call_links.h), which follow
// when it is known. False when the sink refused a row.
bool produce_tables(reader::TraceReader& reader, const model::ExportOptions& options, RowSink& sink,
                    TableCounts* counts);

}  // namespace cutrace::exporting
