// The trace reader's validation of an events chunk: every block and record checked against its kind's
// layout before any is delivered, so that nothing later reads past what a damaged trace holds.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "reader/decode.h"
#include "reader/trace_claim.h"
#include "reader/trace_reader.h"
#include "reader/trace_reader_internal.h"

namespace cutrace::reader {

using namespace detail;

bool TraceReader::validate_events() {
  const uint8_t* p = raw_.data();
  const size_t n = raw_size_;
  std::unordered_set<uint32_t> defined_here;
  // Decoded records are at most kMaxRecordBytes each and every encoded one takes at least 2 bytes,
  // so this bound is never hit by a well-formed chunk; it stops a hostile one from exhausting memory.
  const size_t max_decoded = size_t(format::kMaxChunkRawBytes) * 8;
  // Records are decoded straight into decoded_, which always has room for one more record beyond
  // decoded_size plus kDeliverySlack (deliver_event copies argument slots at a fixed width).
  size_t decoded_size = 0;
  auto room_for = [&](size_t bytes) {
    const size_t need = decoded_size + bytes + abi::kMaxRecordBytes + kDeliverySlack;
    if (decoded_.size() < need) decoded_.resize(std::max(need, decoded_.size() * 2));
  };
  auto append = [&](const void* data, size_t bytes) {
    room_for(bytes);
    std::memcpy(decoded_.data() + decoded_size, data, bytes);
    decoded_size += bytes;
  };
  to_apply_.clear();
  size_t pos = 0;
  while (pos < n) {
    if (n - pos < sizeof(BlockHeader)) return chunk_error_ = "a block header is cut off", false;
    auto bh = load<BlockHeader>(p + pos);
    pos += sizeof bh;
    if (bh.bytes > n - pos) return chunk_error_ = "a block runs past the end of the payload", false;
    const uint32_t encoded_bytes = bh.bytes;
    bool known_thread = thread_pos_.count(bh.thread_index) || defined_here.count(bh.thread_index);
    if (!known_thread && BlockType(bh.type) == BlockType::kRecords && status_.damaged_chunks > 0) {
      // Its definition was in a damaged chunk: its records are shown under a thread of an unknown
      // process (pid 0) rather than lost with it.
      format::ThreadDef def{};
      def.thread_index = bh.thread_index;
      const BlockHeader dh{uint32_t(BlockType::kThreadDef), uint32_t(sizeof def), bh.thread_index, 0};
      to_apply_.push_back({decoded_size, bh.thread_index, true});
      append(&dh, sizeof dh);
      append(&def, sizeof def);
      defined_here.insert(bh.thread_index);
      known_thread = true;
    }
    const size_t out_header = decoded_size;
    room_for(sizeof bh);
    decoded_size += sizeof bh;
    switch (BlockType(bh.type)) {
      case BlockType::kThreadDef: {
        if (bh.bytes < sizeof(format::ThreadDef)) return chunk_error_ = "a thread definition is too short", false;
        auto def = load<format::ThreadDef>(p + pos);
        if (def.thread_index != bh.thread_index)
          return chunk_error_ = "a thread definition disagrees with its block about the thread index", false;
        if (known_thread)
          return chunk_error_ = "thread " + std::to_string(def.thread_index) + " is defined twice", false;
        defined_here.insert(def.thread_index);
        to_apply_.push_back({out_header, bh.thread_index, true});
        append(p + pos, bh.bytes);
        break;
      }
      case BlockType::kRecords: {
        if (!known_thread)
          return chunk_error_ = "records of thread " + std::to_string(bh.thread_index) + " precede its definition",
                 false;
        codec::BlockInput in;
        if (!in.open(p + pos, bh.bytes))
          return chunk_error_ = "a block of thread " + std::to_string(bh.thread_index) + " has a damaged prefix", false;
        uint32_t count = 0;
        codec_state_.start_block();
        while (!in.done()) {
          room_for(0);
          uint8_t* record = decoded_.data() + decoded_size;
          const uint32_t size = codec::decode(codec_state_, in, record);
          if (size == 0) return chunk_error_ = "a record of thread " + std::to_string(bh.thread_index) + " cannot be decoded", false;
          const auto kind = abi::RecordKind(load<uint16_t>(record));
          if (kind == abi::RecordKind::kApiCall) {
            // The decoder built it: well-formed by construction. Only calls that name a kernel by
            // another handle have something to apply.
            const ApiSpec* spec = find_api(load<uint32_t>(record + offsetof(abi::RecordHeader, aux)));
            if (spec && spec->alias_out_arg >= 0) to_apply_.push_back({decoded_size, bh.thread_index, false});
          } else {
            if (const char* why = check_record(record, size)) return chunk_error_ = why, false;
            if (kind == abi::RecordKind::kString || kind == abi::RecordKind::kModuleMap ||
                kind == abi::RecordKind::kGpuDevice ||
                (kind == abi::RecordKind::kNvtx && is_nvtx_naming(load<uint32_t>(record + 4))))
              to_apply_.push_back({decoded_size, bh.thread_index, false});
          }
          if (decoded_size + size > max_decoded) return chunk_error_ = "the chunk decodes to an implausible size", false;
          decoded_size += size;
          ++count;
        }
        if (count != bh.record_count)
          return chunk_error_ = "a block holds " + std::to_string(count) + " records but announces " +
                                std::to_string(bh.record_count),
                 false;
        break;
      }
      default:
        // A block type from a later writer: its size is known, so it is skipped.
        decoded_size = out_header;
        pos += encoded_bytes;
        continue;
    }
    bh.bytes = uint32_t(decoded_size - out_header - sizeof bh);
    std::memcpy(decoded_.data() + out_header, &bh, sizeof bh);
    pos += encoded_bytes;
  }
  room_for(0);
  raw_.swap(decoded_);
  decoded_in_raw_ = true;
  raw_size_ = decoded_size;
  return true;
}

}  // namespace cutrace::reader
