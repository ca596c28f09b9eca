#include "export/gzip_stream.h"

#include <zlib.h>

#include <cstring>
#include <new>

namespace cutrace::exporting {
namespace {

struct GzipCookie {
  FILE* sink;
  uint64_t* raw_bytes;
  z_stream z{};
  bool failed = false;
  unsigned char out[1 << 16] = {};
};

bool drain(GzipCookie* c, int flush) {
  do {
    c->z.next_out = c->out;
    c->z.avail_out = sizeof c->out;
    const int r = deflate(&c->z, flush);
    if (r == Z_STREAM_ERROR) return false;
    const size_t produced = sizeof c->out - c->z.avail_out;
    if (produced && std::fwrite(c->out, 1, produced, c->sink) != produced) return false;
  } while (c->z.avail_out == 0);
  return true;
}

ssize_t gzip_write(void* cookie, const char* data, size_t size) {
  auto* c = static_cast<GzipCookie*>(cookie);
  if (c->failed) return -1;
  c->z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  c->z.avail_in = uInt(size);
  if (!drain(c, Z_NO_FLUSH)) {
    c->failed = true;
    return -1;
  }
  if (c->raw_bytes) *c->raw_bytes += size;
  return ssize_t(size);
}

int gzip_close(void* cookie) {
  auto* c = static_cast<GzipCookie*>(cookie);
  c->z.next_in = nullptr;
  c->z.avail_in = 0;
  const bool ok = !c->failed && drain(c, Z_FINISH);
  deflateEnd(&c->z);
  delete c;
  return ok ? 0 : EOF;
}

}  // namespace

FILE* open_gzip_stream(FILE* sink, uint64_t* raw_bytes) {
  auto* c = new (std::nothrow) GzipCookie{sink, raw_bytes};
  if (!c) return nullptr;
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&c->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    delete c;
    return nullptr;
  }
  cookie_io_functions_t io{};
  io.write = gzip_write;
  io.close = gzip_close;
  FILE* f = fopencookie(c, "w", io);
  if (!f) {
    deflateEnd(&c->z);
    delete c;
  }
  return f;
}

}  // namespace cutrace::exporting
