// Who a process is in a distributed job: its rank, local rank and world size, as the launcher that
// started it says in its environment. Shared by the launcher (the session's own environment, written
// as the trace's job.* metadata), the shim (which variables to send for each traced process) and the
// reader (which of them a process's rank comes from). Allocation-free, so that the shim can use it.
#pragma once

#include <cstdint>
#include <string_view>

namespace cutrace::job {

// The variables of one launcher family: the rank, and the local rank and world size that go with it
// (nullptr where the family has none). Those of a family are read together and never mixed with
// another family's: a local rank from one launcher beside a rank from another would name a process
// that does not exist.
struct Family {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

// Most specific first; the first family whose rank variable holds a rank wins. Launchers nest, and
// every process inherits the variables of the launchers above it, so the innermost launcher's must win:
//  - RANK, LOCAL_RANK, WORLD_SIZE: set per worker by a framework's launcher (torchrun, accelerate,
//    DeepSpeed) or by the user, usually under an outer launcher (srun starting one torchrun per node,
//    each starting 8 workers: SLURM_PROCID names the node's task, RANK the worker).
//  - OMPI_COMM_WORLD_*: Open MPI's mpirun, per process it starts. Inside a Slurm allocation its
//    processes inherit SLURM_PROCID (0 for all of them in a batch script), and under srun's PMI-2 a
//    PMI_RANK, so both rank below it.
//  - PMI_RANK, PMI_SIZE (MPICH and Intel MPI's Hydra, srun --mpi=pmi2), with Hydra's MPI_LOCALRANKID.
//  - SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS: srun, per task; also inherited by everything a batch
//    script or a task starts, which makes it the least specific.
inline constexpr Family kFamilies[] = {
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

// A variable's value longer than this is not a count; the shim sends no more of it.
inline constexpr size_t kMaxValueBytes = 32;

struct Identity {
  int64_t rank = -1;        // -1: unknown
  int64_t local_rank = -1;  // -1: unknown, or the family has none
  int64_t world_size = -1;  // -1: unknown
  const char* rank_variable = nullptr;  // the variable the rank came from (a kFamilies name)
  bool known() const { return rank >= 0; }
};

// A rank, local rank or world size: plain decimal digits, at most 9 of them (no sign, no spaces, no
// "0x"). Anything else (empty, "-1", "3 ", "${RANK}") is -1: not a count, so not a rank.
inline int64_t parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// `lookup(name)` gives a variable's value (null or empty: not set). A family whose rank variable is
// set but holds no count is passed over, as if it were not set.
template <class Lookup>
Identity identify(Lookup&& lookup) {
  auto count = [&](const char* name) -> int64_t {
    if (!name) return -1;
    const char* value = lookup(name);
    return value ? parse_count(std::string_view(value)) : -1;
  };
  for (const Family& f : kFamilies) {
    const int64_t rank = count(f.rank);
    if (rank < 0) continue;
    Identity id;
    id.rank = rank;
    id.local_rank = count(f.local_rank);
    const int64_t size = count(f.world_size);
    id.world_size = size > 0 ? size : -1;  // a job of no processes is no job
    id.rank_variable = f.rank;
    return id;
  }
  return {};
}

}  // namespace cutrace::job
