// The records the generated wrappers write. The wrappers are linked into this program (the
// cutrace_preload_objects library) in front of fake_cudart.cpp, and write into a one-ring session the
// test builds in its own memory, so every record can be read back and compared with the annotations.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api_ids.h"
#include "cutrace/ring.h"
#include "in_process_session.h"
#include "runtime.h"

namespace {

struct FakeMemcpyCall {
  void* dst;
  const void* src;
  size_t count;
  cudaMemcpyKind kind;
  int calls;
};

}  // namespace

extern "C" FakeMemcpyCall fake_memcpy_call;
// The per-thread default stream entry point, which the headers declare only under
// CUDA_API_PER_THREAD_DEFAULT_STREAM (and then under the base name).
extern "C" decltype(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;
// Declared for nvcc-generated code only (crt/host_runtime.h).
extern "C" void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                       const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                                       dim3* bDim, dim3* gDim, int* wSize);

namespace {

namespace abi = cutrace::abi;
namespace preload = cutrace::preload;
namespace ring = cutrace::ring;
using cutrace::kApi_cudaMalloc;
using cutrace::kApi_cudaMemcpy;
using cutrace::kApi_cudaMemcpyAsync_ptsz;
using cutrace::kApi___cudaRegisterFunction;

struct Record {
  uint32_t api;
  uint64_t begin, end, result;
  uint16_t depth;
  uint8_t flags;
  std::vector<uint64_t> args;
};

struct StringSeen {
  abi::StringKind kind;
  uint64_t key;
  std::string text;
};

class Recording : public ::testing::Test {
 protected:
  void SetUp() override { session_.attach(); }
  void TearDown() override { session_.detach(); }

  // Everything written since the last call.
  void drain() {
    calls_.clear();
    strings_.clear();
    session_.drain([&](const uint8_t* p, uint32_t) {
      abi::RecordHeader h;
      std::memcpy(&h, p, sizeof h);
      if (h.kind == uint16_t(abi::RecordKind::kApiCall)) {
        abi::ApiCallRecord c;
        std::memcpy(&c, p, sizeof c);
        Record r{c.header.aux, c.begin, c.end, c.result, c.depth, c.flags,
                 std::vector<uint64_t>(c.arg_count)};
        std::memcpy(r.args.data(), p + sizeof c, 8u * c.arg_count);
        calls_.push_back(r);
      } else if (h.kind == uint16_t(abi::RecordKind::kString)) {
        abi::StringRecord s;
        std::memcpy(&s, p, sizeof s);
        strings_.push_back({abi::StringKind(s.header.aux), s.key,
                            std::string(reinterpret_cast<const char*>(p + sizeof s), s.length)});
      }
    });
  }

  cutrace::test::InProcessSession session_;
  std::vector<Record> calls_;
  std::vector<StringSeen> strings_;
};

TEST_F(Recording, CallRecordHoldsAnnotatedSlotsResultAndErrno) {
  char src[8] = {}, dst[8] = {};
  errno = 0;
  ASSERT_EQ(cudaMemcpy(dst, src, 123, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  // The record is written after the real call; errno must still be what the real call left.
  EXPECT_EQ(errno, 4242);
  EXPECT_EQ(fake_memcpy_call.count, 123u);
  drain();
  ASSERT_EQ(calls_.size(), 1u);
  const Record& r = calls_[0];
  EXPECT_EQ(r.api, uint32_t(kApi_cudaMemcpy));
  EXPECT_EQ(r.result, uint64_t(cudaErrorInvalidValue));
  EXPECT_EQ(r.flags, 0);
  EXPECT_EQ(r.depth, 0);
  EXPECT_LE(r.begin, r.end);
  EXPECT_EQ(r.args, (std::vector<uint64_t>{123, uint64_t(cudaMemcpyHostToDevice)}));
}

TEST_F(Recording, OutParametersAreReadOnlyAfterSuccess) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void* untouched = reinterpret_cast<void*>(uintptr_t(0xdead0000));
  ASSERT_EQ(cudaMallocHost(&untouched, 32), cudaErrorMemoryAllocation);
  drain();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[0].api, uint32_t(kApi_cudaMalloc));
  EXPECT_EQ(calls_[0].args, (std::vector<uint64_t>{64, reinterpret_cast<uint64_t>(p)}));
  EXPECT_EQ(calls_[1].args, (std::vector<uint64_t>{0x5000}));
  // The failed call left *ptr alone, so the slot says nothing rather than something stale.
  EXPECT_EQ(calls_[2].args, (std::vector<uint64_t>{32, 0}));
  EXPECT_EQ(calls_[2].result, uint64_t(cudaErrorMemoryAllocation));
}

TEST_F(Recording, ConfigFieldsAndDim3Packing) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(2, 3, 70000);  // z saturates at 65535 in the packed slot
  config.blockDim = dim3(128, 1, 1);
  config.dynamicSmemBytes = 4096;
  config.stream = reinterpret_cast<cudaStream_t>(uintptr_t(0x7700));
  const void* stub = reinterpret_cast<const void*>(uintptr_t(0x1234));
  ASSERT_EQ(cudaLaunchKernelExC(&config, stub, nullptr), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernelExC(nullptr, stub, nullptr), cudaSuccess);
  drain();
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[0].args,
            (std::vector<uint64_t>{0x1234, 2ull | 3ull << 32 | 0xffffull << 48, 128ull | 1ull << 32 | 1ull << 48, 4096,
                                   0x7700}));
  // A null config records zeros instead of crashing in the tracer.
  EXPECT_EQ(calls_[1].args, (std::vector<uint64_t>{0x1234, 0, 0, 0, 0}));
}

TEST_F(Recording, NothingIsRecordedWhileCaptureIsOff) {
  session_.session()->capture_domains.store(0);
  char src[8] = {}, dst[8] = {};
  EXPECT_EQ(cudaMemcpy(dst, src, 8, cudaMemcpyHostToHost), cudaErrorInvalidValue);
  EXPECT_EQ(errno, 4242);
  drain();
  EXPECT_TRUE(calls_.empty());
}

TEST_F(Recording, RegistrationIsRecordedAndHookedEvenWhileCaptureIsOff) {
  session_.session()->capture_domains.store(0);
  static const char stub = 0;
  char device_fun[] = "_Z6kernelPf";
  __cudaRegisterFunction(nullptr, &stub, device_fun, device_fun, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  drain();
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].api, uint32_t(kApi___cudaRegisterFunction));
  EXPECT_EQ(calls_[0].flags, abi::kCallFlagNoResult | abi::kCallFlagOutsideCapture);
  EXPECT_EQ(calls_[0].args, (std::vector<uint64_t>{0, reinterpret_cast<uint64_t>(&stub)}));
  ASSERT_EQ(strings_.size(), 1u);
  EXPECT_EQ(strings_[0].kind, abi::StringKind::kKernelName);
  EXPECT_EQ(strings_[0].key, reinterpret_cast<uint64_t>(&stub));
  EXPECT_EQ(strings_[0].text, "_Z6kernelPf");
}

TEST_F(Recording, ACallMadeInsideAnotherIsRecordedFirstAndOneLevelDeeper) {
  const auto stream = reinterpret_cast<cudaStream_t>(uintptr_t(0x4400));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // the fake calls cudaStreamQuery inside
  drain();
  ASSERT_EQ(calls_.size(), 2u);
  const Record& inner = calls_[0];  // a record is written when its call returns
  const Record& outer = calls_[1];
  EXPECT_EQ(inner.api, uint32_t(cutrace::kApi_cudaStreamQuery));
  EXPECT_EQ(outer.api, uint32_t(cutrace::kApi_cudaStreamSynchronize));
  EXPECT_EQ(inner.depth, 1);
  EXPECT_EQ(outer.depth, 0);
  EXPECT_LE(outer.begin, inner.begin);
  EXPECT_LE(inner.end, outer.end);
  EXPECT_EQ(inner.args, (std::vector<uint64_t>{0x4400}));
  EXPECT_EQ(outer.args, (std::vector<uint64_t>{0x4400}));
  EXPECT_EQ(preload::t_thread.depth, 0u);  // back to the top level
}

TEST_F(Recording, CallsTheTracerMakesItselfAreNotRecorded) {
  ++preload::t_thread.in_tracer;
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
  --preload::t_thread.in_tracer;
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
  drain();
  ASSERT_EQ(calls_.size(), 1u);  // only the program's own call
  EXPECT_EQ(calls_[0].depth, 0);
}

TEST_F(Recording, PerThreadStreamVariantRecordsWhatItsBaseRecords) {
  char src[8] = {}, dst[8] = {};
  const auto stream = reinterpret_cast<cudaStream_t>(uintptr_t(0x9900));
  ASSERT_EQ(cudaMemcpyAsync_ptsz(dst, src, 16, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  drain();
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].api, uint32_t(kApi_cudaMemcpyAsync_ptsz));
  EXPECT_EQ(calls_[0].args, (std::vector<uint64_t>{16, uint64_t(cudaMemcpyDeviceToHost), 0x9900}));
}

}  // namespace
