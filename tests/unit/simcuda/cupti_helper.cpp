// What the CUPTI tests cannot do in their own process: run with SIMCUDA_CUPTI_* knobs, which are read
// once per process. Prints "key value" lines for the test to check.
//
// usage: simcuda_cupti_helper calls      the result of each CUPTI call that SIMCUDA_CUPTI_ERROR may
//                                        make fail, by the call's name
//        simcuda_cupti_helper device-cap launches 5 kernels with kernel records enabled and prints
//                                        how many records were delivered ("kernels N") and dropped
//                                        ("dropped N")
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_kernels.h"

namespace {

alignas(8) uint8_t g_buffer[1 << 16];
int g_kernels = 0;

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = g_buffer;
  *size = sizeof g_buffer;
  *max_records = 0;
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++g_kernels;
  }
}

void CUPTIAPI ignore(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

uint64_t CUPTIAPI monotonic() { return 1; }

int calls() {
  uint32_t version = 0;
  uint64_t ts = 0;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::printf("cuptiGetVersion %d\n", int(cuptiGetVersion(&version)));
  std::printf("cuptiGetTimestamp %d\n", int(cuptiGetTimestamp(&ts)));
  std::printf("cuptiActivityRegisterCallbacks %d\n", int(cuptiActivityRegisterCallbacks(request, complete)));
  std::printf("cuptiSubscribe %d\n", int(cuptiSubscribe(&subscriber, ignore, nullptr)));
  std::printf("cuptiActivityEnable %d\n", int(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)));
  std::printf("cuptiActivityFlushAll %d\n", int(cuptiActivityFlushAll(0)));
  std::printf("cuptiActivityFlushPeriod %d\n", int(cuptiActivityFlushPeriod(10)));
  std::printf("cuptiSetThreadIdType %d\n", int(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)));
  std::printf("cuptiActivityRegisterTimestampCallback %d\n",
              int(cuptiActivityRegisterTimestampCallback(monotonic)));
  std::printf("cuptiFinalize %d\n", int(cuptiFinalize()));
  return 0;
}

int device_cap() {
  const void* k = simcuda::test::register_kernel(0, "_Z10cap_kernelv");
  if (cuptiActivityRegisterCallbacks(request, complete) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    return 1;
  }
  for (int i = 0; i < 5; ++i) {
    if (cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, nullptr) != cudaSuccess) return 1;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) return 1;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) return 1;
  std::printf("kernels %d\ndropped %zu\n", g_kernels, dropped);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "calls") == 0) return calls();
  if (argc == 2 && std::strcmp(argv[1], "device-cap") == 0) return device_cap();
  std::fprintf(stderr, "usage: simcuda_cupti_helper calls|device-cap\n");
  return 2;
}
