// What the parts of the trace reader share (trace_reader.cpp, trace_file.cpp, trace_validate.cpp,
// trace_names.cpp, trace_gpu.cpp): the format's names, bounds-checked loads and the small helpers more
// than one part uses. Private to tools/reader.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutrace/job.h"
#include "reader/trace_reader.h"

namespace cutrace::reader::detail {

using format::BlockHeader;
using format::BlockType;
using format::ChunkHeader;
using format::ChunkType;

// Ids of generated api tables are dense and small; anything above this is looked up in the map only,
// so a corrupt id cannot make the reader allocate an index of gigabytes.
inline constexpr uint32_t kDenseApiIds = 1u << 16;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads exactly n bytes at offset, retrying short reads; returns the bytes read (less only at EOF).
inline size_t pread_full(int fd, void* buf, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, static_cast<uint8_t*>(buf) + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += size_t(r);
  }
  return done;
}

inline bool all_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

inline const char* chunk_type_name(uint16_t type) {
  switch (ChunkType(type)) {
    case ChunkType::kMetadata: return "metadata";
    case ChunkType::kApiTable: return "api table";
    case ChunkType::kEvents: return "events";
    case ChunkType::kEnd: return "end";
    case ChunkType::kNames: return "names";
  }
  return "unknown";
}

// Bounds-checked cursor over one payload.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool u8(uint8_t& v) { return take(v); }
  bool u16(uint16_t& v) { return take(v); }
  bool u32(uint32_t& v) { return take(v); }
  bool bytes(std::string& out, size_t len) {
    if (len > n_ - pos_) return false;
    out.assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return true;
  }
  bool skip(size_t len) {
    if (len > n_ - pos_) return false;
    pos_ += len;
    return true;
  }
  size_t left() const { return n_ - pos_; }
  const uint8_t* here() const { return p_ + pos_; }

 private:
  template <class T>
  bool take(T& v) {
    if (sizeof(T) > n_ - pos_) return false;
    v = load<T>(p_ + pos_);
    pos_ += sizeof(T);
    return true;
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// NVTX records that name things rather than mark time.
inline bool is_nvtx_naming(uint32_t event) {
  switch (abi::NvtxEvent(event)) {
    case abi::NvtxEvent::kDomainCreate:
    case abi::NvtxEvent::kRegisterString:
    case abi::NvtxEvent::kNameCategory:
    case abi::NvtxEvent::kNameThread:
    case abi::NvtxEvent::kNameResource:
    case abi::NvtxEvent::kPayloadSchema:
    case abi::NvtxEvent::kPayloadSchemaEntry:
    case abi::NvtxEvent::kPayloadEnum:
    case abi::NvtxEvent::kPayloadEnumEntry: return true;
    default: return false;
  }
}

// Checks one record of a kRecords block against its kind's layout. `left` is what remains of the block.
inline const char* check_record(const uint8_t* p, size_t left) {
  if (left < sizeof(abi::RecordHeader)) return "a record header is cut off";
  auto h = load<abi::RecordHeader>(p);
  if (h.size < sizeof(abi::RecordHeader) || h.size % abi::kRecordAlign) return "a record has an invalid size";
  if (h.size > left) return "a record runs past the end of its block";
  const abi::RecordKindInfo* info = abi::record_kind_info(h.kind);
  // A kind of a later build, and a pad (never in a file): passed on as raw records.
  if (info == nullptr || info->kind == abi::RecordKind::kPad) return nullptr;
  if (info->kind == abi::RecordKind::kInvalid) return "a record has kind 0";
  // Messages built once per kind: a damaged trace may hold millions of bad records.
  static const auto messages = [] {
    std::array<std::array<std::string, 3>, std::size(abi::kRecordKinds)> m;
    for (const abi::RecordKindInfo& k : abi::kRecordKinds) {
      const std::string what = k.what;
      m[size_t(k.kind)] = {what + " is too short",
                           k.tail_name ? what + " is shorter than its " + k.tail_name : what + " is too short",
                           what + " is of an unknown kind"};
    }
    return m;
  }();
  const auto& message = messages[h.kind];
  if (h.size < info->fixed_bytes) return message[0].c_str();
  // At least the size its counts give: a later build may add fields at the end of a kind.
  const uint32_t expected = abi::record_bytes_by_counts(*info, p, h.aux);
  const bool aux_is_count = info->tail == abi::RecordTail::kAuxUnits || info->tail == abi::RecordTail::kBacktrace;
  if (expected == 0 && !aux_is_count && (h.aux < info->min_aux || h.aux > info->max_aux)) return message[2].c_str();
  if (expected == 0 || h.size < expected) return message[1].c_str();
  if (info->kind == abi::RecordKind::kModuleMap && p[offsetof(abi::ModuleRecord, build_id_bytes)] > abi::kMaxBuildIdBytes)
    return "a module record claims a build-id longer than its field";
  return nullptr;
}

// A kProcessJob string: the process's job variables, NAME=VALUE, NUL-separated; cutrace/job.h picks
// the rank. Names not among kFamilies' (a later build's) are ignored by identify().
inline void apply_job(Process& proc, std::string_view text) {
  std::vector<std::pair<std::string, std::string>> variables;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\0'), text.size());
    const std::string_view pair = text.substr(0, end);
    if (const size_t eq = pair.find('='); eq != std::string_view::npos)
      variables.emplace_back(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  const job::Identity id = job::identify([&](const char* name) -> const char* {
    for (const auto& [key, value] : variables)
      if (key == name) return value.c_str();
    return nullptr;
  });
  proc.rank = id.rank;
  proc.local_rank = id.local_rank;
  proc.world_size = id.world_size;
  proc.rank_variable = id.rank_variable ? id.rank_variable : "";
}

// What a path that is not a regular file is, for the one sentence that refuses it.
inline const char* kind_of_file(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace cutrace::reader::detail
