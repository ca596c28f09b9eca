// MPI tracing (-t mpi): what the generated wrappers of libcutrace-mpi-openmpi.so and
// libcutrace-mpi-mpich.so call.
//
// Open MPI and MPICH share the MPI standard's function names but not its ABI (a communicator is a
// pointer in one, an int in the other), so the same annotations (preload/annotations/mpi.toml) are
// compiled twice, once against each implementation's mpi.h, into two libraries; the launcher preloads
// the one --mpi-impl names, after the shim. A wrapper defines the program's MPI_X and calls the
// implementation's PMPI_X, the profiling interface every MPI library provides for such tools, found by
// name at the first call (the library may be dlopen()ed late, by mpi4py). Neither library links libmpi:
// the predefined handles Open MPI names by address (MPI_COMM_WORLD, MPI_INT) are looked up by name too.
//
// The shape of a generated wrapper (preload/gen/cutrace_gen/emit_interposers.py, emit_mpi_wrapper):
//
//   extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
//     auto real = cutrace::mpi::real_function<Fn>(index);  // PMPI_Send
//     auto& ts = cutrace::preload::t_thread;
//     if (!cutrace::preload::should_record(ts, kMpi)) return real(buf, count, datatype, dest, tag, comm);
//     uint64_t args[6];  args[0] = cutrace::mpi::comm_id(comm);  ...   // read before the call
//     cutrace::preload::CallScope scope(ts, kMpi, kApi_openmpi_MPI_Send);
//     int result = real(...);
//     scope.finish();
//     scope.emit(result, 0, args, 6);
//     return result;
//   }
//
// The slot functions below never call into MPI with a handle they cannot vouch for except the
// communicators and derived datatypes the call itself names: a null communicator or datatype (which
// programs pass where the standard says an argument is not significant) is recognised and left alone.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime.h"

namespace cutrace::mpi {

// The generated table: the profiling interface's functions, by their index in the wrappers file.
extern const char* const kFunctionNames[];
extern const uint32_t kFunctionCount;
extern std::atomic<void*> g_real_functions[];

void* resolve_real(uint32_t index) __attribute__((noinline, cold));

template <class Fn>
inline Fn real_function(uint32_t index) {
  void* p = g_real_functions[index].load(std::memory_order_relaxed);
  if (CUTRACE_UNLIKELY(!p)) p = resolve_real(index);
  return reinterpret_cast<Fn>(p);
}

// The program called MPI_X, but no loaded library has PMPI_X: ends the process as the loader's lazy
// binding would have without cutrace (the program could not have made the call).
[[noreturn]] void missing_function(uint32_t api_id, const void* caller) __attribute__((noinline, cold));

// A communicator's id in this process: 1 MPI_COMM_WORLD, 2 MPI_COMM_SELF, then 3, 4, ... in the order
// the process's calls first name them (the same on every rank of a program whose ranks make the same
// calls); 0 MPI_COMM_NULL, or a communicator beyond the table's room. The pointer form reads *comm
// (MPI_Comm_dup's newcomm, after the call; MPI_Comm_free's comm, before it).
uint64_t comm_id(MPI_Comm comm);
uint64_t comm_id(const MPI_Comm* comm);
// Its size (the local group's, for an intercommunicator); 0 for MPI_COMM_NULL.
uint64_t comm_size(MPI_Comm comm);
// A rank of `comm` (a peer's, a root's) as its rank in MPI_COMM_WORLD, the same number on every rank;
// MPI_ANY_SOURCE, MPI_PROC_NULL and MPI_ROOT as abi::kMpiRank*. The peers of an intercommunicator are
// ranks of its remote group.
uint64_t world_rank(int rank, MPI_Comm comm);
// abi::kMpiDatatypeNames's index of a predefined datatype, 0 for any other.
uint64_t datatype_id(MPI_Datatype datatype);
// count * the datatype's size in bytes, for a predefined datatype or one the program committed
// (MPI_Type_commit); 0 for any other handle, which is never passed to MPI: programs pass what they
// like where the standard says an argument is not significant (a non-root's receive type).
uint64_t bytes(int count, MPI_Datatype datatype);
// What a completed receive's status says: the sender (as world_rank()) and its tag; for
// MPI_STATUS_IGNORE, abi::kMpiRankUnknown and -1.
uint64_t status_source(const MPI_Status* status, MPI_Comm comm);
uint64_t status_tag(const MPI_Status* status);

// Hooks named by the annotations' `hook`; each runs just before the real call.
namespace hooks {
// MPI_Comm_free: the handle may be reused for a new communicator, which must get an id of its own.
void forget_comm(const MPI_Comm* comm);
// MPI_Type_commit and MPI_Type_free: the derived datatypes whose size bytes() may ask for.
void remember_datatype(const MPI_Datatype* datatype);
void forget_datatype(const MPI_Datatype* datatype);
}  // namespace hooks

}  // namespace cutrace::mpi
