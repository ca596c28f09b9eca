// The shim's CUPTI handlers (preload/gpu_activity.cpp) on buffers and callbacks made here, as Kineto
// tests its own: which records a CUPTI activity buffer becomes, which calls a callback links and how,
// and which callbacks the shim enables. The record and name functions come from the simulated CUPTI
// (its cuptiActivityGetNextRecord walks a buffer exactly as the real one's header describes); no
// device and no CUPTI session are involved. The records go into a one-ring session in this process.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "api_ids.h"
#include "cutrace/ring.h"
#include "gpu_activity.h"
#include "in_process_session.h"
#include "runtime.h"

namespace {

namespace abi = cutrace::abi;
namespace preload = cutrace::preload;
namespace ring = cutrace::ring;

std::set<std::pair<int, uint32_t>> g_enabled;  // what the stand-in for cuptiEnableCallback was asked

int record_enable(uint32_t enable, void*, int domain, uint32_t cbid) {
  if (enable) g_enabled.insert({domain, cbid});
  return CUPTI_SUCCESS;
}

class GpuActivity : public ::testing::Test {
 protected:
  void SetUp() override {
    cupti_ = dlopen(SIMCUDA_CUPTI, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(cupti_, nullptr) << dlerror();
    ASSERT_TRUE(preload::testing::bind_cupti(cupti_, record_enable));
    session_.attach();
    ring_ = session_.ring();
  }

  void TearDown() override { session_.detach(); }

  struct Written {
    std::vector<std::vector<uint8_t>> gpu;  // kGpuActivity records, whole
    std::vector<std::pair<uint64_t, std::string>> kernel_names;
  };
  Written drain() {
    Written w;
    session_.drain([&](const uint8_t* p, uint32_t) {
      abi::RecordHeader h;
      std::memcpy(&h, p, sizeof h);
      if (h.kind == uint16_t(abi::RecordKind::kGpuActivity)) w.gpu.emplace_back(p, p + h.size);
      if (h.kind == uint16_t(abi::RecordKind::kString) && h.aux == uint32_t(abi::StringKind::kGpuKernelName)) {
        abi::StringRecord s;
        std::memcpy(&s, p, sizeof s);
        w.kernel_names.emplace_back(s.key, std::string(reinterpret_cast<const char*>(p + sizeof s), s.length));
      }
    });
    return w;
  }

  template <class T>
  static T as(const std::vector<uint8_t>& bytes) {
    T t;
    EXPECT_EQ(bytes.size(), sizeof t);
    std::memcpy(&t, bytes.data(), sizeof t);
    return t;
  }

  // A buffer from the shim's pool with these records back to back, as CUPTI fills one.
  template <class... Records>
  void complete(const Records&... records) {
    size_t size = 0;
    uint8_t* buffer = preload::testing::request_activity_buffer(&size);
    ASSERT_NE(buffer, nullptr);
    size_t used = 0;
    ((std::memcpy(buffer + used, &records, sizeof records), used += sizeof records), ...);
    ASSERT_LE(used, size);
    preload::testing::buffer_completed(buffer, used);
  }

  void* cupti_ = nullptr;
  cutrace::test::InProcessSession session_;
  abi::RingHeader* ring_ = nullptr;
};

CUpti_ActivityKernel10 kernel(const char* name, uint32_t correlation, uint64_t start) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = start + 5000;
  k.correlationId = correlation;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 7;
  k.gridX = 64, k.gridY = 2, k.gridZ = 1;
  k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.name = name;
  return k;
}

TEST_F(GpuActivity, KernelsCopiesAndSetsBecomeTheirRecordsWithTheirCorrelationAndNamesOnce) {
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.start = 2000, copy.end = 3000;
  copy.bytes = 1 << 20;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.correlationId = 12, copy.runtimeCorrelationId = 11;
  copy.deviceId = 0, copy.contextId = 1, copy.streamId = 7;
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 4000, set.end = 4100;
  set.bytes = 4096, set.value = 0xab;
  set.correlationId = 13;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  set.deviceId = 0, set.contextId = 1, set.streamId = 7;
  // A record the shim does not keep (an API record of a call that gives the device no work) is
  // passed over, and the records after it still come.
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  complete(kernel("_Z4axpyfPf", 10, 1000), copy, api, set, kernel("_Z4axpyfPf", 14, 5000));
  Written w = drain();
  ASSERT_EQ(w.gpu.size(), 4u);
  auto k = as<abi::GpuKernelRecord>(w.gpu[0]);
  EXPECT_EQ(k.h.header.aux, uint32_t(abi::GpuActivity::kKernel));
  EXPECT_EQ(k.h.start, 1000u);
  EXPECT_EQ(k.h.end, 6000u);
  EXPECT_EQ(k.h.correlation, 10u);
  EXPECT_EQ(k.h.stream, 7u);
  EXPECT_EQ(k.grid[0], 64);
  EXPECT_EQ(k.grid[1], 2);
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.registers_per_thread, 32u);
  EXPECT_EQ(k.static_shared_bytes, 1024u);
  EXPECT_EQ(k.dynamic_shared_bytes, 2048u);
  auto m = as<abi::GpuMemcpyRecord>(w.gpu[1]);
  EXPECT_EQ(m.h.header.aux, uint32_t(abi::GpuActivity::kMemcpy));
  EXPECT_EQ(m.h.correlation, 12u);
  EXPECT_EQ(m.runtime_correlation, 11u);
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_EQ(m.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  auto s = as<abi::GpuMemsetRecord>(w.gpu[2]);
  EXPECT_EQ(s.h.header.aux, uint32_t(abi::GpuActivity::kMemset));
  EXPECT_EQ(s.h.correlation, 13u);
  EXPECT_EQ(s.value, 0xabu);
  EXPECT_EQ(s.bytes, 4096u);
  auto second = as<abi::GpuKernelRecord>(w.gpu[3]);
  EXPECT_EQ(second.h.correlation, 14u);
  EXPECT_EQ(second.name, k.name);
  // The kernel's name goes out once, keyed by the id both records carry.
  ASSERT_EQ(w.kernel_names.size(), 1u);
  EXPECT_EQ(w.kernel_names[0], std::make_pair(k.name, std::string("_Z4axpyfPf")));
}

// ENTER then EXIT of one call, as CUPTI makes them, with the result it returned.
void call_through_callbacks(CUpti_CallbackDomain domain, uint32_t cbid, uint32_t correlation, int result) {
  uint64_t slot = 0;
  CUpti_CallbackData data{};
  data.correlationData = &slot;
  data.correlationId = correlation;
  data.callbackSite = CUPTI_API_ENTER;
  preload::testing::callback(domain, cbid, &data);
  data.callbackSite = CUPTI_API_EXIT;
  data.functionReturnValue = &result;
  preload::testing::callback(domain, cbid, &data);
}

TEST_F(GpuActivity, ACallThatGivesTheDeviceWorkIsLinkedByItsCallbacksAndNoOtherIs) {
  call_through_callbacks(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 41, 0);
  call_through_callbacks(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 42, 1);
  call_through_callbacks(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 43, 0);
  // The tracer's own calls (CUPTI's, the shim's) are never the program's.
  preload::t_thread.in_tracer++;
  call_through_callbacks(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 44, 0);
  preload::t_thread.in_tracer--;
  Written w = drain();
  ASSERT_EQ(w.gpu.size(), 2u);
  auto launch = as<abi::GpuApiLinkRecord>(w.gpu[0]);
  EXPECT_EQ(launch.header.aux, uint32_t(abi::GpuActivity::kApiLink));
  EXPECT_EQ(launch.correlation, 41u);
  EXPECT_EQ(launch.api_id, uint32_t(cutrace::kApi_cudaLaunchKernel));
  EXPECT_EQ(launch.tid, ring_->tid);
  EXPECT_EQ(launch.result, 0u);
  EXPECT_LE(launch.start, launch.end);
  EXPECT_GT(launch.start, 0u);
  auto driver = as<abi::GpuApiLinkRecord>(w.gpu[1]);
  EXPECT_EQ(driver.correlation, 42u);
  EXPECT_EQ(driver.api_id, uint32_t(cutrace::kApi_cuLaunchKernel));
  EXPECT_EQ(driver.result, 1u);
  EXPECT_LE(launch.end, driver.start);
}

TEST_F(GpuActivity, OnlyTheCallbacksOfLaunchesCopiesAndSetsAreEnabled) {
  g_enabled.clear();
  const uint32_t enabled = preload::testing::enable_work_callbacks();
  EXPECT_EQ(enabled, g_enabled.size());
  auto on = [](CUpti_CallbackDomain d, uint32_t cbid) { return g_enabled.count({int(d), cbid}) == 1; };
  const auto runtime = CUPTI_CB_DOMAIN_RUNTIME_API, driver = CUPTI_CB_DOMAIN_DRIVER_API;
  for (uint32_t cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020})
    EXPECT_TRUE(on(runtime, cbid)) << cbid;
  for (uint32_t cbid : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
                        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async})
    EXPECT_TRUE(on(driver, cbid)) << cbid;
  // Calls that give the device no work keep CUPTI out of their way.
  for (uint32_t cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020})
    EXPECT_FALSE(on(runtime, cbid)) << cbid;
  for (uint32_t cbid : {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
                        CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize})
    EXPECT_FALSE(on(driver, cbid)) << cbid;
}

}  // namespace
