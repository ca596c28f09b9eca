// Helpers shared by the recorder tests: a producer that claims slots the way the preload library does,
// and a byte-level .cutrace parser that depends on nothing but format.h and zstd (the project's reader
// library is tested separately and must not be what checks the writer).
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cutrace/abi.h"
#include "cutrace/format.h"
#include "cutrace/record_codec.h"
#include "cutrace/ring.h"
#include "recorder/process_monitor.h"

namespace cutrace::test {

// Waits until thread `tid` of this process is blocked in futex(2) (its /proc syscall entry), for at
// most `limit_ms`: the point a test wants a recorder's nap to have reached, told by the kernel rather
// than by a sleep long enough on most machines. Whether it got there.
inline bool wait_until_in_futex(pid_t tid, int limit_ms = 10000) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/syscall";
  for (int waited = 0; waited < limit_ms * 10; ++waited) {
    std::ifstream in(path);
    long number = -1;
    if (in >> number && number == SYS_futex) return true;
    timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
  }
  return false;
}

inline uint64_t own_start_ticks() {
  recorder::ProcStat st;
  return recorder::read_proc_stat(uint32_t(getpid()), &st) ? st.start_ticks : 0;
}

// One claimed ring, written the way the preload library writes it.
struct TestRing {
  abi::RingHeader* header = nullptr;
  ring::Producer producer;
  uint64_t serial = 0;

  // Claims `slot` for (pid, tid) following the SlotState protocol of abi.h. `wake` false leaves the
  // recorder's wake to the caller, for a test that must push before the recorder looks.
  static TestRing claim(abi::SessionHeader* session, uint32_t slot, uint32_t pid, uint32_t tid,
                        uint64_t start_ticks, bool wake = true) {
    TestRing r;
    if (!ring::claim_slot(session, slot, pid, tid, uint32_t(getppid()), start_ticks, &r.producer, &r.serial))
      return TestRing{};
    r.header = abi::slot_header(session, slot);
    if (wake) abi::wake_recorder(session);  // as the shim does
    return r;
  }
  static TestRing claim_self(abi::SessionHeader* session, uint32_t slot, uint32_t tid = 0, bool wake = true) {
    return claim(session, slot, uint32_t(getpid()), tid ? tid : uint32_t(gettid()), own_start_ticks(), wake);
  }

  bool valid() const { return header != nullptr; }

  bool push_call(uint32_t api, uint64_t begin, uint64_t end, uint64_t result, uint8_t depth = 0,
                 std::initializer_list<uint64_t> args = {}, abi::DomainSet outer_domains = 0) {
    const uint32_t bytes = uint32_t(sizeof(abi::ApiCallRecord) + 8 * args.size());
    uint8_t* p = producer.reserve(bytes);
    if (!p) return false;
    auto* r = reinterpret_cast<abi::ApiCallRecord*>(p);
    r->header = {uint16_t(abi::RecordKind::kApiCall), uint16_t(bytes), api};
    r->begin = begin;
    r->end = end;
    r->result = result;
    r->depth = depth;
    r->outer_domains = outer_domains;
    r->arg_count = uint8_t(args.size());
    r->flags = 0;
    r->reserved = 0;
    r->correlation = 0;
    size_t i = 0;
    for (uint64_t a : args) r->args[i++] = a;
    producer.commit(bytes);
    return true;
  }

  bool push_thread_start(uint64_t time, uint32_t pid, uint32_t tid) {
    abi::ThreadStartRecord r{};
    r.header = {uint16_t(abi::RecordKind::kThreadStart), uint16_t(sizeof r), 0};
    r.time = time;
    r.pid = pid;
    r.tid = tid;
    r.ppid = uint32_t(getppid());
    r.flags = abi::kThreadFlagFirstInProcess;
    return producer.push(&r, sizeof r);
  }

  bool push_string(abi::StringKind kind, uint64_t key, const std::string& text) {
    uint8_t buf[abi::kMaxRecordBytes] = {};
    const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::StringRecord) + text.size()));
    auto* r = reinterpret_cast<abi::StringRecord*>(buf);
    r->header = {uint16_t(abi::RecordKind::kString), uint16_t(bytes), uint32_t(kind)};
    r->key = key;
    r->length = uint32_t(text.size());
    std::memcpy(r->text, text.data(), text.size());
    return producer.push(buf, bytes);
  }

  // A Python sample of thread `tid` (the sampler's record), with `frames` (function id, line) pairs.
  bool push_python_sample(uint64_t time, uint32_t tid, std::initializer_list<abi::PythonFrame> frames) {
    uint8_t buf[abi::kMaxRecordBytes] = {};
    const uint32_t bytes = uint32_t(sizeof(abi::PythonSampleRecord) + sizeof(abi::PythonFrame) * frames.size());
    auto* r = reinterpret_cast<abi::PythonSampleRecord*>(buf);
    r->header = {uint16_t(abi::RecordKind::kPythonSample), uint16_t(bytes), uint32_t(frames.size())};
    r->time = time;
    r->tid = tid;
    std::memcpy(r->frames, frames.begin(), sizeof(abi::PythonFrame) * frames.size());
    return producer.push(buf, bytes);
  }

  bool push_module(const std::string& path, uint64_t base, uint32_t flags) {
    uint8_t buf[abi::kMaxRecordBytes] = {};
    const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::ModuleRecord) + path.size()));
    auto* r = reinterpret_cast<abi::ModuleRecord*>(buf);
    r->header = {uint16_t(abi::RecordKind::kModuleMap), uint16_t(bytes), uint32_t(abi::ModuleEvent::kLoaded)};
    r->base = base;
    r->text_start = base + 0x1000;
    r->text_end = base + 0x2000;
    r->flags = flags;
    r->build_id_bytes = 4;
    std::memcpy(r->build_id, "\xde\xad\xbe\xef", 4);
    r->path_bytes = uint32_t(path.size());
    std::memcpy(r->path, path.data(), path.size());
    return producer.push(buf, bytes);
  }

  // Writes raw bytes as one "record" (for malformed-input tests).
  bool push_raw(const void* bytes, uint32_t size) { return producer.push(bytes, size); }

  void retire() { header->state.store(uint32_t(abi::SlotState::kRetired), std::memory_order_release); }
};

struct Chunk {
  format::ChunkHeader header;
  std::vector<uint8_t> payload;
};

struct ParsedFile {
  format::FileHeader header{};
  std::vector<Chunk> chunks;
  uint64_t complete_bytes = 0;  // file offset after the last valid chunk
  uint64_t file_bytes = 0;
  std::string stop_reason;      // why parsing stopped before the end of the file, if it did
};

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Reads chunks until the end of the file or the first chunk that fails a check.
inline bool parse_file(const std::string& path, ParsedFile* out) {
  const std::vector<uint8_t> bytes = read_file(path);
  out->file_bytes = bytes.size();
  if (bytes.size() < sizeof(format::FileHeader)) return false;
  std::memcpy(&out->header, bytes.data(), sizeof out->header);
  if (std::memcmp(out->header.magic, format::kFileMagic, 8) != 0) return false;
  uint64_t pos = out->header.header_bytes;
  out->complete_bytes = pos;
  while (pos < bytes.size()) {
    Chunk c;
    if (bytes.size() - pos < sizeof c.header) {
      out->stop_reason = "cut-off chunk header";
      break;
    }
    std::memcpy(&c.header, bytes.data() + pos, sizeof c.header);
    if (c.header.magic != format::kChunkMagic || c.header.header_check != format::chunk_header_check(c.header)) {
      out->stop_reason = "bad chunk header";
      break;
    }
    if (c.header.sequence != out->chunks.size()) {
      out->stop_reason = "sequence gap";
      break;
    }
    if (bytes.size() - pos - sizeof c.header < c.header.stored_bytes) {
      out->stop_reason = "cut-off chunk";
      break;
    }
    c.payload.resize(c.header.raw_bytes);
    const size_t n = ZSTD_decompress(c.payload.data(), c.payload.size(), bytes.data() + pos + sizeof c.header,
                                     c.header.stored_bytes);
    if (ZSTD_isError(n) || n != c.header.raw_bytes) {
      out->stop_reason = "bad zstd frame";
      break;
    }
    pos += sizeof c.header + c.header.stored_bytes;
    out->complete_bytes = pos;
    out->chunks.push_back(std::move(c));
  }
  return true;
}

using KeyValueList = std::vector<std::pair<std::string, std::string>>;

// Parses `count` pairs (or as many as the span holds when count < 0) starting at `pos`.
inline bool parse_key_values(const std::vector<uint8_t>& p, size_t& pos, long count, KeyValueList* out) {
  for (long i = 0; count < 0 ? pos < p.size() : i < count; ++i) {
    uint32_t k, v;
    if (p.size() - pos < 8) return false;
    std::memcpy(&k, p.data() + pos, 4);
    std::memcpy(&v, p.data() + pos + 4, 4);
    pos += 8;
    if (p.size() - pos < uint64_t(k) + v) return false;
    out->emplace_back(std::string(p.begin() + pos, p.begin() + pos + k),
                      std::string(p.begin() + pos + k, p.begin() + pos + k + v));
    pos += k + v;
  }
  return true;
}

inline std::string lookup(const KeyValueList& kv, const std::string& key) {
  for (auto& [k, v] : kv)
    if (k == key) return v;
  return "<missing>";
}

struct EndChunk {
  KeyValueList summary;
  std::vector<format::ThreadStats> threads;
};

inline bool parse_end(const Chunk& c, EndChunk* out) {
  size_t pos = 0;
  uint32_t pairs;
  if (c.payload.size() < 4) return false;
  std::memcpy(&pairs, c.payload.data(), 4);
  pos = 4;
  if (!parse_key_values(c.payload, pos, pairs, &out->summary)) return false;
  uint32_t threads;
  if (c.payload.size() - pos < 4) return false;
  std::memcpy(&threads, c.payload.data() + pos, 4);
  pos += 4;
  if (c.payload.size() - pos != uint64_t(threads) * sizeof(format::ThreadStats)) return false;
  out->threads.resize(threads);
  if (threads) std::memcpy(out->threads.data(), c.payload.data() + pos, c.payload.size() - pos);
  return true;
}

// One record of a kRecords block with its times decoded back to absolute nanoseconds.
struct Decoded {
  uint32_t thread = 0;
  abi::RecordKind kind = abi::RecordKind::kInvalid;
  uint32_t aux = 0;
  uint64_t begin_ns = 0, end_ns = 0;  // kApiCall
  uint64_t time_ns = 0;               // kThreadStart
  uint64_t result = 0;
  uint8_t depth = 0;
  uint8_t flags = 0;                  // kApiCall: abi::kCallFlag*
  abi::DomainSet outer_domains = 0;
  std::vector<uint64_t> args;
  std::string text;                   // kString, kModuleMap (the path)
  uint64_t key = 0;
  std::vector<uint8_t> encoded;       // the record's structure bytes as stored in the file
  std::vector<uint8_t> encoded_times; // and its times bytes
};

struct Events {
  std::vector<format::ThreadDef> threads;
  std::vector<Decoded> records;
  uint64_t blocks = 0;
  std::string error;
};

inline Events decode_events(const std::vector<Chunk>& chunks) {
  Events ev;
  for (const Chunk& c : chunks) {
    if (c.header.type != uint16_t(format::ChunkType::kEvents)) continue;
    const std::vector<uint8_t>& p = c.payload;
    size_t pos = 0;
    while (pos < p.size()) {
      format::BlockHeader b;
      if (p.size() - pos < sizeof b) return ev.error = "cut-off block header", ev;
      std::memcpy(&b, p.data() + pos, sizeof b);
      pos += sizeof b;
      if (p.size() - pos < b.bytes) return ev.error = "cut-off block", ev;
      ++ev.blocks;
      if (b.type == uint32_t(format::BlockType::kThreadDef)) {
        if (b.bytes != sizeof(format::ThreadDef)) return ev.error = "bad thread def size", ev;
        format::ThreadDef d;
        std::memcpy(&d, p.data() + pos, sizeof d);
        ev.threads.push_back(d);
      } else if (b.type == uint32_t(format::BlockType::kRecords)) {
        codec::BlockInput in;
        if (!in.open(p.data() + pos, b.bytes)) return ev.error = "damaged block prefix", ev;
        uint64_t count = 0;
        codec::BlockState state;
        state.start_block();
        uint8_t rec[abi::kMaxRecordBytes];
        while (!in.done()) {
          const uint8_t* start = in.structure;
          const uint8_t* times_start = in.times;
          const uint32_t size = codec::decode(state, in, rec);
          if (size == 0) return ev.error = "record cannot be decoded", ev;
          if (!ring::record_well_formed(rec, size)) return ev.error = "record not well formed", ev;
          abi::RecordHeader h;
          std::memcpy(&h, rec, 8);
          Decoded d;
          d.thread = b.thread_index;
          d.kind = abi::RecordKind(h.kind);
          d.aux = h.aux;
          d.encoded.assign(start, in.structure);
          d.encoded_times.assign(times_start, in.times);
          if (d.kind == abi::RecordKind::kApiCall) {
            abi::ApiCallRecord a;
            std::memcpy(&a, rec, sizeof a);
            d.begin_ns = a.begin;
            d.end_ns = a.end;
            d.result = a.result;
            d.depth = a.depth;
            d.flags = a.flags;
            d.outer_domains = a.outer_domains;
            d.args.resize(a.arg_count);
            if (a.arg_count) std::memcpy(d.args.data(), rec + sizeof a, 8 * a.arg_count);
          } else if (d.kind == abi::RecordKind::kThreadStart) {
            abi::ThreadStartRecord t;
            std::memcpy(&t, rec, sizeof t);
            d.time_ns = t.time;
          } else if (d.kind == abi::RecordKind::kString) {
            abi::StringRecord s;
            std::memcpy(&s, rec, sizeof s);
            d.key = s.key;
            d.text.assign(reinterpret_cast<const char*>(rec + sizeof s), s.length);
          } else if (d.kind == abi::RecordKind::kModuleMap) {
            abi::ModuleRecord m;
            std::memcpy(&m, rec, sizeof m);
            d.key = m.base;
            d.text.assign(reinterpret_cast<const char*>(rec + sizeof m), m.path_bytes);
          } else if (d.kind == abi::RecordKind::kNvtx) {
            abi::NvtxRecord n;
            std::memcpy(&n, rec, sizeof n);
            d.key = n.range_id;
            d.text.assign(reinterpret_cast<const char*>(rec + sizeof n), n.text_bytes);
          } else if (d.kind == abi::RecordKind::kPythonSample) {
            abi::PythonSampleRecord ps;
            std::memcpy(&ps, rec, sizeof ps);
            d.time_ns = ps.time;
            d.key = ps.tid;
            for (uint32_t i = 0; i < h.aux; ++i) {
              abi::PythonFrame f;
              std::memcpy(&f, rec + sizeof ps + sizeof f * i, sizeof f);
              d.args.push_back(f.function);
              d.args.push_back(f.line);
            }
          } else if (d.kind == abi::RecordKind::kCaptureState) {
            abi::CaptureStateRecord c;
            std::memcpy(&c, rec, sizeof c);
            d.key = c.range;
          } else if (d.kind == abi::RecordKind::kGpuActivity) {
            abi::GpuActivityHeader g;
            std::memcpy(&g, rec, sizeof g);
            d.time_ns = g.start;
            d.key = h.aux;  // the GpuActivity kind
          } else {
            return ev.error = "unexpected record kind in file", ev;
          }
          ev.records.push_back(std::move(d));
          ++count;
        }
        if (count != b.record_count) return ev.error = "block record count mismatch", ev;
      } else {
        return ev.error = "unknown block type", ev;
      }
      pos += b.bytes;
    }
  }
  return ev;
}

}  // namespace cutrace::test
