// The .cutrace file format. docs/trace-format.md is the prose version of this header; keep both in step.
//
// A file is a FileHeader followed by chunks. Every chunk is self-contained: a ChunkHeader and one zstd
// frame (with its content checksum) holding the chunk's payload. A reader can stop at the first chunk
// that is cut off or fails its checks and still use every chunk before it, which is what makes a trace
// whose recorder was killed readable. The last chunk of a complete trace is kEnd.
//
// All integers are little-endian. Times in the file are CLOCK_MONOTONIC nanoseconds.
#pragma once

#include <cstdint>
#include <cstring>

#include "cutrace/abi.h"
#include "cutrace/record_codec.h"

namespace cutrace::format {

inline constexpr char kFileMagic[8] = {'C', 'U', 'T', 'R', 'A', 'C', 'E', '\x01'};
inline constexpr uint32_t kFormatVersion = 7;
// Every cutrace reads every version from this one on (docs/trace-format.md, "Versions"): a format
// change bumps kFormatVersion and teaches the reader to upgrade what the older versions wrote, and
// tests/data/traces keeps traces of each version with the reports they must give.
inline constexpr uint32_t kOldestReadableFormatVersion = 7;
inline constexpr uint32_t kChunkMagic = 0x4b434354u;  // "CTCK"
inline constexpr const char* kFileExtension = ".cutrace";
// A chunk never decompresses to more than this; readers reject larger claims before allocating.
inline constexpr uint32_t kMaxChunkRawBytes = 64u << 20;

struct FileHeader {
  char magic[8];              // kFileMagic
  uint32_t format_version;    // kFormatVersion
  uint32_t header_bytes;      // sizeof(FileHeader); readers skip to this offset
  uint64_t created_realtime_ns;
  uint64_t created_monotonic_ns;
  uint32_t abi_version;       // abi::kAbiVersion of the recorder that wrote the file
  uint8_t reserved[28];
};
static_assert(sizeof(FileHeader) == 64);

enum class ChunkType : uint16_t {
  kMetadata = 1,  // key/value pairs (KeyValue encoding below)
  kApiTable = 2,  // ApiTableEntry list: names and argument meanings of every api id in the file
  kEvents = 3,    // Block list: thread definitions and records
  kEnd = 4,       // key/value summary, then ThreadStats list; marks a complete trace
  kNames = 5,     // kernel names and handles per process (names_chunk.h), written just before kEnd
};

enum class Codec : uint16_t { kZstd = 1 };

struct ChunkHeader {
  uint32_t magic;         // kChunkMagic
  uint16_t type;          // ChunkType
  uint16_t codec;         // Codec
  uint32_t stored_bytes;  // bytes of the zstd frame that follows this header
  uint32_t raw_bytes;     // bytes of payload after decompression
  uint64_t sequence;      // 0, 1, 2, ... in file order; a gap means a chunk is missing
  uint32_t header_check;  // fnv1a32 of the 24 bytes above
  uint32_t reserved;
};
static_assert(sizeof(ChunkHeader) == 32);

inline uint32_t fnv1a32(const void* p, size_t n) {
  uint32_t h = 2166136261u;
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}
inline uint32_t chunk_header_check(const ChunkHeader& c) { return fnv1a32(&c, offsetof(ChunkHeader, header_check)); }

// --- kMetadata and the first part of kEnd: repeated {u32 key_bytes, u32 value_bytes, key, value} ---
// A kEnd payload is: u32 pair_count, that many pairs, then u32 thread_count and ThreadStats[thread_count].

// --- kApiTable payload: u32 entry_count, then entries ---
//   u32 api_id, u16 domain (abi::ApiDomain), u8 api_class (abi::ApiClass), u8 arg_count,
//   u8 result_kind (ResultKind), u8 flags (kApiFlag*), u16 reserved, u32 name_bytes, name,
//   u32 display_bytes, display name (0 bytes: the same as name),
//   then arg_count times: u8 format (abi::ArgFormat), u8 flags (kArgFlag*), u16 name_bytes, name,
//   u16 type_bytes, type name (the C type of a kEnum argument; 0 bytes otherwise)
// kSigned: a count or -1 (the OS runtime's read, write, ...), printed as a signed number.
enum class ResultKind : uint8_t { kErrorCode = 0, kPointer = 1, kVoid = 2, kUnsigned = 3, kSigned = 4 };

// The runtime's own plumbing (kernel registration, the <<<>>> call configuration): reports and
// exports leave it out unless asked, as nsys does; the records stay in the trace.
inline constexpr uint8_t kApiFlagInternal = 1;
// The argument is an out-parameter, recorded as the value the call wrote.
inline constexpr uint8_t kArgFlagOut = 1;

// --- kEvents payload: repeated blocks ---
enum class BlockType : uint32_t {
  kThreadDef = 1,  // payload: ThreadDef
  kRecords = 2,    // payload: records of one thread, in ring order (abi record layouts)
};

struct BlockHeader {
  uint32_t type;          // BlockType
  uint32_t bytes;         // payload bytes after this header
  uint32_t thread_index;  // the thread the block belongs to
  uint32_t record_count;  // records in a kRecords block; 0 otherwise
};
static_assert(sizeof(BlockHeader) == 16);

// One per claimed ring: a thread instance. Thread indexes start at 0 and are unique in the file even
// when the kernel reuses tids.
struct ThreadDef {
  uint32_t thread_index;
  uint32_t pid;
  uint32_t tid;
  uint32_t ppid;
  uint64_t process_start_ticks;
  uint64_t claim_serial;
  uint64_t first_seen_ns;
};
static_assert(sizeof(ThreadDef) == 40);

// Record encoding inside a kRecords block: the compact encoding of include/cutrace/record_codec.h,
// one record after another, record_count of them, each block decoded from a fresh codec::BlockState.
// Decoded records have the ring layouts of abi.h with times in absolute CLOCK_MONOTONIC ns. The
// recorder drops kPad records and anything malformed before writing.

struct ThreadStats {
  uint32_t thread_index;
  uint32_t reserved;
  uint64_t records_written;   // records of this thread in the file
  uint64_t records_dropped;   // the producer's count of records it could not store (ring full)
  uint64_t records_malformed; // records the recorder rejected
};
static_assert(sizeof(ThreadStats) == 32);

}  // namespace cutrace::format
