// Writes .cutrace files (include/cutrace/format.h). Used by the recorder, and by tests and benchmarks
// that need synthetic traces. Not thread-safe: one writer per file, used from one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cutrace/api_table.h"
#include "cutrace/format.h"

namespace cutrace::trace {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

class TraceWriter {
 public:
  TraceWriter() = default;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();

  // Creates (truncates) `path` and writes the FileHeader. Every write below returns false and sets
  // error() to one sentence once the file cannot be written; later calls then do nothing.
  bool open(const std::string& path, int compression_level = 3);

  bool write_metadata(const KeyValues& pairs);
  bool write_api_table(const ApiInfo* table, uint32_t count);

  // Events are gathered into the current kEvents chunk, which is compressed and written by
  // flush_events() or automatically once it holds `events_chunk_bytes` raw bytes.
  void add_thread_def(const format::ThreadDef& def);
  // `records` are already in file encoding (format.h): no pads, delta-encoded ApiCallRecord times.
  void add_records(uint32_t thread_index, const uint8_t* records, uint32_t bytes, uint32_t record_count);
  bool flush_events();

  // Flushes pending events, writes the kEnd chunk and closes the file.
  bool finish(const KeyValues& summary, const std::vector<format::ThreadStats>& threads);
  // Closes without kEnd (what a crash leaves behind, for tests).
  void close();

  void set_events_chunk_bytes(uint32_t bytes) { events_chunk_bytes_ = bytes; }
  const std::string& error() const { return error_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t chunks_written() const { return sequence_; }

 private:
  bool write_chunk(format::ChunkType type, const std::vector<uint8_t>& payload);
  FILE* file_ = nullptr;
  std::string path_, error_;
  int level_ = 3;
  uint64_t sequence_ = 0, bytes_written_ = 0;
  uint32_t events_chunk_bytes_ = 4u << 20;
  std::vector<uint8_t> events_, compressed_;
};

// Appends one key/value pair in the format's encoding.
void append_key_value(std::vector<uint8_t>& out, const std::string& key, const std::string& value);

}  // namespace cutrace::trace
