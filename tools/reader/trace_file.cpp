// The trace reader's file side: opening a trace, finding, reading and decompressing its chunks, salvaging
// what follows a damaged one, and parsing the metadata, api table and end chunks.
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

bool TraceReader::open(const std::string& path) {
  path_ = path;
  // O_NONBLOCK: opening a FIFO (or a link to one) would otherwise wait for a writer, forever; the
  // file's type is checked once it is open, and a regular file ignores the flag.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    int e = errno;
    std::string writer;
    if (e == ENOENT && claim_is_held(path, &writer))
      error_ = path + ": not there yet: " + writer + " is still writing it (its data so far is in " + path +
               ".*.part); read it when that run has ended.";
    else if (e == ENOENT) error_ = path + ": no such file; check the path (traces end in .cutrace).";
    else error_ = path + ": cannot open (" + std::strerror(e) + "); check its permissions.";
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    error_ = path + ": cannot read its type (" + std::strerror(errno) + "); check the path.";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error_ = path + ": is " + kind_of_file(st.st_mode) +
             ", not a trace file; give the path of a .cutrace trace that `cutrace profile` wrote.";
    return false;
  }
  file_bytes_ = uint64_t(st.st_size);
  // A partial file whose run still holds the claim is not cut off: it is still growing.
  if (const std::string trace = trace_of_partial(path); !trace.empty()) {
    std::string writer;
    if (claim_is_held(trace, &writer)) status_.in_progress_by = writer;
  }
  uint8_t buf[sizeof(format::FileHeader)] = {};
  size_t got = pread_full(fd_, buf, sizeof buf, 0);
  if (got < sizeof buf && !status_.in_progress_by.empty()) {
    error_ = path + ": in progress: " + status_.in_progress_by +
             " is still writing it and has not written its first chunk yet; read it again later.";
    return false;
  }
  if (got == 0) {
    error_ = path + ": the file is empty; the recorder wrote nothing (was it killed before it started?).";
    return false;
  }
  const size_t magic_len = std::min(got, sizeof format::kFileMagic);
  if (std::memcmp(buf, format::kFileMagic, magic_len) != 0) {
    error_ = path + ": not a cutrace trace (it does not start with the cutrace signature); give a file that "
             "`cutrace profile` wrote.";
    return false;
  }
  if (got < sizeof buf) {
    error_ = path + ": the file ends inside its " + std::to_string(sizeof buf) +
             "-byte header, so it holds no events; the recorder was stopped right after creating it.";
    return false;
  }
  std::memcpy(&header_, buf, sizeof header_);
  if (header_.format_version > format::kFormatVersion) {
    error_ = path + ": written in trace format version " + std::to_string(header_.format_version) +
             ", newer than this cutrace reads (" + std::to_string(format::kFormatVersion) +
             "); upgrade cutrace to read it.";
    return false;
  }
  if (header_.format_version >= 1 && header_.format_version < format::kOldestReadableFormatVersion) {
    // Versions before 7 came from development builds that preceded the promise to read old traces.
    error_ = path + ": written in trace format version " + std::to_string(header_.format_version) +
             " by a development build of cutrace from before version " +
             std::to_string(format::kOldestReadableFormatVersion) +
             ", the oldest this cutrace reads; record the trace again.";
    return false;
  }
  if (header_.format_version == 0 || header_.header_bytes < sizeof(format::FileHeader) ||
      header_.header_bytes > file_bytes_) {
    error_ = path + ": the file header is damaged (format version " + std::to_string(header_.format_version) +
             ", header size " + std::to_string(header_.header_bytes) + "); the file cannot be read.";
    return false;
  }
  offset_ = header_.header_bytes;
  dctx_ = ZSTD_createDCtx();
  if (!dctx_) {
    error_ = path + ": out of memory creating the decompressor.";
    return false;
  }
  read_names_ahead();
  return true;
}

void TraceReader::note_damage(uint64_t chunk_offset, std::string reason, uint64_t chunks) {
  if (status_.damaged_chunks == 0) {
    status_.first_damage_chunk = next_sequence_;
    status_.first_damage_offset = chunk_offset;
    status_.first_damage_reason = std::move(reason);
  }
  status_.damaged_chunks += chunks;
}

bool TraceReader::header_sound(const ChunkHeader& ch, uint64_t at) const {
  return ch.magic == format::kChunkMagic && ch.header_check == format::chunk_header_check(ch) &&
         ch.codec == uint16_t(format::Codec::kZstd) && ch.raw_bytes <= format::kMaxChunkRawBytes &&
         ch.stored_bytes != 0 && ch.stored_bytes <= ZSTD_compressBound(ch.raw_bytes) + 32 &&
         file_bytes_ - at - sizeof ch >= ch.stored_bytes;
}

bool TraceReader::find_chunk_header(uint64_t from, uint64_t min_sequence, ChunkHeader& out, uint64_t& where) {
  // A header is found by its magic and confirmed by its own check (a 2^-64 chance for damaged bytes
  // to pass both), read in windows that overlap by a header's length.
  static constexpr size_t kWindow = 1u << 20;
  std::vector<uint8_t> window(kWindow);
  const uint8_t magic[4] = {0x54, 0x43, 0x43, 0x4b};
  for (uint64_t base = from; base + sizeof(ChunkHeader) <= file_bytes_; base += kWindow - sizeof(ChunkHeader)) {
    const size_t got = pread_full(fd_, window.data(), kWindow, base);
    if (got < sizeof(ChunkHeader)) return false;
    for (size_t i = 0; i + sizeof(ChunkHeader) <= got; ++i) {
      const void* hit = std::memchr(window.data() + i, magic[0], got - sizeof(ChunkHeader) + 1 - i);
      if (!hit) break;
      i = size_t(static_cast<const uint8_t*>(hit) - window.data());
      if (std::memcmp(window.data() + i, magic, sizeof magic) != 0) continue;
      ChunkHeader ch;
      std::memcpy(&ch, window.data() + i, sizeof ch);
      if (ch.sequence >= min_sequence && header_sound(ch, base + i)) {
        out = ch;
        where = base + i;
        return true;
      }
    }
    if (got < kWindow) return false;
  }
  return false;
}

TraceReader::ReadResult TraceReader::fail_corrupt(uint64_t chunk_offset, std::string reason, const ChunkHeader* sound_header) {
  // A sound header gives the next chunk's place; otherwise the next valid header is searched for.
  const uint64_t from = sound_header ? chunk_offset + sizeof(ChunkHeader) + sound_header->stored_bytes : chunk_offset + 1;
  const uint64_t min_sequence = sound_header ? sound_header->sequence + 1 : next_sequence_;
  ChunkHeader next{};
  uint64_t next_at = from;
  const bool was_last = sound_header && file_bytes_ - from < sizeof(ChunkHeader);
  if (!was_last && !find_chunk_header(from, min_sequence, next, next_at)) {
    status_.state = TraceState::kCorrupt;
    status_.offset = chunk_offset;
    status_.bad_chunk = next_sequence_;
    status_.reason = std::move(reason);
    return ReadResult::kStop;
  }
  const uint64_t resume_sequence = was_last ? min_sequence : next.sequence;
  note_damage(chunk_offset, std::move(reason), std::max<uint64_t>(1, resume_sequence - next_sequence_));
  offset_ = next_at;
  next_sequence_ = resume_sequence;
  return ReadResult::kOk;
}

TraceReader::ReadResult TraceReader::read_chunk() {
  const uint64_t at = offset_;
  if (at >= file_bytes_) {
    // The file may still be growing (a recorder that is still running): look once more.
    struct stat st {};
    if (::fstat(fd_, &st) == 0) file_bytes_ = uint64_t(st.st_size);
  }
  if (at >= file_bytes_) {
    status_.state = TraceState::kIncomplete;
    return ReadResult::kStop;
  }
  auto truncated = [&] {
    status_.state = TraceState::kTruncated;
    status_.offset = file_bytes_;
    status_.bad_chunk = next_sequence_;
    return ReadResult::kStop;
  };
  uint8_t hb[sizeof(ChunkHeader)];
  const size_t got = pread_full(fd_, hb, sizeof hb, at);
  if (got < sizeof hb) return truncated();
  // A crash can leave the tail of a file zero-filled (space allocated, data never written): that is a
  // cut-off file, not a damaged one.
  if (all_zero(hb, sizeof hb)) {
    status_.state = TraceState::kTruncated;
    status_.offset = at;
    status_.bad_chunk = next_sequence_;
    return ReadResult::kStop;
  }
  ChunkHeader ch;
  std::memcpy(&ch, hb, sizeof ch);
  if (ch.magic != format::kChunkMagic) return fail_corrupt(at, "no chunk starts here (bad magic)");
  if (ch.header_check != format::chunk_header_check(ch))
    return fail_corrupt(at, "the chunk header fails its check (damaged bytes)");
  if (ch.sequence < next_sequence_)
    return fail_corrupt(at, "chunk number " + std::to_string(ch.sequence) + " found where " +
                                std::to_string(next_sequence_) + " was expected (a chunk repeats)");
  if (ch.sequence > next_sequence_ && header_sound(ch, at)) {
    // Chunks are missing (cut out of the file): note them and read on from this one.
    note_damage(at,
                "chunk number " + std::to_string(ch.sequence) + " found where " + std::to_string(next_sequence_) +
                    " was expected (chunks are missing)",
                ch.sequence - next_sequence_);
    next_sequence_ = ch.sequence;
  }
  if (ch.sequence != next_sequence_)
    return fail_corrupt(at, "chunk number " + std::to_string(ch.sequence) + " found where " +
                                std::to_string(next_sequence_) + " was expected (chunks are missing)");
  if (ch.codec != uint16_t(format::Codec::kZstd))
    return fail_corrupt(at, "unknown compression codec " + std::to_string(ch.codec));
  if (ch.raw_bytes > format::kMaxChunkRawBytes)
    return fail_corrupt(at, "the chunk claims " + thousands(ch.raw_bytes) + " bytes, more than the format allows");
  if (ch.stored_bytes == 0 || ch.stored_bytes > ZSTD_compressBound(ch.raw_bytes) + 32)
    return fail_corrupt(at, "the compressed size " + thousands(ch.stored_bytes) + " cannot hold " +
                                thousands(ch.raw_bytes) + " bytes");
  if (file_bytes_ - at - sizeof ch < ch.stored_bytes) return truncated();

  stored_.resize(ch.stored_bytes);
  if (pread_full(fd_, stored_.data(), ch.stored_bytes, at + sizeof ch) < ch.stored_bytes) return truncated();

  // RFC 8878: a frame starts with the magic 0xFD2FB528, then the frame header descriptor whose bit 2 says
  // whether a content checksum follows the last block. The checksum is what catches flipped bytes in
  // the payload, so a frame without one is rejected.
  if (stored_.size() < 5 || load<uint32_t>(stored_.data()) != 0xFD2FB528u)
    return fail_corrupt(at, "the chunk does not hold a zstd frame", &ch);
  if (!(stored_[4] & 0x04))
    return fail_corrupt(at, "the zstd frame has no content checksum, which the format requires", &ch);
  const unsigned long long content = ZSTD_getFrameContentSize(stored_.data(), stored_.size());
  if (content == ZSTD_CONTENTSIZE_ERROR)
    return fail_corrupt(at, "the zstd frame header is damaged", &ch);
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != ch.raw_bytes)
    return fail_corrupt(at, "the zstd frame size disagrees with the chunk header", &ch);
  if (ZSTD_findFrameCompressedSize(stored_.data(), stored_.size()) != stored_.size())
    return fail_corrupt(at, "the chunk is not exactly one zstd frame", &ch);
  // The previous events chunk left its decoded records in raw_ and its payload's buffer in decoded_:
  // swapped back, each buffer keeps to one size (payloads, decoded records), so that neither has to
  // grow again to the other's size, and the reader holds one buffer of each at its peak.
  if (decoded_in_raw_) {
    raw_.swap(decoded_);
    decoded_in_raw_ = false;
  }
  if (raw_.size() < ch.raw_bytes) raw_.resize(ch.raw_bytes);
  size_t n = ZSTD_decompressDCtx(dctx_, raw_.data(), ch.raw_bytes, stored_.data(), stored_.size());
  if (ZSTD_isError(n))
    return fail_corrupt(at, std::string("decompression failed (") + ZSTD_getErrorName(n) + ")", &ch);
  if (n != ch.raw_bytes)
    return fail_corrupt(at, "the chunk decompresses to " + thousands(n) + " bytes instead of " +
                                thousands(ch.raw_bytes), &ch);
  raw_size_ = n;
  current_type_ = ch.type;
  if (!decode_payload(ch.type)) {
    return fail_corrupt(at, std::string("the ") + chunk_type_name(ch.type) + " chunk is malformed: " + chunk_error_, &ch);
  }
  offset_ = at + sizeof ch + ch.stored_bytes;
  ++next_sequence_;
  ++status_.intact_chunks;
  if (ChunkType(ch.type) == ChunkType::kEnd) {
    // Whatever follows the end chunk is not part of the trace (a second recorder appending, say).
    ended_ = true;
    status_.trailing_bytes = file_bytes_ - offset_;
  }
  return ReadResult::kOk;
}

bool TraceReader::decode_payload(uint16_t type) {
  chunk_error_.clear();
  pending_chunk_event_ = false;
  block_pos_ = block_end_ = rec_pos_ = 0;
  switch (ChunkType(type)) {
    case ChunkType::kMetadata: {
      std::vector<std::pair<std::string, std::string>> pairs;
      if (!parse_metadata(pairs, raw_.data(), raw_size_)) return false;
      for (auto& kv : pairs) metadata_.push_back(std::move(kv));
      pending_chunk_event_ = true;
      return true;
    }
    case ChunkType::kApiTable:
      if (!parse_api_table()) return false;
      pending_chunk_event_ = true;
      return true;
    case ChunkType::kEvents:
      if (!validate_events()) return false;
      apply_events();
      block_end_ = raw_size_;
      return true;
    case ChunkType::kEnd:
      if (!parse_end()) return false;
      pending_chunk_event_ = true;
      return true;
    case ChunkType::kNames: {
      // Usually read ahead at open() already; what it adds now serves the rest of the stream.
      std::vector<names::ProcessNames> list;
      if (!names::decode(raw_.data(), raw_size_, list)) return chunk_error_ = "its tables run past its end", false;
      add_kernel_names(list);
      return true;
    }
  }
  // A chunk type from a later writer: self-delimiting and checksummed, so it can be skipped safely.
  ++status_.skipped_chunks;
  return true;
}

bool TraceReader::parse_metadata(std::vector<std::pair<std::string, std::string>>& out, const uint8_t* p,
                                 size_t n) {
  Cursor c(p, n);
  while (c.left()) {
    uint32_t kb, vb;
    std::string k, v;
    if (!c.u32(kb) || !c.u32(vb) || !c.bytes(k, kb) || !c.bytes(v, vb)) {
      chunk_error_ = "a key/value pair runs past the end of the payload";
      return false;
    }
    out.emplace_back(std::move(k), std::move(v));
  }
  return true;
}

bool TraceReader::parse_api_table() {
  Cursor c(raw_.data(), raw_size_);
  uint32_t count;
  if (!c.u32(count)) return chunk_error_ = "no entry count", false;
  std::vector<ApiSpec> parsed;
  // Each entry takes at least 16 bytes, so a count larger than that allows is a lie; checking it first
  // keeps a corrupt count from reserving memory.
  if (count > c.left() / 16) return chunk_error_ = "the entry count exceeds the payload", false;
  parsed.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    ApiSpec s;
    uint16_t domain;
    uint8_t cls, argc, rk, flags;
    uint32_t name_bytes, display_bytes;
    if (!c.u32(s.id) || !c.u16(domain) || !c.u8(cls) || !c.u8(argc) || !c.u8(rk) || !c.u8(flags) || !c.skip(2) ||
        !c.u32(name_bytes) || !c.bytes(s.name, name_bytes) || !c.u32(display_bytes) ||
        !c.bytes(s.display_name, display_bytes))
      return chunk_error_ = "entry " + std::to_string(i) + " is cut off", false;
    if (s.display_name.empty()) s.display_name = s.name;
    s.internal = flags & format::kApiFlagInternal;
    s.domain = abi::ApiDomain(domain);
    s.api_class = abi::ApiClass(cls);
    s.result_kind = format::ResultKind(rk);
    s.known = true;
    for (uint8_t a = 0; a < argc; ++a) {
      uint8_t fmt, arg_flags;
      uint16_t nb, tb;
      ApiArgSpec arg;
      if (!c.u8(fmt) || !c.u8(arg_flags) || !c.u16(nb) || !c.bytes(arg.name, nb) || !c.u16(tb) ||
          !c.bytes(arg.type_name, tb))
        return chunk_error_ = "the arguments of entry " + std::to_string(i) + " are cut off", false;
      arg.format = abi::ArgFormat(fmt);
      arg.out = arg_flags & format::kArgFlagOut;
      if (names_kernel(arg.format)) {
        if (s.kernel_arg < 0) s.kernel_arg = a;
        int& slot = arg.out ? s.alias_out_arg : s.alias_in_arg;
        if (slot < 0) slot = a;
      }
      s.args.push_back(std::move(arg));
    }
    parsed.push_back(std::move(s));
  }
  if (c.left()) return chunk_error_ = thousands(c.left()) + " bytes follow the last entry", false;
  for (auto& s : parsed) {
    if (s.alias_out_arg < 0 || s.alias_in_arg < 0) s.alias_out_arg = s.alias_in_arg = -1;
    ApiSpec& slot = apis_[s.id];  // replaces a placeholder or an earlier definition in place
    slot = std::move(s);
    if (slot.id < kDenseApiIds) {
      if (api_index_.size() <= slot.id) api_index_.resize(slot.id + 1, nullptr);
      api_index_[slot.id] = &slot;
    }
  }
  return true;
}

bool TraceReader::parse_end() {
  Cursor c(raw_.data(), raw_size_);
  uint32_t pairs;
  if (!c.u32(pairs)) return chunk_error_ = "no summary count", false;
  std::vector<std::pair<std::string, std::string>> summary;
  for (uint32_t i = 0; i < pairs; ++i) {
    uint32_t kb, vb;
    std::string k, v;
    if (!c.u32(kb) || !c.u32(vb) || !c.bytes(k, kb) || !c.bytes(v, vb))
      return chunk_error_ = "summary pair " + std::to_string(i) + " is cut off", false;
    summary.emplace_back(std::move(k), std::move(v));
  }
  uint32_t thread_count;
  if (!c.u32(thread_count)) return chunk_error_ = "no thread count", false;
  if (uint64_t(thread_count) * sizeof(format::ThreadStats) != c.left())
    return chunk_error_ = "the thread statistics do not fill the rest of the payload", false;
  summary_ = std::move(summary);
  if (const std::string* why = summary_value("cut_off.reason")) {
    status_.cut_off = why->empty() ? "the recorder stopped before the program ended" : *why;
    const std::string* last = summary_value("cut_off.last_record_ns");
    const uint64_t last_ns = last ? std::strtoull(last->c_str(), nullptr, 10) : 0;
    if (last_ns) status_.cut_off += "; the last record is " + time_into_recording(last_ns);
  }
  for (uint32_t i = 0; i < thread_count; ++i) {
    auto st = load<format::ThreadStats>(c.here() + i * sizeof(format::ThreadStats));
    if (Thread* t = mutable_thread(st.thread_index)) {
      t->has_stats = true;
      t->records_written = st.records_written;
      t->records_dropped = st.records_dropped;
      t->records_malformed = st.records_malformed;
    }
  }
  return true;
}

}  // namespace cutrace::reader
