// A program that profiles one range (cudaProfilerStart/Stop around a copy), goes on with CUDA after
// it, then takes CUPTI for a profiler of its own, as a program that starts torch.profiler late does.
// Under `cutrace profile -c cudaProfilerApi --capture-range-end stop` the range was the last one, so
// cutrace has finalised its CUPTI by then and the program's subscription succeeds as it would alone.
//
// Under `cutrace profile -d SECONDS --kill none` with a pause longer than that, the recording ended
// during the pause and the copy after it is what lets cutrace's CUPTI go.
//
// usage: cupti_after_capture [pause_ms]   (default 0: no pause between the range and the next copy)
// stdout: "copies 2", then "subscribe <CUptiResult of the program's cuptiSubscribe>"
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
void CUPTIAPI ignore(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
}  // namespace

int main(int argc, char** argv) {
  const long pause_ms = argc > 1 ? std::atol(argv[1]) : 0;
  std::vector<char> host(1 << 20);
  void* device = nullptr;
  if (cudaMalloc(&device, host.size()) != cudaSuccess) return 1;
  int copies = 0;
  cudaProfilerStart();
  copies += cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess;
  cudaProfilerStop();
  // After the range, the program goes on.
  const timespec pause{pause_ms / 1000, pause_ms % 1000 * 1000000};
  nanosleep(&pause, nullptr);
  copies += cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaDeviceSynchronize();
  std::printf("copies %d\n", copies);
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  auto subscribe = cupti ? reinterpret_cast<decltype(&cuptiSubscribe)>(dlsym(cupti, "cuptiSubscribe")) : nullptr;
  auto unsubscribe = cupti ? reinterpret_cast<decltype(&cuptiUnsubscribe)>(dlsym(cupti, "cuptiUnsubscribe")) : nullptr;
  if (!subscribe || !unsubscribe) return 2;
  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult result = subscribe(&subscriber, ignore, nullptr);
  std::printf("subscribe %d\n", int(result));
  if (result == CUPTI_SUCCESS) unsubscribe(subscriber);
  cudaFree(device);
  return 0;
}
