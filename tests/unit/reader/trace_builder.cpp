#include "trace_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cutrace/names_chunk.h"
#include "cutrace/record_codec.h"

namespace cutrace::testing {
namespace {

using abi::ArgFormat;
using abi::ApiClass;
using abi::ApiDomain;
using format::ResultKind;

const ApiArgInfo kMallocArgs[] = {{"size", ArgFormat::kBytes}, {"devPtr", ArgFormat::kPointer}};
const ApiArgInfo kMemcpyArgs[] = {{"dst", ArgFormat::kPointer},
                                  {"src", ArgFormat::kPointer},
                                  {"count", ArgFormat::kBytes},
                                  {"kind", ArgFormat::kMemcpyKind}};
const ApiArgInfo kLaunchArgs[] = {{"func", ArgFormat::kKernelStub},
                                  {"gridDim", ArgFormat::kDim3},
                                  {"blockDim", ArgFormat::kDim3},
                                  {"sharedMem", ArgFormat::kBytes},
                                  {"stream", ArgFormat::kStream}};
const ApiArgInfo kRegisterArgs[] = {{"hostFun", ArgFormat::kKernelStub}};
const ApiArgInfo kGetKernelArgs[] = {{"kernel", ArgFormat::kKernelHandle, format::kArgFlagOut},
                                     {"entryFuncAddr", ArgFormat::kKernelStub}};
const ApiArgInfo kLaunch13Args[] = {{"kernel", ArgFormat::kKernelHandle},
                                    {"gridDim", ArgFormat::kDim3},
                                    {"blockDim", ArgFormat::kDim3},
                                    {"sharedMem", ArgFormat::kBytes},
                                    {"stream", ArgFormat::kStream}};
const ApiArgInfo kStreamArgs[] = {{"stream", ArgFormat::kStream}};
const ApiArgInfo kFreeArgs[] = {{"devPtr", ArgFormat::kPointer}};
const ApiArgInfo kSgemmArgs[] = {{"handle", ArgFormat::kPointer}};
const ApiArgInfo kCuMemAllocArgs[] = {{"bytesize", ArgFormat::kBytes}};
const ApiArgInfo kErrorStringArgs[] = {{"error", ArgFormat::kSigned}};
const ApiArgInfo kPushConfigArgs[] = {{"gridDim", ArgFormat::kDim3}, {"blockDim", ArgFormat::kDim3}};
const ApiArgInfo kCuLaunchArgs[] = {{"f", ArgFormat::kFunction}, {"gridDimX", ArgFormat::kUnsigned}};
const ApiArgInfo kSetLimitArgs[] = {{"limit", ArgFormat::kEnum, 0, "CUlimit"}, {"value", ArgFormat::kBytes}};
const ApiArgInfo kGemmExArgs[] = {{"handle", ArgFormat::kPointer},
                                  {"transa", ArgFormat::kEnum, 0, "cublasOperation_t"},
                                  {"transb", ArgFormat::kEnum, 0, "cublasOperation_t"},
                                  {"Atype", ArgFormat::kEnum, 0, "cudaDataType"},
                                  {"computeType", ArgFormat::kEnum, 0, "cublasComputeType_t"},
                                  {"algo", ArgFormat::kEnum, 0, "cublasGemmAlgo_t"}};
const ApiArgInfo kLtMatmulArgs[] = {{"lightHandle", ArgFormat::kPointer}};
const ApiArgInfo kConvFwdArgs[] = {{"handle", ArgFormat::kPointer},
                                   {"algo", ArgFormat::kEnum, 0, "cudnnConvolutionFwdAlgo_t"},
                                   {"mode", ArgFormat::kEnum, 0, "an_enum_no_header_defines"}};

template <class T>
void append(std::vector<uint8_t>& out, const T& v) {
  // resize and copy rather than insert: GCC 12 at -O1 takes insert into an empty vector for an overflow.
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

const ApiInfo kTestApis[kTestApiCount] = {
    {"cudaMalloc", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kMemory, ResultKind::kErrorCode, 2, kMallocArgs},
    {"cudaMemcpy", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kMemory, ResultKind::kErrorCode, 4, kMemcpyArgs},
    {"cudaLaunchKernel", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kKernel, ResultKind::kErrorCode, 5,
     kLaunchArgs},
    {"__cudaRegisterFunction", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kOther, ResultKind::kVoid, 1,
     kRegisterArgs, nullptr, format::kApiFlagInternal},
    {"__cudaGetKernel", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kOther, ResultKind::kErrorCode, 2,
     kGetKernelArgs, nullptr, format::kApiFlagInternal},
    {"__cudaLaunchKernel", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kKernel, ResultKind::kErrorCode, 5,
     kLaunch13Args, "cudaLaunchKernel"},
    {"cudaStreamSynchronize", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kSync, ResultKind::kErrorCode, 1,
     kStreamArgs},
    {"cudaFree", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kMemory, ResultKind::kErrorCode, 1, kFreeArgs},
    {"cublasSgemm_v2", "libcublas.so.13", ApiDomain::kCublas, ApiClass::kKernel, ResultKind::kErrorCode, 1, kSgemmArgs},
    {"cuMemAlloc_v2", "libcuda.so.1", ApiDomain::kCudaDriver, ApiClass::kMemory, ResultKind::kErrorCode, 1,
     kCuMemAllocArgs},
    {"cudaGetErrorString", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kOther, ResultKind::kPointer, 1,
     kErrorStringArgs},
    {"__cudaLaunchKernel_ptsz", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kKernel, ResultKind::kErrorCode,
     5, kLaunch13Args, "cudaLaunchKernel"},
    {"__cudaPushCallConfiguration", "libcudart.so.13", ApiDomain::kCudaRuntime, ApiClass::kOther,
     ResultKind::kUnsigned, 2, kPushConfigArgs, nullptr, format::kApiFlagInternal},
    {"cuLaunchKernel", "libcuda.so.1", ApiDomain::kCudaDriver, ApiClass::kKernel, ResultKind::kErrorCode, 2,
     kCuLaunchArgs},
    {"cuCtxSetLimit", "libcuda.so.1", ApiDomain::kCudaDriver, ApiClass::kOther, ResultKind::kErrorCode, 2,
     kSetLimitArgs},
    {"cublasGemmEx", "libcublas.so.13", ApiDomain::kCublas, ApiClass::kKernel, ResultKind::kErrorCode, 6, kGemmExArgs},
    {"cublasLtMatmul", "libcublasLt.so.13", ApiDomain::kCublasLt, ApiClass::kKernel, ResultKind::kErrorCode, 1,
     kLtMatmulArgs},
    {"cudnnConvolutionForward", "libcudnn.so.9", ApiDomain::kCudnn, ApiClass::kKernel, ResultKind::kErrorCode, 3,
     kConvFwdArgs},
};

Records& Records::call(uint32_t api, uint64_t begin_ns, uint64_t end_ns, uint64_t result,
                       std::initializer_list<uint64_t> args, uint8_t flags, uint16_t depth, abi::DomainSet outer_domains) {
  abi::ApiCallRecord r{};
  r.header.kind = uint16_t(abi::RecordKind::kApiCall);
  r.header.size = uint16_t(sizeof r + 8 * args.size());
  r.header.aux = api;
  r.begin = begin_ns;
  r.end = end_ns;
  r.result = result;
  r.depth = uint8_t(depth);
  r.outer_domains = outer_domains;
  r.arg_count = uint8_t(args.size());
  r.flags = flags;
  append(bytes_, r);
  for (uint64_t a : args) append(bytes_, a);
  ++count_;
  return *this;
}

void Records::add_to(trace::TraceWriter& w, uint32_t thread_index) const {
  w.add_records(thread_index, encoded(), count_);
}

std::vector<uint8_t> Records::encoded() const {
  codec::BlockBuilder block;
  for (size_t pos = 0; pos < bytes_.size();) {
    abi::RecordHeader h;
    std::memcpy(&h, bytes_.data() + pos, sizeof h);
    block.add(bytes_.data() + pos, h.size);
    pos += h.size;
  }
  return block.body();
}

Records& Records::string(abi::StringKind kind, uint64_t key, std::string_view text) {
  abi::StringRecord r{};
  r.header.kind = uint16_t(abi::RecordKind::kString);
  r.header.size = uint16_t(abi::align_record(uint32_t(sizeof r + text.size())));
  r.header.aux = uint32_t(kind);
  r.key = key;
  r.length = uint32_t(text.size());
  const size_t start = bytes_.size();
  append(bytes_, r);
  bytes_.insert(bytes_.end(), text.begin(), text.end());
  bytes_.resize(start + r.header.size, 0);
  ++count_;
  return *this;
}

Records& Records::thread_start(uint64_t time_ns, uint32_t pid, uint32_t tid, uint32_t ppid, uint32_t flags) {
  abi::ThreadStartRecord r{};
  r.header.kind = uint16_t(abi::RecordKind::kThreadStart);
  r.header.size = sizeof r;
  r.time = time_ns;
  r.pid = pid;
  r.tid = tid;
  r.ppid = ppid;
  r.flags = flags;
  append(bytes_, r);
  ++count_;
  return *this;
}

Records& Records::nvtx(abi::NvtxEvent event, uint64_t time_ns, std::string_view text, uint32_t domain,
                       uint64_t range_id, uint64_t string_id, uint32_t category) {
  abi::NvtxRecord r{};
  const bool inline_text = (string_id == 0 || event == abi::NvtxEvent::kRegisterString) && !text.empty();
  r.header.kind = uint16_t(abi::RecordKind::kNvtx);
  r.header.size = uint16_t(abi::align_record(uint32_t(sizeof r + (inline_text ? text.size() : 0))));
  r.header.aux = uint32_t(event);
  r.time = time_ns;
  r.range_id = range_id;
  r.string_id = string_id;
  r.domain = domain;
  r.category = category;
  r.text_bytes = inline_text ? uint32_t(text.size()) : 0;
  r.message_type = uint8_t(inline_text ? abi::NvtxMessage::kText
                           : string_id ? abi::NvtxMessage::kRegistered : abi::NvtxMessage::kNone);
  append(bytes_, r);
  if (inline_text) bytes_.insert(bytes_.end(), text.begin(), text.end());
  bytes_.resize(bytes_.size() + (r.header.size - sizeof r - r.text_bytes), 0);
  ++count_;
  return *this;
}

Records& Records::capture(bool begin, uint64_t time_ns, uint32_t range) {
  abi::CaptureStateRecord r{};
  r.header = {uint16_t(abi::RecordKind::kCaptureState), uint16_t(sizeof r),
              uint32_t(begin ? abi::CaptureEvent::kBegin : abi::CaptureEvent::kEnd)};
  r.time = time_ns;
  r.range = range;
  r.reason = uint32_t(abi::CaptureReason::kNvtx);
  append(bytes_, r);
  ++count_;
  return *this;
}

Records& Records::module(abi::ModuleEvent event, uint64_t time_ns, uint64_t base, uint64_t text_start,
                         uint64_t text_end, std::string_view path) {
  const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::ModuleRecord) + path.size()));
  std::vector<uint8_t> rec(bytes, 0);
  abi::ModuleRecord r{};
  r.header = {uint16_t(abi::RecordKind::kModuleMap), uint16_t(bytes), uint32_t(event)};
  r.time = time_ns;
  r.base = base;
  r.text_start = text_start;
  r.text_end = text_end;
  r.path_bytes = uint32_t(path.size());
  std::memcpy(rec.data(), &r, sizeof r);
  std::memcpy(rec.data() + sizeof r, path.data(), path.size());
  bytes_.insert(bytes_.end(), rec.begin(), rec.end());
  ++count_;
  return *this;
}

Records& Records::bytes_of(const void* record, uint32_t size) {
  const auto* p = static_cast<const uint8_t*>(record);
  bytes_.insert(bytes_.end(), p, p + size);
  ++count_;
  return *this;
}

Records& Records::raw(abi::RecordKind kind, uint32_t aux, uint32_t payload_bytes) {
  abi::RecordHeader h{uint16_t(kind), uint16_t(sizeof h + payload_bytes), aux};
  append(bytes_, h);
  for (uint32_t i = 0; i < payload_bytes; ++i) bytes_.push_back(uint8_t(i));
  ++count_;
  return *this;
}

format::ThreadDef thread_def(uint32_t index, uint32_t pid, uint32_t tid, uint32_t ppid, uint64_t start_ticks,
                             uint64_t first_seen_ns) {
  format::ThreadDef d{};
  d.thread_index = index;
  d.pid = pid;
  d.tid = tid;
  d.ppid = ppid;
  d.process_start_ticks = start_ticks;
  d.claim_serial = index + 1;
  d.first_seen_ns = first_seen_ns;
  return d;
}

SmallTrace write_small_trace(const std::string& path, bool finish) {
  using abi::StringKind;
  constexpr uint8_t kOut = abi::kCallFlagOutsideCapture;
  const uint64_t t = kT0;
  SmallTrace st;
  trace::TraceWriter w;
  w.set_creation_monotonic_ns(kT0);
  EXPECT_TRUE(w.open(path)) << w.error();
  EXPECT_TRUE(w.write_metadata({{"host", "node01"},
                                {"command", "./app --n 3"},
                                {"cutrace_version", "0.1.0"},
                                {"session.clock", "monotonic"},
                                {"session.ring_bytes", "4194304"}}));
  EXPECT_TRUE(w.write_api_table(kTestApis, kTestApiCount));

  // Chunk: both threads of process 4242.
  w.add_thread_def(thread_def(0, 4242, 4242, 1, 1000, t));
  Records a;
  a.thread_start(t, 4242, 4242, 1, abi::kThreadFlagFirstInProcess)
      .string(StringKind::kProcessCommand, 0, "./app --n 3")
      .string(StringKind::kProcessExe, 0, "/work/app")
      .string(StringKind::kCudaRuntime, 12080, "/venv/nvidia/cuda_runtime/lib/libcudart.so.12")
      .string(StringKind::kThreadName, 0, "app")
      .string(StringKind::kKernelName, kStubAxpy, kMangledAxpy)
      .string(StringKind::kKernelName, kStubReduce, kMangledReduce)
      .call(kRegisterFunction, t + 100, t + 150, 0, {kStubAxpy}, kOut)
      .call(kRegisterFunction, t + 200, t + 240, 0, {kStubReduce}, kOut)
      .call(kCuMemAlloc, t + 1500, t + 5500, 0, {1 << 20}, 0, 1,  // inside the cudaMalloc below
            uint8_t(abi::domain_bit(abi::ApiDomain::kCudaRuntime)))
      .call(kCudaMalloc, t + 1000, t + 6000, 0, {1 << 20, 0x7f0000000000})
      .call(kCudaMalloc, t + 7000, t + 10000, 0, {4096, 0x7f0000100000})
      .call(kCudaMemcpy, t + 11000, t + 19000, 0, {0x7f0000000000, 0x5555000, 1 << 20, 1})
      .call(kCudaLaunchKernel, t + 20000, t + 22000, 0, {kStubAxpy, 256 | 1ull << 32 | 1ull << 48, 128 | 1ull << 32 | 1ull << 48, 0, 0})
      .call(kCudaStreamSynchronize, t + 23000, t + 30000, 0, {0})
      .call(kCudaMemcpy, t + 31000, t + 35000, 0, {0x5556000, 0x7f0000000000, 4096, 2})
      .call(kCudaFree, t + 36000, t + 36500, 0, {0x7f0000100000})
      .call(kCudaGetErrorString, t + 37000, t + 37010, 0x7ffff000, {35});
  a.add_to(w, 0);
  w.add_thread_def(thread_def(1, 4242, 4243, 1, 1000, t + 11000));
  Records b;
  b.thread_start(t + 11000, 4242, 4243, 1, 0)
      .string(StringKind::kThreadName, 0, "worker")
      .call(kGetKernel, t + 12000, t + 12300, 0, {kHandleReduce, kStubReduce})
      .call(kLaunchKernel13, t + 12500, t + 14500, 0, {kHandleReduce, 64 | 2ull << 32 | 1ull << 48, 256 | 1ull << 32 | 1ull << 48, 1024, 0x5000})
      .call(kCublasSgemm, t + 15000, t + 25000, 0, {0x9000});
  b.add_to(w, 1);
  EXPECT_TRUE(w.flush_events());

  // Chunk: both threads go on.
  Records a2;
  a2.call(kCudaLaunchKernel, t + 40000, t + 43000, 0, {kStubAxpy, 512 | 1ull << 32 | 1ull << 48, 128 | 1ull << 32 | 1ull << 48, 0, 0})
      .raw(abi::RecordKind::kKindCount, 7, 16)  // a kind of a later version
      .call(kCudaMemcpy, t + 44000, t + 50000, 0, {0x5556000, 0x7f0000000000, 1 << 20, 2})
      .call(kCudaMalloc, t + 51000, t + 52000, 2, {1ull << 40, 0});
  a2.add_to(w, 0);
  Records b2;
  b2.call(kLaunchKernel13, t + 45000, t + 46000, 0, {kHandleReduce, 64 | 2ull << 32 | 1ull << 48, 256 | 1ull << 32 | 1ull << 48, 1024, 0x5000})
      .call(kCudaStreamSynchronize, t + 46500, t + 47500, 0, {0x5000});
  b2.add_to(w, 1);
  EXPECT_TRUE(w.flush_events());

  // Chunk: a child process whose stub address names a different kernel.
  w.add_thread_def(thread_def(2, 4300, 4300, 4242, 2000, t + 60000));
  Records c;
  c.thread_start(t + 60000, 4300, 4300, 4242, abi::kThreadFlagFirstInProcess)
      .string(StringKind::kProcessCommand, 0, "python train.py")
      .string(StringKind::kThreadName, 0, "python")
      .string(StringKind::kKernelName, kStubAxpy, "_Z8other_fnv")
      .call(kRegisterFunction, t + 60000, t + 60020, 0, {kStubAxpy}, kOut)
      .call(kCudaLaunchKernel, t + 61000, t + 62000, 0, {kStubAxpy, 1 | 1ull << 32 | 1ull << 48, 32 | 1ull << 32 | 1ull << 48, 0, 0})
      .call(kCudaMalloc, t + 63000, t + 65000, 0, {256, 0x7e0000000000})
      .call(kCuMemAlloc, t + 66000, t + 66400, 0, {512});
  c.add_to(w, 2);
  EXPECT_TRUE(w.flush_events());

  st.events = a.count() + b.count() + a2.count() + b2.count() + c.count();
  st.api_calls = 11 + 3 + 3 + 2 + 4;
  st.counted_calls =
      st.api_calls - 3 /* outside capture */ - 1 /* nested driver */ - 1 /* cuBLAS */ - 1 /* __cudaGetKernel */;
  st.event_chunks = 3;
  if (finish) {
    // What the recorder would gather from the records above.
    names::ProcessNames app{4242, 1000, {{kStubAxpy, kMangledAxpy}, {kStubReduce, kMangledReduce}},
                            {{kHandleReduce, kStubReduce}}};
    names::ProcessNames child{4300, 2000, {{kStubAxpy, "_Z8other_fnv"}}, {}};
    EXPECT_TRUE(w.write_names(names::encode({app, child})));
    std::vector<format::ThreadStats> stats = {
        {0, 0, a.count() + a2.count(), 0, 0},
        {1, 0, b.count() + b2.count(), 3, 0},
        {2, 0, c.count(), 0, 1},
    };
    EXPECT_TRUE(w.finish({{"events", std::to_string(st.events)},
                          {"dropped", "3"},
                          {"malformed", "1"},
                          {"lost_no_slot", "2"},
                          {"cuda.runtime_library", "/usr/local/cuda/lib64/libcudart.so.13"}},
                         stats))
        << w.error();
  } else {
    w.close();
  }
  return st;
}

void write_nvtx_trace(const std::string& path) {
  using abi::NvtxEvent;
  const uint64_t t = kT0;
  trace::TraceWriter w;
  w.set_creation_monotonic_ns(t);
  EXPECT_TRUE(w.open(path)) << w.error();
  EXPECT_TRUE(w.write_metadata({{"host", "node01"}}));
  EXPECT_TRUE(w.write_api_table(kTestApis, kTestApiCount));
  w.add_thread_def(thread_def(0, 500, 500, 1, 1000, t));
  w.add_thread_def(thread_def(1, 500, 501, 1, 1000, t));
  // Thread 1 first, as a drain may order it: it ends range 9, which thread 0 starts.
  Records worker;
  worker.nvtx(NvtxEvent::kEnd, t + 400, {}, 0, 9);
  worker.add_to(w, 1);
  Records main;
  main.nvtx(NvtxEvent::kDomainCreate, t + 10, "dom", 1)
      .nvtx(NvtxEvent::kRegisterString, t + 20, "reg", 1, 0, 5)
      .nvtx(NvtxEvent::kNameCategory, t + 30, "phase", 1, 0, 0, 3)
      .nvtx(NvtxEvent::kNameThread, t + 40, "main thread", 0, 500)
      .capture(true, t + 90, 1)
      .nvtx(NvtxEvent::kPush, t + 100, "outer")
      .nvtx(NvtxEvent::kPush, t + 150, {}, 1, 0, 77)  // registered, but string 77 is never named
      .nvtx(NvtxEvent::kPop, t + 160, {}, 1)
      .nvtx(NvtxEvent::kPush, t + 162, {}, 1, 0, 5)
      .nvtx(NvtxEvent::kPop, t + 165, {}, 1)
      .nvtx(NvtxEvent::kPush, t + 170, "inner")
      .nvtx(NvtxEvent::kPop, t + 190)
      .nvtx(NvtxEvent::kMark, t + 195, "m", 1, 0, 0, 3)
      .nvtx(NvtxEvent::kStart, t + 200, "se", 0, 9)
      .nvtx(NvtxEvent::kPop, t + 300)
      .nvtx(NvtxEvent::kPop, t + 310)  // nothing open: unmatched
      .capture(false, t + 320, 1);
  main.add_to(w, 0);
  EXPECT_TRUE(w.flush_events());
  w.close();
}

std::string temp_path(const std::string& name) {
  // One directory per test process, removed when it exits, so test runs leave nothing behind.
  static const std::string dir = [] {
    std::string templ = ::testing::TempDir() + "cutrace-test-XXXXXX";
    if (!::mkdtemp(templ.data())) return ::testing::TempDir();
    static std::string to_remove = templ;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return templ + "/";
  }();
  static std::atomic<int> counter{0};
  return dir + std::to_string(counter++) + "-" + name;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<uint64_t> chunk_offsets(const std::vector<uint8_t>& file) {
  std::vector<uint64_t> out;
  uint64_t at = sizeof(format::FileHeader);
  while (at + sizeof(format::ChunkHeader) <= file.size()) {
    format::ChunkHeader h;
    std::memcpy(&h, file.data() + at, sizeof h);
    out.push_back(at);
    at += sizeof h + h.stored_bytes;
  }
  return out;
}

std::vector<uint8_t> frame_chunks(const std::vector<std::pair<format::ChunkType, std::vector<uint8_t>>>& chunks) {
  std::vector<uint8_t> out;
  format::FileHeader fh{};
  std::memcpy(fh.magic, format::kFileMagic, sizeof fh.magic);
  fh.format_version = format::kFormatVersion;
  fh.header_bytes = sizeof fh;
  fh.abi_version = abi::kAbiVersion;
  append(out, fh);
  uint64_t seq = 0;
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  for (const auto& [type, payload] : chunks) {
    std::vector<uint8_t> z(ZSTD_compressBound(payload.size()));
    size_t n = ZSTD_compress2(cctx, z.data(), z.size(), payload.data(), payload.size());
    EXPECT_FALSE(ZSTD_isError(n));
    format::ChunkHeader h{};
    h.magic = format::kChunkMagic;
    h.type = uint16_t(type);
    h.codec = uint16_t(format::Codec::kZstd);
    h.stored_bytes = uint32_t(n);
    h.raw_bytes = uint32_t(payload.size());
    h.sequence = seq++;
    h.header_check = format::chunk_header_check(h);
    append(out, h);
    out.insert(out.end(), z.begin(), z.begin() + n);
  }
  ZSTD_freeCCtx(cctx);
  return out;
}

}  // namespace cutrace::testing
