// The simulated CUDA device: its knobs and the timing guarantees tests may rely on.
//
// build/simcuda/lib/libcudart.so.13 is a replacement for the real CUDA runtime, compiled against the
// real headers and exporting the real version node, so any program built with `nvcc -cudart shared`
// (or linked against libcudart.so.13) runs on it with LD_LIBRARY_PATH=build/simcuda/lib. It needs no
// GPU and no driver. The device state (memory, streams, events, the device timeline, registered
// kernels) lives in libsimcuda-core.so beside it, so that the simulated driver, libraries and CUPTI
// beside it share one device with the runtime, as the real stack does.
//
// Knobs (environment variables, read once per process, when the library is first used):
//
//   SIMCUDA_DEVICE_COUNT       devices reported by cudaGetDeviceCount, 0..64 (default 1). With 0,
//                              device calls fail with cudaErrorNoDevice.
//   CUDA_VISIBLE_DEVICES       as CUDA takes it: comma-separated indices of those devices, which the
//                              process then sees as devices 0, 1, ... (names, UUIDs and PCI bus ids stay
//                              the installed devices'); the list ends at an entry that is no index.
//   SIMCUDA_KERNEL_NS          device time of one kernel launch in ns (default 20000).
//   SIMCUDA_COPY_GBPS          copy and memset bandwidth in GB/s = bytes per ns (default 10).
//   SIMCUDA_DEVICE_MEMORY_MIB  memory of each device in MiB (default 16384).
//   SIMCUDA_DRIVER_VERSION     what cudaDriverGetVersion and cuDriverGetVersion report (default 13000).
//   SIMCUDA_RUNTIME_DRIVER     0: the runtime does not load libcuda.so.1 (see below); default 1.
//   SIMCUDA_CUPTI_ERROR        a CUptiResult libcupti.so.13 injects (default none). 999
//                              (CUPTI_ERROR_UNKNOWN, as real CUPTI without a driver): cuptiSubscribe,
//                              cuptiActivityEnable, cuptiActivityFlushAll, cuptiActivityFlushPeriod,
//                              cuptiSetThreadIdType and cuptiActivityRegisterTimestampCallback fail
//                              with it; 39 (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED):
//                              cuptiSubscribe fails as if another tool had subscribed first.
//   SIMCUDA_CUPTI_SUBSCRIBE_DELAY_MS  cuptiSubscribe answers only after this many ms: a CUPTI that
//                              is slow to start, or hangs (default 0).
//   SIMCUDA_CUPTI_DEVICE_BUFFER_RECORDS  at most this many device records (kernels, copies, memsets)
//                              between two flushes; the rest are dropped and counted by
//                              cuptiActivityGetNumDroppedRecords (default 0 = no limit).
//
// A malformed value is ignored with one warning on stderr.
//
// Timing model. Device time is CLOCK_MONOTONIC in ns. Every operation queued on a stream gets, when it
// is issued, a start and an end time that never change afterwards:
//
//   start = max(time of the issuing call,
//               end of the previous operation in the same stream,
//               end of the last legacy-stream operation        (blocking streams, per-thread streams),
//               end of the last blocking-stream operation      (the legacy stream),
//               time of the event awaited                      (cudaStreamWaitEvent))
//   end   = start + duration
//
//   duration of a kernel        = 1000 * N ns if its (mangled) name contains "sleep_us_N" (N decimal),
//                                 else SIMCUDA_KERNEL_NS (kernels never execute device code)
//   duration of a copy, memset  = ceil(bytes / SIMCUDA_COPY_GBPS) ns (2D: width * height bytes)
//   duration of an event record, a stream wait, a host function = 0
//
// so operations in one stream never overlap and run in issue order, and operations in streams that do
// not wait for each other may overlap (there is no engine contention). A device thread performs each
// operation's effect (copying bytes, setting bytes, calling a host function) no earlier than its end
// time, in end-time order, and only then marks it complete. Guarantees:
//
//   - cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize and synchronous copies return
//     no earlier than the end time of every operation they wait for, with its effect done.
//   - cudaStreamQuery and cudaEventQuery return cudaErrorNotReady before that end time.
//   - An event's time is the start of its record operation, and cudaEventElapsedTime returns exactly
//     (end event time - start event time) / 1e6 ms. Two events recorded around operations in a stream
//     are therefore at least the sum of those durations apart, and exactly that sum apart when the
//     stream was never idle in between (e.g. the work was issued behind a long "sleep_us_" kernel).
//   - Kernel launches, async copies and memsets return without waiting for the device, except the
//     cases the CUDA documentation calls synchronous (below).
//
// Host-synchronous cases, as on real CUDA: cudaMemcpy, cudaMemcpy2D and the symbol copies wait for
// the copy unless it is device to device; cudaMemcpyAsync to pageable host memory waits for the copy
// (a pageable source is staged when the call is made, so the caller may reuse it at once);
// cudaMemset waits only when it sets pinned host memory; cudaFree waits for all work of the
// allocation's device and cudaFreeHost for all work of all devices. cudaDeviceReset waits for
// nothing: the device's queued work keeps its place in time but loses its effects, and its streams
// (other than the default ones), events and allocations are destroyed.
//
// Streams: 0 and cudaStreamLegacy are the legacy default stream of the current device, and
// cudaStreamPerThread (or 0 passed to a _ptsz/_ptds export) the calling thread's per-thread default
// stream, created on first use, blocking, and destroyed with its thread. Host functions
// (cudaLaunchHostFunc, cudaStreamAddCallback) run on the device thread and, as on real CUDA, must not
// call CUDA: a synchronising call from one never returns.
//
// Memory: device memory is host memory; every allocation is tracked (device, managed, pinned host,
// registered host). cudaMemGetInfo reports free = total - sum of live device and managed allocation
// sizes, each rounded up to 256 bytes. Device pointers are 256-byte aligned. Copies and memsets
// check that the device side lies inside one allocation (cudaErrorInvalidValue otherwise).
//
// CUDA arrays (core/arrays.h; cudaMallocArray, cudaMalloc3DArray with the layered, cubemap, surface
// load-store and texture-gather flags, and the driver's cuArrayCreate/cuArray3DCreate, one handle for
// both) are device memory holding their elements densely: width x height x depth (layers, 6 faces a
// cubemap layer) elements of (x+y+z+w)/8 bytes, counted by cudaMemGetInfo. Copies to, from and
// between them (the 2D, run and 3D copies and copy nodes) move exactly the box asked for, are refused
// with cudaErrorInvalidValue when it leaves the array, and are copies like any other: same timing,
// waiting and staging, made by the runtime itself as its 2D copies, with CUPTI's array copy kinds
// (HTOA, ATOH, ATOA, ATOD, DTOA; memory kind ARRAY). Texture and surface objects are validated handles
// that keep their descriptors: kernels never execute, so nothing ever fetches, filters or writes
// through one. Sparse, mipmapped and normalized-format arrays answer "not supported".
//
// Errors are the real runtime's codes, names and descriptions; failures are recorded as the calling
// thread's last error (cudaGetLastError, cudaPeekAtLastError), cudaErrorNotReady is not.
//
// Every library exports every function the real one exports (the one the build reads: the pinned
// wheels' runtime, cuBLAS, cuBLASLt and cuDNN, the toolkit's driver stub, CUDA 12's wheels for lib12),
// under the real symbol version, so that a framework linked against the real libraries loads on these
// (tests/unit/simcuda/exports_test.py checks it). What the hand-written sources do not implement is
// generated at build time (gen/gen_missing.py, from the headers and annotations the shim's wrappers
// are generated from) as a weak definition that answers as a library lacking the feature: the status
// cudaErrorNotSupported (also the thread's last error), CUDA_ERROR_NOT_SUPPORTED,
// CUBLAS_STATUS_NOT_SUPPORTED or CUDNN_STATUS_NOT_SUPPORTED, reported to the simulated CUPTI under
// its cbid where it has one; a function returning no status returns nothing, a string saying it is
// not supported (const char*), nullptr (other pointers) or zero. Exports no parsed header declares
// are defined only for the runtime (the graphics interop functions, all returning cudaError_t: a stub
// without parameters); the others (__cudaGetProcAddress, __cudaRegisterHostVar,
// __cudaRegisterUnifiedTable, cuBLAS's and cuDNN's backdoor functions, cuBLASLt's undocumented
// exports) are left out, and the generated missing/<library>.cpp in the build lists them.
//
// Real PyTorch (torch 2.15, CUDA 13 wheels) runs a training step on the simulated libraries preloaded,
// CUPTI included (tests/unit/simcuda/torch_test.py):
//   LD_LIBRARY_PATH=build/simcuda/lib LD_PRELOAD="build/simcuda/lib/libcudart.so.13
//     build/simcuda/lib/libcuda.so.1 build/simcuda/lib/libcublasLt.so.13
//     build/simcuda/lib/libcublas.so.13 build/simcuda/lib/libcudnn.so.9
//     build/simcuda/lib/libcupti.so.13" python train.py
// (preloaded, because torch's libraries find the nvidia-* wheels' copies through their RUNPATH, which
// LD_LIBRARY_PATH does not override; an object loaded under a soname satisfies every later reference
// to it). Its GEMMs compute (libs/host_gemm.h); its own kernels do not. The runtime makes device 0's
// primary context current in the driver on a thread's first use, as the real one does, so that
// cuCtxGetCurrent finds it (torch checks before cuBLAS), without driver calls a tracer would see.
// Real JAX (jax[cuda13]) runs a jitted step too, with the simulated NVML (libnvidia-ml.so.1, nvml/)
// preloaded as well: XLA's plug-in enumerates devices only through it (tests/unit/simcuda/jax_test.py).
// Not modelled yet: cuDNN beyond a convolution. Limits are kept and occupancy is the occupancy
// calculator's for this device and a kernel of 32 registers a thread (cudart/device.cpp); memory pools
// count their stream-ordered allocations and keep no freed memory (cudart/memory.cpp).
//
// The driver, libcuda.so.1 (driver/), is the subset of the driver API the tests use, over the same
// device: a runtime stream, event or kernel handle is a valid driver handle and the reverse. Its
// exports carry no symbol version, as the real libcuda's. cuGetProcAddress and cuGetProcAddress_v2
// (which also hand out cuSimFutureFunction, from version 13020: CUresult (void), declared by no header
// and exported by no library, an entry point of a driver newer than the toolkit; and cuGLInit, of the
// OpenGL interop header, as the real driver does to every runtime that asks)
// answer as the real driver does (the symbol without suffix, a CUDA version, flags 0, 1 =
// CU_GET_PROC_ADDRESS_LEGACY_STREAM or 2 = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM): the newest
// version of the entry point not newer than the one asked for, the per-thread flavour with flag 2
// where there is one, CUDA_ERROR_NOT_FOUND with CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND or
// CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT otherwise. Only the versions it implements are known to
// it (not the 32-bit legacy memory functions). Most addresses it hands out are internal functions
// of the library, not its exports, as with the real driver, so a tracer that only interposes on
// exports misses them; cuInit, cuDriverGetVersion, cuGetErrorName and cuGetErrorString come back as
// the exports themselves, and so do the entry points this file does not list (the generated ones, see
// above), at the versions cudaTypedefs.h lists. cuDevicePrimaryCtxGetState reports every primary
// context active with flags 0. The runtime's cudaGetDriverEntryPoint[ByVersion] (and _ptsz) ask the
// driver's cuGetProcAddress; cudaStreamGetCaptureInfo (CUDA 13) reports the capture status, the
// captured graph and its id as the capture id, and no dependencies. Deviations: a thread with no
// current context uses device 0's primary context (the real driver fails with
// CUDA_ERROR_INVALID_CONTEXT); cuInit is still required first.
//
// Modules: cuModuleLoadData and cuLibraryLoadData accept any non-null image. An image that starts
// with kModuleMagic (with its NUL) names its kernels: NUL-terminated names after the magic, ended by
// an empty name, e.g. "SIMCUDA-MODULE-1\0axpy\0sleep_us_50_kernel\0" (the literal's own NUL ends
// the list). A real fatbin (what `nvcc -fatbin` writes) or cubin holds the kernels its uncompressed
// cubins define (driver/cubin.h); any other image (PTX, a compressed cubin) holds no kernels. A kernel's duration follows from its name as below.
// A launch can be given its own duration with the extra argument {kLaunchParamDurationNs, &ns,
// CU_LAUNCH_PARAM_END} (ns a uint64_t): how the simulated libraries make a GEMM's time grow with
// its size. With {kLaunchParamEffect, &fn} (fn a std::function<void()>, moved from) the device
// thread calls fn when the launch ends, as it performs a copy: how a GEMM of the simulated cuBLAS and
// cuBLASLt writes its result (libs/host_gemm.h). A launch captured into a graph runs it at each replay.
//
// Graphs (core/graphs.h), one model for the runtime and the driver: stream capture (the runtime's
// cudaStreamBeginCapture ... cudaStreamEndCapture takes kernel launches, async copies between memories
// the device reaches and memsets; the driver's cuStreamBeginCapture takes kernel launches, and its
// copies and memsets on a capturing stream fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), graphs
// built node by node (the runtime's kernel, memset, 1D copy and empty nodes; the driver's kernel
// nodes), instantiation, and launch, which queues the graph's nodes on the stream one after another
// in the order they were added, so a launch takes the sum of its nodes' times. Graph ids and node
// ids are process-wide counters from 1.
//
// The runtime reaches the driver as the real CUDA 13 runtime does: on first need it dlopen()s
// "libcuda.so.1" (found beside it through its RUNPATH, or on LD_LIBRARY_PATH), dlsym()s
// cuGetProcAddress_v2, calls cuInit(0) and obtains with its CUDART_VERSION, through cuGetProcAddress,
// the driver functions behind cudaMalloc, cudaFree, cudaMemcpy, cudaMemcpyAsync, cudaMemset,
// cudaDeviceSynchronize, cudaStreamSynchronize and kernel launches (cuMemAlloc, cuMemFree,
// cuMemcpy*, cuMemsetD8, cuCtxSynchronize, cuStreamSynchronize, cuLaunchKernel; the _ptsz/_ptds
// flavours for its own). It still validates arguments itself, so its results are the same with or
// without the driver. Cheap calls (cudaGetDevice, cudaGetLastError, cudaStreamQuery, ...) never go
// through the driver. When libcuda.so.1 cannot be loaded, or SIMCUDA_RUNTIME_DRIVER=0 is set, the
// runtime works on the device directly, as it always did.
//
// CUPTI: libcupti.so.13 (cupti/cupti.cpp) implements the CUPTI Activity API with CUDA 13's record
// structs (CUpti_ActivityKernel10, Memcpy6, Memset4, Synchronization2, Memory4, API,
// ExternalCorrelation, GraphTrace2) for the kinds CONCURRENT_KERNEL, KERNEL, MEMCPY, MEMSET,
// SYNCHRONIZATION, MEMORY2, RUNTIME, DRIVER, EXTERNAL_CORRELATION and GRAPH_TRACE (others:
// CUPTI_ERROR_NOT_COMPATIBLE). The work of a graph launch carries graphId and graphNodeId; with
// GRAPH_TRACE enabled it gets no records of its own, and one GraphTrace2 record per launch, from its
// first node's start to its last node's end, with the launching call's correlation id, stands for it. The
// runtime and the driver report each API call that has a CUPTI cbid (every runtime export that
// returns a cudaError_t, not the __cudaRegister* family, __cudaPushCallConfiguration or
// cudaGetErrorName/String; every driver entry point but cuSimFutureFunction, whether called by
// export or through cuGetProcAddress) under CUDA 13's cbid of that export; device operations
// are reported when the device thread completes them, before they count as complete. Records carry
// the timeline's exact start and end. Correlation ids:
//   - every runtime and every driver call gets its own id from one process-wide counter,
//     increasing in the order calls are entered; the driver calls the runtime makes inside a
//     runtime call get ids of their own (an entry point implemented with another of its domain is
//     one call);
//   - a kernel carries the outermost call's id (the runtime call's when launched through the
//     runtime, else the driver call's), as do memsets, synchronisations and allocation records;
//   - a memcpy carries the driver call's id as correlationId (the runtime call's when the runtime
//     copied without the driver, as for 2D copies) and the runtime call's as runtimeCorrelationId
//     (0 when the driver was called directly).
// With no CUPTI loaded, or no activity kind enabled, every hook costs one relaxed atomic load and
// nothing about the device or its timing changes (core/activity.h).
//
// libcublasLt.so.13, libcublas.so.13 and libcudnn.so.9 do not use the runtime: each dlopen()s
// libcuda.so.1 and uses cuGetProcAddress, as the real CUDA 13 libraries do. A GEMM is one kernel
// launch (cuLaunchKernel) of gemm_duration_ns() whose effect writes its result (libs/host_gemm.h
// says which GEMMs are computed); cudnnConvolutionForward is an im2col kernel
// launched through the driver plus one cublasSgemm_v2 found with dlopen("libcublas.so.13") + dlsym,
// and cudnnActivationForward one kernel. Their kernels' names are the k*Kernel constants below.
//
// libcusparse.so.12 (handles, CSR and dense vector descriptors, cusparseSpMV as one kernel) and
// libcusolver.so.12 reach the driver the same way. libcusolver links the simulated cuBLAS and
// cuSPARSE, as the real one does, and calls them: a cuSOLVER dense handle owns a cuBLAS handle, a
// sparse handle a cuSPARSE handle, and a Cholesky factorization is a kernel per column block of
// kCholeskyBlock with a GEMM on the trailing matrix between two blocks.
//
// libcufft.so.12 reaches the driver the same way: plans of rank 1 to 3 of the six transform types
// (cufftPlan*, cufftCreate + cufftMakePlan*, the 64-bit and Xt forms), their work area sizes, and a
// transform (cufftExec*, cufftXtExec) as one kFftKernel launch per dimension on the plan's stream.
// The transforms compute nothing. Every other export answers CUFFT_NOT_SUPPORTED.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace simcuda {

inline constexpr int kDefaultDeviceCount = 1;
inline constexpr int kMaxDeviceCount = 64;
inline constexpr uint64_t kDefaultKernelNs = 20000;
inline constexpr double kDefaultCopyGBps = 10.0;
inline constexpr uint64_t kDefaultDeviceMemoryMiB = 16384;
inline constexpr int kDefaultDriverVersion = 13000;
inline constexpr uint64_t kAllocationGranularity = 256;
inline constexpr const char kSleepMarker[] = "sleep_us_";
inline constexpr int kDriverApiVersion = 13000;  // cuDriverGetVersion and the version cuGetProcAddress serves

// A module image that names its kernels starts with this string and its NUL (see above).
inline constexpr char kModuleMagic[] = "SIMCUDA-MODULE-1";
// cuLaunchKernel's `extra` key whose value points at a uint64_t duration in ns for that launch.
inline void* const kLaunchParamDurationNs = reinterpret_cast<void*>(uintptr_t(0x53494d44));
// cuLaunchKernel's `extra` key whose value points at a std::function<void()>: the launch's effect.
inline void* const kLaunchParamEffect = reinterpret_cast<void*>(uintptr_t(0x53494d45));

// The simulated libraries' kernels, by the names their launches carry.
inline constexpr const char kSgemmKernel[] = "sgemm_sim_128x64";
inline constexpr const char kDgemmKernel[] = "dgemm_sim_64x64";
inline constexpr const char kLtMatmulKernel[] = "cublasLt_matmul_sim_128x128";
inline constexpr const char kSaxpyKernel[] = "saxpy_sim";
inline constexpr const char kIm2colKernel[] = "cudnn_im2col_sim";
inline constexpr const char kActivationKernel[] = "cudnn_activation_fw_sim";
inline constexpr const char kCholeskyKernel[] = "cusolver_potrf_block_sim";
inline constexpr const char kSparseQrKernel[] = "cusolver_csrqr_sim";
inline constexpr const char kSpmvKernel[] = "cusparse_csrmv_sim";
// The simulated cuFFT launches one of these per dimension of a transform.
inline constexpr const char kFftKernel[] = "cufft_regular_fft_sim";
// The column block of the simulated cuSOLVER's Cholesky factorization (potrf): one kernel per block,
// and a GEMM on the trailing matrix between two blocks.
inline constexpr int kCholeskyBlock = 64;
// Multiply-adds per ns of the simulated GEMM units.
inline constexpr uint64_t kGemmMacsPerNs = 1000;

// The device time of a kernel with this name when the default is default_ns: the per-launch rule
// shared by the simulator and the tests that predict its timings.
inline uint64_t kernel_duration_ns(const char* name, uint64_t default_ns) {
  if (name == nullptr) return default_ns;
  const char* marker = std::strstr(name, kSleepMarker);
  if (marker == nullptr) return default_ns;
  const char* digits = marker + sizeof(kSleepMarker) - 1;
  if (*digits < '0' || *digits > '9') return default_ns;
  uint64_t us = 0;
  for (; *digits >= '0' && *digits <= '9'; ++digits) us = us * 10 + uint64_t(*digits - '0');
  return us * 1000;
}

// The device time of a GEMM of m x n x k (times batch): one kernel's time plus the multiply-adds at
// kGemmMacsPerNs, so that tests can bound it from the sizes alone.
inline uint64_t gemm_duration_ns(uint64_t m, uint64_t n, uint64_t k, uint64_t batch,
                                 uint64_t kernel_ns) {
  uint64_t macs = m * n * k * batch;
  return kernel_ns + (macs + kGemmMacsPerNs - 1) / kGemmMacsPerNs;
}

// The device time of a copy or memset of `bytes` at `gbps` GB/s.
inline uint64_t copy_duration_ns(uint64_t bytes, double gbps) {
  double ns = double(bytes) / gbps;
  uint64_t whole = uint64_t(ns);
  return double(whole) < ns ? whole + 1 : whole;
}

}  // namespace simcuda
