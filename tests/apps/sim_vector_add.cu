// A classic CUDA program: each iteration allocates three buffers, copies two inputs in, runs a
// templated kernel in a namespace and a second kernel, copies one buffer back, verifies it round
// tripped unchanged, frees everything and synchronises.
//
// usage: sim_vector_add [iterations=1] [elements=1048576]
// stdout: "iterations N", "elements N", "verified N", "bytes HostToDevice N",
//         "bytes DeviceToHost N", "launches <kernel> N" for each kernel, then the calls table.
// exit:   0 on success, 1 when a CUDA call fails (as on a machine without a driver), 2 when the
//         copied-back bytes differ.
#include <cstdio>
#include <cstring>
#include <vector>

#include "app_util.h"

namespace ns {

template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace ns

__global__ void square_kernel(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * x[i];
}

namespace {

constexpr const char kUsage[] = "sim_vector_add [iterations=1] [elements=1048576]";
constexpr int kAxpySite = 0;
constexpr int kSquareSite = 1;

struct Totals {
  long verified = 0;
  long h2d_bytes = 0;
  long d2h_bytes = 0;
  long axpy_launches = 0;
  long square_launches = 0;
};

void print_summary(long iterations, long elements, const Totals& t, const CallCounter& calls) {
  std::printf("iterations %ld\n", iterations);
  std::printf("elements %ld\n", elements);
  std::printf("verified %ld\n", t.verified);
  std::printf("bytes HostToDevice %ld\n", t.h2d_bytes);
  std::printf("bytes DeviceToHost %ld\n", t.d2h_bytes);
  std::printf("launches ns::axpy<float>(int, float, float const*, float*) %ld\n", t.axpy_launches);
  std::printf("launches square_kernel(float*, float const*, int) %ld\n", t.square_launches);
  calls.print();
}

// One iteration; returns the exit code it implies (0 to go on).
int iterate(int n, CallCounter& calls, Totals& t, std::vector<float>& x, std::vector<float>& y,
            std::vector<float>& back) {
  size_t bytes = size_t(n) * sizeof(float);
  float* d_x = nullptr;
  float* d_y = nullptr;
  float* d_out = nullptr;
  if (!counted(calls, "cudaMalloc", cudaMalloc(&d_x, bytes)) ||
      !counted(calls, "cudaMalloc", cudaMalloc(&d_y, bytes)) ||
      !counted(calls, "cudaMalloc", cudaMalloc(&d_out, bytes))) {
    return 1;
  }
  if (!counted(calls, "cudaMemcpy", cudaMemcpy(d_x, x.data(), bytes, cudaMemcpyHostToDevice)) ||
      !counted(calls, "cudaMemcpy", cudaMemcpy(d_y, y.data(), bytes, cudaMemcpyHostToDevice))) {
    return 1;
  }
  t.h2d_bytes += 2 * long(bytes);

  dim3 block(256);
  dim3 grid((n + block.x - 1) / block.x);
  cudaStream_t stream = nullptr;
  ns::axpy<float><<<grid, block, 0, stream>>>(n, 2.0f, d_x, d_y);
  calls.add_launch(kAxpySite);
  ++t.axpy_launches;
  square_kernel<<<grid, block>>>(d_out, d_x, n);
  calls.add_launch(kSquareSite);
  ++t.square_launches;
  if (!counted(calls, "cudaGetLastError", cudaGetLastError())) return 1;

  // x is only read by the kernels, so it must come back exactly as it went in.
  if (!counted(calls, "cudaMemcpy", cudaMemcpy(back.data(), d_x, bytes, cudaMemcpyDeviceToHost))) {
    return 1;
  }
  t.d2h_bytes += long(bytes);
  if (std::memcmp(back.data(), x.data(), bytes) != 0) {
    std::fprintf(stderr, "error: the bytes copied back differ from the bytes copied in\n");
    return 2;
  }
  ++t.verified;

  if (!counted(calls, "cudaFree", cudaFree(d_x)) || !counted(calls, "cudaFree", cudaFree(d_y)) ||
      !counted(calls, "cudaFree", cudaFree(d_out))) {
    return 1;
  }
  if (!counted(calls, "cudaDeviceSynchronize", cudaDeviceSynchronize())) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 3) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long iterations = argc > 1 ? parse_count(argv[1], "iterations", kUsage) : 1;
  long elements = argc > 2 ? parse_count(argv[2], "elements", kUsage) : 1 << 20;
  if (elements == 0 || elements > (1l << 28)) {
    std::fprintf(stderr, "error: elements must be from 1 to %ld\nusage: %s\n", 1l << 28, kUsage);
    return 64;
  }
  int n = int(elements);
  std::vector<float> x(n), y(n), back(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 1000) * 0.5f;
    y[i] = float(i % 7);
  }

  CallCounter calls;
  Totals totals;
  int rc = 0;
  for (long i = 0; i < iterations && rc == 0; ++i) rc = iterate(n, calls, totals, x, y, back);
  print_summary(iterations, elements, totals, calls);
  return rc;
}
