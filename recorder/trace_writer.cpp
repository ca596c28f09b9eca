#include "recorder/trace_writer.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "cutrace/record_codec.h"

namespace cutrace::trace {

namespace {

// How much less CPU preference compression threads get than the thread that drains the rings.
constexpr int kCompressionNiceIncrement = 5;

// The zstd level a compression thread falls back to while chunks wait behind the events chunk it
// takes: the draining thread blocks once the queue is full, and then the rings overflow. zstd's
// fast level -1 compresses the recorder's chunks about half again as fast as level 1 for about 24%
// more bytes.
constexpr int kBacklogCompressionLevel = -1;

uint64_t clock_ns(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

template <class T>
void append_pod(std::vector<uint8_t>& out, const T& value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof value);
}

void append_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

size_t safe_strlen(const char* s) { return s ? std::strlen(s) : 0; }

// Returns "" or why the context cannot be configured.
std::string configure(ZSTD_CCtx* cctx, int level) {
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  // The checksum lets a reader reject a chunk whose bytes were damaged after the header check passed.
  if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1)))
    return "zstd rejected compression level " + std::to_string(level) + "; use a level from 1 to 19";
  return {};
}

// Builds ChunkHeader + zstd frame of `payload` in the first `out_bytes` of `out`. `out` only grows: a
// vector is zero-filled as it grows, and filling megabytes for every chunk (most of them never
// written, as compression shrinks the chunk) cost more than a trace of a short program takes to write.
// Returns "" or why it failed.
std::string encode_chunk(ZSTD_CCtx* cctx, format::ChunkType type, uint64_t sequence,
                         const std::vector<uint8_t>& payload, std::vector<uint8_t>& out, size_t& out_bytes) {
  const size_t bound = sizeof(format::ChunkHeader) + ZSTD_compressBound(payload.size());
  if (out.size() < bound) out.resize(bound);
  const size_t stored = ZSTD_compress2(cctx, out.data() + sizeof(format::ChunkHeader),
                                       out.size() - sizeof(format::ChunkHeader), payload.data(), payload.size());
  if (ZSTD_isError(stored)) return std::string("zstd failed to compress a chunk: ") + ZSTD_getErrorName(stored);
  format::ChunkHeader header{};
  header.magic = format::kChunkMagic;
  header.type = uint16_t(type);
  header.codec = uint16_t(format::Codec::kZstd);
  header.stored_bytes = uint32_t(stored);
  header.raw_bytes = uint32_t(payload.size());
  header.sequence = sequence;
  header.header_check = format::chunk_header_check(header);
  std::memcpy(out.data(), &header, sizeof header);
  out_bytes = sizeof header + stored;
  return {};
}

// One fwrite and a flush per chunk: a recorder killed at any point leaves whole chunks plus at most
// one torn chunk at the end, which readers detect by its size or checksum.
bool write_out(FILE* file, const std::vector<uint8_t>& bytes, size_t count) {
  return std::fwrite(bytes.data(), 1, count, file) == count && std::fflush(file) == 0;
}

}  // namespace

// Background compression: the owner thread queues raw chunks in sequence order; workers compress
// them in parallel, and whichever worker completes the oldest outstanding chunk writes every
// completed chunk at the front of the queue, so the file always holds a gap-free prefix.
struct TraceWriter::Pipeline {
  struct Job {
    uint64_t sequence;
    format::ChunkType type;
    uint64_t records;
    std::vector<uint8_t> raw, out;
    size_t out_bytes = 0;
    bool done = false;
  };

  Pipeline(FILE* f, std::string p, int lvl, unsigned threads, std::atomic<uint64_t>* bytes,
           std::atomic<uint64_t>* records, std::atomic<uint64_t>* fast)
      : file(f), path(std::move(p)), level(lvl), max_in_flight(threads + 2), bytes_written(bytes),
        records_on_file(records), compressed_fast(fast) {
    for (unsigned i = 0; i < threads; ++i) workers.emplace_back([this] { work(); });
  }
  ~Pipeline() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    work_cv.notify_all();
    for (std::thread& t : workers) t.join();
  }

  // Blocks while the pipeline is full. Returns false once a background write has failed.
  bool submit(format::ChunkType type, uint64_t sequence, std::vector<uint8_t>&& raw, uint64_t records) {
    std::unique_lock lock(mu);
    done_cv.wait(lock, [&] { return in_order.size() < max_in_flight || failed.load(); });
    if (failed.load()) return false;
    auto job = std::make_unique<Job>();
    job->sequence = sequence;
    job->type = type;
    job->records = records;
    job->raw = std::move(raw);
    if (!spare_out.empty()) {
      job->out = std::move(spare_out.back());
      spare_out.pop_back();
    }
    unclaimed.push_back(job.get());
    in_order.push_back(std::move(job));
    work_cv.notify_one();
    return true;
  }

  // Until everything submitted is written (or discarded after a failure).
  void wait_idle() {
    std::unique_lock lock(mu);
    done_cv.wait(lock, [&] { return in_order.empty(); });
  }

  std::vector<uint8_t> take_spare() {
    std::lock_guard lock(mu);
    if (spare.empty()) return {};
    std::vector<uint8_t> v = std::move(spare.back());
    spare.pop_back();
    return v;
  }

  std::string failure() {
    std::lock_guard lock(mu);
    return error;
  }

  void work() {
    // The thread that drains the rings must win the CPU whenever it wakes: while it waits, rings
    // fill and records are dropped, while a compression that waits only holds a chunk in memory.
    // On Linux the nice value is per thread; failing to lower it only costs that preference.
    errno = 0;
    const int nice_now = getpriority(PRIO_PROCESS, 0);
    if (errno == 0) setpriority(PRIO_PROCESS, 0, std::min(nice_now + kCompressionNiceIncrement, 19));
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    std::string setup = cctx ? configure(cctx, level) : "cannot allocate a zstd compression context (out of memory)";
    int level_now = level;
    std::unique_lock lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stopping || !unclaimed.empty(); });
      if (unclaimed.empty()) break;
      Job* job = unclaimed.front();
      unclaimed.pop_front();
      // Only events chunks are big enough for the level to matter; the others are written once.
      const bool behind = job->type == format::ChunkType::kEvents && !unclaimed.empty();
      const int wanted = behind ? std::min(level, kBacklogCompressionLevel) : level;
      if (wanted != level_now && setup.empty() &&
          !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, wanted)))
        level_now = wanted;
      if (level_now != level) compressed_fast->fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      std::string problem = setup.empty() ? encode_chunk(cctx, job->type, job->sequence, job->raw, job->out, job->out_bytes) : setup;
      lock.lock();
      if (!problem.empty()) set_failed(problem);
      job->done = true;
      while (!in_order.empty() && in_order.front()->done) {
        std::unique_ptr<Job> next = std::move(in_order.front());
        in_order.pop_front();
        if (!failed.load()) {
          if (write_out(file, next->out, next->out_bytes)) {
            bytes_written->fetch_add(next->out_bytes, std::memory_order_relaxed);
            records_on_file->fetch_add(next->records, std::memory_order_relaxed);
          } else {
            set_failed("cannot write '" + path + "': " + std::strerror(errno));
          }
        }
        if (spare.size() < max_in_flight) {
          next->raw.clear();
          spare.push_back(std::move(next->raw));
          spare_out.push_back(std::move(next->out));
        }
      }
      done_cv.notify_all();
    }
    if (cctx) ZSTD_freeCCtx(cctx);
  }

  void set_failed(const std::string& what) {
    if (!failed.load()) error = what;
    failed.store(true);
  }

  FILE* const file;
  const std::string path;
  const int level;
  const size_t max_in_flight;
  std::atomic<uint64_t>* const bytes_written;
  std::atomic<uint64_t>* const records_on_file;
  std::atomic<uint64_t>* const compressed_fast;

  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<std::unique_ptr<Job>> in_order;  // submitted and not yet written, in sequence order
  std::deque<Job*> unclaimed;                 // submitted and not yet taken by a worker
  std::vector<std::vector<uint8_t>> spare;    // raw buffers kept for reuse: chunks are megabytes
  std::vector<std::vector<uint8_t>> spare_out;  // and compressed ones
  std::vector<std::thread> workers;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::string error;
};

void append_key_value(std::vector<uint8_t>& out, const std::string& key, const std::string& value) {
  append_pod(out, uint32_t(key.size()));
  append_pod(out, uint32_t(value.size()));
  append_bytes(out, key.data(), key.size());
  append_bytes(out, value.data(), value.size());
}

TraceWriter::TraceWriter() = default;

TraceWriter::~TraceWriter() {
  close();
  if (cctx_) ZSTD_freeCCtx(cctx_);
}

void TraceWriter::stop_pipeline() {
  if (!pipeline_) return;
  pipeline_->wait_idle();
  pipeline_.reset();
}

bool TraceWriter::fail(const std::string& what) {
  if (error_.empty()) error_ = what;
  stop_pipeline();
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  return false;
}

bool TraceWriter::fail_errno(const char* action) {
  return fail("cannot " + std::string(action) + " '" + path_ + "': " + std::strerror(errno));
}

bool TraceWriter::good() {
  if (file_ && pipeline_ && pipeline_->failed.load()) fail(pipeline_->failure());
  return file_ != nullptr;
}

bool TraceWriter::open(const std::string& path, int compression_level) {
  close();
  path_ = path;
  error_.clear();
  level_ = compression_level;
  sequence_ = 0;
  bytes_written_.store(0, std::memory_order_relaxed);
  records_on_file_.store(0, std::memory_order_relaxed);
  chunks_compressed_fast_.store(0, std::memory_order_relaxed);
  events_.clear();
  records_in_events_ = 0;
  if (!cctx_) cctx_ = ZSTD_createCCtx();
  if (!cctx_) return fail("cannot allocate a zstd compression context (out of memory)");
  if (std::string problem = configure(cctx_, level_); !problem.empty()) return fail(problem);

  // "e": the recorder never execs, but a library user might, and the trace must not leak into children.
  file_ = std::fopen(path.c_str(), "wbe");
  if (!file_) return fail_errno("create");
  format::FileHeader header{};
  std::memcpy(header.magic, format::kFileMagic, sizeof header.magic);
  header.format_version = format::kFormatVersion;
  header.header_bytes = sizeof header;
  header.created_realtime_ns = clock_ns(CLOCK_REALTIME);
  header.created_monotonic_ns = creation_monotonic_ns_.value_or(clock_ns(CLOCK_MONOTONIC));
  header.abi_version = abi::kAbiVersion;
  if (std::fwrite(&header, sizeof header, 1, file_) != 1 || std::fflush(file_) != 0) return fail_errno("write");
  bytes_written_.store(sizeof header, std::memory_order_relaxed);
  if (compression_threads_ > 0)
    pipeline_ = std::make_unique<Pipeline>(file_, path_, level_, compression_threads_, &bytes_written_,
                                           &records_on_file_, &chunks_compressed_fast_);
  return true;
}

bool TraceWriter::write_metadata(const KeyValues& pairs) {
  std::vector<uint8_t> payload;
  for (const auto& [key, value] : pairs) append_key_value(payload, key, value);
  return write_chunk(format::ChunkType::kMetadata, std::move(payload));
}

bool TraceWriter::write_api_table(const ApiInfo* table, uint32_t count) {
  // Thousands of functions with their arguments: sized first and filled through a cursor, since
  // growing the vector field by field took 2 ms of every run's start-up, before the program may start.
  auto short_bytes = [](const char* text) { return std::min<size_t>(safe_strlen(text), UINT16_MAX); };
  size_t total = sizeof count;
  for (uint32_t id = 0; id < count; ++id) {
    const ApiInfo& api = table[id];
    total += sizeof(uint32_t) + 2 + 1 + 1 + 1 + sizeof api.flags + 2 + 4 + safe_strlen(api.name) + 4 +
             safe_strlen(api.display_name);
    for (uint32_t a = 0; api.args && a < api.arg_count; ++a)
      total += 1 + sizeof api.args[a].flags + 2 + short_bytes(api.args[a].name) + 2 + short_bytes(api.args[a].type_name);
  }
  std::vector<uint8_t> payload(total);
  uint8_t* cursor = payload.data();
  auto put = [&cursor](const void* p, size_t n) {
    if (n) std::memcpy(cursor, p, n);  // a name may be null, and then n is 0
    cursor += n;
  };
  auto put_pod = [&put](const auto& value) { put(&value, sizeof value); };
  auto put_short_string = [&](const char* text) {
    const size_t bytes = short_bytes(text);
    put_pod(uint16_t(bytes));
    put(text, bytes);
  };
  put_pod(count);
  for (uint32_t id = 0; id < count; ++id) {
    const ApiInfo& api = table[id];
    const uint32_t name_bytes = uint32_t(safe_strlen(api.name));
    put_pod(id);
    put_pod(uint16_t(api.domain));
    put_pod(uint8_t(api.api_class));
    put_pod(api.args ? api.arg_count : uint8_t(0));
    put_pod(uint8_t(api.result_kind));
    put_pod(api.flags);
    put_pod(uint16_t(0));
    put_pod(name_bytes);
    put(api.name, name_bytes);
    const uint32_t display_bytes = uint32_t(safe_strlen(api.display_name));
    put_pod(display_bytes);
    put(api.display_name, display_bytes);
    for (uint32_t a = 0; api.args && a < api.arg_count; ++a) {
      const ApiArgInfo& arg = api.args[a];
      put_pod(uint8_t(arg.format));
      put_pod(arg.flags);
      put_short_string(arg.name);
      put_short_string(arg.type_name);
    }
  }
  if (cursor != payload.data() + payload.size()) return fail("the api table's size was miscounted");
  return write_chunk(format::ChunkType::kApiTable, std::move(payload));
}

bool TraceWriter::write_names(const std::vector<uint8_t>& payload) {
  return write_chunk(format::ChunkType::kNames, payload);
}

void TraceWriter::add_thread_def(const format::ThreadDef& def) {
  if (!file_) return;
  reserve_events(sizeof(format::BlockHeader) + sizeof def);
  if (!file_) return;
  const format::BlockHeader block{uint32_t(format::BlockType::kThreadDef), uint32_t(sizeof def), def.thread_index, 0};
  append_pod(events_, block);
  append_pod(events_, def);
  if (events_.size() >= events_chunk_bytes_) flush_events();
}

void TraceWriter::add_records(uint32_t thread_index, const uint8_t* structure, uint32_t structure_bytes,
                              const uint8_t* times, uint32_t times_bytes, uint32_t record_count) {
  if (!file_ || record_count == 0) return;
  const uint64_t body_bytes = uint64_t(codec::kBlockPrefixBytes) + structure_bytes + times_bytes;
  const uint64_t block_bytes = sizeof(format::BlockHeader) + body_bytes;
  if (block_bytes > format::kMaxChunkRawBytes) {
    // Splitting would break the per-block delta coding, so a caller must batch below the chunk limit.
    fail("a batch of " + std::to_string(body_bytes) + " record bytes exceeds the chunk limit of " +
         std::to_string(format::kMaxChunkRawBytes) + " bytes; pass smaller batches");
    return;
  }
  reserve_events(block_bytes);
  if (!file_) return;
  const format::BlockHeader block{uint32_t(format::BlockType::kRecords), uint32_t(body_bytes), thread_index,
                                  record_count};
  append_pod(events_, block);
  append_pod(events_, structure_bytes);
  append_bytes(events_, structure, structure_bytes);
  append_bytes(events_, times, times_bytes);
  records_in_events_ += record_count;
  if (events_.size() >= events_chunk_bytes_) flush_events();
}

void TraceWriter::add_records(uint32_t thread_index, const std::vector<uint8_t>& body, uint32_t record_count) {
  uint32_t structure_bytes = 0;
  if (body.size() >= codec::kBlockPrefixBytes) std::memcpy(&structure_bytes, body.data(), sizeof structure_bytes);
  if (body.size() < codec::kBlockPrefixBytes || structure_bytes > body.size() - codec::kBlockPrefixBytes) {
    fail("a block body handed to the writer has a damaged prefix");
    return;
  }
  const uint8_t* structure = body.data() + codec::kBlockPrefixBytes;
  add_records(thread_index, structure, structure_bytes, structure + structure_bytes,
              uint32_t(body.size() - codec::kBlockPrefixBytes - structure_bytes), record_count);
}

void TraceWriter::reserve_events(uint64_t block_bytes) {
  // Flush first rather than let one chunk grow past what readers accept.
  if (!events_.empty() && events_.size() + block_bytes > format::kMaxChunkRawBytes) flush_events();
}

bool TraceWriter::flush_events() {
  if (!file_) return false;
  if (events_.empty()) return good();
  const uint64_t records = std::exchange(records_in_events_, 0);
  if (pipeline_) {
    // The buffer itself travels to the compressing thread; a recycled one takes its place.
    std::vector<uint8_t> full = pipeline_->take_spare();
    full.swap(events_);
    return submit(format::ChunkType::kEvents, std::move(full), records);
  }
  const bool ok = write_chunk(format::ChunkType::kEvents, events_, records);
  events_.clear();
  return ok;
}

bool TraceWriter::finish(const KeyValues& summary, const std::vector<format::ThreadStats>& threads) {
  if (!file_) return false;
  if (!flush_events()) return false;
  // Every earlier chunk is compressed before the count of fast ones is final.
  if (pipeline_) {
    pipeline_->wait_idle();
    if (!good()) return false;
  }
  std::vector<uint8_t> payload;
  append_pod(payload, uint32_t(summary.size() + 1));
  for (const auto& [key, value] : summary) append_key_value(payload, key, value);
  append_key_value(payload, "chunks.compressed_fast", std::to_string(chunks_compressed_fast()));
  append_pod(payload, uint32_t(threads.size()));
  append_bytes(payload, threads.data(), threads.size() * sizeof(format::ThreadStats));
  if (!write_chunk(format::ChunkType::kEnd, std::move(payload))) return false;
  if (pipeline_) {
    pipeline_->wait_idle();
    if (!good()) return false;
    pipeline_.reset();
  }
  if (sync_on_finish_ && fsync(fileno(file_)) != 0) return fail_errno("flush to disk");
  FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) return fail_errno("close");
  return true;
}

void TraceWriter::close() {
  stop_pipeline();
  if (file_) std::fclose(file_);
  file_ = nullptr;
  events_.clear();
  records_in_events_ = 0;
}

bool TraceWriter::submit(format::ChunkType type, std::vector<uint8_t>&& payload, uint64_t records) {
  if (!pipeline_->submit(type, sequence_, std::move(payload), records)) return good();
  ++sequence_;
  return true;
}

bool TraceWriter::write_chunk(format::ChunkType type, std::vector<uint8_t> payload, uint64_t records) {
  if (!file_) return false;
  if (payload.size() > format::kMaxChunkRawBytes)
    return fail("a chunk of " + std::to_string(payload.size()) + " bytes exceeds the format's limit of " +
                std::to_string(format::kMaxChunkRawBytes) + " bytes");
  if (pipeline_) return submit(type, std::move(payload), records);
  size_t compressed_bytes = 0;
  if (std::string problem = encode_chunk(cctx_, type, sequence_, payload, compressed_, compressed_bytes); !problem.empty())
    return fail(problem);
  if (!write_out(file_, compressed_, compressed_bytes)) return fail_errno("write");
  bytes_written_.fetch_add(compressed_bytes, std::memory_order_relaxed);
  records_on_file_.fetch_add(records, std::memory_order_relaxed);
  ++sequence_;
  return true;
}

}  // namespace cutrace::trace
