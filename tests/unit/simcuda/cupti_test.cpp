// The simulated CUPTI (libcupti.so.13): the records it delivers for what the simulated device ran,
// their times, correlation and delivery, and the failures its knobs inject.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "process.h"
#include "sim_kernels.h"
#include "simcuda.h"

// The runtime still exports the deprecated array copies (cudaMemcpyToArray and the like), and
// programs still call them: the tests call them too.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace simcuda {
namespace {

uint64_t CUPTIAPI monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// A delivered record, copied out of its buffer (records hold only values and static strings).
struct Record {
  std::vector<uint8_t> bytes;
  CUpti_ActivityKind kind() const { return reinterpret_cast<const CUpti_Activity*>(bytes.data())->kind; }
  template <class T>
  const T& as() const {
    return *reinterpret_cast<const T*>(bytes.data());
  }
};

// What the buffer callbacks saw; the completion callback may run on CUPTI's worker thread.
struct Collected {
  std::mutex mu;
  std::vector<Record> records;
  std::vector<std::thread::id> completing_threads;
  size_t buffer_size = 1 << 16;
  bool give_buffer = true;
  int requested = 0;
  int completed = 0;
};
Collected* g_collected = nullptr;

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Runs with CUPTI's lock held; the test's lock is taken here and in the completion only.
  std::lock_guard<std::mutex> lock(g_collected->mu);
  ++g_collected->requested;
  *max_records = 0;
  if (!g_collected->give_buffer) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *size = g_collected->buffer_size;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, g_collected->buffer_size));
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Record> got;
  CUpti_Activity* r = nullptr;
  CUptiResult status;
  while ((status = cuptiActivityGetNextRecord(buffer, valid, &r)) == CUPTI_SUCCESS) {
    auto* p = reinterpret_cast<const uint8_t*>(r);
    auto* next = r;
    size_t size = valid - size_t(p - buffer);
    // The record's extent is up to the next one (or the end of the valid bytes).
    if (cuptiActivityGetNextRecord(buffer, valid, &next) == CUPTI_SUCCESS) {
      size = size_t(reinterpret_cast<const uint8_t*>(next) - p);
    }
    EXPECT_EQ(size_t(p - buffer) % 8, 0u);
    got.push_back(Record{std::vector<uint8_t>(p, p + size)});
  }
  EXPECT_EQ(status, CUPTI_ERROR_MAX_LIMIT_REACHED);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_collected->mu);
  ++g_collected->completed;
  g_collected->completing_threads.push_back(std::this_thread::get_id());
  for (Record& rec : got) g_collected->records.push_back(std::move(rec));
}

constexpr CUpti_ActivityKind kAllKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
};

// One CUPTI session in this process; ends it (cuptiFinalize) whatever the test did.
class CuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_collected = &collected_;
    ASSERT_EQ(cuptiActivityRegisterTimestampCallback(monotonic_ns), CUPTI_SUCCESS);
    ASSERT_EQ(cuptiActivityRegisterCallbacks(request, complete), CUPTI_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuptiFinalize(), CUPTI_SUCCESS);
    g_collected = nullptr;
  }
  std::vector<Record> take() {
    std::lock_guard<std::mutex> lock(collected_.mu);
    return std::exchange(collected_.records, {});
  }
  Collected collected_;
};

template <class T>
std::vector<T> of_kind(const std::vector<Record>& records, CUpti_ActivityKind kind) {
  std::vector<T> out;
  for (const Record& r : records) {
    if (r.kind() == kind) out.push_back(r.as<T>());
  }
  return out;
}

std::string callback_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) return "?";
  return name;
}

TEST_F(CuptiTest, RecordsEveryOperationOnceWithTheDeviceTimesAndItsCorrelation) {
  // s1's kernels last 1 ms, so that s2's work certainly starts while s1's first kernel runs.
  const void* first = test::register_kernel(10, "_Z19cupti_sleep_us_1000Pf");
  const void* second = test::register_kernel(11, "_Z12cupti_secondv");
  cudaStream_t s1, s2;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s2), cudaSuccess);
  for (CUpti_ActivityKind k : kAllKinds) ASSERT_EQ(cuptiActivityEnable(k), CUPTI_SUCCESS);
  const uint64_t t0 = monotonic_ns();

  void* device = nullptr;
  void* pinned = nullptr;
  std::vector<char> pageable(1000, 1);
  ASSERT_EQ(cudaMalloc(&device, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel(first, dim3(2, 3, 1), dim3(32, 1, 1), nullptr, 128, s1), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel(second, dim3(1), dim3(64), nullptr, 0, s2), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel(first, dim3(4), dim3(8), nullptr, 0, s1), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, pageable.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, 4096, cudaMemcpyDeviceToHost, s1), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device, 7, 2048, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  const uint64_t t1 = monotonic_ns();
  for (CUpti_ActivityKind k : kAllKinds) ASSERT_EQ(cuptiActivityDisable(k), CUPTI_SUCCESS);
  // Not recorded: nothing is enabled any more.
  ASSERT_EQ(cudaLaunchKernel(second, dim3(1), dim3(1), nullptr, 0, s2), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  std::vector<Record> records = take();
  size_t dropped = 99;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u);

  // API records: every call, each with its own increasing id, inside the test's interval.
  std::vector<CUpti_ActivityAPI> runtime = of_kind<CUpti_ActivityAPI>(records, CUPTI_ACTIVITY_KIND_RUNTIME);
  std::vector<CUpti_ActivityAPI> driver = of_kind<CUpti_ActivityAPI>(records, CUPTI_ACTIVITY_KIND_DRIVER);
  std::map<uint32_t, CUpti_ActivityAPI> api;  // by correlation id
  std::map<uint32_t, CUpti_ActivityKind> api_domain;
  for (const auto* list : {&runtime, &driver}) {
    for (const CUpti_ActivityAPI& a : *list) {
      EXPECT_TRUE(api.emplace(a.correlationId, a).second) << "correlation id " << a.correlationId << " twice";
      api_domain[a.correlationId] = a.kind;
      EXPECT_LE(t0, a.start);
      EXPECT_LE(a.start, a.end);
      EXPECT_LE(a.end, t1);
      EXPECT_EQ(a.processId, uint32_t(getpid()));
      EXPECT_EQ(a.returnValue, 0u);
    }
  }
  std::vector<std::string> runtime_names;
  for (const CUpti_ActivityAPI& a : runtime) runtime_names.push_back(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, a.cbid));
  EXPECT_EQ(runtime_names,
            (std::vector<std::string>{"cudaMalloc_v3020", "cudaMallocHost_v3020", "cudaLaunchKernel_v7000",
                                      "cudaLaunchKernel_v7000", "cudaLaunchKernel_v7000", "cudaMemcpy_v3020",
                                      "cudaMemcpyAsync_v3020", "cudaMemsetAsync_v3020",
                                      "cudaStreamSynchronize_v3020", "cudaDeviceSynchronize_v3020",
                                      "cudaFree_v3020", "cudaFreeHost_v3020"}));
  // Runtime records are written when the call returns, so their ids increase in that order too.
  for (size_t i = 1; i < runtime.size(); ++i) EXPECT_LT(runtime[i - 1].correlationId, runtime[i].correlationId);
  // The driver calls the runtime made, each inside its runtime call, with a later id.
  std::multiset<std::string> driver_names;
  for (const CUpti_ActivityAPI& d : driver) {
    driver_names.insert(callback_name(CUPTI_CB_DOMAIN_DRIVER_API, d.cbid));
    auto outer = std::find_if(runtime.begin(), runtime.end(), [&](const CUpti_ActivityAPI& r) {
      return r.start <= d.start && d.end <= r.end;
    });
    ASSERT_NE(outer, runtime.end()) << "driver call " << d.correlationId << " outside every runtime call";
    EXPECT_GT(d.correlationId, outer->correlationId);
  }
  for (const char* name : {"cuMemAlloc_v2", "cuLaunchKernel", "cuMemcpyHtoD_v2", "cuMemcpyDtoHAsync_v2",
                           "cuStreamSynchronize", "cuMemFree_v2"}) {
    EXPECT_EQ(driver_names.count(name), name == std::string("cuLaunchKernel") ? 3u : 1u) << name;
  }

  // Kernels: one record each, the timeline's durations, in issue order and apart within a stream.
  std::vector<CUpti_ActivityKernel10> kernels =
      of_kind<CUpti_ActivityKernel10>(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 3u);
  std::sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) { return a.correlationId < b.correlationId; });
  const uint64_t kernel_ns = config().kernel_ns;
  EXPECT_EQ(kernels[0].end - kernels[0].start, 1000000u);
  EXPECT_EQ(kernels[1].end - kernels[1].start, kernel_ns);
  EXPECT_EQ(kernels[2].end - kernels[2].start, 1000000u);
  for (const CUpti_ActivityKernel10& k : kernels) {
    EXPECT_EQ(k.completed, k.end);
    EXPECT_EQ(k.deviceId, 0u);
    EXPECT_NE(k.contextId, 0u);
    EXPECT_EQ(k.graphId, 0u);
    EXPECT_EQ(k.graphNodeId, 0u);
    ASSERT_EQ(api.count(k.correlationId), 1u);
    EXPECT_EQ(api_domain[k.correlationId], CUPTI_ACTIVITY_KIND_RUNTIME);
    EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[k.correlationId].cbid), "cudaLaunchKernel_v7000");
  }
  EXPECT_STREQ(kernels[0].name, "_Z19cupti_sleep_us_1000Pf");
  EXPECT_STREQ(kernels[1].name, "_Z12cupti_secondv");
  EXPECT_STREQ(kernels[2].name, "_Z19cupti_sleep_us_1000Pf");
  EXPECT_EQ(kernels[0].gridX, 2);
  EXPECT_EQ(kernels[0].gridY, 3);
  EXPECT_EQ(kernels[0].gridZ, 1);
  EXPECT_EQ(kernels[0].blockX, 32);
  EXPECT_EQ(kernels[0].dynamicSharedMemory, 128);
  EXPECT_EQ(kernels[1].blockX, 64);
  EXPECT_EQ(kernels[2].gridX, 4);
  EXPECT_EQ(kernels[0].streamId, kernels[2].streamId);
  EXPECT_NE(kernels[0].streamId, kernels[1].streamId);
  EXPECT_LE(kernels[0].end, kernels[2].start);
  // s2's kernel does not wait for s1's: it starts as soon as it is issued, inside its launch call
  // (while s1's runs, unless this thread was held up for the whole 1 ms).
  EXPECT_LE(kernels[1].start, api[kernels[1].correlationId].end);

  // Copies: the driver call's id and the runtime call's, and the bandwidth's duration.
  std::vector<CUpti_ActivityMemcpy6> copies = of_kind<CUpti_ActivityMemcpy6>(records, CUPTI_ACTIVITY_KIND_MEMCPY);
  ASSERT_EQ(copies.size(), 2u);
  std::sort(copies.begin(), copies.end(), [](const auto& a, const auto& b) { return a.correlationId < b.correlationId; });
  const double gbps = config().copy_gbps;
  EXPECT_EQ(copies[0].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(copies[0].srcKind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
  EXPECT_EQ(copies[0].dstKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(copies[0].bytes, 1000u);
  EXPECT_EQ(copies[0].end - copies[0].start, copy_duration_ns(1000, gbps));
  EXPECT_EQ(copies[1].copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
  EXPECT_EQ(copies[1].srcKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(copies[1].dstKind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(copies[1].bytes, 4096u);
  EXPECT_EQ(copies[1].end - copies[1].start, copy_duration_ns(4096, gbps));
  EXPECT_EQ(copies[1].streamId, kernels[0].streamId);
  // In s1 behind the second kernel.
  EXPECT_LE(kernels[2].end, copies[1].start);
  const char* copy_calls[2][2] = {{"cudaMemcpy_v3020", "cuMemcpyHtoD_v2"},
                                  {"cudaMemcpyAsync_v3020", "cuMemcpyDtoHAsync_v2"}};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(api_domain[copies[i].correlationId], CUPTI_ACTIVITY_KIND_DRIVER);
    ASSERT_EQ(api_domain[copies[i].runtimeCorrelationId], CUPTI_ACTIVITY_KIND_RUNTIME);
    EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[copies[i].runtimeCorrelationId].cbid), copy_calls[i][0]);
    EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_DRIVER_API, api[copies[i].correlationId].cbid), copy_calls[i][1]);
  }

  std::vector<CUpti_ActivityMemset4> sets = of_kind<CUpti_ActivityMemset4>(records, CUPTI_ACTIVITY_KIND_MEMSET);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].value, 7u);
  EXPECT_EQ(sets[0].bytes, 2048u);
  EXPECT_EQ(sets[0].memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(sets[0].end - sets[0].start, copy_duration_ns(2048, gbps));
  EXPECT_EQ(sets[0].streamId, kernels[1].streamId);
  EXPECT_LE(kernels[1].end, sets[0].start);
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[sets[0].correlationId].cbid), "cudaMemsetAsync_v3020");

  // Every device record's API call started before the operation did.
  std::vector<std::pair<uint32_t, uint64_t>> device_ops;
  for (const auto& k : kernels) device_ops.emplace_back(k.correlationId, k.start);
  for (const auto& c : copies) device_ops.emplace_back(c.correlationId, c.start);
  for (const auto& s : sets) device_ops.emplace_back(s.correlationId, s.start);
  for (auto [id, start] : device_ops) {
    ASSERT_EQ(api.count(id), 1u) << id;
    EXPECT_LE(api[id].start, start);
  }

  // Synchronisations: the host interval each call waited, with the call's id.
  std::vector<CUpti_ActivitySynchronization2> syncs =
      of_kind<CUpti_ActivitySynchronization2>(records, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(syncs[0].type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  EXPECT_EQ(syncs[0].streamId, kernels[0].streamId);
  EXPECT_LE(copies[1].end, syncs[0].end);
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[syncs[0].correlationId].cbid), "cudaStreamSynchronize_v3020");
  EXPECT_EQ(syncs[1].type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[syncs[1].correlationId].cbid), "cudaDeviceSynchronize_v3020");
  for (const auto& s : syncs) {
    EXPECT_LE(api[s.correlationId].start, s.start);
    EXPECT_LE(s.end, api[s.correlationId].end);
  }

  // Allocations and releases, each once, with the runtime call's id.
  std::vector<CUpti_ActivityMemory4> memory = of_kind<CUpti_ActivityMemory4>(records, CUPTI_ACTIVITY_KIND_MEMORY2);
  ASSERT_EQ(memory.size(), 4u);
  const std::pair<CUpti_ActivityMemoryOperationType, CUpti_ActivityMemoryKind> expected[] = {
      {CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE},
      {CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED},
      {CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE},
      {CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED}};
  const char* memory_calls[] = {"cudaMalloc_v3020", "cudaMallocHost_v3020", "cudaFree_v3020", "cudaFreeHost_v3020"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(memory[i].memoryOperationType, expected[i].first) << i;
    EXPECT_EQ(memory[i].memoryKind, expected[i].second) << i;
    EXPECT_EQ(memory[i].address, uintptr_t(i % 2 == 0 ? device : pinned)) << i;
    EXPECT_EQ(memory[i].bytes, i % 2 == 0 ? 1u << 16 : 4096u) << i;
    EXPECT_EQ(memory[i].processId, uint32_t(getpid()));
    EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[memory[i].correlationId].cbid), memory_calls[i]);
    EXPECT_LE(api[memory[i].correlationId].start, memory[i].timestamp);
    EXPECT_LE(memory[i].timestamp, api[memory[i].correlationId].end);
  }
  EXPECT_EQ(records.size(), runtime.size() + driver.size() + kernels.size() + copies.size() + sets.size() +
                                syncs.size() + memory.size());
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s2), cudaSuccess);
}

TEST_F(CuptiTest, ArrayCopiesCarryTheArrayKinds) {
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
  constexpr size_t kRow = 16 * sizeof(float), kRows = 8, kBytes = kRow * kRows;
  cudaArray_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &channels, 16, kRows), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&b, &channels, 16, kRows), cudaSuccess);
  std::vector<float> host(16 * kRows, 1.0f);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, host.data(), kRow, kRow, kRows, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, kRow, kRows), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(device, kRow, b, 0, 0, kRow, kRows, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, device, kRow, kRow, kRows, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromArray(host.data(), a, 0, 0, 100, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  std::vector<Record> records = take();
  std::map<uint32_t, CUpti_ActivityAPI> api;  // by correlation id
  for (const auto& r : of_kind<CUpti_ActivityAPI>(records, CUPTI_ACTIVITY_KIND_RUNTIME)) api[r.correlationId] = r;
  auto copies = of_kind<CUpti_ActivityMemcpy6>(records, CUPTI_ACTIVITY_KIND_MEMCPY);
  ASSERT_EQ(copies.size(), 5u);
  std::sort(copies.begin(), copies.end(), [](const auto& x, const auto& y) { return x.correlationId < y.correlationId; });
  struct Expected {
    const char* call;
    CUpti_ActivityMemcpyKind kind;
    CUpti_ActivityMemoryKind src, dst;
    uint64_t bytes;
  };
  const Expected expected[] = {
      {"cudaMemcpy2DToArray_v3020", CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
       CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, kBytes},
      {"cudaMemcpy2DArrayToArray_v3020", CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
       CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, kBytes},
      {"cudaMemcpy2DFromArray_v3020", CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kBytes},
      {"cudaMemcpy2DToArray_v3020", CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, kBytes},
      {"cudaMemcpyFromArray_v3020", CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
       CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 100},
  };
  for (size_t i = 0; i < copies.size(); ++i) {
    SCOPED_TRACE(expected[i].call);
    const CUpti_ActivityMemcpy6& c = copies[i];
    EXPECT_EQ(c.copyKind, expected[i].kind);
    EXPECT_EQ(c.srcKind, expected[i].src);
    EXPECT_EQ(c.dstKind, expected[i].dst);
    EXPECT_EQ(c.bytes, expected[i].bytes);
    EXPECT_EQ(c.end - c.start, copy_duration_ns(expected[i].bytes, config().copy_gbps));
    // The runtime makes array copies itself, as 2D copies: both ids are the runtime call's.
    EXPECT_EQ(c.correlationId, c.runtimeCorrelationId);
    ASSERT_EQ(api.count(c.runtimeCorrelationId), 1u);
    EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, api[c.runtimeCorrelationId].cbid), expected[i].call);
  }
  EXPECT_EQ(cudaFreeArray(a), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(b), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST_F(CuptiTest, TimestampsAreRealtimeWithoutACallback) {
  // A fresh session: no timestamp callback.
  ASSERT_EQ(cuptiFinalize(), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityRegisterCallbacks(request, complete), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  timespec before, after;
  clock_gettime(CLOCK_REALTIME, &before);
  int device;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  clock_gettime(CLOCK_REALTIME, &after);
  uint64_t ts = 0;
  ASSERT_EQ(cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(api.size(), 1u);
  auto ns = [](const timespec& t) { return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec); };
  // Converted through the monotonic clock, so allow the two clocks' reading skew.
  EXPECT_GE(api[0].start + 100000, ns(before));
  EXPECT_LE(api[0].end, ns(after) + 100000);
  EXPECT_GE(ts, ns(after));
  EXPECT_EQ(api[0].threadId, uint32_t(uintptr_t(pthread_self())));
}

TEST_F(CuptiTest, SystemThreadIdsAreGettid) {
  ASSERT_EQ(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM), CUPTI_SUCCESS);
  CUpti_ActivityThreadIdType type;
  ASSERT_EQ(cuptiGetThreadIdType(&type), CUPTI_SUCCESS);
  EXPECT_EQ(type, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  int device;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  auto api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(api[0].threadId, uint32_t(gettid()));
}

TEST_F(CuptiTest, FullBuffersGoToTheWorkerAndFlushDeliversTheRestOnTheCallingThread) {
  collected_.buffer_size = 3 * sizeof(CUpti_ActivityAPI);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  int device;
  for (int i = 0; i < 7; ++i) ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  // Two buffers filled up; the worker completes them without being asked.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(collected_.mu);
      if (collected_.completed == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lock(collected_.mu);
    ASSERT_EQ(collected_.completed, 2);
    EXPECT_EQ(collected_.records.size(), 6u);
    for (std::thread::id t : collected_.completing_threads) EXPECT_NE(t, std::this_thread::get_id());
    collected_.completing_threads.clear();
  }
  // The last, partial buffer holds only complete records: a plain flush hands it over, before it
  // returns, on this thread.
  ASSERT_EQ(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  {
    std::lock_guard<std::mutex> lock(collected_.mu);
    EXPECT_EQ(collected_.completed, 3);
    EXPECT_EQ(collected_.records.size(), 7u);
    ASSERT_EQ(collected_.completing_threads.size(), 1u);
    EXPECT_EQ(collected_.completing_threads[0], std::this_thread::get_id());
  }
  // Nothing is left: neither flush delivers an empty buffer.
  ASSERT_EQ(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  std::lock_guard<std::mutex> lock(collected_.mu);
  EXPECT_EQ(collected_.completed, 3);
  EXPECT_EQ(collected_.requested, 3);
}

TEST_F(CuptiTest, ForcedFlushDeliversAPartialBuffer) {
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), CUPTI_SUCCESS);
  int version = 0;
  ASSERT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  auto api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_DRIVER);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_DRIVER_API, api[0].cbid), "cuDriverGetVersion");
}

TEST_F(CuptiTest, RecordsWithoutABufferAreDroppedAndCountedOnce) {
  collected_.give_buffer = false;
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  int device;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  EXPECT_TRUE(take().empty());
  size_t dropped = 0;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 3u);
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, nullptr), CUPTI_ERROR_INVALID_PARAMETER);
}

TEST_F(CuptiTest, ExternalIdsCorrelateTheCallsMadeWhileTheyArePushed) {
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), CUPTI_SUCCESS);
  int device;
  ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 42), CUPTI_SUCCESS);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  uint64_t last = 0;
  ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, &last), CUPTI_SUCCESS);
  EXPECT_EQ(last, 42u);
  EXPECT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, &last),
            CUPTI_ERROR_QUEUE_EMPTY);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  std::vector<Record> records = take();
  auto external = of_kind<CUpti_ActivityExternalCorrelation>(records, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  auto api = of_kind<CUpti_ActivityAPI>(records, CUPTI_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(external.size(), 1u);
  ASSERT_EQ(api.size(), 2u);
  EXPECT_EQ(external[0].externalId, 42u);
  EXPECT_EQ(external[0].externalKind, CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN);
  EXPECT_EQ(external[0].correlationId, api[0].correlationId);
  EXPECT_EQ(records[0].kind(), CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
}

// cuptiActivityEnableRuntimeApi: one function's records without the kind, or all but one with it;
// setting the kind again drops what was chosen per function, as documented.
TEST_F(CuptiTest, ApiRecordsCanBeChosenPerFunction) {
  const uint32_t get_device = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  int device, count;
  ASSERT_EQ(cuptiActivityEnableRuntimeApi(get_device, 1), CUPTI_SUCCESS);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  auto api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(api[0].cbid, get_device);

  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityEnableRuntimeApi(get_device, 0), CUPTI_SUCCESS);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(api.size(), 1u);
  EXPECT_EQ(api[0].cbid, uint32_t(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020));

  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  EXPECT_EQ(of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME).size(), 1u);

  size_t size = sizeof(size_t);
  size_t buffer = 8 << 20;
  ASSERT_EQ(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &buffer), CUPTI_SUCCESS);
  size_t read_back = 0;
  size = sizeof read_back;
  ASSERT_EQ(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &read_back), CUPTI_SUCCESS);
  EXPECT_EQ(read_back, buffer);
}

TEST_F(CuptiTest, OneSubscriberAtATime) {
  auto ignore = [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {};
  CUpti_SubscriberHandle a = nullptr, b = nullptr;
  ASSERT_EQ(cuptiSubscribe(&a, ignore, nullptr), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiSubscribe(&b, ignore, nullptr), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  ASSERT_EQ(cuptiUnsubscribe(a), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiSubscribe(&b, ignore, nullptr), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiUnsubscribe(b), CUPTI_SUCCESS);
}

// What a subscriber's callback saw: one entry per callback, in order.
struct Seen {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  CUpti_ApiCallbackSite site;
  uint32_t correlation;
  uint64_t data;  // *correlationData as the callback found it
  int result;     // at exit
};
std::vector<Seen>* g_seen = nullptr;

void CUPTIAPI remember(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  int result = call->functionReturnValue ? *static_cast<const int*>(call->functionReturnValue) : -1;
  g_seen->push_back({domain, cbid, call->callbackSite, call->correlationId, *call->correlationData, result});
  if (call->callbackSite == CUPTI_API_ENTER) *call->correlationData = 1000 + call->correlationId;
}

TEST_F(CuptiTest, CallbacksOfTheEnabledIdsOnlyWithTheIdsTheirApiRecordsWouldHave) {
  std::vector<Seen> seen;
  g_seen = &seen;
  CUpti_SubscriberHandle subscriber = nullptr;
  ASSERT_EQ(cuptiSubscribe(&subscriber, remember, nullptr), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020),
            CUPTI_SUCCESS);
  EXPECT_EQ(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, 0), CUPTI_ERROR_INVALID_PARAMETER);
  // Without RUNTIME records, as a tracer that links through callbacks alone runs it; then with them,
  // whose ids the callbacks' must equal.
  void* device = nullptr;
  char host[256] = {};
  ASSERT_EQ(cudaMalloc(&device, sizeof host), cudaSuccess);
  int current = 0;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);  // not enabled: no callback
  ASSERT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  ASSERT_EQ(cudaMemcpy(host, device, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host, device, sizeof host, cudaMemcpyKind(17)), cudaErrorInvalidMemcpyDirection);
  ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  ASSERT_EQ(seen.size(), 6u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
    EXPECT_EQ(seen[i].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
    EXPECT_EQ(seen[i].site, i % 2 ? CUPTI_API_EXIT : CUPTI_API_ENTER);
  }
  // ENTER and EXIT of one call share its id and its correlationData; each call has an id of its own.
  EXPECT_EQ(seen[0].correlation, seen[1].correlation);
  EXPECT_EQ(seen[1].data, 1000u + seen[1].correlation);
  EXPECT_LT(seen[1].correlation, seen[2].correlation);
  EXPECT_EQ(seen[1].result, int(cudaSuccess));
  EXPECT_EQ(seen[5].result, int(cudaErrorInvalidMemcpyDirection));
  auto api = of_kind<CUpti_ActivityAPI>(take(), CUPTI_ACTIVITY_KIND_RUNTIME);
  std::vector<uint32_t> copies;
  for (const auto& a : api)
    if (a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020) copies.push_back(a.correlationId);
  EXPECT_EQ(copies, (std::vector<uint32_t>{seen[2].correlation, seen[4].correlation}));
  // Disabled again, or after cuptiUnsubscribe: no more callbacks.
  ASSERT_EQ(cuptiEnableCallback(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020),
            CUPTI_SUCCESS);
  ASSERT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiUnsubscribe(subscriber), CUPTI_SUCCESS);
  ASSERT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(seen.size(), 6u);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  g_seen = nullptr;
}

TEST_F(CuptiTest, KindsAndNamesAsTheHeadersSay) {
  EXPECT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_PC_SAMPLING), CUPTI_ERROR_NOT_COMPATIBLE);
  EXPECT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_INVALID), CUPTI_ERROR_INVALID_KIND);
  EXPECT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_COUNT), CUPTI_ERROR_INVALID_KIND);
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
            "cudaLaunchKernel_v7000");
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2),
            "cuMemcpyHtoDAsync_v2");
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_INVALID), "?");
  EXPECT_EQ(callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE), "?");
  const char* text = nullptr;
  ASSERT_EQ(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &text), CUPTI_SUCCESS);
  EXPECT_STREQ(text, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
  uint32_t version = 0;
  ASSERT_EQ(cuptiGetVersion(&version), CUPTI_SUCCESS);
  EXPECT_EQ(version, uint32_t(CUPTI_API_VERSION));
}

// Without a driver (SIMCUDA_CUPTI_ERROR=999) the calls that need one fail as the real library's do.
TEST(CuptiKnobs, UnknownErrorFailsTheCallsThatNeedADriver) {
  test::Result r = test::run({CUPTI_HELPER, "calls"}, test::on_simulator({{"SIMCUDA_CUPTI_ERROR", "999"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"cuptiSubscribe", "cuptiActivityEnable", "cuptiActivityFlushAll",
                           "cuptiActivityFlushPeriod", "cuptiSetThreadIdType",
                           "cuptiActivityRegisterTimestampCallback"}) {
    EXPECT_EQ(test::field_long(r.out, name), 999) << name;
  }
  for (const char* name : {"cuptiGetVersion", "cuptiGetTimestamp", "cuptiActivityRegisterCallbacks", "cuptiFinalize"}) {
    EXPECT_EQ(test::field_long(r.out, name), 0) << name;
  }
}

TEST(CuptiKnobs, AnotherSubscriberTakesTheSlot) {
  test::Result r = test::run({CUPTI_HELPER, "calls"}, test::on_simulator({{"SIMCUDA_CUPTI_ERROR", "39"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::field_long(r.out, "cuptiSubscribe"), 39);
  EXPECT_EQ(test::field_long(r.out, "cuptiActivityEnable"), 0);
  EXPECT_EQ(test::field_long(r.out, "cuptiActivityFlushAll"), 0);
}

TEST(CuptiKnobs, DeviceRecordsBeyondTheDeviceBufferAreDropped) {
  test::Result r = test::run({CUPTI_HELPER, "device-cap"},
                             test::on_simulator({{"SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::field_long(r.out, "kernels"), 2);
  EXPECT_EQ(test::field_long(r.out, "dropped"), 3);
  test::Result unlimited = test::run({CUPTI_HELPER, "device-cap"}, test::on_simulator());
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
  EXPECT_EQ(test::field_long(unlimited.out, "kernels"), 5);
  EXPECT_EQ(test::field_long(unlimited.out, "dropped"), 0);
}

}  // namespace
}  // namespace simcuda
