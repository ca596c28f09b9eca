// A program on the driver API alone, as code that loads its own kernels does: it loads a module
// and a library whose images name their kernels (the simulated driver's convention, simcuda.h),
// launches them every way the driver offers (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel,
// a captured graph), copies, sets and frees memory, and synchronises.
//
// usage: sim_driver_launch [launches=4]
// stdout: "launches <kernel> N" for each kernel (graph replays included), "graph nodes N",
//         "verified 1", "bytes HtoD N", "bytes DtoH N", "elapsed ok 1", then
//         "calls <exported function> N" for every driver call the program made, sorted.
// exit:   0 on success, 1 when a driver call fails, 2 when the data or timings are wrong.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr const char kUsage[] = "sim_driver_launch [launches=4]";

// The module image names two kernels; the library one more. The tail kernel takes 200 us.
constexpr char kModuleImage[] = "SIMCUDA-MODULE-1\0vec_scale\0tail_sleep_us_200\0";
constexpr char kLibraryImage[] = "SIMCUDA-MODULE-1\0lib_fill\0";

std::map<std::string, long> g_calls;

// The exported name a call binds to, after cuda.h's macros (cuMemAlloc is cuMemAlloc_v2).
#define NAME_OF(fn) NAME_OF_EXPANDED(fn)
#define NAME_OF_EXPANDED(fn) #fn

#define CALL(fn, ...)                                                                      \
  do {                                                                                     \
    ++g_calls[NAME_OF(fn)];                                                                \
    CUresult r_ = fn(__VA_ARGS__);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                              \
      const char* name_ = nullptr;                                                         \
      cuGetErrorName(r_, &name_);                                                          \
      std::fprintf(stderr, "error: %s returned %d %s\n", NAME_OF(fn), int(r_),            \
                   name_ != nullptr ? name_ : "?");                                        \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int run(long launches) {
  constexpr size_t kElements = 1024;
  constexpr size_t kBytes = kElements * sizeof(unsigned);
  std::map<std::string, long> launched;

  CALL(cuInit, 0);
  CUdevice dev;
  CALL(cuDeviceGet, &dev, 0);
  CUcontext ctx;
  CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
  CALL(cuCtxSetCurrent, ctx);

  CUmodule module;
  CALL(cuModuleLoadData, &module, kModuleImage);
  CUfunction scale, tail;
  CALL(cuModuleGetFunction, &scale, module, "vec_scale");
  CALL(cuModuleGetFunction, &tail, module, "tail_sleep_us_200");
  const char* scale_name = nullptr;
  const char* tail_name = nullptr;
  CALL(cuFuncGetName, &scale_name, scale);
  CALL(cuFuncGetName, &tail_name, tail);

  CUlibrary library;
  CALL(cuLibraryLoadData, &library, kLibraryImage, nullptr, nullptr, 0, nullptr, nullptr, 0);
  CUkernel fill_kernel;
  CALL(cuLibraryGetKernel, &fill_kernel, library, "lib_fill");
  CUfunction fill;
  CALL(cuKernelGetFunction, &fill, fill_kernel);
  const char* fill_name = nullptr;
  CALL(cuFuncGetName, &fill_name, fill);

  CUstream stream;
  CALL(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  CUevent start, stop;
  CALL(cuEventCreate, &start, CU_EVENT_DEFAULT);
  CALL(cuEventCreate, &stop, CU_EVENT_DEFAULT);

  std::vector<unsigned> host(kElements), back(kElements);
  for (size_t i = 0; i < kElements; ++i) host[i] = unsigned(i * 2654435761u);
  CUdeviceptr d = 0;
  CALL(cuMemAlloc, &d, kBytes);
  CALL(cuMemsetD8, d, 0, kBytes);
  CALL(cuMemcpyHtoD, d, host.data(), kBytes);
  long h2d = kBytes, d2h = 0;

  void* args[] = {&d};
  for (long i = 0; i < launches; ++i) {
    CALL(cuLaunchKernel, scale, 4, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
    ++launched[scale_name];
  }
  CALL(cuLaunchCooperativeKernel, scale, 2, 1, 1, 128, 1, 1, 0, nullptr, args);
  ++launched[scale_name];

  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 64;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  CALL(cuLaunchKernelEx, &config, fill, args, nullptr);
  ++launched[fill_name];

  // Two tail kernels captured into a graph and replayed: 400 us between the events at least.
  CALL(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CALL(cuLaunchKernel, tail, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr);
  CALL(cuLaunchKernel, tail, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr);
  CUgraph graph;
  CALL(cuStreamEndCapture, stream, &graph);
  CUgraphExec exec;
  CALL(cuGraphInstantiate, &exec, graph, 0);
  CALL(cuEventRecord, start, stream);
  CALL(cuGraphLaunch, exec, stream);
  CALL(cuEventRecord, stop, stream);
  launched[tail_name] += 2;
  CALL(cuStreamSynchronize, stream);
  float ms = 0;
  CALL(cuEventSynchronize, stop);
  CALL(cuEventElapsedTime, &ms, start, stop);
  bool elapsed_ok = ms >= 0.4f * (1 - 1e-6f);

  CALL(cuMemcpyDtoHAsync, back.data(), d, kBytes, stream);
  d2h += kBytes;
  CALL(cuMemcpyHtoDAsync, d, host.data(), kBytes, stream);
  h2d += kBytes;
  CALL(cuCtxSynchronize);
  bool verified = back == host;
  CALL(cuMemsetD32, d, 0xdeadbeef, kElements);
  CALL(cuMemcpyDtoH, back.data(), d, kBytes);
  d2h += kBytes;
  for (unsigned v : back) verified = verified && v == 0xdeadbeefu;

  CALL(cuGraphExecDestroy, exec);
  CALL(cuGraphDestroy, graph);
  CALL(cuEventDestroy, start);
  CALL(cuEventDestroy, stop);
  CALL(cuStreamDestroy, stream);
  CALL(cuMemFree, d);
  CALL(cuLibraryUnload, library);
  CALL(cuModuleUnload, module);
  CALL(cuDevicePrimaryCtxRelease, dev);

  for (const auto& [name, n] : launched) std::printf("launches %s %ld\n", name.c_str(), n);
  std::printf("graph nodes 2\n");
  std::printf("verified %d\n", verified ? 1 : 0);
  std::printf("bytes HtoD %ld\n", h2d);
  std::printf("bytes DtoH %ld\n", d2h);
  std::printf("elapsed ok %d\n", elapsed_ok ? 1 : 0);
  for (const auto& [name, n] : g_calls) std::printf("calls %s %ld\n", name.c_str(), n);
  return verified && elapsed_ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 4;
  if (argc > 2 || (argc == 2 && (launches = std::strtol(argv[1], nullptr, 10)) < 0)) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 1;
  }
  return run(launches);
}
