// What CUPTI's activity API gives on a real GPU, read before GPU activity is built on it: which activity
// kinds this driver (and the machine's virtualisation) lets a tool enable, how many records of each a
// known workload yields, whether kernel records carry the launching call's correlation id, whether a
// timestamp callback puts GPU times on the host's clock, whether a second callback subscriber is
// refused (PyTorch's profiler is one), and what activity tracing adds to a kernel launch on the host.
// It needs a GPU; scripts/gpu-bundle.sh builds it and scripts/gpu-check.sh runs it.
//
// usage: cupti_probe [monotonic | costs]
//   monotonic: register a timestamp callback returning CLOCK_MONOTONIC before enabling any kind, and
//              check that kernels fall between the host times read around them.
//   costs:     what each part of activity collection adds to a kernel launch and to a call that never
//              reaches the GPU (cudaGetDevice): kernels alone, then copies, sets, synchronisation and
//              memory, then RUNTIME and DRIVER API records; and, instead of those API records, callbacks
//              on the launch functions alone, which is another way to learn a launch's correlation id
//              (and whether kernel records carry the runtime's or the driver's).
// stdout: "key value" lines.
#include <cupti.h>
#include <cuda_runtime.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8 << 20;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t CUPTIAPI monotonic_callback() { return monotonic_ns(); }

struct Span {
  uint64_t start, end;
  uint32_t correlation;
  std::string name;
};

std::map<int, long> g_records_by_kind;
std::vector<Span> g_kernels;
std::map<uint32_t, Span> g_runtime_by_correlation;
size_t g_dropped = 0;
std::mutex g_records_lock;  // CUPTI's worker thread delivers full buffers while the program runs

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> hold(g_records_lock);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    ++g_records_by_kind[record->kind];
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
      g_kernels.push_back({k->start, k->end, k->correlationId, k->name ? k->name : "?"});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      auto* api = reinterpret_cast<CUpti_ActivityAPI*>(record);
      g_runtime_by_correlation[api->correlationId] = {api->start, api->end, api->correlationId,
                                                       std::to_string(api->cbid)};
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  free(buffer);
}

__global__ void spin(long long cycles) {
  const long long until = clock64() + cycles;
  while (clock64() < until) {
  }
}

__global__ void empty() {}

const char* result_name(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "?";
}

double launch_ns(int launches) {
  cudaDeviceSynchronize();
  const uint64_t t0 = monotonic_ns();
  for (int i = 0; i < launches; ++i) empty<<<1, 1>>>();
  const uint64_t t1 = monotonic_ns();
  cudaDeviceSynchronize();
  return double(t1 - t0) / launches;
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

double get_device_ns(int calls) {
  int device = 0;
  const uint64_t t0 = monotonic_ns();
  for (int i = 0; i < calls; ++i) cudaGetDevice(&device);
  return double(monotonic_ns() - t0) / calls;
}

std::vector<std::pair<uint32_t, CUpti_CallbackDomain>> g_callback_correlations;

void CUPTIAPI note_correlation(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite == CUPTI_API_ENTER) g_callback_correlations.emplace_back(call->correlationId, domain);
}

// The host's time per launch, in batches of 100 that the device's queue takes without making the
// launching thread wait (launch_ns's 20,000 back to back measure the device's pace as well).
double batched_launch_ns(int batches) {
  uint64_t spent = 0;
  for (int b = 0; b < batches; ++b) {
    cudaDeviceSynchronize();
    const uint64_t t0 = monotonic_ns();
    for (int i = 0; i < 100; ++i) empty<<<1, 1>>>();
    spent += monotonic_ns() - t0;
  }
  cudaDeviceSynchronize();
  return double(spent) / (100.0 * batches);
}

void measure(const char* label) {
  constexpr int kCalls = 20000;
  launch_ns(1000);
  const double launch = launch_ns(kCalls);
  const double host_launch = batched_launch_ns(200);
  const double get_device = get_device_ns(10 * kCalls);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::printf("cost %-34s launch_ns %8.1f host_launch_ns %8.1f get_device_ns %8.1f\n", label, launch, host_launch,
              get_device);
}

int costs() {
  cudaFree(nullptr);
  measure("none");
  cuptiActivityRegisterTimestampCallback(monotonic_callback);
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  // Each kind alone, then all of them as cutrace enables them.
  const std::pair<CUpti_ActivityKind, const char*> kinds[] = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent_kernel"}, {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "memset"}, {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"},
      {CUPTI_ACTIVITY_KIND_MEMORY2, "memory2"}, {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime"},
      {CUPTI_ACTIVITY_KIND_DRIVER, "driver"}};
  char label[64];
  for (const auto& [kind, name] : kinds) {
    cuptiActivityEnable(kind);
    std::snprintf(label, sizeof label, "only_%s", name);
    measure(label);
    cuptiActivityDisable(kind);
  }
  measure("none_again");
  for (const auto& [kind, name] : kinds) cuptiActivityEnable(kind);
  measure("all_seven");
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
  measure("all_but_memory2");
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
  measure("all_but_memory2_and_api_records");

  CUpti_SubscriberHandle subscriber = nullptr;
  std::printf("subscribe %s\n", result_name(cuptiSubscribe(&subscriber, note_correlation, nullptr)));
  measure("+subscriber_no_callbacks");
  g_callback_correlations.reserve(1 << 20);
  cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  size_t kernels_before;
  {
    std::lock_guard<std::mutex> hold(g_records_lock);
    kernels_before = g_kernels.size();
  }
  measure("+callbacks_on_launches");
  {
    std::lock_guard<std::mutex> hold(g_records_lock);
    std::map<uint32_t, CUpti_CallbackDomain> domain_of;
    long runtime_callbacks = 0, driver_callbacks = 0;
    for (const auto& [correlation, domain] : g_callback_correlations) {
      domain_of[correlation] = domain;
      (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_callbacks : driver_callbacks)++;
    }
    long by_runtime = 0, by_driver = 0, unmatched = 0;
    for (size_t i = kernels_before; i < g_kernels.size(); ++i) {
      auto found = domain_of.find(g_kernels[i].correlation);
      if (found == domain_of.end()) ++unmatched;
      else (found->second == CUPTI_CB_DOMAIN_RUNTIME_API ? by_runtime : by_driver)++;
    }
    std::printf("callback_phase kernels %zu runtime_callbacks %ld driver_callbacks %ld kernels_with_runtime_id %ld "
                "kernels_with_driver_id %ld kernels_unmatched %ld\n", g_kernels.size() - kernels_before,
                runtime_callbacks, driver_callbacks, by_runtime, by_driver, unmatched);
  }
  g_callback_correlations.clear();
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  measure("+callbacks_on_all_runtime_calls");
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  measure("+callbacks_on_all_driver_calls");
  std::printf("dropped %zu\n", g_dropped);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "costs") == 0) return costs();
  const bool monotonic = argc > 1 && std::strcmp(argv[1], "monotonic") == 0;
  cudaFree(nullptr);
  uint32_t version = 0;
  cuptiGetVersion(&version);
  std::printf("cupti_api_version %u\n", version);
  constexpr int kLaunches = 20000;
  launch_ns(1000);  // module loaded, first-launch costs paid
  std::printf("launch_ns_without_cupti %.1f\n", launch_ns(kLaunches));

  CUpti_SubscriberHandle first = nullptr, second = nullptr;
  std::printf("subscribe_first %s\n", result_name(cuptiSubscribe(&first, ignore_callback, nullptr)));
  std::printf("subscribe_second %s\n", result_name(cuptiSubscribe(&second, ignore_callback, nullptr)));
  if (first) cuptiUnsubscribe(first);
  if (second) cuptiUnsubscribe(second);

  if (monotonic) {
    std::printf("timestamp_callback %s\n", result_name(cuptiActivityRegisterTimestampCallback(monotonic_callback)));
  }
  std::printf("register_callbacks %s\n", result_name(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)));
  const std::pair<CUpti_ActivityKind, const char*> kinds[] = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent_kernel"}, {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "memset"}, {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"},
      {CUPTI_ACTIVITY_KIND_MEMORY2, "memory2"}, {CUPTI_ACTIVITY_KIND_MEMORY_POOL, "memory_pool"},
      {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime"}, {CUPTI_ACTIVITY_KIND_DRIVER, "driver"},
      {CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead"}, {CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "graph_trace"}};
  for (const auto& [kind, name] : kinds) std::printf("enable_%s %s\n", name, result_name(cuptiActivityEnable(kind)));

  uint64_t cupti_now = 0;
  const uint64_t real_before = realtime_ns(), mono_before = monotonic_ns();
  cuptiGetTimestamp(&cupti_now);
  std::printf("cupti_minus_realtime_ns %lld\n", (long long)(cupti_now - real_before));
  std::printf("cupti_minus_monotonic_ns %lld\n", (long long)(cupti_now - mono_before));

  const size_t bytes = 64 << 20;
  std::vector<char> host(bytes, 1);
  char* device = nullptr;
  cudaMalloc(&device, bytes);
  cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemset(device, 0, bytes);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const long long one_ms = (long long)clock_khz;  // kHz cycles are one millisecond
  const uint64_t host_before_spin = monotonic ? monotonic_ns() : 0;
  for (int i = 0; i < 5; ++i) spin<<<1, 1, 0, stream>>>(one_ms);
  cudaStreamSynchronize(stream);
  const uint64_t host_after_spin = monotonic ? monotonic_ns() : 0;
  cudaEvent_t event;
  cudaEventCreate(&event);
  spin<<<1, 1, 0, stream>>>(one_ms);
  cudaEventRecord(event, stream);
  cudaEventSynchronize(event);
  void* pooled = nullptr;
  cudaMallocAsync(&pooled, 1 << 20, stream);
  cudaFreeAsync(pooled, stream);
  cudaStreamSynchronize(stream);
  cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost);
  std::printf("launch_ns_with_cupti %.1f\n", launch_ns(kLaunches));
  cudaFree(device);
  cudaEventDestroy(event);
  cudaStreamDestroy(stream);
  cudaDeviceSynchronize();
  const uint64_t flush_start = monotonic_ns();
  std::printf("flush %s\n", result_name(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  std::printf("flush_ms %.2f\n", (monotonic_ns() - flush_start) / 1e6);

  for (const auto& [kind, n] : g_records_by_kind) std::printf("records_kind_%d %ld\n", kind, n);
  std::printf("dropped %zu\n", g_dropped);
  long spins = 0, correlated = 0, inside_host_bounds = 0;
  for (const Span& k : g_kernels) {
    if (k.name.find("spin") == std::string::npos) continue;
    ++spins;
    auto api = g_runtime_by_correlation.find(k.correlation);
    if (api != g_runtime_by_correlation.end() && api->second.start <= k.start) ++correlated;
    if (spins <= 5 && host_before_spin <= k.start && k.end <= host_after_spin) ++inside_host_bounds;
    if (spins <= 2) {
      std::printf("spin_kernel %s duration_ns %llu", k.name.c_str(), (unsigned long long)(k.end - k.start));
      if (api != g_runtime_by_correlation.end()) {
        std::printf(" api_cbid %s api_start_to_kernel_start_ns %lld", api->second.name.c_str(),
                    (long long)(k.start - api->second.start));
      }
      std::printf("\n");
    }
  }
  std::printf("kernels %zu spin_kernels %ld correlated_to_runtime %ld\n", g_kernels.size(), spins, correlated);
  if (monotonic) std::printf("spin_kernels_inside_host_monotonic_bounds %ld of 5\n", inside_host_bounds);
  return 0;
}
