// Synthetic traces for the reader and report tests, written by the real TraceWriter.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "cutrace/abi.h"
#include "cutrace/api_table.h"
#include "recorder/trace_writer.h"

namespace cutrace::testing {

// A small api table shaped like the generated one: ids are indexes.
enum TestApi : uint32_t {
  kCudaMalloc,
  kCudaMemcpy,
  kCudaLaunchKernel,
  kRegisterFunction,  // __cudaRegisterFunction, internal
  kGetKernel,         // __cudaGetKernel, internal
  kLaunchKernel13,    // __cudaLaunchKernel, shown as cudaLaunchKernel
  kCudaStreamSynchronize,
  kCudaFree,
  kCublasSgemm,       // cuBLAS domain: not in cuda_api_sum
  kCuMemAlloc,        // driver domain
  kCudaGetErrorString,  // returns a pointer
  // Not in the small trace: the nesting and decoding tests.
  kLaunchKernel13Ptsz,    // __cudaLaunchKernel_ptsz, shown as cudaLaunchKernel
  kPushCallConfiguration, // __cudaPushCallConfiguration, internal
  kCuLaunchKernel,        // driver, a kFunction argument
  kCuCtxSetLimit,         // driver, a CUlimit argument
  kCublasGemmEx,          // cuBLAS, enum arguments
  kCublasLtMatmul,        // cuBLASLt
  kCudnnConvolutionForward,  // cuDNN, an enum argument
  kTestApiCount,
};
extern const ApiInfo kTestApis[kTestApiCount];

// One kRecords block: records in ring layout with absolute times, encoded for the file by add_to.
class Records {
 public:
  // `outer_domains`: abi::domain_bit() of the recorded calls around a nested (depth > 0) call.
  Records& call(uint32_t api, uint64_t begin_ns, uint64_t end_ns, uint64_t result, std::initializer_list<uint64_t> args,
                uint8_t flags = 0, uint16_t depth = 0, abi::DomainSet outer_domains = 0);
  Records& string(abi::StringKind kind, uint64_t key, std::string_view text);
  Records& thread_start(uint64_t time_ns, uint32_t pid, uint32_t tid, uint32_t ppid, uint32_t flags);
  // An NVTX record; `text` is inline unless `string_id` is set (a registered message), and for
  // kRegisterString both are (the string and its id).
  Records& nvtx(abi::NvtxEvent event, uint64_t time_ns, std::string_view text = {}, uint32_t domain = 0,
                uint64_t range_id = 0, uint64_t string_id = 0, uint32_t category = 0);
  Records& capture(bool begin, uint64_t time_ns, uint32_t range);
  // A module record: an object loaded or unloaded at `time_ns`, its executable range [text_start, text_end).
  Records& module(abi::ModuleEvent event, uint64_t time_ns, uint64_t base, uint64_t text_start, uint64_t text_end,
                  std::string_view path);
  // Any record, as given (a GPU activity record, say): its header must say its size.
  Records& bytes_of(const void* record, uint32_t size);
  template <class Record>
  Records& record(const Record& r) { return bytes_of(&r, sizeof r); }
  // A record of a kind the reader has no decoder for (a GPU activity record of a later version, say).
  Records& raw(abi::RecordKind kind, uint32_t aux, uint32_t payload_bytes);

  void add_to(trace::TraceWriter& w, uint32_t thread_index) const;
  // The records in ring layout, and in the file's compact encoding (one block).
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> encoded() const;
  uint32_t count() const { return count_; }

 private:
  std::vector<uint8_t> bytes_;
  uint32_t count_ = 0;
};

format::ThreadDef thread_def(uint32_t index, uint32_t pid, uint32_t tid, uint32_t ppid = 1, uint64_t start_ticks = 1000,
                             uint64_t first_seen_ns = 0);

// Host stubs and handles of the small trace's kernels.
inline constexpr uint64_t kStubAxpy = 0x401000, kStubReduce = 0x402000, kHandleReduce = 0x7f0000001000;
inline constexpr const char* kMangledAxpy = "_ZN2ns4axpyIfEEvT_PS1_S2_i";
inline constexpr const char* kMangledReduce = "_Z6reducePKfPfi";
inline constexpr uint64_t kT0 = 1'000'000'000'000ull;  // absolute start of the small trace, in ns

// The trace most tests share: process 4242 ("./app --n 3") with threads 4242 ("app") and 4243
// ("worker"), kernel registration recorded outside capture, launches through both cudaLaunchKernel
// and __cudaGetKernel/__cudaLaunchKernel, a nested driver call, a cuBLAS call, and a second process
// 4300 ("python train.py") reusing a stub address for another kernel. Events are split over several
// chunks. Its exact content is what the reader and golden-output tests check.
struct SmallTrace {
  uint64_t events = 0;        // records written
  uint64_t api_calls = 0;
  uint64_t counted_calls = 0;  // in cuda_api_sum
  uint64_t event_chunks = 0;
};
// `finish`: write the kEnd chunk (with 3 drops on thread 1 and lost_no_slot 2) or stop like a crash.
SmallTrace write_small_trace(const std::string& path, bool finish = true);

// Process 500 with two threads and NVTX: a domain, a registered string, a category, a thread name,
// nested push/pop ranges (one with a registered message the trace never names), a mark, a start/end
// range ended on the other thread (whose block comes first), an unmatched pop, and one capture range.
void write_nvtx_trace(const std::string& path);

std::string temp_path(const std::string& name);  // a fresh path under the test's temp directory
std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// Byte offsets of every chunk in a file (following the chunk headers).
std::vector<uint64_t> chunk_offsets(const std::vector<uint8_t>& file);

// A file with the given chunk payloads framed correctly (valid headers and zstd checksums), to reach
// the payload parsers with arbitrary bytes.
std::vector<uint8_t> frame_chunks(const std::vector<std::pair<format::ChunkType, std::vector<uint8_t>>>& chunks);

}  // namespace cutrace::testing
