// The simulated driver, libcuda.so.1: cuGetProcAddress's version rule, kernel naming through
// modules, libraries and kernels, launch timings, graphs, and the runtime reaching the driver.
// As an application sees the driver: cuda.h maps cuMemAlloc to cuMemAlloc_v2 and so on.
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/sync.h"
#include "process.h"
#include "simcuda.h"

namespace simcuda {
namespace {

constexpr uint64_t kMs = 1000000;

// Two kernels named as the simulated driver's module convention says (simcuda.h).
constexpr char kImage[] = "SIMCUDA-MODULE-1\0first_kernel\0second_sleep_us_300\0";
constexpr char kLongImage[] = "SIMCUDA-MODULE-1\0blocker_sleep_us_40000\0";

void init() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }

struct Lookup {
  CUresult result;
  void* pfn;
  CUdriverProcAddressQueryResult status;
};

Lookup lookup(const char* symbol, int version, cuuint64_t flags = 0) {
  Lookup l{CUDA_ERROR_UNKNOWN, reinterpret_cast<void*>(1), CUdriverProcAddressQueryResult(-1)};
  l.result = cuGetProcAddress_v2(symbol, &l.pfn, version, flags, &l.status);
  return l;
}

void* found(const char* symbol, int version, cuuint64_t flags = 0) {
  Lookup l = lookup(symbol, version, flags);
  EXPECT_EQ(l.result, CUDA_SUCCESS) << symbol << "@" << version;
  EXPECT_EQ(l.status, CU_GET_PROC_ADDRESS_SUCCESS) << symbol << "@" << version;
  EXPECT_NE(l.pfn, nullptr);
  return l.pfn;
}

void* exported(const char* name) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(lib, nullptr);
  return lib == nullptr ? nullptr : dlsym(lib, name);
}

std::string library_of(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  return path.substr(path.rfind('/') + 1);
}

// A CUarray is a cudaArray_t: made by the driver, described and copied by the runtime, and back.
TEST(DriverArrays, AreTheRuntimesArrays) {
  init();
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 8;
  d.Height = 4;
  d.Depth = 3;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  d.NumChannels = 2;
  d.Flags = CUDA_ARRAY3D_LAYERED;
  CUarray array = nullptr;
  ASSERT_EQ(cuArray3DCreate(&array, &d), CUDA_SUCCESS);
  cudaChannelFormatDesc channels{};
  cudaExtent extent{};
  unsigned flags = 0;
  ASSERT_EQ(cudaArrayGetInfo(&channels, &extent, &flags, reinterpret_cast<cudaArray_t>(array)), cudaSuccess);
  EXPECT_EQ(channels.x, 16);
  EXPECT_EQ(channels.y, 16);
  EXPECT_EQ(channels.z, 0);
  EXPECT_EQ(channels.f, cudaChannelFormatKindUnsigned);
  EXPECT_EQ(extent.depth, 3u);
  EXPECT_EQ(flags, unsigned(cudaArrayLayered));
  std::vector<uint32_t> in(8 * 4 * 3), out(in.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u);
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{in.data(), 8 * sizeof(uint32_t), 8, 4};
  p.dstArray = reinterpret_cast<cudaArray_t>(array);
  p.extent = cudaExtent{8, 4, 3};
  p.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&p), cudaSuccess);
  std::swap(p.srcArray, p.dstArray);
  p.dstPtr = cudaPitchedPtr{out.data(), 8 * sizeof(uint32_t), 8, 4};
  p.srcPtr = cudaPitchedPtr{};
  p.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&p), cudaSuccess);
  EXPECT_EQ(out, in);

  cudaArray_t made = nullptr;
  const cudaChannelFormatDesc f = cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
  ASSERT_EQ(cudaMallocArray(&made, &f, 5, 0), cudaSuccess);
  CUDA_ARRAY_DESCRIPTOR got{};
  ASSERT_EQ(cuArrayGetDescriptor(&got, reinterpret_cast<CUarray>(made)), CUDA_SUCCESS);
  EXPECT_EQ(got.Width, 5u);
  EXPECT_EQ(got.Height, 0u);
  EXPECT_EQ(got.Format, CU_AD_FORMAT_FLOAT);
  EXPECT_EQ(got.NumChannels, 4u);
  EXPECT_EQ(cuArrayDestroy(reinterpret_cast<CUarray>(made)), CUDA_SUCCESS);
  EXPECT_EQ(cudaFreeArray(made), cudaErrorInvalidValue);

  d.NumChannels = 3;
  EXPECT_EQ(cuArray3DCreate(&array, &d), CUDA_ERROR_INVALID_VALUE);
  d.NumChannels = 1;
  d.Flags = CUDA_ARRAY3D_CUBEMAP;  // not square, not six faces
  EXPECT_EQ(cuArray3DCreate(&array, &d), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayDestroy(reinterpret_cast<CUarray>(p.srcArray)), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(reinterpret_cast<CUarray>(p.srcArray)), CUDA_ERROR_INVALID_HANDLE);
  cudaGetLastError();
}

TEST(DriverDevices, APciBusIdNamesItsDeviceBothWays) {
  init();
  char id[13] = {};
  ASSERT_EQ(cuDeviceGetPCIBusId(id, sizeof id, 0), CUDA_SUCCESS);
  int bus = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), CUDA_SUCCESS);
  char expected[13];
  std::snprintf(expected, sizeof expected, "0000:%02x:00.0", bus);
  EXPECT_STREQ(id, expected);
  CUdevice found = -1;
  ASSERT_EQ(cuDeviceGetByPCIBusId(&found, id), CUDA_SUCCESS);
  EXPECT_EQ(found, 0);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&found, "0000:ff:00.0"), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&found, "not an id"), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetPCIBusId(id, sizeof id, 99), CUDA_ERROR_INVALID_DEVICE);
  int least = 1, greatest = 1;
  ASSERT_EQ(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
}

// What XLA asks of the driver past the runtime's calls (JAX's CUDA plug-in reaches the driver alone).
TEST(DriverBasics, TheCallsXlaMakesBeyondTheRuntimes) {
  init();
  CUcontext ctx;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUstream high, low;
  ASSERT_EQ(cuStreamCreateWithPriority(&high, CU_STREAM_NON_BLOCKING, -100), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreateWithPriority(&low, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamCreateWithPriority(&low, 0x80, 0), CUDA_ERROR_INVALID_VALUE);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  ASSERT_EQ(cuStreamIsCapturing(high, &capture), CUDA_SUCCESS);
  EXPECT_EQ(capture, CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_EQ(cuStreamBeginCapture_v2(high, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamIsCapturing(high, &capture), CUDA_SUCCESS);
  EXPECT_EQ(capture, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(high, &graph), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);

  // A host function runs once the stream reaches it, after the event the stream waits for.
  CUevent event;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(event, low), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(high, event, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamWaitEvent(high, event, 0x80), CUDA_ERROR_INVALID_VALUE);
  int ran = 0;
  ASSERT_EQ(cuLaunchHostFunc(high, [](void* flag) { ++*static_cast<int*>(flag); }, &ran), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(high), CUDA_SUCCESS);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cuLaunchHostFunc(high, nullptr, &ran), CUDA_ERROR_INVALID_VALUE);

  // Pinned host memory and what a pointer is.
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  unsigned type = 0;
  ASSERT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(uintptr_t(pinned) + 16)),
            CUDA_SUCCESS);
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_HOST));
  CUdeviceptr device_memory = 0;
  ASSERT_EQ(cuMemAlloc(&device_memory, 1 << 20), CUDA_SUCCESS);
  int ordinal = -1;
  size_t size = 0;
  CUdeviceptr start = 0;
  ASSERT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device_memory + 100), CUDA_SUCCESS);
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_DEVICE));
  ASSERT_EQ(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device_memory + 100), CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 0);
  ASSERT_EQ(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, device_memory + 100), CUDA_SUCCESS);
  EXPECT_EQ(start, device_memory);
  ASSERT_EQ(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, device_memory + 100), CUDA_SUCCESS);
  EXPECT_EQ(size, size_t(1) << 20);
  int on_stack = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(uintptr_t(&on_stack))),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeHost(reinterpret_cast<char*>(pinned) + 16), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(device_memory), CUDA_SUCCESS);

  // A module from a fatbin pointer; its kernel's attributes and cache preference.
  CUmodule module;
  ASSERT_EQ(cuModuleLoadFatBinary(&module, kImage), CUDA_SUCCESS);
  CUfunction f;
  ASSERT_EQ(cuModuleGetFunction(&f, module, "first_kernel"), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 << 10), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 228 << 10), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 32), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);

  // A TMA descriptor of a 64 x 64 float matrix in 32 x 32 boxes.
  CUtensorMap map;
  const cuuint64_t dims[2] = {64, 64}, strides[1] = {64 * sizeof(float)};
  const cuuint32_t box[2] = {32, 32}, element_strides[2] = {1, 1};
  ASSERT_EQ(cuMemAlloc(&device_memory, 64 * 64 * sizeof(float)), CUDA_SUCCESS);
  void* global = reinterpret_cast<void*>(uintptr_t(device_memory));
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, global, dims, strides, box,
                                   element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, static_cast<char*>(global) + 4, dims,
                                   strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(device_memory), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
  ASSERT_EQ(cuEventDestroy(event), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(high), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(low), CUDA_SUCCESS);
}

TEST(DriverProcAddress, PicksTheNewestVersionNotNewerThanTheOneAskedFor) {
  // cuMemAlloc's second version (cuMemAlloc_v2) came with 3.2; every later request gets it.
  void* v2 = found("cuMemAlloc", 3020);
  EXPECT_EQ(found("cuMemAlloc", 13000), v2);
  EXPECT_EQ(found("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), v2);
  // cuStreamBeginCapture gained a mode argument (cuStreamBeginCapture_v2) in 10.1.
  void* capture_v1 = found("cuStreamBeginCapture", 10000);
  void* capture_v2 = found("cuStreamBeginCapture", 10010);
  EXPECT_NE(capture_v1, capture_v2);
  EXPECT_EQ(found("cuStreamBeginCapture", 10009), capture_v1);
  EXPECT_EQ(found("cuStreamBeginCapture", 13000), capture_v2);
  // cuCtxSynchronize takes its context from 13.0 on.
  EXPECT_NE(found("cuCtxSynchronize", 12090), found("cuCtxSynchronize", 13000));
}

TEST(DriverProcAddress, ThePerThreadFlagPicksThePerThreadFlavourWhereOneExists) {
  void* legacy = found("cuLaunchKernel", 13000);
  void* per_thread = found("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  EXPECT_NE(legacy, per_thread);
  EXPECT_EQ(found("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM), legacy);
  // cuLaunchKernel_ptsz came with 7.0: an older request gets the legacy flavour.
  EXPECT_EQ(found("cuLaunchKernel", 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), legacy);
  // cuStreamBeginCapture_v2_ptsz for 10.1, cuStreamBeginCapture_ptsz before.
  void* capture_ptsz_v1 =
      found("cuStreamBeginCapture", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  void* capture_ptsz_v2 =
      found("cuStreamBeginCapture", 10010, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  EXPECT_NE(capture_ptsz_v1, capture_ptsz_v2);
  EXPECT_NE(capture_ptsz_v2, found("cuStreamBeginCapture", 10010));

  // The per-thread flavour really queues on the calling thread's default stream for stream 0.
  init();
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, kLongImage), CUDA_SUCCESS);
  CUfunction f;
  ASSERT_EQ(cuModuleGetFunction(&f, m, "blocker_sleep_us_40000"), CUDA_SUCCESS);
  auto launch_ptsz = reinterpret_cast<PFN_cuLaunchKernel_v7000_ptsz>(per_thread);
  ASSERT_EQ(launch_ptsz(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(CU_STREAM_LEGACY), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

TEST(DriverProcAddress, UnknownSymbolsAndTooOldVersionsAreNotFound) {
  Lookup unknown = lookup("cuNoSuchFunction", 13000);
  EXPECT_EQ(unknown.result, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(unknown.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(unknown.pfn, nullptr);
  // Symbols are asked for without their version suffix.
  EXPECT_EQ(lookup("cuMemAlloc_v2", 13000).status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  Lookup too_old = lookup("cuLibraryLoadData", 11080);
  EXPECT_EQ(too_old.result, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(too_old.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(too_old.pfn, nullptr);
  // Only the 64-bit memory functions are implemented: 2.0's cuMemAlloc is not there.
  EXPECT_EQ(lookup("cuMemAlloc", 3010).status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  void* pfn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2(nullptr, &pfn, 13000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", &pfn, 13000, 4, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(DriverProcAddress, CuGetProcAddressItselfHasTwoVersions) {
  auto v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(found("cuGetProcAddress", 11030));
  auto v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(found("cuGetProcAddress", 12000));
  ASSERT_NE(reinterpret_cast<void*>(v1), reinterpret_cast<void*>(v2));
  void* init_v1 = nullptr;
  ASSERT_EQ(v1("cuInit", &init_v1, 13000, 0), CUDA_SUCCESS);
  void* init_v2 = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  ASSERT_EQ(v2("cuInit", &init_v2, 13000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(init_v1, init_v2);
  EXPECT_EQ(v2("cuGetProcAddress", &init_v2, 11020, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(DriverProcAddress, MostAddressesAreInternalFunctionsNotExports) {
  // Internal: inside libcuda.so.1 but not the export of the same version.
  for (const char* sym : {"cuMemAlloc", "cuLaunchKernel", "cuGetProcAddress", "cuStreamSynchronize"}) {
    void* p = found(sym, 13000);
    EXPECT_EQ(library_of(p), "libcuda.so.1") << sym;
  }
  EXPECT_NE(found("cuMemAlloc", 13000), exported("cuMemAlloc_v2"));
  EXPECT_NE(found("cuLaunchKernel", 13000), exported("cuLaunchKernel"));
  EXPECT_NE(found("cuGetProcAddress", 12000), exported("cuGetProcAddress_v2"));
  // These few are the exports themselves.
  EXPECT_EQ(found("cuInit", 13000), exported("cuInit"));
  EXPECT_EQ(found("cuDriverGetVersion", 13000), exported("cuDriverGetVersion"));
  // And an internal function works as its export does.
  init();
  auto alloc = reinterpret_cast<PFN_cuMemAlloc_v3020>(found("cuMemAlloc", 13000));
  CUdeviceptr p = 0;
  ASSERT_EQ(alloc(&p, 4096), CUDA_SUCCESS);
  EXPECT_NE(p, 0u);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

TEST(DriverBasics, VersionDevicesContextsAndErrors) {
  int version = 0;
  ASSERT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
  init();
  int count = 0;
  ASSERT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, config().device_count);
  CUdevice dev;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  ASSERT_EQ(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Simulated CUDA Device 0");
  int warp = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_SUCCESS);
  EXPECT_EQ(warp, 32);
  CUcontext ctx = nullptr, current = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, ctx);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  const char* text = nullptr;
  ASSERT_EQ(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_INVALID_HANDLE");
  ASSERT_EQ(cuGetErrorString(CUDA_ERROR_NOT_FOUND, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "named symbol not found");
  EXPECT_EQ(cuGetErrorName(CUresult(12345), &text), CUDA_ERROR_INVALID_VALUE);
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

// One description of the device: the driver's attributes are the runtime's, value for value.
TEST(DriverBasics, AttributesAndMemoryAreTheRuntimes) {
  init();
  for (int attribute = 1; attribute < int(CU_DEVICE_ATTRIBUTE_MAX); ++attribute) {
    int from_driver = -7, from_runtime = -8;
    ASSERT_EQ(cuDeviceGetAttribute(&from_driver, CUdevice_attribute(attribute), 0), CUDA_SUCCESS) << attribute;
    if (attribute < int(cudaDevAttrMax)) {
      ASSERT_EQ(cudaDeviceGetAttribute(&from_runtime, cudaDeviceAttr(attribute), 0), cudaSuccess) << attribute;
      EXPECT_EQ(from_driver, from_runtime) << attribute;
    }
  }
  int clock = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0), CUDA_SUCCESS);
  EXPECT_GT(clock, 0);
  int ignored = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&ignored, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  size_t bytes = 0;
  ASSERT_EQ(cuDeviceTotalMem(&bytes, 0), CUDA_SUCCESS);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(bytes, prop.totalGlobalMem);
}

// cuCtxCreate pushes a context of its own; the stack pops back to what was current before.
TEST(DriverBasics, CreatedContextsStackOnTheirThread) {
  init();
  std::thread fresh([] {
    CUcontext primary = nullptr, created = nullptr, current = nullptr, popped = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxCreate(&created, nullptr, 0, 0), CUDA_SUCCESS);
    EXPECT_NE(created, primary);
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, created);
    CUdevice dev = -1;
    ASSERT_EQ(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 0);
    ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    EXPECT_EQ(popped, created);
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, primary);
    ASSERT_EQ(cuCtxPushCurrent(created), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxDestroy(created), CUDA_SUCCESS);  // current here: popped as it goes
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, primary);
    EXPECT_EQ(cuCtxDestroy(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxPushCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxDestroy(primary), CUDA_ERROR_INVALID_CONTEXT);
    ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  });
  fresh.join();
}

TEST(DriverModules, KernelsAreNamedByTheImageThroughModulesLibrariesAndKernels) {
  init();
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, kImage), CUDA_SUCCESS);
  CUfunction first, second, missing;
  ASSERT_EQ(cuModuleGetFunction(&first, m, "first_kernel"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&second, m, "second_sleep_us_300"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&missing, m, "third"), CUDA_ERROR_NOT_FOUND);
  const char* name = nullptr;
  ASSERT_EQ(cuFuncGetName(&name, first), CUDA_SUCCESS);
  EXPECT_STREQ(name, "first_kernel");
  ASSERT_EQ(cuFuncGetName(&name, second), CUDA_SUCCESS);
  EXPECT_STREQ(name, "second_sleep_us_300");

  CUlibrary lib;
  ASSERT_EQ(cuLibraryLoadData(&lib, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel k;
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "second_sleep_us_300"), CUDA_SUCCESS);
  ASSERT_EQ(cuKernelGetName(&name, k), CUDA_SUCCESS);
  EXPECT_STREQ(name, "second_sleep_us_300");
  CUfunction from_kernel;
  ASSERT_EQ(cuKernelGetFunction(&from_kernel, k), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetName(&name, from_kernel), CUDA_SUCCESS);
  EXPECT_STREQ(name, "second_sleep_us_300");
  // A module is not a library.
  EXPECT_EQ(cuLibraryGetKernel(&k, reinterpret_cast<CUlibrary>(m), "first_kernel"),
            CUDA_ERROR_INVALID_HANDLE);

  // An image without the convention's magic loads, with no kernels.
  CUmodule plain;
  ASSERT_EQ(cuModuleLoadData(&plain, "\x7f" "ELF whatever"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&missing, plain, "first_kernel"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleLoadData(&plain, nullptr), CUDA_ERROR_INVALID_VALUE);

  // Unloaded kernels cannot be launched or named.
  ASSERT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(first, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetName(&name, first), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(plain), CUDA_SUCCESS);
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What nvcc -fatbin and -cubin write (module_kernels.cu): the kernels are found by their names, the
// mangled one of a template instance too, and a device function is not a kernel.
TEST(DriverModules, ARealFatbinOrCubinNamesItsKernels) {
  init();
  for (const char* path : {MODULE_FATBIN, MODULE_CUBIN}) {
    SCOPED_TRACE(path);
    std::string image = read_file(path);
    ASSERT_FALSE(image.empty());
    CUmodule m;
    ASSERT_EQ(cuModuleLoadData(&m, image.data()), CUDA_SUCCESS);
    CUfunction scale, fill, missing;
    ASSERT_EQ(cuModuleGetFunction(&scale, m, "scale_sleep_us_30"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&fill, m, "_Z4fillIiEvPT_S0_i"), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleGetFunction(&missing, m, "_Z5twicef"), CUDA_ERROR_NOT_FOUND);
    // The name's rule gives the kernel its device time, as for any simulated kernel.
    CUevent start, stop;
    ASSERT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&stop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(start, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel(scale, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(stop, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuEventSynchronize(stop), CUDA_SUCCESS);
    float ms = 0;
    ASSERT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
    EXPECT_GE(ms, 0.030f - 1e-6f);
    EXPECT_EQ(cuEventDestroy(start), CUDA_SUCCESS);
    EXPECT_EQ(cuEventDestroy(stop), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  }
}

// Measures the events around `issue` on a fresh stream, behind a 40 ms blocker so that the stream
// is never idle in between: the elapsed time is then exactly the work's device time.
template <class Issue>
int64_t device_time_ns(Issue issue) {
  init();
  CUmodule m;
  EXPECT_EQ(cuModuleLoadData(&m, kLongImage), CUDA_SUCCESS);
  CUfunction blocker;
  EXPECT_EQ(cuModuleGetFunction(&blocker, m, "blocker_sleep_us_40000"), CUDA_SUCCESS);
  CUstream s;
  CUevent start, stop;
  EXPECT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  EXPECT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuEventCreate(&stop, 0), CUDA_SUCCESS);
  uint64_t t0 = now_ns();
  EXPECT_EQ(cuLaunchKernel(blocker, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuEventRecord(start, s), CUDA_SUCCESS);
  issue(s);
  EXPECT_EQ(cuEventRecord(stop, s), CUDA_SUCCESS);
  bool issued_while_busy = now_ns() < t0 + 40 * kMs;
  EXPECT_EQ(cuEventSynchronize(stop), CUDA_SUCCESS);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  EXPECT_TRUE(issued_while_busy) << "the machine was too slow to measure exactly";
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy(start), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy(stop), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  return int64_t(double(ms) * 1e6 + 0.5);
}

TEST(DriverLaunch, DurationsFollowTheModel) {
  CUmodule m;
  init();
  ASSERT_EQ(cuModuleLoadData(&m, kImage), CUDA_SUCCESS);
  CUfunction plain, sleepy;
  ASSERT_EQ(cuModuleGetFunction(&plain, m, "first_kernel"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&sleepy, m, "second_sleep_us_300"), CUDA_SUCCESS);
  // Three launches of the default duration and one of 300 us, by each launch entry point.
  int64_t ns = device_time_ns([&](CUstream s) {
    EXPECT_EQ(cuLaunchKernel(plain, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
    CUlaunchConfig c{};
    c.gridDimX = c.gridDimY = c.gridDimZ = 2;
    c.blockDimX = c.blockDimY = c.blockDimZ = 4;
    c.hStream = s;
    EXPECT_EQ(cuLaunchKernelEx(&c, plain, nullptr, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuLaunchCooperativeKernel(plain, 1, 1, 1, 1, 1, 1, 0, s, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuLaunchKernel(sleepy, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
  });
  EXPECT_NEAR(double(ns), double(3 * config().kernel_ns + 300000), 1000.0);
  // A launch's own duration through `extra`.
  uint64_t own = 123456;
  void* extra[] = {kLaunchParamDurationNs, &own, CU_LAUNCH_PARAM_END};
  ns = device_time_ns([&](CUstream s) {
    EXPECT_EQ(cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra), CUDA_SUCCESS);
  });
  EXPECT_NEAR(double(ns), double(own), 1000.0);
  // Invalid configurations and arguments.
  EXPECT_EQ(cuLaunchKernel(plain, 0, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(plain, 1, 1, 1, 1025, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  void* bad_extra[] = {reinterpret_cast<void*>(0x77), nullptr, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, bad_extra),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

TEST(DriverLaunch, ACapturedGraphReplaysItsKernels) {
  init();
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, kImage), CUDA_SUCCESS);
  CUfunction sleepy;
  ASSERT_EQ(cuModuleGetFunction(&sleepy, m, "second_sleep_us_300"), CUDA_SUCCESS);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(sleepy, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(sleepy, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
  // Nothing was queued while capturing; copies cannot be captured.
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);
  char host[16];
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoDAsync(d, host, sizeof host, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  ASSERT_EQ(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
  // A third node added by hand.
  CUgraphNode node;
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = sleepy;
  p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  ASSERT_EQ(cuGraphAddKernelNode(&node, graph, nullptr, 0, &p), CUDA_SUCCESS);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  int64_t ns = device_time_ns([&](CUstream on) {
    EXPECT_EQ(cuGraphLaunch(exec, on), CUDA_SUCCESS);
  });
  EXPECT_NEAR(double(ns), 3 * 300000.0, 1000.0);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

// How XLA builds its command buffers: nodes added through cuGraphAddNode_v2 (kernels, programmatic
// edges between them, empty nodes), their types read back, and kernel nodes given new parameters in
// the executable graph before it is launched again.
TEST(DriverLaunch, CommandBuffersAddNodesAndUpdateTheirKernels) {
  init();
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, kImage), CUDA_SUCCESS);
  CUfunction sleepy;
  ASSERT_EQ(cuModuleGetFunction(&sleepy, m, "second_sleep_us_300"), CUDA_SUCCESS);
  CUgraph graph;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUgraphNodeParams kernel{};
  kernel.type = CU_GRAPH_NODE_TYPE_KERNEL;
  kernel.kernel.func = sleepy;
  kernel.kernel.gridDimX = kernel.kernel.gridDimY = kernel.kernel.gridDimZ = 1;
  kernel.kernel.blockDimX = kernel.kernel.blockDimY = kernel.kernel.blockDimZ = 1;
  CUgraphNode first, second, last;
  ASSERT_EQ(cuGraphAddNode_v2(&first, graph, nullptr, nullptr, 0, &kernel), CUDA_SUCCESS);
  CUgraphEdgeData programmatic{};
  programmatic.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  ASSERT_EQ(cuGraphAddNode_v2(&second, graph, &first, &programmatic, 1, &kernel), CUDA_SUCCESS);
  CUgraphNodeParams empty{};
  empty.type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_EQ(cuGraphAddNode_v2(&last, graph, &second, nullptr, 1, &empty), CUDA_SUCCESS);
  CUgraphNodeParams event{};
  event.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  CUgraphNode refused;
  EXPECT_EQ(cuGraphAddNode_v2(&refused, graph, &last, nullptr, 1, &event), CUDA_ERROR_NOT_SUPPORTED);
  CUgraphNodeType type;
  ASSERT_EQ(cuGraphNodeGetType(second, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  ASSERT_EQ(cuGraphNodeGetType(last, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EMPTY);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  EXPECT_NEAR(double(device_time_ns([&](CUstream on) { EXPECT_EQ(cuGraphLaunch(exec, on), CUDA_SUCCESS); })),
              2 * 300000.0, 1000.0);
  // The second kernel now runs for 100 us; an empty node takes no kernel parameters.
  uint64_t shorter = 100000;
  void* extra[] = {kLaunchParamDurationNs, &shorter, CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS update{};
  update.func = sleepy;
  update.gridDimX = update.gridDimY = update.gridDimZ = update.blockDimX = update.blockDimY = update.blockDimZ = 1;
  update.extra = extra;
  ASSERT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, second, &update), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, last, &update), CUDA_ERROR_INVALID_VALUE);
  EXPECT_NEAR(double(device_time_ns([&](CUstream on) { EXPECT_EQ(cuGraphLaunch(exec, on), CUDA_SUCCESS); })),
              300000.0 + 100000.0, 1000.0);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

TEST(DriverMemory, CopiesAndMemsetsMoveTheBytes) {
  init();
  constexpr size_t kN = 256;
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, kN * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemsetD32(d, 0x01020304u, kN), CUDA_SUCCESS);
  unsigned back[kN] = {};
  ASSERT_EQ(cuMemcpyDtoH(back, d, sizeof back), CUDA_SUCCESS);
  for (unsigned v : back) ASSERT_EQ(v, 0x01020304u);
  ASSERT_EQ(cuMemsetD8(d, 0xab, kN * 4), CUDA_SUCCESS);
  unsigned char bytes[kN * 4];
  ASSERT_EQ(cuMemcpyDtoH(bytes, d, sizeof bytes), CUDA_SUCCESS);
  for (unsigned char b : bytes) ASSERT_EQ(b, 0xab);
  unsigned src[kN];
  for (size_t i = 0; i < kN; ++i) src[i] = unsigned(i * 7);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(d, src, sizeof src, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(back, d, sizeof back, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(back, src, sizeof src), 0);
  // The device side must lie inside one allocation.
  EXPECT_EQ(cuMemcpyHtoD(d + 4, src, sizeof src), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD32(d + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
}

// The runtime's calls reach the driver when it is there, and the runtime works without it.
TEST(DriverRuntime, TheRuntimeLoadsTheDriverUnlessToldNot) {
  test::Result with = test::run({HELPER, "driver-route"}, test::on_simulator());
  EXPECT_EQ(with.exit_code, 0) << with.out << with.err;
  EXPECT_EQ(test::field(with.out, "driver-loaded"), "1") << with.out;
  EXPECT_EQ(test::field(with.out, "driver-route"), "ok") << with.out;
  test::Result without =
      test::run({HELPER, "driver-route"}, test::on_simulator({{"SIMCUDA_RUNTIME_DRIVER", "0"}}));
  EXPECT_EQ(without.exit_code, 0) << without.out << without.err;
  EXPECT_EQ(test::field(without.out, "driver-loaded"), "0") << without.out;
  EXPECT_EQ(test::field(without.out, "driver-route"), "ok") << without.out;
}

// The driver's occupancy calculator answers as the runtime's (the header's
// cudaOccupancyMaxPotentialBlockSize gives 1024 threads and a grid of 264 for every kernel here), and
// its function attributes are those cudaFuncGetAttributes reports.
TEST(DriverOccupancy, AnswersAsTheRuntimes) {
  init();
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, kImage), CUDA_SUCCESS);
  CUfunction f;
  ASSERT_EQ(cuModuleGetFunction(&f, m, "first_kernel"), CUDA_SUCCESS);
  int grid = 0, block = 0;
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 264);
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, nullptr, 0, 100), CUDA_SUCCESS);
  // Under a limit of 100: 64 threads a block fill a multiprocessor (32 blocks), where 100 leave 1600
  // of its 2048 threads resident.
  EXPECT_EQ(block, 64);
  EXPECT_EQ(grid, 32 * 132);
  int blocks = 0;
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0), CUDA_SUCCESS);
  EXPECT_EQ(blocks, 8);
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, 256, 0, 8), CUDA_ERROR_INVALID_VALUE);
  size_t smem = 0;
  ASSERT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(&smem, f, 2, 256), CUDA_SUCCESS);
  EXPECT_GT(smem, 0u);
  int regs = 0;
  ASSERT_EQ(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_SUCCESS);
  EXPECT_EQ(regs, 32);
  int ptx = 0;
  ASSERT_EQ(cuFuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f), CUDA_SUCCESS);
  EXPECT_EQ(ptx, 90);
  EXPECT_EQ(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

constexpr char kPtx[] =
    "// a comment\n.version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry jit_scale(\n .param .u64 p\n)\n{\n ret;\n}\n"
    ".entry jit_sleep_us_500()\n{\n ret;\n}\n"
    ".func not_a_kernel()\n{\n ret;\n}\n";

// ptxjit's route: PTX linked at run time into an image that loads as a module naming its kernels;
// and PTX loaded directly, with and without JIT options.
TEST(DriverModules, PtxIsLinkedAndLoadedWithItsKernels) {
  init();
  float wall = -1;
  char info[16] = "x", error[16] = "x";
  CUjit_option options[] = {CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
  void* values[] = {&wall, info, reinterpret_cast<void*>(uintptr_t(sizeof info)), error,
                    reinterpret_cast<void*>(uintptr_t(sizeof error)), reinterpret_cast<void*>(uintptr_t(1))};
  CUlinkState link;
  ASSERT_EQ(cuLinkCreate(6, options, values, &link), CUDA_SUCCESS);
  EXPECT_EQ(wall, 0.0f);
  EXPECT_STREQ(info, "");
  EXPECT_STREQ(error, "");
  void* image = nullptr;
  size_t size = 0;
  EXPECT_EQ(cuLinkComplete(link, &image, &size), CUDA_ERROR_INVALID_IMAGE);  // nothing added
  ASSERT_EQ(cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(kPtx), sizeof kPtx, "jit.ptx", 0, nullptr,
                          nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(cuLinkAddData(link, CU_JIT_INPUT_NVVM, const_cast<char*>(kPtx), sizeof kPtx, "jit.ll", 0, nullptr,
                          nullptr),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuLinkAddFile(link, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, nullptr, nullptr), CUDA_ERROR_FILE_NOT_FOUND);
  ASSERT_EQ(cuLinkComplete(link, &image, &size), CUDA_SUCCESS);
  CUmodule m;
  ASSERT_EQ(cuModuleLoadData(&m, image), CUDA_SUCCESS);
  CUfunction scale, sleeper, missing;
  EXPECT_EQ(cuModuleGetFunction(&scale, m, "jit_scale"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&sleeper, m, "jit_sleep_us_500"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&missing, m, "not_a_kernel"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuLinkDestroy(link), CUDA_SUCCESS);
  EXPECT_EQ(cuLinkDestroy(link), CUDA_ERROR_INVALID_HANDLE);
  // The module outlives the link.
  ASSERT_EQ(cuLaunchKernel(sleeper, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);

  ASSERT_EQ(cuModuleLoadData(&m, kPtx), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&scale, m, "jit_scale"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  std::strcpy(info, "x");
  ASSERT_EQ(cuModuleLoadDataEx(&m, kPtx, 3, options, values), CUDA_SUCCESS);
  EXPECT_STREQ(info, "");
  EXPECT_EQ(cuModuleGetFunction(&sleeper, m, "jit_sleep_us_500"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
}

// Virtual memory management, as PyTorch's expandable segments use it: one physical allocation
// mapped at two reserved addresses reads back through both what was copied through either, counts
// once against the device, and goes when both its handle and its mappings are gone.
TEST(DriverVirtualMemory, MappingsShareTheirPhysicalAllocation) {
  init();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  ASSERT_EQ(granularity, size_t(2) << 20);
  int vmm = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
  EXPECT_EQ(vmm, 1);

  size_t free_before = 0, free = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo(&free_before, &total), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle;
  EXPECT_EQ(cuMemCreate(&handle, granularity + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemCreate(&handle, 2 * granularity, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(free, free_before - 2 * granularity);

  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 4 * granularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&b, 2 * granularity, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(a % granularity, 0u);
  EXPECT_EQ(cuMemMap(a + granularity, 4 * granularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // too large
  ASSERT_EQ(cuMemMap(a, 2 * granularity, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(b, granularity, granularity, handle, 0), CUDA_SUCCESS);  // its second half
  EXPECT_EQ(cuMemMap(a, granularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
  CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  ASSERT_EQ(cuMemSetAccess(a, 2 * granularity, &access, 1), CUDA_SUCCESS);
  EXPECT_EQ(cuMemSetAccess(a, 3 * granularity, &access, 1), CUDA_ERROR_INVALID_VALUE);  // not all mapped

  // Device memory to the runtime: copied into through one address, read back through the other.
  std::vector<unsigned char> pattern(4096), back(4096, 0);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 7);
  void* second_half = reinterpret_cast<void*>(a + granularity);
  ASSERT_EQ(cudaMemcpy(second_half, pattern.data(), pattern.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), reinterpret_cast<void*>(b), back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, pattern);
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, reinterpret_cast<void*>(b)), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(a)), cudaErrorInvalidValue);  // not the runtime's to free

  CUmemGenericAllocationHandle retained;
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(b + 100)), CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  CUmemAllocationProp read{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&read, handle), CUDA_SUCCESS);
  EXPECT_EQ(read.location.id, 0);
  ASSERT_EQ(cuMemRelease(retained), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);
  // Still mapped, so still there and still counted.
  ASSERT_EQ(cudaMemcpy(back.data(), second_half, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, pattern);
  EXPECT_EQ(cuMemAddressFree(a, 4 * granularity), CUDA_ERROR_INVALID_VALUE);  // a mapping is in it
  ASSERT_EQ(cuMemUnmap(a, 2 * granularity), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(b, granularity), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(free, free_before);
  EXPECT_EQ(cudaMemcpy(back.data(), second_half, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cuMemAddressFree(a, 2 * granularity), CUDA_ERROR_INVALID_VALUE);  // not the whole reservation
  EXPECT_EQ(cuMemAddressFree(a, 4 * granularity), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(b, 2 * granularity), CUDA_SUCCESS);

  // Mappings side by side (vectorAddMMAP stripes its buffers so) unmap together, whole; a range that
  // would split one is refused.
  ASSERT_EQ(cuMemCreate(&handle, 2 * granularity, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&a, 3 * granularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(a, granularity, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(a + granularity, 2 * granularity, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemUnmap(a, 2 * granularity), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemUnmap(a, 3 * granularity), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 3 * granularity), CUDA_SUCCESS);
  cudaGetLastError();
}

// The real runtime initialises the driver on its first call that needs a device, so a library using
// the driver after cudaGetDeviceCount works without a cuInit of its own (PyTorch's
// cuDevicePrimaryCtxGetState, samples' cuCtxGetDevice after cudaSetDevice).
TEST(DriverRuntime, TheRuntimesFirstDeviceCallInitialisesTheDriver) {
  test::Result r = test::run({HELPER, "driver-init"}, test::on_simulator());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(test::field(r.out, "driver-init"), "ok") << r.out;
}

// As with the real runtime, a thread's first runtime work makes device 0's primary context current
// in the driver (PyTorch checks with cuCtxGetCurrent before every cuBLAS call), until the thread sets
// one itself.
TEST(DriverRuntime, TheRuntimeMakesThePrimaryContextCurrent) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext primary = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
  std::thread fresh([&] {
    CUcontext current = primary;
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, nullptr);
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, primary);
    ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, nullptr);
    EXPECT_EQ(cudaFree(p), cudaSuccess);
  });
  fresh.join();
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

}  // namespace
}  // namespace simcuda
