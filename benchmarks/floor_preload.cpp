// The floor under a traced call, for bench_overhead: a preload that does only what any tracer of a
// call must do (read the clock before and after the real function, write a record as large as
// cutrace's into a ring of the thread's own) and nothing cutrace adds to it (a shared-memory ring a
// recorder drains, the session and capture gates, call depth and domains, errno-safe slow paths,
// backtrace thresholds). bench_overhead reports cutrace's added cost as a multiple of this one's
// (issue 27: at most 1.25x). Interposes the CUDA runtime functions cheap_calls times on its plt route.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cutrace/abi.h"

namespace {

// As large as cutrace's default ring (abi::kDefaultRingBytes), its pages populated up front as
// cutrace's are: records stream through memory as cutrace's do, rather than staying in a cache.
constexpr uint64_t kRingBytes = 16u << 20;
struct Ring {
  uint8_t* data;
  uint64_t head;
};
thread_local Ring t_ring __attribute__((tls_model("initial-exec")));

__attribute__((noinline, cold)) void allocate(Ring& ring) {
  void* p = mmap(nullptr, kRingBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) std::abort();
  ring.data = static_cast<uint8_t*>(p);
}

// As large as cutrace's record of a call with one argument: an ApiCallRecord and its slot.
struct Record {
  uint64_t header, begin, end, result, domains, flags, arg;
};
static_assert(sizeof(Record) == sizeof(cutrace::abi::ApiCallRecord) + sizeof(uint64_t));

inline void record(uint32_t api, uint64_t begin, uint64_t end, uint64_t result, uint64_t arg) {
  Ring& ring = t_ring;
  if (__builtin_expect(!ring.data, 0)) allocate(ring);
  uint64_t offset = ring.head & (kRingBytes - 1);
  if (__builtin_expect(offset + sizeof(Record) > kRingBytes, 0)) {  // as cutrace's ring, a pad to the end
    ring.head += kRingBytes - offset;
    offset = 0;
  }
  auto* r = reinterpret_cast<Record*>(ring.data + offset);
  *r = {uint64_t(api) << 32 | sizeof(Record), begin, end, result, 0, 0, arg};
  ring.head += sizeof(Record);
}

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

using GetDevice = cudaError_t (*)(int*);
using NoArguments = cudaError_t (*)();
using StreamQuery = cudaError_t (*)(cudaStream_t);
using EventQuery = cudaError_t (*)(cudaEvent_t);
GetDevice g_get_device = real<GetDevice>("cudaGetDevice");
NoArguments g_peek = real<NoArguments>("cudaPeekAtLastError");
NoArguments g_last_error = real<NoArguments>("cudaGetLastError");
StreamQuery g_stream_query = real<StreamQuery>("cudaStreamQuery");
EventQuery g_event_query = real<EventQuery>("cudaEventQuery");

}  // namespace

extern "C" __attribute__((visibility("default"))) cudaError_t cudaGetDevice(int* device) {
  const uint64_t begin = __rdtsc();
  const cudaError_t result = g_get_device(device);
  const uint64_t end = __rdtsc();
  record(1, begin, end, uint64_t(result), result == cudaSuccess && device ? uint64_t(*device) : 0);
  return result;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaPeekAtLastError() {
  const uint64_t begin = __rdtsc();
  const cudaError_t result = g_peek();
  const uint64_t end = __rdtsc();
  record(2, begin, end, uint64_t(result), 0);
  return result;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaGetLastError() {
  const uint64_t begin = __rdtsc();
  const cudaError_t result = g_last_error();
  const uint64_t end = __rdtsc();
  record(3, begin, end, uint64_t(result), 0);
  return result;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaStreamQuery(cudaStream_t stream) {
  const uint64_t begin = __rdtsc();
  const cudaError_t result = g_stream_query(stream);
  const uint64_t end = __rdtsc();
  record(4, begin, end, uint64_t(result), uint64_t(reinterpret_cast<uintptr_t>(stream)));
  return result;
}

extern "C" __attribute__((visibility("default"))) cudaError_t cudaEventQuery(cudaEvent_t event) {
  const uint64_t begin = __rdtsc();
  const cudaError_t result = g_event_query(event);
  const uint64_t end = __rdtsc();
  record(5, begin, end, uint64_t(result), uint64_t(reinterpret_cast<uintptr_t>(event)));
  return result;
}
