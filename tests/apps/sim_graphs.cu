// CUDA graphs as JAX and torch.compile use them: a graph captured from a stream (a memset, a kernel,
// a device-to-device copy, a second kernel) and a graph built node by node (a memset, then a kernel
// and a copy that both depend on it, then an empty join node), each instantiated once and launched
// `launches` times, with one ordinary kernel launch between them. The copied-back bytes check that
// every node ran, in an order its dependencies allow.
//
// usage: sim_graphs [launches=3]
// stdout: "launches N", "captured_nodes N", "built_nodes N", "verified N", then the calls table.
// exit:   0 on success, 1 when a CUDA call fails, 2 when the copied-back bytes differ.
#include <cstdio>
#include <cstring>
#include <vector>

#include "app_util.h"

namespace graphs {

__global__ void sleep_us_30_add(unsigned char* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = static_cast<unsigned char>(data[i] + 1);
}

__global__ void sleep_us_10_touch(unsigned char* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i];
}

}  // namespace graphs

namespace {

constexpr const char kUsage[] = "sim_graphs [launches=3]";
constexpr int kBytes = 4096;

int run(long launches, CallCounter& calls, long* verified) {
  cudaStream_t stream = nullptr;
  unsigned char *a = nullptr, *b = nullptr, *c = nullptr;
  bool ok = counted(calls, "cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) &&
            counted(calls, "cudaMalloc", cudaMalloc(&a, kBytes)) && counted(calls, "cudaMalloc", cudaMalloc(&b, kBytes)) &&
            counted(calls, "cudaMalloc", cudaMalloc(&c, kBytes));
  if (!ok) return 1;
  const dim3 block(256), grid(kBytes / 256);

  // Captured: every call on the capturing stream becomes a node and runs nothing yet.
  cudaGraph_t captured = nullptr;
  ok = counted(calls, "cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal)) &&
       counted(calls, "cudaMemsetAsync", cudaMemsetAsync(a, 7, kBytes, stream));
  if (!ok) return 1;
  graphs::sleep_us_30_add<<<grid, block, 0, stream>>>(a, kBytes);
  calls.add_launch(1);
  ok = counted(calls, "cudaMemcpyAsync", cudaMemcpyAsync(b, a, kBytes, cudaMemcpyDeviceToDevice, stream));
  if (!ok) return 1;
  graphs::sleep_us_10_touch<<<grid, block, 0, stream>>>(b, kBytes);
  calls.add_launch(2);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ok = counted(calls, "cudaStreamIsCapturing", cudaStreamIsCapturing(stream, &status)) &&
       counted(calls, "cudaStreamEndCapture", cudaStreamEndCapture(stream, &captured));
  if (!ok) return 1;
  if (status != cudaStreamCaptureStatusActive) {
    std::fprintf(stderr, "error: the stream did not say it was capturing\n");
    return 2;
  }
  size_t captured_nodes = 0;
  if (!counted(calls, "cudaGraphGetNodes", cudaGraphGetNodes(captured, nullptr, &captured_nodes))) return 1;

  // Built: the kernel and the copy both depend on the memset; the empty node joins them.
  cudaGraph_t built = nullptr;
  cudaGraphNode_t set_node, kernel_node, copy_node, join_node;
  if (!counted(calls, "cudaGraphCreate", cudaGraphCreate(&built, 0))) return 1;
  cudaMemsetParams set{};
  set.dst = c;
  set.value = 3;
  set.elementSize = 1;
  set.width = kBytes;
  set.height = 1;
  ok = counted(calls, "cudaGraphAddMemsetNode", cudaGraphAddMemsetNode(&set_node, built, nullptr, 0, &set));
  if (!ok) return 1;
  int n = kBytes;
  void* args[] = {&c, &n};
  cudaKernelNodeParams kernel{};
  kernel.func = reinterpret_cast<void*>(graphs::sleep_us_10_touch);
  kernel.gridDim = grid;
  kernel.blockDim = block;
  kernel.kernelParams = args;
  ok = counted(calls, "cudaGraphAddKernelNode", cudaGraphAddKernelNode(&kernel_node, built, &set_node, 1, &kernel)) &&
       counted(calls, "cudaGraphAddMemcpyNode1D",
               cudaGraphAddMemcpyNode1D(&copy_node, built, &set_node, 1, a, c, kBytes, cudaMemcpyDeviceToDevice));
  if (!ok) return 1;
  const cudaGraphNode_t both[] = {kernel_node, copy_node};
  ok = counted(calls, "cudaGraphAddEmptyNode", cudaGraphAddEmptyNode(&join_node, built, both, 2));
  size_t built_nodes = 0;
  ok = ok && counted(calls, "cudaGraphGetNodes", cudaGraphGetNodes(built, nullptr, &built_nodes));
  if (!ok) return 1;
  std::printf("captured_nodes %zu\n", captured_nodes);
  std::printf("built_nodes %zu\n", built_nodes);

  cudaGraphExec_t captured_exec = nullptr, built_exec = nullptr;
  ok = counted(calls, "cudaGraphInstantiate", cudaGraphInstantiate(&captured_exec, captured, 0)) &&
       counted(calls, "cudaGraphInstantiate", cudaGraphInstantiate(&built_exec, built, 0)) &&
       counted(calls, "cudaGraphUpload", cudaGraphUpload(captured_exec, stream));
  if (!ok) return 1;
  std::vector<unsigned char> host(kBytes);
  for (long i = 0; i < launches; ++i) {
    if (!counted(calls, "cudaGraphLaunch", cudaGraphLaunch(captured_exec, stream))) return 1;
    // An ordinary launch between the graphs: its kernel is traced as any other in both modes.
    graphs::sleep_us_10_touch<<<grid, block, 0, stream>>>(b, kBytes);
    calls.add_launch(2);  // the same kernel: its stub asked for its handle once
    ok = counted(calls, "cudaGraphLaunch", cudaGraphLaunch(built_exec, stream)) &&
         counted(calls, "cudaStreamSynchronize", cudaStreamSynchronize(stream)) &&
         counted(calls, "cudaMemcpy", cudaMemcpy(host.data(), b, kBytes, cudaMemcpyDeviceToHost));
    if (!ok) return 1;
    // The captured graph set a to 7, added 1 on the device (a no-op here: kernels do not run on the
    // simulated device) and copied it to b; the built graph then copied c (3) into a.
    const unsigned char expect_b = host[0];
    for (unsigned char byte : host) {
      if (byte != expect_b || (byte != 7 && byte != 8)) {
        std::fprintf(stderr, "error: launch %ld: b holds %d, not 7 (or 8 on a GPU)\n", i, int(byte));
        return 2;
      }
    }
    if (!counted(calls, "cudaMemcpy", cudaMemcpy(host.data(), a, kBytes, cudaMemcpyDeviceToHost))) return 1;
    for (unsigned char byte : host) {
      if (byte != 3) {
        std::fprintf(stderr, "error: launch %ld: a holds %d after the built graph, not 3\n", i, int(byte));
        return 2;
      }
    }
    ++*verified;
  }
  ok = counted(calls, "cudaGraphExecDestroy", cudaGraphExecDestroy(captured_exec)) &&
       counted(calls, "cudaGraphExecDestroy", cudaGraphExecDestroy(built_exec)) &&
       counted(calls, "cudaGraphDestroy", cudaGraphDestroy(captured)) &&
       counted(calls, "cudaGraphDestroy", cudaGraphDestroy(built)) &&
       counted(calls, "cudaStreamDestroy", cudaStreamDestroy(stream)) && counted(calls, "cudaFree", cudaFree(a)) &&
       counted(calls, "cudaFree", cudaFree(b)) && counted(calls, "cudaFree", cudaFree(c));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long launches = argc > 1 ? parse_count(argv[1], "launches", kUsage) : 3;
  std::printf("launches %ld\n", launches);
  CallCounter calls;
  long verified = 0;
  int rc = run(launches, calls, &verified);
  std::printf("verified %ld\n", verified);
  calls.print();
  return rc;
}
