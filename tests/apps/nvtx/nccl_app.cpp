// nccl_app THREADS ITERATIONS [bad]: each thread plays one rank of a communicator through
// nccl_like_lib (NCCL's NVTX ranges and payloads): ncclCommInitRank once, then ITERATIONS times an
// ncclAllReduce of 1 MiB (Sum on even iterations, Max on odd) and an ncclBroadcast of 4 KiB from
// root 0. `bad` adds, on the main thread, payloads a tool must survive (nccl_like_lib's
// like_bad_payloads). Prints one line, the same with or without a tracer.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "nccl_like.h"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 3;
  const bool bad = argc > 3 && std::strcmp(argv[3], "bad") == 0;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < threads; ++rank) {
    ranks.emplace_back([=] {
      const uint64_t comm = 0xc0ffee00ull + uint64_t(rank);
      like_comm_init_rank(comm, threads, rank, 0);
      for (int i = 0; i < iterations; ++i) {
        like_all_reduce(comm, 1 << 20, i % 2 ? like_max : like_sum);
        like_broadcast(comm, 4096, 0);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  if (bad) like_bad_payloads();
  std::printf("nccl_app: %d ranks, %d iterations%s\n", threads, iterations, bad ? ", bad payloads" : "");
  return 0;
}
