// Calls that fail, each with the code the CUDA runtime documents for it.
//
// usage: sim_errors
// stdout: one line per check, "<check> <returned code> <name> expected <code> <name>", then
//         "matched <k> of <n>" and the calls table.
// exit: 0 when every call returned its expected code, 1 otherwise (always so on a machine without
//       a driver, where the runtime returns cudaErrorInsufficientDriver).
#include <cstdio>
#include <vector>

#include "app_util.h"

__global__ void never_runs_kernel(int* out) { *out = 1; }

namespace {

struct Check {
  const char* what;
  cudaError_t got;
  cudaError_t expected;
};

void host_function_that_is_not_a_kernel() {}

}  // namespace

int main(int argc, char**) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: sim_errors\n");
    return 64;
  }
  CallCounter calls;
  std::vector<Check> checks;
  auto check = [&](const char* what, const char* api, cudaError_t got, cudaError_t expected) {
    calls.add(api);
    checks.push_back({what, got, expected});
  };

  check("cudaFree(bogus)", "cudaFree", cudaFree(reinterpret_cast<void*>(0x1234)),
        cudaErrorInvalidValue);
  check("cudaSetDevice(99)", "cudaSetDevice", cudaSetDevice(99), cudaErrorInvalidDevice);
  check("cudaLaunchKernel(not_a_kernel)", "cudaLaunchKernel",
        cudaLaunchKernel(reinterpret_cast<const void*>(&host_function_that_is_not_a_kernel),
                         dim3(1), dim3(1), nullptr, 0, nullptr),
        cudaErrorInvalidDeviceFunction);

  size_t too_much = size_t(1) << 50;
  void* p = nullptr;
  check("cudaMalloc(1PiB)", "cudaMalloc", cudaMalloc(&p, too_much), cudaErrorMemoryAllocation);

  char host[16] = {};
  check("cudaMemcpy(kind=7)", "cudaMemcpy",
        cudaMemcpy(host, host + 8, 8, static_cast<cudaMemcpyKind>(7)),
        cudaErrorInvalidMemcpyDirection);
  check("cudaMemcpy(DeviceToHost,src=host)", "cudaMemcpy",
        cudaMemcpy(host, host + 8, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);

  cudaStream_t stream = nullptr;
  check("cudaStreamCreate", "cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
  check("cudaStreamDestroy", "cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
  check("cudaStreamSynchronize(destroyed)", "cudaStreamSynchronize", cudaStreamSynchronize(stream),
        cudaErrorInvalidResourceHandle);

  cudaEvent_t start = nullptr, stop = nullptr;
  check("cudaEventCreate", "cudaEventCreate", cudaEventCreate(&start), cudaSuccess);
  check("cudaEventCreate", "cudaEventCreate", cudaEventCreate(&stop), cudaSuccess);
  float ms = 0;
  check("cudaEventElapsedTime(unrecorded)", "cudaEventElapsedTime",
        cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);
  check("cudaEventDestroy", "cudaEventDestroy", cudaEventDestroy(start), cudaSuccess);
  check("cudaEventDestroy", "cudaEventDestroy", cudaEventDestroy(stop), cudaSuccess);

  // The launch result of <<<...>>> is only visible through the last error.
  check("cudaGetLastError(clears)", "cudaGetLastError", cudaGetLastError(),
        cudaErrorInvalidResourceHandle);
  never_runs_kernel<<<0, 1>>>(nullptr);
  calls.add_launch(0);
  check("kernel<<<0,1>>> then cudaGetLastError", "cudaGetLastError", cudaGetLastError(),
        cudaErrorInvalidConfiguration);
  check("cudaGetLastError(again)", "cudaGetLastError", cudaGetLastError(), cudaSuccess);

  int matched = 0;
  for (const Check& c : checks) {
    std::printf("%s %d %s expected %d %s\n", c.what, int(c.got), cudaGetErrorName(c.got),
                int(c.expected), cudaGetErrorName(c.expected));
    calls.add("cudaGetErrorName", 2);
    matched += c.got == c.expected ? 1 : 0;
  }
  std::printf("matched %d of %zu\n", matched, checks.size());
  calls.print();
  return matched == int(checks.size()) ? 0 : 1;
}
