// A data-parallel training job in miniature, one process per rank under mpirun: the communicator's id
// broadcast over MPI as NCCL's unique id is, a training step captured once into a CUDA graph (zero the
// gradients, forward, backward) and replayed every step, the gradients all-reduced through nccl_like
// (NCCL's NVTX ranges and payloads), and the loss all-reduced over MPI. Built once per MPI
// implementation (mpi_train_openmpi, mpi_train_mpich) for test_training_job.py.
//
// usage: mpi_train STEPS
// stdout (rank 0 only): "step S loss L" per step, then "ranks N steps S"; exit 0, 1 when a CUDA call
// fails, 2 when not run with exactly two ranks.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "nvtx/nccl_like.h"

namespace train {

__global__ void sleep_us_20_forward(float* activations, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) activations[i] += 1.0f;
}

__global__ void sleep_us_40_backward(float* gradients, const float* activations, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) gradients[i] += activations[i];
}

}  // namespace train

namespace {

constexpr int kElements = 1024;
constexpr size_t kBytes = kElements * sizeof(float);

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "mpi_train: %s failed: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3;
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "mpi_train: run with exactly 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  // Rank 0 makes the communicator's id and every rank learns it over MPI, as ncclGetUniqueId's is.
  uint64_t comm = rank == 0 ? 0x7a11ull << 32 : 0;
  MPI_Bcast(&comm, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  like_comm_init_rank(comm, size, rank, 0);

  cudaStream_t stream;
  float *activations, *gradients;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !ok(cudaMalloc(&activations, kBytes), "cudaMalloc") || !ok(cudaMalloc(&gradients, kBytes), "cudaMalloc"))
    return 1;
  cudaGraph_t graph;
  cudaGraphExec_t step_graph;
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture") ||
      !ok(cudaMemsetAsync(gradients, 0, kBytes, stream), "cudaMemsetAsync"))
    return 1;
  train::sleep_us_20_forward<<<kElements / 256, 256, 0, stream>>>(activations, kElements);
  train::sleep_us_40_backward<<<kElements / 256, 256, 0, stream>>>(gradients, activations, kElements);
  if (!ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") ||
      !ok(cudaGraphInstantiate(&step_graph, graph, 0), "cudaGraphInstantiate"))
    return 1;

  for (int step = 0; step < steps; ++step) {
    if (!ok(cudaGraphLaunch(step_graph, stream), "cudaGraphLaunch")) return 1;
    like_all_reduce(comm, kBytes, like_sum);
    if (!ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return 1;
    double loss = 1.0 / (step + 1) + rank, total = 0;
    MPI_Allreduce(&loss, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) std::printf("step %d loss %.4f\n", step, total);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::printf("ranks %d steps %d\n", size, steps);
  bool cleaned = ok(cudaGraphExecDestroy(step_graph), "cudaGraphExecDestroy") &&
                 ok(cudaGraphDestroy(graph), "cudaGraphDestroy") && ok(cudaFree(activations), "cudaFree") &&
                 ok(cudaFree(gradients), "cudaFree") && ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
  MPI_Finalize();
  return cleaned ? 0 : 1;
}
