// libFuzzer target for the trace reader. The first input byte picks what the rest is:
//   even: a whole file, as found on disk (exercises the framing checks);
//   odd:  the payload of one chunk (type = second byte), framed with a valid header and zstd checksum,
//         preceded by an api table and a thread definition so record payloads reach every decoder.
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "reader/trace_reader.h"

namespace {

using namespace cutrace;

template <class T>
void append(std::vector<uint8_t>& out, const T& v) {
  auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

void append_chunk(std::vector<uint8_t>& out, uint16_t type, const uint8_t* payload, size_t n, uint64_t seq) {
  static ZSTD_CCtx* cctx = [] {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    return c;
  }();
  std::vector<uint8_t> z(ZSTD_compressBound(n));
  size_t stored = ZSTD_compress2(cctx, z.data(), z.size(), payload, n);
  if (ZSTD_isError(stored)) return;
  format::ChunkHeader h{};
  h.magic = format::kChunkMagic;
  h.type = type;
  h.codec = uint16_t(format::Codec::kZstd);
  h.stored_bytes = uint32_t(stored);
  h.raw_bytes = uint32_t(n);
  h.sequence = seq;
  h.header_check = format::chunk_header_check(h);
  append(out, h);
  out.insert(out.end(), z.begin(), z.begin() + stored);
}

std::vector<uint8_t> preamble() {
  std::vector<uint8_t> out;
  format::FileHeader fh{};
  std::memcpy(fh.magic, format::kFileMagic, sizeof fh.magic);
  fh.format_version = format::kFormatVersion;
  fh.header_bytes = sizeof fh;
  append(out, fh);
  // An api table with one entry per argument format, so fuzzed calls decode through every formatter.
  std::vector<uint8_t> table;
  append(table, uint32_t(1));
  append(table, uint32_t(0));
  append(table, uint16_t(abi::ApiDomain::kCudaRuntime));
  append(table, uint8_t(0));
  append(table, uint8_t(11));
  append(table, uint8_t(0));
  const uint8_t reserved[3] = {};
  table.insert(table.end(), reserved, reserved + 3);
  append(table, uint32_t(4));
  table.insert(table.end(), {'f', 'u', 'z', 'z'});
  for (uint8_t f = 0; f < 11; ++f) {
    append(table, f);
    append(table, uint8_t(0));
    append(table, uint16_t(1));
    table.push_back(uint8_t('a' + f));
  }
  append_chunk(out, uint16_t(format::ChunkType::kApiTable), table.data(), table.size(), 0);
  std::vector<uint8_t> events;
  format::BlockHeader bh{uint32_t(format::BlockType::kThreadDef), sizeof(format::ThreadDef), 0, 0};
  format::ThreadDef def{};
  def.pid = def.tid = 1;
  append(events, bh);
  append(events, def);
  append_chunk(out, uint16_t(format::ChunkType::kEvents), events.data(), events.size(), 1);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::vector<uint8_t> file;
  if (data[0] % 2 == 0) {
    file.assign(data + 1, data + size);
  } else {
    file = preamble();
    append_chunk(file, uint16_t(1 + data[1] % 5), data + 2, size - 2, 2);
  }
  int fd = memfd_create("trace", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, file.data(), file.size()) != ssize_t(file.size())) {
    close(fd);
    return 0;
  }
  {
    reader::TraceReader r;
    if (r.open("/proc/self/fd/" + std::to_string(fd))) {
      reader::Event ev;
      while (r.next(ev)) {
        if (ev.kind != reader::EventKind::kApiCall) continue;
        for (uint32_t i = 0; i < ev.call.arg_count && i < ev.call.api->args.size(); ++i)
          reader::decode_arg(r, *ev.thread, ev.call.api->args[i].format, ev.call.args[i]);
        reader::result_text(*ev.call.api, ev.call.result);
      }
      (void)r.status().describe();
    }
  }
  close(fd);
  return 0;
}
