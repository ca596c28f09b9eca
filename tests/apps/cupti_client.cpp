// A program with a CUPTI activity client of its own, as torch.profiler's Kineto is: linked to CUPTI,
// it launches kernels, then registers its own activity buffers, enables kernel records, launches more,
// flushes, disables the kind, and launches more again. It counts the kernel records its own callbacks
// were given, by name: exactly the kernels it launched while it profiled, with or without cutrace.
//
// usage: cupti_client [before=3] [profiled=4] [after=5] [finalize=0]   (finalize 1: cuptiFinalize at the
//        end of its profiling instead of disabling the kind)
// stdout: "own kernels <n>" (records of kernels named "profiled_sleep_us_100" its callbacks got),
//         "other records <n>" (any other record it was given), then "done".
// exit:   0; 1 when a driver or CUPTI call fails.
#include <cuda.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr char kImage[] = "SIMCUDA-MODULE-1\0plain_sleep_us_100\0profiled_sleep_us_100\0";
constexpr size_t kBufferBytes = 1 << 20;
int g_own_kernels = 0, g_other_records = 0;

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
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
  // The profiler of its own starts: its buffers, kernel records.
  if (!ok(cuptiActivityRegisterCallbacks(request, complete), "cuptiActivityRegisterCallbacks") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable") || !launch(mine, profiled) ||
      !ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll"))
    return 1;
  if (finalize ? !ok(cuptiFinalize(), "cuptiFinalize")
               : !ok(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable"))
    return 1;
  if (!launch(plain, after)) return 1;
  std::printf("own kernels %d\nother records %d\ndone\n", g_own_kernels, g_other_records);
  return 0;
}
