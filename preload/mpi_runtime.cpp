// libcutrace-mpi-*.so's own state: the profiling interface's functions, and the communicators and
// datatypes the argument slots name (mpi_runtime.h). Compiled once per MPI implementation.
#include <mpi.h>

#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstring>

#include "mpi_runtime.h"

// Open MPI names its predefined handles by the address of a global of libmpi (MPI_INT is
// &ompi_mpi_int). This library does not link libmpi, which a program may load late or not at all, so
// the macros below reach those globals by name, once MPI is running. MPICH's handles are constants.
#ifdef OPEN_MPI
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global) (reinterpret_cast<type>(cutrace::mpi::predefined_global(#global)))
#endif

namespace cutrace::mpi {
namespace {

[[maybe_unused]] void* predefined_global(const char* name) {
  const int saved_errno = errno;
  void* p = dlsym(RTLD_DEFAULT, name);
  errno = saved_errno;
  return p;
}

// The profiling interface's queries this file makes, found by name like the wrappers' (this library
// does not link libmpi). A query whose function is missing fails as MPI_ERR_OTHER; every caller then
// records what it could not learn as unknown.
template <class Fn>
Fn find_pmpi(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_relaxed);
  if (!p) {
    p = dlsym(RTLD_NEXT, name);
    if (!p) p = dlsym(RTLD_DEFAULT, name);
    slot.store(p, std::memory_order_relaxed);
  }
  return reinterpret_cast<Fn>(p);
}
#define CUTRACE_PMPI_CALL(name, ...)                                               \
  ([&]() -> int {                                                                  \
    static std::atomic<void*> slot{nullptr};                                       \
    auto fn = find_pmpi<decltype(&::name)>(slot, #name);                            \
    return fn ? fn(__VA_ARGS__) : MPI_ERR_OTHER;                                   \
  }())

template <class Handle>
uint64_t handle_bits(Handle h) {
  if constexpr (std::is_pointer_v<Handle>) return reinterpret_cast<uint64_t>(h);
  else return uint64_t(uint32_t(h));
}

// One lock for the tables below: they change only when a call names a communicator for the first
// time or frees one, and the MPI calls made while holding it are local queries.
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
struct Lock {
  Lock() { pthread_mutex_lock(&g_lock); }
  ~Lock() { pthread_mutex_unlock(&g_lock); }
};

// ---------------------------------------------------------------------------------------------
// Predefined handles, found once MPI runs (the first call that needs them is an MPI call).
// ---------------------------------------------------------------------------------------------

#define CUTRACE_MPI_DATATYPES(X)                                                                              \
  X(MPI_CHAR) X(MPI_SIGNED_CHAR) X(MPI_UNSIGNED_CHAR) X(MPI_BYTE) X(MPI_WCHAR) X(MPI_SHORT)                   \
  X(MPI_UNSIGNED_SHORT) X(MPI_INT) X(MPI_UNSIGNED) X(MPI_LONG) X(MPI_UNSIGNED_LONG) X(MPI_LONG_LONG)           \
  X(MPI_UNSIGNED_LONG_LONG) X(MPI_FLOAT) X(MPI_DOUBLE) X(MPI_LONG_DOUBLE) X(MPI_INT8_T) X(MPI_INT16_T)        \
  X(MPI_INT32_T) X(MPI_INT64_T) X(MPI_UINT8_T) X(MPI_UINT16_T) X(MPI_UINT32_T) X(MPI_UINT64_T)                \
  X(MPI_C_BOOL) X(MPI_C_FLOAT_COMPLEX) X(MPI_C_DOUBLE_COMPLEX) X(MPI_C_LONG_DOUBLE_COMPLEX) X(MPI_AINT)       \
  X(MPI_OFFSET) X(MPI_COUNT) X(MPI_PACKED) X(MPI_FLOAT_INT) X(MPI_DOUBLE_INT) X(MPI_LONG_INT) X(MPI_2INT)     \
  X(MPI_SHORT_INT) X(MPI_LONG_DOUBLE_INT) X(MPI_LONG_LONG_INT)

#define CUTRACE_MPI_NAME(name) #name,
constexpr const char* kDatatypeNames[] = {"", CUTRACE_MPI_DATATYPES(CUTRACE_MPI_NAME)};
#undef CUTRACE_MPI_NAME

constexpr bool same_text(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
constexpr bool names_match_abi() {
  if (std::size(kDatatypeNames) != abi::kMpiDatatypeCount) return false;
  for (uint32_t i = 0; i < abi::kMpiDatatypeCount; ++i)
    if (!same_text(kDatatypeNames[i], abi::kMpiDatatypeNames[i])) return false;
  return true;
}
static_assert(names_match_abi(), "the datatypes here and abi::kMpiDatatypeNames must be the same list, in order");

struct Predefined {
  uint64_t comm_world = 0, comm_self = 0, comm_null = 0, datatype_null = 0;
  uint64_t datatypes[abi::kMpiDatatypeCount] = {};  // index 0 unused
  std::atomic<int> sizes[abi::kMpiDatatypeCount] = {};  // MPI_Type_size, -1 until asked
  MPI_Group world_group{};
  bool have_world_group = false;
};
Predefined g_predefined;
std::atomic<bool> g_predefined_ready{false};

// Holds g_lock.
void find_predefined() {
  if (g_predefined_ready.load(std::memory_order_acquire)) return;
  Predefined& p = g_predefined;
  p.comm_world = handle_bits(MPI_COMM_WORLD);
  p.comm_self = handle_bits(MPI_COMM_SELF);
  p.comm_null = handle_bits(MPI_COMM_NULL);
  p.datatype_null = handle_bits(MPI_DATATYPE_NULL);
  uint32_t i = 1;
#define CUTRACE_MPI_HANDLE(name) p.datatypes[i++] = handle_bits(name);
  CUTRACE_MPI_DATATYPES(CUTRACE_MPI_HANDLE)
#undef CUTRACE_MPI_HANDLE
  for (std::atomic<int>& s : p.sizes) s.store(-1, std::memory_order_relaxed);
  g_predefined_ready.store(true, std::memory_order_release);
}

void ensure_predefined() {
  if (CUTRACE_LIKELY(g_predefined_ready.load(std::memory_order_acquire))) return;
  Lock lock;
  find_predefined();
}

// A handle's index among the predefined datatypes, 0 if it is none of them (0 is no handle: Open MPI's
// globals that are missing read as 0 and must never match).
uint32_t predefined_index(uint64_t bits) {
  if (bits == 0) return 0;
  for (uint32_t i = 1; i < abi::kMpiDatatypeCount; ++i)
    if (g_predefined.datatypes[i] == bits) return i;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Communicators
// ---------------------------------------------------------------------------------------------

struct Comm {
  uint64_t bits = 0;  // 0: a free entry
  uint32_t id = 0;
  uint32_t size = 0;
  bool world = false;  // ranks are world ranks already
  bool have_group = false;
  MPI_Group group{};   // the group its peers' ranks index (the remote group of an intercommunicator)
};
constexpr uint32_t kMaxComms = 1024;
Comm g_comms[kMaxComms];
uint32_t g_next_comm_id = 3;

// Holds g_lock. The entry of a communicator, made on first sight; nullptr for MPI_COMM_NULL or when
// the table is full.
Comm* comm_entry_locked(MPI_Comm comm) {
  find_predefined();
  const uint64_t bits = handle_bits(comm);
  if (bits == g_predefined.comm_null) return nullptr;
  Comm* free_entry = nullptr;
  for (Comm& c : g_comms) {
    if (c.bits == bits) return &c;
    if (!free_entry && c.bits == 0) free_entry = &c;
  }
  if (!free_entry) return nullptr;
  Comm& c = *free_entry;
  c.bits = bits;
  c.world = bits == g_predefined.comm_world;
  c.id = c.world ? 1 : bits == g_predefined.comm_self ? 2 : g_next_comm_id++;
  int size = 0, inter = 0;
  if (CUTRACE_PMPI_CALL(PMPI_Comm_size, comm, &size) == MPI_SUCCESS && size > 0) c.size = uint32_t(size);
  if (!c.world) {
    CUTRACE_PMPI_CALL(PMPI_Comm_test_inter, comm, &inter);
    c.have_group = (inter ? CUTRACE_PMPI_CALL(PMPI_Comm_remote_group, comm, &c.group) : CUTRACE_PMPI_CALL(PMPI_Comm_group, comm, &c.group)) == MPI_SUCCESS;
  }
  return &c;
}

// What the slots say of a communicator, kept per thread for the last one it named: a program calls on
// one communicator many times in a row, and the table's lock would then be taken for every slot. A
// freed communicator bumps the generation, so that a handle reused for a new one is looked up again.
struct CommFacts {
  uint64_t bits = 0;
  uint64_t generation = 0;  // 0: nothing cached yet
  uint32_t id = 0, size = 0;
};
constinit thread_local CommFacts t_last_comm __attribute__((tls_model("initial-exec")));
std::atomic<uint64_t> g_comm_generation{1};

CommFacts comm_facts(MPI_Comm comm) {
  ensure_predefined();
  const uint64_t bits = handle_bits(comm);
  if (bits == g_predefined.comm_null) return CommFacts{};
  const uint64_t generation = g_comm_generation.load(std::memory_order_acquire);
  CommFacts& last = t_last_comm;
  if (last.bits == bits && last.generation == generation) return last;
  const int saved_errno = errno;
  CommFacts facts{bits, generation};
  {
    Lock lock;
    if (const Comm* c = comm_entry_locked(comm)) {
      facts.id = c->id;
      facts.size = c->size;
      last = facts;
    }
  }
  errno = saved_errno;
  return facts;
}

// The derived datatypes the program committed, with their sizes (read when committed, a valid handle).
struct Derived {
  uint64_t bits = 0;  // 0: a free entry
  int size = 0;
};
constexpr uint32_t kMaxDerived = 4096;
Derived g_derived[kMaxDerived];

uint64_t special_rank(int rank) {
  if (rank == MPI_ANY_SOURCE) return uint64_t(abi::kMpiRankAnySource);
  if (rank == MPI_PROC_NULL) return uint64_t(abi::kMpiRankProcNull);
  if (rank == MPI_ROOT) return uint64_t(abi::kMpiRankRoot);
  return uint64_t(abi::kMpiRankUnknown);
}

}  // namespace

void* resolve_real(uint32_t index) {
  if (index >= kFunctionCount) return nullptr;
  const int saved_errno = errno;
  // RTLD_NEXT: the MPI library the program linked, after the preloaded tools; RTLD_DEFAULT: one it
  // opened later (the shim's dlsym passes both to glibc with this library as the caller).
  void* fn = dlsym(RTLD_NEXT, kFunctionNames[index]);
  if (!fn) fn = dlsym(RTLD_DEFAULT, kFunctionNames[index]);
  errno = saved_errno;
  if (fn) g_real_functions[index].store(fn, std::memory_order_relaxed);
  return fn;
}

void missing_function(uint32_t api_id, const void* caller) { preload::missing_function(api_id, caller); }

uint64_t comm_id(MPI_Comm comm) { return comm_facts(comm).id; }

uint64_t comm_id(const MPI_Comm* comm) { return comm ? comm_id(*comm) : 0; }

uint64_t comm_size(MPI_Comm comm) { return comm_facts(comm).size; }

uint64_t world_rank(int rank, MPI_Comm comm) {
  if (rank < 0) return special_rank(rank);
  ensure_predefined();
  if (handle_bits(comm) == g_predefined.comm_world) return uint64_t(rank);
  if (handle_bits(comm) == g_predefined.comm_null) return uint64_t(abi::kMpiRankUnknown);
  const int saved_errno = errno;
  int64_t out = abi::kMpiRankUnknown;
  {
    Lock lock;
    Comm* c = comm_entry_locked(comm);
    if (c && c->world) {
      out = rank;
    } else if (c && c->have_group) {
      if (!g_predefined.have_world_group)
        g_predefined.have_world_group = CUTRACE_PMPI_CALL(PMPI_Comm_group, MPI_COMM_WORLD, &g_predefined.world_group) == MPI_SUCCESS;
      int translated = MPI_UNDEFINED;
      if (g_predefined.have_world_group &&
          CUTRACE_PMPI_CALL(PMPI_Group_translate_ranks, c->group, 1, &rank, g_predefined.world_group, &translated) == MPI_SUCCESS &&
          translated >= 0)
        out = translated;
    }
  }
  errno = saved_errno;
  return uint64_t(out);
}

uint64_t datatype_id(MPI_Datatype datatype) {
  ensure_predefined();
  return predefined_index(handle_bits(datatype));
}

uint64_t bytes(int count, MPI_Datatype datatype) {
  ensure_predefined();
  const uint64_t bits = handle_bits(datatype);
  if (count <= 0 || bits == 0 || bits == g_predefined.datatype_null) return 0;
  const uint32_t index = predefined_index(bits);
  // Predefined sizes never change: asked once, then read without the lock.
  int size = index ? g_predefined.sizes[index].load(std::memory_order_relaxed) : -1;
  if (size >= 0) return uint64_t(count) * uint64_t(size);
  const int saved_errno = errno;
  {
    Lock lock;
    if (index) {
      if (g_predefined.sizes[index].load(std::memory_order_relaxed) < 0 &&
          CUTRACE_PMPI_CALL(PMPI_Type_size, datatype, &size) == MPI_SUCCESS)
        g_predefined.sizes[index].store(size, std::memory_order_relaxed);
      size = g_predefined.sizes[index].load(std::memory_order_relaxed);
    } else {
      for (const Derived& d : g_derived)
        if (d.bits == bits) size = d.size;
    }
  }
  errno = saved_errno;
  return size > 0 ? uint64_t(count) * uint64_t(size) : 0;
}

uint64_t status_source(const MPI_Status* status, MPI_Comm comm) {
  if (status == MPI_STATUS_IGNORE || status == nullptr) return uint64_t(abi::kMpiRankUnknown);
  return world_rank(status->MPI_SOURCE, comm);
}

uint64_t status_tag(const MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE || status == nullptr) return uint64_t(int64_t(-1));
  return uint64_t(int64_t(status->MPI_TAG));
}

namespace hooks {

void forget_comm(const MPI_Comm* comm) {
  if (!comm) return;
  ensure_predefined();
  const uint64_t bits = handle_bits(*comm);
  if (bits == g_predefined.comm_null) return;
  const int saved_errno = errno;
  Lock lock;
  for (Comm& c : g_comms) {
    if (c.bits != bits) continue;
    if (c.have_group) CUTRACE_PMPI_CALL(PMPI_Group_free, &c.group);
    c = Comm{};
  }
  g_comm_generation.fetch_add(1, std::memory_order_acq_rel);
  errno = saved_errno;
}

void remember_datatype(const MPI_Datatype* datatype) {
  if (!datatype) return;
  ensure_predefined();
  const uint64_t bits = handle_bits(*datatype);
  if (bits == 0 || bits == g_predefined.datatype_null || predefined_index(bits)) return;
  const int saved_errno = errno;
  int size = -1;
  if (CUTRACE_PMPI_CALL(PMPI_Type_size, *datatype, &size) == MPI_SUCCESS && size >= 0) {
    Lock lock;
    Derived* free_entry = nullptr;
    for (Derived& d : g_derived)
      if (d.bits == bits) free_entry = &d;
    for (Derived& d : g_derived)
      if (!free_entry && d.bits == 0) free_entry = &d;
    // A full table leaves the type's calls without a byte count, as any unknown type.
    if (free_entry) *free_entry = Derived{bits, size};
  }
  errno = saved_errno;
}

void forget_datatype(const MPI_Datatype* datatype) {
  if (!datatype) return;
  const uint64_t bits = handle_bits(*datatype);
  Lock lock;
  for (Derived& d : g_derived)
    if (d.bits == bits) d = Derived{};
}

}  // namespace hooks
}  // namespace cutrace::mpi
