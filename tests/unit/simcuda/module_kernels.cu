// Compiled to a fatbin and a cubin at build time (tests/unit/simcuda/CMakeLists.txt): the simulated
// driver names a real module image's kernels from its cubins.
__device__ __noinline__ float twice(float x) { return 2 * x; }

extern "C" __global__ void scale_sleep_us_30(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = twice(data[i]);
}

template <class T>
__global__ void fill(T* data, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = value;
}

template __global__ void fill<int>(int*, int, int);
