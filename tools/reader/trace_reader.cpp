#include "reader/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "cutrace/job.h"
#include "reader/decode.h"
#include "reader/trace_claim.h"

namespace cutrace::reader {
namespace {

using format::BlockHeader;
using format::BlockType;
using format::ChunkHeader;
using format::ChunkType;

// Ids of generated api tables are dense and small; anything above this is looked up in the map only,
// so a corrupt id cannot make the reader allocate an index of gigabytes.
constexpr uint32_t kDenseApiIds = 1u << 16;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads exactly n bytes at offset, retrying short reads; returns the bytes read (less only at EOF).
size_t pread_full(int fd, void* buf, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, static_cast<uint8_t*>(buf) + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += size_t(r);
  }
  return done;
}

bool all_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

const char* chunk_type_name(uint16_t type) {
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

// Checks one record of a kRecords block against its kind's layout. `left` is what remains of the block.
// NVTX records that name things rather than mark time.
bool is_nvtx_naming(uint32_t event) {
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

const char* check_record(const uint8_t* p, size_t left) {
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
void apply_job(Process& proc, std::string_view text) {
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

}  // namespace

std::string Status::describe() const {
  const std::string ev = thousands(events) + (events == 1 ? " event" : " events");
  const std::string ch = thousands(intact_chunks) + (intact_chunks == 1 ? " intact chunk" : " intact chunks");
  std::string damage;
  if (damaged_chunks)
    damage = thousands(damaged_chunks) + (damaged_chunks == 1 ? " damaged chunk was" : " damaged chunks were") +
             " skipped (the first, chunk " + std::to_string(first_damage_chunk) + " at byte " +
             thousands(first_damage_offset) + ": " + first_damage_reason + ")";
  const std::string earlier = damage.empty() ? "" : "; before that, " + damage;
  switch (state) {
    case TraceState::kReading:
      return "reading: " + ev + " in " + ch + " so far" + earlier;
    case TraceState::kComplete: {
      std::string s = damage.empty() ? "complete: " + ev + " in " + thousands(intact_chunks) + " chunks"
                                     : "damaged: " + damage + "; " + ev + " in the other " + ch + " are shown";
      // Never "complete" over calls the program made after recording stopped.
      if (!cut_off.empty()) s = "cut off: " + cut_off + "; " + (damage.empty() ? ev + " in " + thousands(intact_chunks) + " chunks" : s);
      if (trailing_bytes)
        s += "; " + thousands(trailing_bytes) + " bytes after the end chunk were ignored";
      return s;
    }
    case TraceState::kIncomplete:
      if (!in_progress_by.empty())
        return "in progress: " + in_progress_by + " is still writing it; " + ev + " in " + ch + " so far are shown" +
               earlier;
      return "incomplete: the recorder did not finish (killed or crashed); " + ev + " in " + ch + " are shown" + earlier;
    case TraceState::kTruncated:
      if (!in_progress_by.empty())
        return "in progress: " + in_progress_by + " is still writing it; " + ev + " in " + ch + " so far are shown" +
               earlier;
      return "truncated at byte " + thousands(offset) + " after " + ch +
             ": the recorder did not finish writing chunk " + std::to_string(bad_chunk) + "; " + ev + " are shown" +
             earlier;
    case TraceState::kCorrupt:
      return "corrupt chunk " + std::to_string(bad_chunk) + " at byte " + thousands(offset) + ": " + reason +
             ", and no intact chunk follows; " + ev + " in the " + ch + " before it are shown" + earlier;
  }
  return {};
}

TraceReader::TraceReader() = default;

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeDCtx(dctx_);
}

namespace {

// What a path that is not a regular file is, for the one sentence that refuses it.
const char* kind_of_file(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

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

void TraceReader::read_names_ahead() {
  // Only chunk headers are read on the way; a damaged or cut-off file simply has no names read
  // ahead, and the stream reports what is wrong with it when it gets there.
  uint64_t at = header_.header_bytes;
  std::vector<uint8_t> stored, payload;
  while (file_bytes_ - at >= sizeof(ChunkHeader)) {
    ChunkHeader ch;
    if (pread_full(fd_, &ch, sizeof ch, at) < sizeof ch) return;
    // Past a damaged header, on to the next sound one, as the stream itself will go.
    if (!header_sound(ch, at) && !find_chunk_header(at + 1, 0, ch, at)) return;
    if (ChunkType(ch.type) == ChunkType::kEnd) return;
    if (ChunkType(ch.type) == ChunkType::kNames) {
      if (ch.codec != uint16_t(format::Codec::kZstd) || ch.raw_bytes > format::kMaxChunkRawBytes) return;
      stored.resize(ch.stored_bytes);
      payload.resize(ch.raw_bytes);
      if (pread_full(fd_, stored.data(), ch.stored_bytes, at + sizeof ch) < ch.stored_bytes) return;
      // zstd verifies the frame's content checksum while decompressing.
      const size_t n = ZSTD_decompressDCtx(dctx_, payload.data(), payload.size(), stored.data(), stored.size());
      std::vector<names::ProcessNames> list;
      if (ZSTD_isError(n) || n != ch.raw_bytes || !names::decode(payload.data(), n, list)) return;
      add_kernel_names(list);
      return;
    }
    at += sizeof ch + ch.stored_bytes;
  }
}

void TraceReader::add_kernel_names(std::vector<names::ProcessNames>& list) {
  for (names::ProcessNames& n : list) {
    Process* known = nullptr;
    if (auto it = processes_by_pid_.find(n.pid); it != processes_by_pid_.end())
      for (uint32_t i : it->second)
        if (processes_[i].start_ticks == n.start_ticks) known = &processes_[i];
    if (known) {
      apply_kernel_names(*known, n);
    } else {
      names::ProcessNames& pending = pending_names_[{n.pid, n.start_ticks}];
      pending.kernels.insert(pending.kernels.end(), n.kernels.begin(), n.kernels.end());
      pending.handles.insert(pending.handles.end(), n.handles.begin(), n.handles.end());
    }
  }
}

void TraceReader::apply_kernel_names(Process& p, const names::ProcessNames& n) {
  for (const auto& [key, mangled] : n.kernels) {
    auto [it, added] = p.kernel_names.try_emplace(key);
    if (!added) continue;
    it->second.mangled = mangled;
    it->second.demangled = demangle(mangled);
  }
  for (const auto& [handle, key] : n.handles) p.kernel_aliases.emplace(handle, key);
}

const std::string* TraceReader::metadata_value(std::string_view key) const {
  for (auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

std::string TraceReader::time_into_recording(uint64_t monotonic_ns) const {
  const std::string* start = metadata_value("start.monotonic_ns");
  const uint64_t start_ns = start ? std::strtoull(start->c_str(), nullptr, 10) : 0;
  if (!start_ns || monotonic_ns < start_ns) return "at " + std::to_string(monotonic_ns) + " ns (CLOCK_MONOTONIC)";
  char text[64];
  std::snprintf(text, sizeof text, "%.3f s into the recording", double(monotonic_ns - start_ns) / 1e9);
  return text;
}

const std::string* TraceReader::summary_value(std::string_view key) const {
  for (auto& [k, v] : summary_)
    if (k == key) return &v;
  return nullptr;
}

const ApiSpec& TraceReader::api(uint32_t id) {
  if (id < api_index_.size() && api_index_[id]) return *api_index_[id];
  auto it = apis_.find(id);
  if (it != apis_.end()) return it->second;
  ApiSpec& spec = apis_[id];
  spec.id = id;
  spec.name = "api#" + std::to_string(id);
  spec.known = false;
  return spec;
}

std::vector<const ApiSpec*> TraceReader::api_table() const {
  std::vector<const ApiSpec*> out;
  for (auto& [id, spec] : apis_)
    if (spec.known) out.push_back(&spec);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->id < b->id; });
  return out;
}

const Thread* TraceReader::thread(uint32_t index) const {
  auto it = thread_pos_.find(index);
  return it == thread_pos_.end() ? nullptr : &threads_[it->second];
}

Thread* TraceReader::mutable_thread(uint32_t index) {
  auto it = thread_pos_.find(index);
  return it == thread_pos_.end() ? nullptr : &threads_[it->second];
}

const KernelName* TraceReader::kernel(const Thread& t, abi::ArgFormat format, uint64_t value) const {
  if (!names_kernel(format) || value == 0) return nullptr;
  const Process& p = processes_[t.process];
  // A handle is named directly (cuModuleGetFunction) or through what it was derived from: a
  // cudaKernel_t from its stub, a CUfunction from its CUkernel, which may itself come from a stub.
  // The chain is short; the bound only guards against a cycle in an untrusted file.
  for (int step = 0; step < 4; ++step) {
    if (auto k = p.kernel_names.find(value); k != p.kernel_names.end()) return &k->second;
    auto a = p.kernel_aliases.find(value);
    if (a == p.kernel_aliases.end()) return nullptr;
    value = a->second;
  }
  return nullptr;
}

const KernelName* TraceReader::kernel_of(const ApiCall& call, const Thread& t) const {
  const int i = call.api->kernel_arg;
  if (i < 0 || i >= call.arg_count) return nullptr;
  return kernel(t, call.api->args[size_t(i)].format, call.args[i]);
}

const ApiSpec* TraceReader::find_api(uint32_t id) const {
  if (id < api_index_.size()) return api_index_[id];
  auto it = apis_.find(id);
  return it == apis_.end() || !it->second.known ? nullptr : &it->second;
}

Process& TraceReader::process_for(const format::ThreadDef& def) {
  auto& same_pid = processes_by_pid_[def.pid];
  for (uint32_t i : same_pid)
    if (processes_[i].start_ticks == def.process_start_ticks) return processes_[i];
  Process& p = processes_.emplace_back();
  p.index = uint32_t(processes_.size() - 1);
  p.pid = def.pid;
  p.ppid = def.ppid;
  p.start_ticks = def.process_start_ticks;
  same_pid.push_back(p.index);
  if (auto pending = pending_names_.find({def.pid, def.process_start_ticks}); pending != pending_names_.end()) {
    apply_kernel_names(p, pending->second);
    pending_names_.erase(pending);
  }
  return p;
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

void TraceReader::apply_call_names(Thread& t, const uint8_t* rec, uint32_t size) {
  (void)size;
  const ApiSpec* spec = find_api(load<uint32_t>(rec + offsetof(abi::RecordHeader, aux)));
  if (!spec || spec->alias_out_arg < 0) return;
  const uint8_t argc = rec[offsetof(abi::ApiCallRecord, arg_count)];
  if (spec->alias_out_arg >= argc || spec->alias_in_arg >= argc) return;
  const uint64_t derived = load<uint64_t>(rec + sizeof(abi::ApiCallRecord) + 8 * size_t(spec->alias_out_arg));
  const uint64_t from = load<uint64_t>(rec + sizeof(abi::ApiCallRecord) + 8 * size_t(spec->alias_in_arg));
  // A failed call leaves its out-parameter at 0 (the wrappers record 0 then): nothing to learn from it.
  if (derived && from && derived != from) processes_[t.process].kernel_aliases[derived] = from;
}

void TraceReader::apply_module(Thread& t, const uint8_t* rec) {
  auto r = load<abi::ModuleRecord>(rec);
  std::vector<Module>& modules = processes_[t.process].modules;
  if (r.header.aux == uint32_t(abi::ModuleEvent::kUnloaded)) {
    // Ends the latest load of the same object that is still open; an unload of nothing known (its load
    // was in a damaged chunk) changes nothing.
    for (auto m = modules.rbegin(); m != modules.rend(); ++m) {
      if (m->base == r.base && m->text_start == r.text_start && m->text_end == r.text_end &&
          m->unloaded_at == UINT64_MAX) {
        m->unloaded_at = std::max(r.time, m->loaded_at);
        break;
      }
    }
    return;
  }
  Module m;
  m.base = r.base;
  m.text_start = r.text_start;
  m.text_end = r.text_end;
  m.flags = r.flags;
  m.loaded_at = r.time;
  m.build_id.assign(reinterpret_cast<const char*>(r.build_id), r.build_id_bytes);
  m.path.assign(reinterpret_cast<const char*>(rec + sizeof(abi::ModuleRecord)), r.path_bytes);
  modules.push_back(std::move(m));
}

void TraceReader::apply_events() {
  const uint8_t* p = raw_.data();
  // Only what validate_events() found to apply: thread definitions (at their block header) and the
  // records that name things; in file order.
  for (const PendingApply& at : to_apply_) {
    const uint8_t* r = p + at.offset;
    if (at.thread_def) {
      auto def = load<format::ThreadDef>(r + sizeof(BlockHeader));
      Process& proc = process_for(def);
      Thread& t = threads_.emplace_back();
      t.index = def.thread_index;
      t.pid = def.pid;
      t.tid = def.tid;
      t.ppid = def.ppid;
      t.process_start_ticks = def.process_start_ticks;
      t.claim_serial = def.claim_serial;
      t.first_seen_ns = def.first_seen_ns;
      t.process = proc.index;
      proc.threads.push_back(def.thread_index);
      thread_pos_[def.thread_index] = uint32_t(threads_.size() - 1);
      continue;
    }
    Thread& t = *mutable_thread(at.thread_index);
    auto h = load<abi::RecordHeader>(r);
    if (abi::RecordKind(h.kind) == abi::RecordKind::kString) {
      auto length = load<uint32_t>(r + offsetof(abi::StringRecord, length));
      std::string_view text(reinterpret_cast<const char*>(r + sizeof(abi::StringRecord)), length);
      Process& proc = processes_[t.process];
      switch (abi::StringKind(h.aux)) {
        case abi::StringKind::kKernelName: {
          uint64_t key = load<uint64_t>(r + offsetof(abi::StringRecord, key));
          KernelName& k = proc.kernel_names[key];
          k.mangled.assign(text);
          k.demangled = demangle(text);
          break;
        }
        case abi::StringKind::kThreadName: t.name.assign(text); break;
        case abi::StringKind::kProcessCommand: proc.command.assign(text); break;
        case abi::StringKind::kProcessExe: proc.exe.assign(text); break;
        case abi::StringKind::kCudaRuntime:
          proc.cuda_runtime_version = uint32_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          proc.cuda_runtime_path.assign(text);
          break;
        case abi::StringKind::kProcessJob: apply_job(proc, text); break;
        case abi::StringKind::kUnwrappedEntryPoint:
          break;  // the recorder's warning (metadata warning.N) names them
        case abi::StringKind::kGpuKernelName: {
          KernelName& k = proc.gpu_kernel_names[load<uint64_t>(r + offsetof(abi::StringRecord, key))];
          k.mangled.assign(text);
          k.demangled = demangle(text);
          break;
        }
        case abi::StringKind::kGpuActivityStatus: {
          // CUPTI that started late, after the shim said it had not started in time: the start wins.
          const auto code = int64_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          if (proc.gpu_status_code == 0 && code != 0) break;
          proc.gpu_status_code = code;
          proc.gpu_status.assign(text);
          break;
        }
        case abi::StringKind::kPythonFramesStatus: {
          // A check that failed after the frames were accepted: the refusal wins.
          const auto code = int64_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          if (proc.python_frames_code == 1 && code != 1) break;
          proc.python_frames_code = code;
          proc.python_frames_status.assign(text);
          break;
        }
        case abi::StringKind::kPythonFunction: {
          const size_t nul = text.find('\0');
          Process::PythonFunction& f = proc.python_functions[load<uint64_t>(r + offsetof(abi::StringRecord, key))];
          f.name.assign(text.substr(0, nul));
          f.file.assign(nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1));
          break;
        }
      }
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kApiCall) {
      apply_call_names(t, r, h.size);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kModuleMap) {
      apply_module(t, r);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kNvtx) {
      apply_nvtx_name(t, r);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kGpuDevice) {
      apply_gpu_device(t, r);
    }
  }
}

void TraceReader::apply_gpu_device(Thread& t, const uint8_t* rec) {
  GpuDevice d;
  d.record = load<abi::GpuDeviceRecord>(rec);
  d.name.assign(reinterpret_cast<const char*>(rec + sizeof(abi::GpuDeviceRecord)), d.record.name_bytes);
  // CUPTI describes a device once; a second description of the same id (a CUPTI restarted in the
  // process) is the newer word on it.
  std::vector<GpuDevice>& devices = processes_[t.process].gpu_devices;
  for (GpuDevice& known : devices)
    if (known.record.device == d.record.device) {
      known = std::move(d);
      return;
    }
  devices.push_back(std::move(d));
}

std::string gpu_uuid_text(const uint8_t (&uuid)[16]) {
  static const char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[uuid[i] >> 4];
    text += kHex[uuid[i] & 15];
  }
  return text;
}

void TraceReader::deliver_gpu_activity(Event& ev, const uint8_t* r, uint32_t aux) {
  ev.kind = EventKind::kGpuActivity;
  GpuActivityEvent& g = ev.gpu;
  g = GpuActivityEvent{};
  g.kind = abi::GpuActivity(aux);
  switch (g.kind) {
    case abi::GpuActivity::kApiLink: {
      auto a = load<abi::GpuApiLinkRecord>(r);
      g.start_ns = a.start, g.end_ns = a.end, g.correlation = a.correlation;
      g.tid = a.tid, g.api_id = a.api_id, g.result = a.result;
      return;
    }
    case abi::GpuActivity::kDropped: {
      auto d = load<abi::GpuDroppedRecord>(r);
      g.start_ns = g.end_ns = d.time;
      g.dropped = d.dropped;
      return;
    }
    default: break;
  }
  auto h = load<abi::GpuActivityHeader>(r);
  g.start_ns = h.start, g.end_ns = std::max(h.start, h.end), g.correlation = h.correlation;
  g.device = h.device, g.context = h.context, g.stream = h.stream;
  switch (g.kind) {
    case abi::GpuActivity::kKernel: {
      auto k = load<abi::GpuKernelRecord>(r);
      const Process& proc = processes_[ev.thread->process];
      if (auto it = proc.gpu_kernel_names.find(k.name); k.name && it != proc.gpu_kernel_names.end()) g.name = &it->second;
      std::copy(std::begin(k.grid), std::end(k.grid), g.grid);
      std::copy(std::begin(k.block), std::end(k.block), g.block);
      g.static_shared_bytes = k.static_shared_bytes, g.dynamic_shared_bytes = k.dynamic_shared_bytes;
      g.registers_per_thread = k.registers_per_thread;
      g.graph_id = k.graph_id, g.graph_node_id = k.graph_node_id;
      break;
    }
    case abi::GpuActivity::kMemcpy: {
      auto m = load<abi::GpuMemcpyRecord>(r);
      g.bytes = m.bytes, g.runtime_correlation = m.runtime_correlation;
      g.copy_kind = m.copy_kind, g.src_kind = m.src_kind, g.dst_kind = m.dst_kind, g.flags = m.flags;
      g.graph_id = m.graph_id, g.graph_node_id = m.graph_node_id;
      break;
    }
    case abi::GpuActivity::kMemset: {
      auto m = load<abi::GpuMemsetRecord>(r);
      g.bytes = m.bytes, g.value = m.value, g.memory_kind = m.memory_kind, g.flags = uint8_t(m.flags);
      g.graph_id = m.graph_id, g.graph_node_id = m.graph_node_id;
      break;
    }
    case abi::GpuActivity::kGraph: {
      g.graph_id = load<abi::GpuGraphRecord>(r).graph_id;
      break;
    }
    case abi::GpuActivity::kSync: {
      auto s = load<abi::GpuSyncRecord>(r);
      g.sync_type = s.type, g.event = s.event;
      break;
    }
    case abi::GpuActivity::kMemory: {
      auto m = load<abi::GpuMemoryRecord>(r);
      g.address = m.address, g.bytes = m.bytes, g.operation = m.operation, g.memory_kind = m.memory_kind;
      break;
    }
    default: break;
  }
}

// A payload schema or enum, or one of its entries: `values` holds the record's payload bytes, which
// must be the struct of its event (a record of a later build may hold more; one with less is ignored).
static void apply_payload_registration(NvtxPayloadTypes& types, const abi::NvtxRecord& r, std::string name,
                                const uint8_t* values) {
  const std::pair<uint32_t, uint64_t> key{r.domain, r.string_id};
  const bool cut = r.text_cut || (r.payload_cut & abi::kNvtxPayloadCutEntries);
  // Entries beyond what the shim records (it keeps 256) cannot come from a well-formed trace.
  constexpr uint32_t kMaxEntries = 4096;
  switch (abi::NvtxEvent(r.header.aux)) {
    case abi::NvtxEvent::kPayloadSchema: {
      if (r.payload_bytes < sizeof(abi::NvtxSchemaInfo)) return;
      const auto info = load<abi::NvtxSchemaInfo>(values);
      NvtxSchema& s = types.schemas[key];
      s = NvtxSchema{};  // registered again (by another module): the new entries follow
      s.name = std::move(name);
      s.type = info.type;
      s.flags = info.flags;
      s.static_size = info.static_size;
      s.declared_entries = info.entries;
      s.cut = cut;
      break;
    }
    case abi::NvtxEvent::kPayloadSchemaEntry: {
      auto it = types.schemas.find(key);
      if (it == types.schemas.end() || r.payload_bytes < sizeof(abi::NvtxSchemaEntry) || r.category >= kMaxEntries) return;
      const auto e = load<abi::NvtxSchemaEntry>(values);
      std::vector<NvtxSchemaField>& fields = it->second.fields;
      if (fields.size() <= r.category) fields.resize(r.category + 1);
      fields[r.category] = {std::move(name), e.type, e.flags, e.offset, e.array_or_union_detail};
      if (r.text_cut) it->second.cut = true;
      break;
    }
    case abi::NvtxEvent::kPayloadEnum: {
      if (r.payload_bytes < sizeof(abi::NvtxEnumInfo)) return;
      const auto info = load<abi::NvtxEnumInfo>(values);
      NvtxEnum& e = types.enums[key];
      e = NvtxEnum{};
      e.name = std::move(name);
      e.size = info.size == 0 || info.size > 8 ? 4 : info.size;
      e.declared_entries = info.entries;
      e.cut = cut;
      break;
    }
    case abi::NvtxEvent::kPayloadEnumEntry: {
      auto it = types.enums.find(key);
      if (it == types.enums.end() || r.payload_bytes < sizeof(abi::NvtxEnumEntry) || r.category >= kMaxEntries) return;
      const auto e = load<abi::NvtxEnumEntry>(values);
      std::vector<NvtxEnumValue>& values_of = it->second.values;
      if (values_of.size() <= r.category) values_of.resize(r.category + 1);
      values_of[r.category] = {std::move(name), e.value, e.is_flag != 0};
      if (r.text_cut) it->second.cut = true;
      break;
    }
    default: break;
  }
}

void TraceReader::apply_nvtx_name(Thread& t, const uint8_t* rec) {
  auto r = load<abi::NvtxRecord>(rec);
  std::string text(reinterpret_cast<const char*>(rec + sizeof(abi::NvtxRecord)), r.text_bytes);
  Process& proc = processes_[t.process];
  switch (abi::NvtxEvent(r.header.aux)) {
    case abi::NvtxEvent::kDomainCreate: proc.nvtx_domains[r.domain] = std::move(text); break;
    case abi::NvtxEvent::kRegisterString: proc.nvtx_strings[r.string_id] = std::move(text); break;
    case abi::NvtxEvent::kNameCategory: proc.nvtx_categories[uint64_t(r.domain) << 32 | r.category] = std::move(text); break;
    case abi::NvtxEvent::kNameThread: proc.nvtx_thread_names[uint32_t(r.range_id)] = std::move(text); break;
    case abi::NvtxEvent::kNameResource:
      proc.nvtx_resources[uint64_t(r.category) << 56 ^ r.range_id] = std::move(text);
      break;
    case abi::NvtxEvent::kPayloadSchema:
    case abi::NvtxEvent::kPayloadSchemaEntry:
    case abi::NvtxEvent::kPayloadEnum:
    case abi::NvtxEvent::kPayloadEnumEntry:
      apply_payload_registration(proc.nvtx_payload_types, r, std::move(text),
                                 rec + sizeof(abi::NvtxRecord) + r.text_bytes);
      break;
    default: break;
  }
}

bool TraceReader::deliver_event(Event& ev) {
  const uint8_t* p = raw_.data();
  while (true) {
    if (rec_pos_ < block_pos_) {
      // Inside a kRecords block: [rec_pos_, block_pos_) holds its remaining records.
      const uint8_t* r = p + rec_pos_;
      auto h = load<abi::RecordHeader>(r);
      rec_pos_ += h.size;
      ev.chunk = next_sequence_ - 1;
      ev.thread = block_thread_;
      ++block_thread_->records_read;
      ++status_.events;
      switch (abi::RecordKind(h.kind)) {
        case abi::RecordKind::kApiCall: {
          auto rec = load<abi::ApiCallRecord>(r);
          ApiCall& c = ev.call;
          ev.kind = EventKind::kApiCall;
          c.api_id = h.aux;
          c.api = &api(h.aux);
          c.begin_ns = rec.begin;
          c.end_ns = rec.end;
          c.result = rec.result;
          c.depth = rec.depth;
          c.outer_domains = rec.outer_domains;
          c.flags = rec.flags;
          c.correlation = rec.correlation ? rec.correlation : ++call_sequence_;
          c.arg_count = rec.arg_count;
          // A fixed width (decoded calls have at most kMaxApiArgs; raw_ has the slack): an inline copy
          // instead of a call into memcpy. Slots past arg_count hold whatever followed.
          static_assert(kDeliverySlack >= 8 * abi::kMaxApiArgs);
          std::memcpy(c.args, r + sizeof(abi::ApiCallRecord), 8 * abi::kMaxApiArgs);
          c.frames = nullptr;
          c.frame_count = 0;
          c.python_frames = nullptr;
          c.python_frame_count = 0;
          if (backtraces_waiting_) {
            // The stack written just before this call's record, if it is this call's (a backtrace
            // whose call was lost to a full ring is dropped here).
            auto b = backtraces_.find(block_thread_->index);
            if (b != backtraces_.end() && b->second.waiting) {
              b->second.waiting = false;
              --backtraces_waiting_;
              if (b->second.call_begin == rec.begin && b->second.api_id == h.aux) {
                c.frames = b->second.frames.data();
                c.frame_count = uint32_t(b->second.frames.size());
                c.python_frames = b->second.python_frames.data();
                c.python_frame_count = uint32_t(b->second.python_frames.size());
              }
            }
          }
          return true;
        }
        case abi::RecordKind::kBacktrace: {
          auto rec = load<abi::BacktraceRecord>(r);
          PendingBacktrace& b = backtraces_[block_thread_->index];
          if (!b.waiting) ++backtraces_waiting_;
          b.waiting = true;
          b.call_begin = rec.call_begin;
          b.api_id = rec.api_id;
          // Either list may be empty (a record of Python frames alone, or of native ones alone), and an
          // empty vector's data() may be null, which memcpy must not be given.
          b.frames.resize(h.aux);
          if (h.aux) std::memcpy(b.frames.data(), r + sizeof(abi::BacktraceRecord), 8u * h.aux);
          b.python_frames.resize(rec.python_frames);
          if (rec.python_frames)
            std::memcpy(b.python_frames.data(), r + abi::backtrace_record_bytes(h.aux, 0),
                        sizeof(abi::PythonFrame) * rec.python_frames);
          continue;  // delivered with its call
        }
        case abi::RecordKind::kString: {
          auto rec = load<abi::StringRecord>(r);
          ev.kind = EventKind::kString;
          ev.string.kind = abi::StringKind(h.aux);
          ev.string.key = rec.key;
          ev.string.text = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::StringRecord)), rec.length);
          return true;
        }
        case abi::RecordKind::kThreadStart: {
          auto rec = load<abi::ThreadStartRecord>(r);
          ev.kind = EventKind::kThreadStart;
          const int32_t priority =
              rec.header.aux & abi::kThreadPriorityKnown ? int32_t(rec.header.aux & 0xff) : -1;
          ev.thread_start = {rec.time, rec.pid, rec.tid, rec.ppid, rec.flags, priority};
          if (priority >= 0) block_thread_->priority = priority;
          return true;
        }
        case abi::RecordKind::kModuleMap: {
          // apply_events() added the chunk's loads in record order; this is the next of them. An
          // unload was applied to its module there and is no event of its own.
          if (h.aux != uint32_t(abi::ModuleEvent::kLoaded)) continue;
          const Process& proc = processes_[block_thread_->process];
          size_t& delivered = module_cursor_[block_thread_->process];
          if (delivered >= proc.modules.size()) continue;
          ev.kind = EventKind::kModule;
          ev.module = &proc.modules[delivered++];
          return true;
        }
        case abi::RecordKind::kCaptureState: {
          auto rec = load<abi::CaptureStateRecord>(r);
          ev.kind = EventKind::kCapture;
          ev.capture = {h.aux == uint32_t(abi::CaptureEvent::kBegin), rec.time, rec.range,
                        abi::CaptureReason(rec.reason)};
          return true;
        }
        case abi::RecordKind::kContextSwitch: {
          auto rec = load<abi::ContextSwitchRecord>(r);
          ev.kind = EventKind::kContextSwitch;
          ev.context_switch = {rec.time, rec.cpu, abi::ContextSwitch(h.aux)};
          return true;
        }
        case abi::RecordKind::kCpuSample: {
          auto rec = load<abi::CpuSampleRecord>(r);
          ev.kind = EventKind::kCpuSample;
          sample_frames_.resize(h.aux);
          std::memcpy(sample_frames_.data(), r + sizeof(abi::CpuSampleRecord), 8u * h.aux);
          ev.sample = {rec.time, rec.cpu, sample_frames_.data(), h.aux};
          return true;
        }
        case abi::RecordKind::kGpuActivity:
          deliver_gpu_activity(ev, r, h.aux);
          return true;
        case abi::RecordKind::kPythonSample: {
          auto rec = load<abi::PythonSampleRecord>(r);
          ev.kind = EventKind::kPythonSample;
          python_sample_frames_.resize(h.aux);
          std::memcpy(python_sample_frames_.data(), r + sizeof(abi::PythonSampleRecord),
                      sizeof(abi::PythonFrame) * h.aux);
          ev.python_sample = {rec.time, python_sample_frames_.data(), h.aux};
          return true;
        }
        case abi::RecordKind::kNvtx:
          if (!is_nvtx_naming(h.aux)) {
            deliver_nvtx(ev, r);
            return true;
          }
          ev.kind = EventKind::kRecord;
          ev.record = {h.kind, h.aux, r, h.size};
          return true;
        case abi::RecordKind::kGpuDevice:  // applied to its process before delivery (Process::gpu_devices)
          break;
        case abi::RecordKind::kInvalid:  // refused by check_record; here for the compiler's count
        case abi::RecordKind::kPad:
        case abi::RecordKind::kKindCount:
          break;
      }
      // A kind without an event of its own (and any kind of a later build): the raw record.
      ev.kind = EventKind::kRecord;
      ev.record = {h.kind, h.aux, r, h.size};
      return true;
    }
    if (block_pos_ >= block_end_) return false;
    auto bh = load<BlockHeader>(p + block_pos_);
    const size_t payload = block_pos_ + sizeof bh;
    block_pos_ = payload + bh.bytes;
    if (BlockType(bh.type) == BlockType::kThreadDef) {
      ev.kind = EventKind::kThreadDef;
      ev.chunk = next_sequence_ - 1;
      ev.thread = thread(bh.thread_index);
      rec_pos_ = block_pos_;
      return true;
    }
    if (BlockType(bh.type) == BlockType::kRecords) {
      block_thread_ = mutable_thread(bh.thread_index);
      rec_pos_ = payload;
    } else {
      rec_pos_ = block_pos_;
    }
  }
}

void TraceReader::deliver_nvtx(Event& ev, const uint8_t* r) {
  auto rec = load<abi::NvtxRecord>(r);
  NvtxEvent& n = ev.nvtx;
  ev.kind = EventKind::kNvtx;
  n.type = abi::NvtxEvent(rec.header.aux);
  n.time_ns = rec.time;
  n.range_id = rec.range_id;
  n.domain = rec.domain;
  n.category = rec.category;
  n.color = rec.has_color ? std::optional<uint32_t>(rec.color) : std::nullopt;
  n.payload_type = abi::NvtxPayload(rec.payload_type);
  n.payload = rec.payload;
  n.text_cut = rec.text_cut;
  n.payload_cut = rec.payload_cut;
  n.payload_bytes = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::NvtxRecord)) + rec.text_bytes,
                                     rec.payload_bytes);
  n.text = {};
  if (abi::NvtxMessage(rec.message_type) == abi::NvtxMessage::kRegistered) {
    const Process& proc = processes_[block_thread_->process];
    auto it = proc.nvtx_strings.find(rec.string_id);
    if (it != proc.nvtx_strings.end()) {
      n.text = it->second;
    } else {
      nvtx_unnamed_ = "#" + std::to_string(rec.string_id);
      n.text = nvtx_unnamed_;
    }
  } else if (abi::NvtxMessage(rec.message_type) == abi::NvtxMessage::kText) {
    n.text = std::string_view(reinterpret_cast<const char*>(r + sizeof(abi::NvtxRecord)), rec.text_bytes);
  }
}

bool TraceReader::next(Event& ev) {
  if (fd_ < 0 || status_.state != TraceState::kReading) return false;
  while (true) {
    if (pending_chunk_event_) {
      pending_chunk_event_ = false;
      ev.chunk = next_sequence_ - 1;
      ev.thread = nullptr;
      switch (ChunkType(current_type_)) {
        case ChunkType::kMetadata: ev.kind = EventKind::kMetadata; break;
        case ChunkType::kApiTable: ev.kind = EventKind::kApiTable; break;
        default: ev.kind = EventKind::kEnd; break;
      }
      return true;
    }
    if (deliver_event(ev)) return true;
    if (ended_) {
      status_.state = TraceState::kComplete;
      return false;
    }
    const ReadResult result = read_chunk();
    if (on_chunk_) on_chunk_(offset_);
    if (result == ReadResult::kStop) return false;
  }
}

}  // namespace cutrace::reader
