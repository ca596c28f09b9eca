// A program with a CUPTI client of its own, as torch.profiler's Kineto is: linked to CUPTI, it launches
// kernels, then subscribes to the driver's launch callbacks, registers its own activity buffers,
// enables kernel records, launches more, flushes, disables the kind, unsubscribes, and launches more
// again. It counts the kernel records its own callbacks were given, by name, and the launch callbacks
// it got, whose correlationData must come back from entry to exit: exactly the kernels it launched
// while it profiled, with or without cutrace.
//
// Built twice: cupti_client is linked to CUPTI; cupti_client_dlopen (CUPTI_THROUGH_DLOPEN) looks every
// CUPTI function up through a handle of its own, dlopen("libcupti.so.13", RTLD_LOCAL) then dlsym, as
// programs that load CUPTI only when they profile do.
//
// usage: cupti_client [before=3] [profiled=4] [after=5] [finalize=0] [windows=1]   (finalize 1: cuptiFinalize
//        at the end of its profiling instead of disabling the kind; windows: how many times it profiles,
//        each time `profiled` kernels then `after` plain ones)
// stdout: "own kernels <n>" (records of kernels named "profiled_sleep_us_100" its callbacks got),
//         "other records <n>" (any other record it was given), "launch callbacks <n>" (cuLaunchKernel
//         exits whose entry's correlationData came back), then "done".
// exit:   0; 1 when a driver or CUPTI call fails.
#include <cuda.h>
#include <cupti.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr char kImage[] = "SIMCUDA-MODULE-1\0plain_sleep_us_100\0profiled_sleep_us_100\0";
constexpr size_t kBufferBytes = 1 << 20;
int g_own_kernels = 0, g_other_records = 0, g_launch_callbacks = 0;

#define CUPTI_CLIENT_FUNCTIONS(X)                                                                            \
  X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiActivityRegisterCallbacks)            \
  X(cuptiActivityEnable) X(cuptiActivityDisable) X(cuptiActivityFlushAll) X(cuptiFinalize)                  \
  X(cuptiActivityGetNextRecord)

struct Cupti {
#define CUPTI_CLIENT_POINTER(name) decltype(&::name) name = nullptr;
  CUPTI_CLIENT_FUNCTIONS(CUPTI_CLIENT_POINTER)
#undef CUPTI_CLIENT_POINTER
};
Cupti g_cupti;

bool bind_cupti() {
#ifdef CUPTI_THROUGH_DLOPEN
  void* handle = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "dlopen libcupti.so.13 failed: %s\n", dlerror());
    return false;
  }
  bool all = true;
#define CUPTI_CLIENT_LOOKUP(name)                                                 \
  g_cupti.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));        \
  all = all && g_cupti.name;
  CUPTI_CLIENT_FUNCTIONS(CUPTI_CLIENT_LOOKUP)
#undef CUPTI_CLIENT_LOOKUP
  return all;
#else
#define CUPTI_CLIENT_LINKED(name) g_cupti.name = &::name;
  CUPTI_CLIENT_FUNCTIONS(CUPTI_CLIENT_LINKED)
#undef CUPTI_CLIENT_LINKED
  return true;
#endif
}

void CUPTIAPI on_launch(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (userdata != &g_launch_callbacks || domain != CUPTI_CB_DOMAIN_DRIVER_API ||
      cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
    return;
  if (call->callbackSite == CUPTI_API_ENTER)
    *call->correlationData = 0xC0FFEE;
  else if (*call->correlationData == 0xC0FFEE)
    ++g_launch_callbacks;
}

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (g_cupti.cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (kernel->name && std::strcmp(kernel->name, "profiled_sleep_us_100") == 0) {
        ++g_own_kernels;
        continue;
      }
    }
    ++g_other_records;
  }
  std::free(buffer);
}

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  std::fprintf(stderr, "%s failed: %d\n", what, int(r));
  return false;
}

bool ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  std::fprintf(stderr, "%s failed: %d\n", what, int(r));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int before = argc > 1 ? std::atoi(argv[1]) : 3, profiled = argc > 2 ? std::atoi(argv[2]) : 4;
  const int after = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool finalize = argc > 4 && std::atoi(argv[4]) != 0;
  const int windows = argc > 5 ? std::atoi(argv[5]) : 1;
  if (!bind_cupti()) return 1;
  CUdevice device;
  CUcontext context;
  CUmodule module;
  CUfunction plain, mine;
  if (!ok(cuInit(0), "cuInit") || !ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !ok(cuCtxSetCurrent(context), "cuCtxSetCurrent") || !ok(cuModuleLoadData(&module, kImage), "cuModuleLoadData") ||
      !ok(cuModuleGetFunction(&plain, module, "plain_sleep_us_100"), "cuModuleGetFunction") ||
      !ok(cuModuleGetFunction(&mine, module, "profiled_sleep_us_100"), "cuModuleGetFunction"))
    return 1;
  auto launch = [](CUfunction f, int n) {
    for (int i = 0; i < n; ++i)
      if (!ok(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel")) return false;
    return ok(cuCtxSynchronize(), "cuCtxSynchronize");
  };
  if (!launch(plain, before)) return 1;
  for (int window = 0; window < windows; ++window) {
    // The profiler of its own starts: the launch callbacks, its buffers, kernel records.
    CUpti_SubscriberHandle subscriber = nullptr;
    if (!ok(g_cupti.cuptiSubscribe(&subscriber, on_launch, &g_launch_callbacks), "cuptiSubscribe") ||
        !ok(g_cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
            "cuptiEnableCallback") ||
        !ok(g_cupti.cuptiActivityRegisterCallbacks(request, complete), "cuptiActivityRegisterCallbacks") ||
        !ok(g_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable") ||
        !launch(mine, profiled) || !ok(g_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll"))
      return 1;
    if (!ok(g_cupti.cuptiUnsubscribe(subscriber), "cuptiUnsubscribe")) return 1;
    if (finalize ? !ok(g_cupti.cuptiFinalize(), "cuptiFinalize")
                 : !ok(g_cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable"))
      return 1;
    if (!launch(plain, after)) return 1;
  }
  std::printf("own kernels %d\nother records %d\nlaunch callbacks %d\ndone\n", g_own_kernels, g_other_records,
              g_launch_callbacks);
  return 0;
}
