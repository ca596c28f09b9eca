// Capture ranges for the tests of -c: calls inside ranges and outside them, counted by the program.
//
// usage: capture_app profiler|driver|nvtx <ranges> <calls>
//          each range: <calls> cudaGetDevice outside any range, then the range around <calls>
//          cudaGetDeviceCount. profiler: cudaProfilerStart/Stop; driver: cuProfilerStart/Stop;
//          nvtx: before each range a push/pop "other" around one cudaGetDevice (never a capture range),
//          then the range: push/pop "capture" in the default domain for even ranges, and for odd ones
//          push/pop of the registered string "capture" in domain "dom".
//        capture_app paced <milliseconds>
//          one cudaGetDevice per millisecond until the time is up.
// stdout: "inside <n> outside <m>" (paced: "calls <n>").
// exit: 0, or 64 on a usage error.
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void outside(int calls, long* count) {
  int device = 0;
  for (int i = 0; i < calls; ++i) cudaGetDevice(&device), ++*count;
}

void inside(int calls, long* count) {
  int n = 0;
  for (int i = 0; i < calls; ++i) cudaGetDeviceCount(&n), ++*count;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: capture_app profiler|driver|nvtx <ranges> <calls> | paced <milliseconds>\n");
    return 64;
  }
  const std::string mode = argv[1];
  if (mode == "paced") {
    const long ms = std::atol(argv[2]);
    long calls = 0;
    int device = 0;
    timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms) break;
      cudaGetDevice(&device);
      ++calls;
      std::printf("calls %ld\n", calls);
      std::fflush(stdout);
      timespec pause{0, 1000000};
      nanosleep(&pause, nullptr);
    }
    return 0;
  }
  if (argc != 4) return 64;
  const int ranges = std::atoi(argv[2]);
  const int calls = std::atoi(argv[3]);
  long in = 0, out = 0;
  cuInit(0);
  nvtxDomainHandle_t dom = nvtxDomainCreateA("dom");
  nvtxStringHandle_t capture_in_dom = nvtxDomainRegisterStringA(dom, "capture");
  for (int r = 0; r < ranges; ++r) {
    outside(calls, &out);
    if (mode == "profiler") {
      cudaProfilerStart();
      inside(calls, &in);
      cudaProfilerStop();
    } else if (mode == "driver") {
      cuProfilerStart();
      inside(calls, &in);
      cuProfilerStop();
    } else if (mode == "nvtx") {
      nvtxRangePushA("other");
      outside(1, &out);
      nvtxRangePop();
      if (r % 2 == 0) {
        nvtxRangePushA("capture");
        inside(calls, &in);
        nvtxRangePop();
      } else {
        nvtxEventAttributes_t a{};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = capture_in_dom;
        nvtxDomainRangePushEx(dom, &a);
        inside(calls, &in);
        nvtxDomainRangePop(dom);
      }
    } else {
      return 64;
    }
  }
  outside(calls, &out);
  std::printf("inside %ld outside %ld\n", in, out);
  return 0;
}
