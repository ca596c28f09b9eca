// A FILE* that gzip-compresses what is written to it into another FILE*: the Perfetto UI and
// trace_processor open gzip-compressed JSON directly, at a tenth of the size or less.
#pragma once

#include <cstdint>
#include <cstdio>

namespace cutrace::exporting {

// Opens a stream whose writes are compressed (gzip format, zlib level 6) into `sink`, which stays
// open and owned by the caller. fclose() of the returned stream writes the gzip trailer and fails
// when anything could not be written. nullptr when out of memory. `raw_bytes`, when given, counts
// the bytes written before compression.
FILE* open_gzip_stream(FILE* sink, uint64_t* raw_bytes = nullptr);

}  // namespace cutrace::exporting
