// Capture ranges (preload/capture.cpp): each process gates its own calls by `-c cudaProfilerApi|nvtx`
// and `--capture-range-end`, read from the launcher's environment variables by init_capture(). The
// ranges are opened and closed here as a program opens them: cudaProfilerStart/Stop through the
// generated wrappers and their hooks (fake_cudart.cpp supplies the real functions), and NVTX ranges
// through NVTX's own header implementation, which finds the shim linked into this program. The records
// go into a one-ring session in this process and are read back in order.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api_ids.h"
#include "capture.h"
#include "in_process_session.h"
#include "runtime.h"

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

namespace {

namespace abi = cutrace::abi;
namespace preload = cutrace::preload;

constexpr abi::DomainSet kAll = ~abi::DomainSet(0);

struct UseShimAsNvtxTool : ::testing::Environment {
  void SetUp() override {
    unsetenv("NVTX_INJECTION64_PATH");
    InitializeInjectionNvtx2_fnptr = &InitializeInjectionNvtx2;
  }
};
const auto* const g_environment = ::testing::AddGlobalTestEnvironment(new UseShimAsNvtxTool);

// The clock once it has moved past `t`: an instant strictly after it.
uint64_t after(uint64_t t) {
  uint64_t now;
  while ((now = preload::monotonic_ns()) <= t) {
  }
  return now;
}

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.attach();
    // -t cuda,nvtx
    session_.session()->capture_domains.store(abi::kCudaDomains | abi::domain_bit(abi::ApiDomain::kNvtx));
  }
  void TearDown() override {
    unsetenv(abi::kCaptureEnvVar);
    unsetenv(abi::kNvtxCaptureEnvVar);
    preload::testing::reset_capture();
    session_.detach();
  }

  // The launcher's settings, read as the shim reads them once attached.
  void configure(const char* capture, const char* nvtx_range = nullptr) {
    preload::testing::reset_capture();
    setenv(abi::kCaptureEnvVar, capture, 1);
    if (nvtx_range) setenv(abi::kNvtxCaptureEnvVar, nvtx_range, 1);
    else unsetenv(abi::kNvtxCaptureEnvVar);
    preload::init_capture();
  }

  static abi::DomainSet gate() { return preload::g_process_capture.load(); }

  // The records written since the last call, each as one line: "begin 1 profiler", "end 2 nvtx",
  // "call cudaMalloc", "call cudaProfilerStart outside" (recorded while capture was off), "push step",
  // "pop", "start step", "end", "domain NAME", "string NAME".
  std::vector<std::string> drain() {
    std::vector<std::string> out;
    times_.clear();
    session_.drain([&](const uint8_t* p, uint32_t) {
      abi::RecordHeader h;
      std::memcpy(&h, p, sizeof h);
      std::string line;
      if (h.kind == uint16_t(abi::RecordKind::kCaptureState)) {
        abi::CaptureStateRecord c;
        std::memcpy(&c, p, sizeof c);
        EXPECT_EQ(h.size, sizeof c);
        line = std::string(h.aux == uint32_t(abi::CaptureEvent::kBegin) ? "begin " : "end ") + std::to_string(c.range) +
               (c.reason == uint32_t(abi::CaptureReason::kProfilerApi) ? " profiler" : " nvtx");
        times_.push_back(c.time);
      } else if (h.kind == uint16_t(abi::RecordKind::kApiCall)) {
        abi::ApiCallRecord c;
        std::memcpy(&c, p, sizeof c);
        line = "call " + api_name(h.aux) + (c.flags & abi::kCallFlagOutsideCapture ? " outside" : "");
        times_.push_back(c.end);
      } else if (h.kind == uint16_t(abi::RecordKind::kNvtx)) {
        abi::NvtxRecord n;
        std::memcpy(&n, p, sizeof n);
        const std::string text(reinterpret_cast<const char*>(p + sizeof n), n.text_bytes);
        static const char* const kEvents[] = {"?", "push", "pop", "start", "end", "mark", "domain", "string"};
        line = h.aux < 8 ? kEvents[h.aux] : "nvtx " + std::to_string(h.aux);
        if (!text.empty()) line += " " + text;
        times_.push_back(n.time);
      } else {
        line = "kind " + std::to_string(h.kind);
        times_.push_back(0);
      }
      out.push_back(line);
    });
    return out;
  }

  static std::string api_name(uint32_t id) {
    if (id == cutrace::kApi_cudaProfilerStart) return "cudaProfilerStart";
    if (id == cutrace::kApi_cudaProfilerStop) return "cudaProfilerStop";
    if (id == cutrace::kApi_cudaMalloc) return "cudaMalloc";
    return std::to_string(id);
  }

  static void malloc_once() {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  }

  // A thread range of the default domain: opened, then closed.
  static void push_pop(const char* message) {
    const int level = nvtxRangePushA(message);
    EXPECT_EQ(nvtxRangePop(), level);
  }

  // One of the domain's thread ranges whose message is given as NVTX would have it.
  static void domain_push_pop(nvtxDomainHandle_t d, const char* ascii, nvtxStringHandle_t registered = nullptr) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = registered ? NVTX_MESSAGE_TYPE_REGISTERED : NVTX_MESSAGE_TYPE_ASCII;
    if (registered) a.message.registered = registered;
    else a.message.ascii = ascii;
    const int level = nvtxDomainRangePushEx(d, &a);
    EXPECT_EQ(nvtxDomainRangePop(d), level);
  }

  cutrace::test::InProcessSession session_;
  std::vector<uint64_t> times_;  // of drain()'s lines, index for index
};

using Lines = std::vector<std::string>;

TEST_F(Capture, WithoutCaptureRangesEverythingIsRecordedAndEveryGpuIntervalKept) {
  unsetenv(abi::kCaptureEnvVar);
  preload::init_capture();
  EXPECT_EQ(gate(), kAll);
  EXPECT_FALSE(preload::nvtx_capture_enabled());
  malloc_once();
  ASSERT_EQ(cudaProfilerStart(), cudaSuccess);
  push_pop("step");
  EXPECT_EQ(drain(), (Lines{"call cudaMalloc", "call cudaProfilerStart", "push step", "pop"}));
  EXPECT_TRUE(preload::capture_overlaps(0, 1));
  EXPECT_TRUE(preload::capture_overlaps(UINT64_MAX - 1, UINT64_MAX));
}

TEST_F(Capture, AnUnknownModeCapturesEverythingRatherThanNothing) {
  configure("hotkey,stop,0");
  EXPECT_EQ(gate(), kAll);
  ASSERT_EQ(cudaProfilerStart(), cudaSuccess);
  ASSERT_EQ(cudaProfilerStop(), cudaSuccess);
  malloc_once();
  EXPECT_EQ(drain(), (Lines{"call cudaProfilerStart", "call cudaProfilerStop", "call cudaMalloc"}));
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
  EXPECT_TRUE(preload::capture_overlaps(0, 1));
}

TEST_F(Capture, ProfilerRangeGatesTheProcessAndStopShutdownEndsTheProgram) {
  configure("cudaProfilerApi,stop-shutdown,0");
  EXPECT_EQ(gate(), 0u);
  malloc_once();
  ASSERT_EQ(cudaProfilerStart(), cudaSuccess);
  EXPECT_EQ(gate(), kAll);
  malloc_once();
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
  ASSERT_EQ(cudaProfilerStop(), cudaSuccess);
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 1u);
  malloc_once();
  // The process is done with ranges: a start is recorded (the tools name ranges by it), opens nothing.
  ASSERT_EQ(cudaProfilerStart(), cudaSuccess);
  EXPECT_EQ(gate(), 0u);
  // The range opens once cudaProfilerStart has returned, so its call lies outside; the range ends
  // after cudaProfilerStop's call, which lies inside.
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "call cudaProfilerStart outside", "call cudaMalloc",
                            "end 1 profiler", "call cudaProfilerStop", "call cudaProfilerStart outside"}));
  EXPECT_GE(times_[0], times_[1]);
  EXPECT_LE(times_[1], times_[2]);
  EXPECT_GE(times_[3], times_[2]);
  EXPECT_GE(times_[3], times_[4]);
}

TEST_F(Capture, StopEndsCaptureForGoodAndLeavesTheProgramRunning) {
  configure("cudaProfilerApi,stop,0");
  preload::hooks::capture_start();
  preload::hooks::capture_stop();
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
  preload::hooks::capture_start();
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "end 1 profiler"}));
}

TEST_F(Capture, TheSecondStartOrStopOfAPairChangesNothing) {
  // cudaProfilerStart calls cuProfilerStart inside: both hooks run, one range opens and closes.
  configure("cudaProfilerApi,repeat,0");
  preload::hooks::capture_start();
  preload::hooks::capture_start();
  preload::hooks::capture_stop();
  preload::hooks::capture_stop();
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "end 1 profiler"}));
  EXPECT_EQ(gate(), 0u);
}

TEST_F(Capture, RepeatRecordsEachRangeUpToItsCount) {
  configure("cudaProfilerApi,repeat,2");
  for (int i = 0; i < 3; ++i) {
    preload::hooks::capture_start();
    preload::hooks::capture_stop();
  }
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "end 1 profiler", "begin 2 profiler", "end 2 profiler"}));
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
}

TEST_F(Capture, RepeatWithoutACountNeverStops) {
  configure("cudaProfilerApi,repeat,0");
  for (int i = 0; i < 3; ++i) {
    preload::hooks::capture_start();
    EXPECT_EQ(gate(), kAll) << i;
    preload::hooks::capture_stop();
    EXPECT_EQ(gate(), 0u) << i;
  }
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "end 1 profiler", "begin 2 profiler", "end 2 profiler",
                            "begin 3 profiler", "end 3 profiler"}));
}

TEST_F(Capture, RepeatShutdownEndsTheProgramAfterItsCount) {
  configure("cudaProfilerApi,repeat-shutdown,2");
  preload::hooks::capture_start();
  preload::hooks::capture_stop();
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
  preload::hooks::capture_start();
  preload::hooks::capture_stop();
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 1u);
  preload::hooks::capture_start();
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler", "end 1 profiler", "begin 2 profiler", "end 2 profiler"}));
}

TEST_F(Capture, NoneIgnoresRangeEnds) {
  configure("cudaProfilerApi,none,0");
  preload::hooks::capture_start();
  preload::hooks::capture_stop();
  EXPECT_EQ(gate(), kAll);
  preload::hooks::capture_start();
  EXPECT_EQ(session_.session()->capture_shutdown.load(), 0u);
  EXPECT_EQ(drain(), (Lines{"begin 1 profiler"}));
}

TEST_F(Capture, GpuWorkIsKeptWhereItOverlapsARange) {
  configure("cudaProfilerApi,repeat,0");
  const uint64_t before_any = preload::monotonic_ns();
  EXPECT_FALSE(preload::capture_overlaps(0, UINT64_MAX));  // no range yet
  preload::hooks::capture_start();
  const uint64_t inside_first = preload::monotonic_ns();
  preload::hooks::capture_stop();
  const uint64_t between = after(preload::monotonic_ns());
  const uint64_t before_second = after(between);
  preload::hooks::capture_start();
  const uint64_t inside_second = preload::monotonic_ns();

  EXPECT_FALSE(preload::capture_overlaps(0, before_any - 1));
  EXPECT_TRUE(preload::capture_overlaps(inside_first, inside_first));
  EXPECT_TRUE(preload::capture_overlaps(0, inside_first));  // began before, ended inside
  EXPECT_FALSE(preload::capture_overlaps(between, between));
  EXPECT_TRUE(preload::capture_overlaps(between, before_second + 1000000000));  // runs into the second
  EXPECT_TRUE(preload::capture_overlaps(inside_first, between));  // began inside, ended after
  // The open range has no end yet: anything from its start on is in it.
  EXPECT_TRUE(preload::capture_overlaps(inside_second, inside_second));
  EXPECT_TRUE(preload::capture_overlaps(UINT64_MAX - 1, UINT64_MAX));
  preload::hooks::capture_stop();
  EXPECT_FALSE(preload::capture_overlaps(after(preload::monotonic_ns()), UINT64_MAX));
}

TEST_F(Capture, NvtxRangeOfTheDefaultDomainOpensAndItsPopClosesTheCapture) {
  configure("nvtx,stop,0", "step");
  EXPECT_TRUE(preload::nvtx_capture_enabled());
  EXPECT_EQ(gate(), 0u);
  push_pop("warm-up");
  push_pop("step-like");
  const nvtxDomainHandle_t other = nvtxDomainCreateA("other");
  domain_push_pop(other, "step");  // -p step follows the default domain only
  malloc_once();
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(nvtxRangePushA("step"), 0);
  EXPECT_EQ(gate(), kAll);
  malloc_once();
  push_pop("inner");
  EXPECT_EQ(gate(), kAll);
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(gate(), 0u);
  push_pop("step");  // stop: no second range
  // The push that opens the range and the pop that closes it are inside it; names are always recorded.
  EXPECT_EQ(drain(), (Lines{"domain other", "begin 1 nvtx", "push step", "call cudaMalloc", "push inner", "pop",
                            "pop", "end 1 nvtx"}));
}

TEST_F(Capture, NvtxRangeOfANamedDomainByMessageStartAndRegisteredString) {
  configure("nvtx,repeat,0", "step@train");
  // Created after the settings are read, as a program's domains are.
  const nvtxDomainHandle_t train = nvtxDomainCreateA("train");
  const nvtxDomainHandle_t eval = nvtxDomainCreateA("eval");
  push_pop("step");
  domain_push_pop(eval, "step");
  domain_push_pop(train, "step");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "step";
  const nvtxRangeId_t range = nvtxDomainRangeStartEx(train, &a);
  EXPECT_EQ(gate(), kAll);
  nvtxDomainRangeEnd(train, range);
  EXPECT_EQ(gate(), 0u);
  const nvtxStringHandle_t in_eval = nvtxDomainRegisterStringA(eval, "step");
  const nvtxStringHandle_t in_train = nvtxDomainRegisterStringA(train, "step");
  domain_push_pop(train, nullptr, in_eval);
  domain_push_pop(train, nullptr, in_train);
  EXPECT_EQ(drain(), (Lines{"domain train", "domain eval", "begin 1 nvtx", "push step", "pop", "end 1 nvtx",
                            "begin 2 nvtx", "start step", "end", "end 2 nvtx", "string step", "string step",
                            "begin 3 nvtx", "push", "pop", "end 3 nvtx"}));
}

TEST_F(Capture, NvtxRangeOfAnyDomain) {
  configure("nvtx,repeat,0", "step@*");
  const nvtxDomainHandle_t d = nvtxDomainCreateA("anywhere");
  push_pop("step");
  domain_push_pop(d, "step");
  domain_push_pop(d, "other");
  EXPECT_EQ(drain(), (Lines{"domain anywhere", "begin 1 nvtx", "push step", "pop", "end 1 nvtx", "begin 2 nvtx",
                            "push step", "pop", "end 2 nvtx"}));
}

TEST_F(Capture, ARegisteredMessageMatchesByItsString) {
  configure("nvtx,repeat,0", "step");
  const nvtxStringHandle_t step = nvtxDomainRegisterStringA(nullptr, "step");
  const nvtxStringHandle_t steps = nvtxDomainRegisterStringA(nullptr, "steps");
  domain_push_pop(nullptr, nullptr, steps);
  domain_push_pop(nullptr, nullptr, step);
  EXPECT_EQ(drain(), (Lines{"string step", "string steps", "begin 1 nvtx", "push", "pop", "end 1 nvtx"}));
}

// The matching strings are kept in a few slots: a string registered again keeps its one slot, so a
// program that registers "step" in a loop still has room for it in another domain.
TEST_F(Capture, AStringRegisteredAgainKeepsItsOneSlot) {
  configure("nvtx,repeat,0", "step@*");
  for (int i = 0; i < 40; ++i) nvtxDomainRegisterStringA(nullptr, "step");
  const nvtxDomainHandle_t d = nvtxDomainCreateA("x");
  const nvtxStringHandle_t step = nvtxDomainRegisterStringA(d, "step");
  domain_push_pop(d, nullptr, step);
  const Lines lines = drain();
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(Lines(lines.end() - 4, lines.end()), (Lines{"begin 1 nvtx", "push", "pop", "end 1 nvtx"}));
}

TEST_F(Capture, APushRangeClosesOnlyAtItsOwnLevelOnItsOwnThread) {
  configure("nvtx,repeat,0", "step");
  EXPECT_EQ(nvtxRangePushA("step"), 0);
  EXPECT_EQ(gate(), kAll);
  // The same text nested inside opens nothing more, and its pop closes nothing.
  push_pop("step");
  EXPECT_EQ(gate(), kAll);
  // Another thread's ranges at the same level are its own.
  std::thread([] {
    EXPECT_EQ(nvtxRangePushA("other thread"), 0);
    EXPECT_EQ(nvtxRangePop(), 0);
    EXPECT_EQ(nvtxRangePop(), -1);
  }).join();
  EXPECT_EQ(gate(), kAll);
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(drain(), (Lines{"begin 1 nvtx", "push step", "push step", "pop", "pop", "end 1 nvtx"}));
}

TEST_F(Capture, AStartEndRangeClosesFromAnyThreadOnlyByItsId) {
  configure("nvtx,repeat,0", "step");
  const nvtxRangeId_t step = nvtxRangeStartA("step");
  const nvtxRangeId_t other = nvtxRangeStartA("other");
  nvtxRangeEnd(other);
  EXPECT_EQ(gate(), kAll);
  EXPECT_EQ(drain(), (Lines{"begin 1 nvtx", "start step", "start other", "end"}));
  // A process range: its end may come from any thread (whose records, in this test, go nowhere: the
  // session's one ring is this thread's).
  std::thread([step] { nvtxRangeEnd(step); }).join();
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(drain(), Lines{});
  // Ended: its id opens or closes nothing again.
  nvtxRangeEnd(step);
  push_pop("other");
  EXPECT_EQ(gate(), 0u);
  EXPECT_EQ(drain(), Lines{});
}

}  // namespace
