// Two streams working at once: in each, per round, an event, an async copy in, a kernel, an async
// copy out and a second event, all from pinned host memory so that nothing blocks the host. The
// event pairs time each stream's round on the device.
//
// usage: sim_streams [elements=262144] [rounds=1]
// stdout: "elements N", "rounds N", "bytes_per_copy N", one "elapsed_ms stream<i> round<r> <ms>"
//         per stream and round (%.6f), "verified N", then the calls table.
// exit:   0 on success, 1 when a CUDA call fails, 2 when the copied-back bytes differ.
#include <cstdio>
#include <cstring>

#include "app_util.h"

namespace ns {

__global__ void scale(float* out, const float* in, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = factor * in[i];
}

}  // namespace ns

namespace {

constexpr const char kUsage[] = "sim_streams [elements=262144] [rounds=1]";
constexpr int kStreams = 2;

struct PerStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  float* h_in = nullptr;
  float* h_out = nullptr;
  float* d_in = nullptr;
  float* d_tmp = nullptr;
};

int run(int n, long rounds, CallCounter& calls, long* verified) {
  size_t bytes = size_t(n) * sizeof(float);
  PerStream s[kStreams];
  bool ok = counted(calls, "cudaStreamCreate", cudaStreamCreate(&s[0].stream)) &&
            counted(calls, "cudaStreamCreateWithFlags",
                    cudaStreamCreateWithFlags(&s[1].stream, cudaStreamNonBlocking));
  for (int i = 0; ok && i < kStreams; ++i) {
    ok = counted(calls, "cudaEventCreate", cudaEventCreate(&s[i].start)) &&
         counted(calls, "cudaEventCreate", cudaEventCreate(&s[i].stop)) &&
         counted(calls, "cudaMallocHost", cudaMallocHost(&s[i].h_in, bytes)) &&
         counted(calls, "cudaMallocHost", cudaMallocHost(&s[i].h_out, bytes)) &&
         counted(calls, "cudaMalloc", cudaMalloc(&s[i].d_in, bytes)) &&
         counted(calls, "cudaMalloc", cudaMalloc(&s[i].d_tmp, bytes));
    if (ok) {
      for (int j = 0; j < n; ++j) s[i].h_in[j] = float(i * 1000 + j % 997);
    }
  }
  if (!ok) return 1;

  dim3 block(256);
  dim3 grid((n + block.x - 1) / block.x);
  for (long r = 0; r < rounds; ++r) {
    for (int i = 0; i < kStreams; ++i) {
      PerStream& p = s[i];
      std::memset(p.h_out, 0, bytes);
      ok = counted(calls, "cudaEventRecord", cudaEventRecord(p.start, p.stream)) &&
           counted(calls, "cudaMemcpyAsync",
                   cudaMemcpyAsync(p.d_in, p.h_in, bytes, cudaMemcpyHostToDevice, p.stream));
      if (!ok) return 1;
      // The kernel writes a scratch buffer, so d_in round-trips unchanged on a real GPU too.
      ns::scale<<<grid, block, 0, p.stream>>>(p.d_tmp, p.d_in, 3.0f, n);
      calls.add_launch(0);
      ok = counted(calls, "cudaMemcpyAsync",
                   cudaMemcpyAsync(p.h_out, p.d_in, bytes, cudaMemcpyDeviceToHost, p.stream)) &&
           counted(calls, "cudaEventRecord", cudaEventRecord(p.stop, p.stream));
      if (!ok) return 1;
    }
    for (int i = 0; i < kStreams; ++i) {
      if (!counted(calls, "cudaStreamSynchronize", cudaStreamSynchronize(s[i].stream))) return 1;
    }
    for (int i = 0; i < kStreams; ++i) {
      float ms = 0;
      if (!counted(calls, "cudaEventElapsedTime", cudaEventElapsedTime(&ms, s[i].start, s[i].stop))) {
        return 1;
      }
      std::printf("elapsed_ms stream%d round%ld %.6f\n", i, r, ms);
      if (std::memcmp(s[i].h_out, s[i].h_in, bytes) != 0) {
        std::fprintf(stderr, "error: stream %d: the bytes copied back differ\n", i);
        return 2;
      }
      ++*verified;
    }
  }

  for (int i = 0; i < kStreams; ++i) {
    ok = counted(calls, "cudaStreamDestroy", cudaStreamDestroy(s[i].stream)) &&
         counted(calls, "cudaEventDestroy", cudaEventDestroy(s[i].start)) &&
         counted(calls, "cudaEventDestroy", cudaEventDestroy(s[i].stop)) &&
         counted(calls, "cudaFree", cudaFree(s[i].d_in)) &&
         counted(calls, "cudaFree", cudaFree(s[i].d_tmp)) &&
         counted(calls, "cudaFreeHost", cudaFreeHost(s[i].h_in)) &&
         counted(calls, "cudaFreeHost", cudaFreeHost(s[i].h_out));
    if (!ok) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 3) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long elements = argc > 1 ? parse_count(argv[1], "elements", kUsage) : 262144;
  long rounds = argc > 2 ? parse_count(argv[2], "rounds", kUsage) : 1;
  if (elements == 0 || elements > (1l << 26)) {
    std::fprintf(stderr, "error: elements must be from 1 to %ld\nusage: %s\n", 1l << 26, kUsage);
    return 64;
  }
  std::printf("elements %ld\n", elements);
  std::printf("rounds %ld\n", rounds);
  std::printf("bytes_per_copy %ld\n", elements * long(sizeof(float)));
  CallCounter calls;
  long verified = 0;
  int rc = run(int(elements), rounds, calls, &verified);
  std::printf("verified %ld\n", verified);
  calls.print();
  return rc;
}
