// Writes .cutrace files (include/cutrace/format.h). Used by the recorder, and by tests and benchmarks
// that need synthetic traces. Not thread-safe: one writer per file, used from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cutrace/api_table.h"
#include "cutrace/format.h"

struct ZSTD_CCtx_s;

namespace cutrace::trace {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

class TraceWriter {
 public:
  TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();

  // Creates (truncates) `path` and writes the FileHeader. Every write below returns false and sets
  // error() to one sentence once the file cannot be written; later calls then do nothing.
  bool open(const std::string& path, int compression_level = 3);
  // Synthetic traces (tests, benchmarks) choose the creation time the header records, so that their
  // made-up event times lie after it; call before open().
  void set_creation_monotonic_ns(uint64_t ns) { creation_monotonic_ns_ = ns; }

  bool write_metadata(const KeyValues& pairs);
  // The kNames chunk (names_chunk.h); written once, before finish().
  bool write_names(const std::vector<uint8_t>& payload);
  bool write_api_table(const ApiInfo* table, uint32_t count);

  // Events are gathered into the current kEvents chunk, which is compressed and written by
  // flush_events() or automatically once it holds `events_chunk_bytes` raw bytes.
  void add_thread_def(const format::ThreadDef& def);
  // A kRecords block of `record_count` records in the file encoding (codec::encode): its two
  // streams, which the writer joins behind the block's prefix.
  void add_records(uint32_t thread_index, const uint8_t* structure, uint32_t structure_bytes, const uint8_t* times,
                   uint32_t times_bytes, uint32_t record_count);
  // The same from a whole block body (codec::BlockBuilder::body()).
  void add_records(uint32_t thread_index, const std::vector<uint8_t>& body, uint32_t record_count);
  bool flush_events();

  // Flushes pending events, writes the kEnd chunk and closes the file.
  bool finish(const KeyValues& summary, const std::vector<format::ThreadStats>& threads);
  // Closes without kEnd (what a crash leaves behind, for tests).
  void close();

  void set_events_chunk_bytes(uint32_t bytes) { events_chunk_bytes_ = bytes; }
  // finish() also fsyncs the file, for a writer whose output must survive a power loss once it is
  // renamed into place. Off by default: tests and benchmarks write many throwaway files.
  void set_sync_on_finish(bool sync) { sync_on_finish_ = sync; }
  // Compresses and writes chunks on `threads` background threads, so that flush_events() returns at
  // once instead of compressing megabytes on the caller's thread (it blocks only while `threads` + 2
  // chunks are already in flight). Chunks still reach the file whole and in sequence order. 0, the
  // default, compresses in the calling thread. Takes effect at the next open().
  void set_compression_threads(unsigned threads) { compression_threads_ = threads; }
  // False once any write has failed, also one done in the background; error() then says why.
  bool good();
  // Raw bytes of events gathered but not yet handed on as a chunk.
  size_t pending_event_bytes() const { return events_.size(); }
  bool is_open() const { return file_ != nullptr; }
  const std::string& error() const { return error_; }
  // With background compression these count what has reached the file so far and the chunks handed
  // on (written or in flight), respectively; after finish() or close() both are final.
  uint64_t bytes_written() const { return bytes_written_.load(std::memory_order_relaxed); }
  // Records of add_records() in chunks that have reached the file (so far, with background
  // compression): after a failed write, those handed over and not counted here are not in the file.
  uint64_t records_on_file() const { return records_on_file_.load(std::memory_order_relaxed); }
  uint64_t chunks_written() const { return sequence_; }
  // Chunks a compression thread wrote at the fast backlog level instead of the one asked for,
  // because more chunks were waiting behind them. finish() records the final count in kEnd.
  uint64_t chunks_compressed_fast() const { return chunks_compressed_fast_.load(std::memory_order_relaxed); }

 private:
  struct Pipeline;
  // By value: a payload built for one chunk is moved in, one that is reused (events_) is copied.
  // `records`: how many add_records() records the chunk holds, for records_on_file().
  bool write_chunk(format::ChunkType type, std::vector<uint8_t> payload, uint64_t records = 0);
  bool submit(format::ChunkType type, std::vector<uint8_t>&& payload, uint64_t records = 0);
  void reserve_events(uint64_t block_bytes);
  void stop_pipeline();
  bool fail(const std::string& what);
  bool fail_errno(const char* action);
  FILE* file_ = nullptr;
  std::string path_, error_;
  std::optional<uint64_t> creation_monotonic_ns_;  // unset: CLOCK_MONOTONIC at open()
  int level_ = 3;
  uint64_t sequence_ = 0;
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> records_on_file_{0};
  uint64_t records_in_events_ = 0;  // of add_records(), in events_
  std::atomic<uint64_t> chunks_compressed_fast_{0};
  uint32_t events_chunk_bytes_ = 4u << 20;
  std::vector<uint8_t> events_, compressed_;
  ZSTD_CCtx_s* cctx_ = nullptr;
  bool sync_on_finish_ = false;
  unsigned compression_threads_ = 0;
  std::unique_ptr<Pipeline> pipeline_;
};

// Appends one key/value pair in the format's encoding.
void append_key_value(std::vector<uint8_t>& out, const std::string& key, const std::string& value);

}  // namespace cutrace::trace
