// Threads that each make one slow copy and exit at once, one after another while the recorder drains:
// the backtrace of each copy must reach the trace whole, attached to its call, though its thread has
// ended by the time the recorder reads it.
// usage: backtrace_threads <threads>; prints "threads N failed F".
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

volatile int g_after_call = 0;
constexpr size_t kBytes = 16u << 20;

__attribute__((noinline)) int copy_then_exit(void* device, const char* host) {
  const int failed = cudaMemcpy(device, host, kBytes, cudaMemcpyHostToDevice) != cudaSuccess;  // CALL: copy_then_exit
  g_after_call = g_after_call + 1;
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <threads>\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  std::vector<char> host(kBytes, 1);
  void* device = nullptr;
  if (cudaMalloc(&device, kBytes) != cudaSuccess) return 1;
  int failed = 0;
  for (int i = 0; i < threads; ++i) {
    int result = 0;
    std::thread([&] { result = copy_then_exit(device, host.data()); }).join();
    failed += result;
  }
  cudaFree(device);
  std::printf("threads %d failed %d\n", threads, failed);
  return failed ? 1 : 0;
}
