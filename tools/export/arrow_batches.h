// The tables of export_tables.h as Arrow record batches (the Arrow C data interface), for the Python
// package: rows are gathered per table into columns and handed out a batch at a time, so that a trace
// of any size streams with memory bounded by one batch per table.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "export/arrow_c_abi.h"
#include "export/export_tables.h"

namespace cutrace::exporting {

// Rows per batch: large enough that Arrow's per-batch cost vanishes, small enough that a batch of
// every table together stays a few hundred MB at most.
inline constexpr int64_t kArrowBatchRows = 65536;

// The schema of a table: a struct of its columns (int64 "l", double "g", UTF-8 "u"), each nullable
// unless the table definition says NOT NULL. The caller releases it.
void export_arrow_schema(TableId table, ArrowSchema* out);

class ArrowBatchSink : public RowSink {
 public:
  ArrowBatchSink();
  ~ArrowBatchSink() override;
  bool row(TableId table, const Value* values) override;
  // Ends the batches being filled (the trace was read to its end).
  void flush();
  bool has_batch() const { return !ready_.empty(); }
  // Moves the oldest finished batch into `out` (the caller releases it) and returns its table.
  TableId take(ArrowArray* out);

 private:
  struct Builder;
  std::vector<std::unique_ptr<Builder>> builders_;  // by TableId
  std::deque<std::pair<TableId, std::unique_ptr<Builder>>> ready_;
};

}  // namespace cutrace::exporting
