// Creating, opening and removing a session's shared-memory object. The launcher creates it; the
// recorder and tests open it by name; the preload library has its own minimal attach code (it may not
// use anything that allocates).
#pragma once

#include <cstdint>
#include <string>

#include "cutrace/abi.h"

namespace cutrace::session {

struct Options {
  uint32_t slot_count = abi::kDefaultSlotCount;
  uint32_t ring_bytes = abi::kDefaultRingBytes;
  abi::ClockKind clock = abi::ClockKind::kMonotonicNs;
  // abi::domain_bit() of each domain to record (`-t`); capture starts on for these. 0: nothing is
  // recorded but what the tools need to name things (`-t none`).
  abi::DomainSet trace_domains = abi::kCudaDomains;
  // --osrt-threshold: OS runtime calls shorter than this are not recorded (nsys's default, 1 us).
  uint64_t osrt_threshold_ns = 1000;
  // --cudabacktrace, --osrt-backtrace-threshold: per backtrace class (abi::ApiClass, then
  // abi::kBacktraceClassOsrt), the duration from which a call's stack is taken; kBacktraceOff: never.
  uint64_t backtrace_threshold_ns[abi::kBacktraceClasses] = {abi::kBacktraceOff, abi::kBacktraceOff,
                                                             abi::kBacktraceOff, abi::kBacktraceOff,
                                                             abi::kBacktraceOff};
  uint32_t backtrace_depth_cuda = 32;
  uint32_t backtrace_depth_osrt = 24;  // --osrt-backtrace-depth (nsys's default)
  uint32_t backtrace_depth_python = 32;  // --python-backtrace none: 0
  // /dev/shm is the program's too: a container's is 64 MiB by default, and PyTorch's DataLoader
  // workers, NCCL and Python's multiprocessing keep their buffers there. So a session never reserves
  // more than its share of what /dev/shm has free as it starts (plan_rings: half); with this set, the
  // rings are made smaller and fewer to fit that share instead of failing.
  bool fit_to_free_space = true;
  // When nonzero, fitting first halves the ring size, down to this, and only then lowers the slot
  // count (for a ring size the user did not choose).
  uint32_t min_ring_bytes = 0;
};

// The share of /dev/shm's free space a session may take: 1/kShmShareDivisor of it, the rest left to
// the program.
inline constexpr uint64_t kShmShareDivisor = 2;
// Fitting a ring size the user did not choose halves it until this many rings fit the share (or the
// slots asked, if fewer), and not below kSmallestFittedRingBytes.
inline constexpr uint32_t kFittedSlotsWanted = 16;
inline constexpr uint32_t kSmallestFittedRingBytes = 64u << 10;

// The rings a session takes of a /dev/shm with `free_bytes` free: the slots and ring size asked when
// they fit the share, else a smaller ring (where the user did not choose its size) and then fewer
// slots. `budget` is the share.
struct RingPlan {
  uint32_t slot_count = 0;
  uint32_t ring_bytes = 0;
  uint64_t budget = 0;
};
// False, with one sentence in `error`, when not even one ring fits (or, without fit_to_free_space,
// when what was asked does not).
bool plan_rings(const Options& options, uint64_t free_bytes, RingPlan* plan, std::string* error);

// TSC when the kernel itself uses it as clocksource (so it is invariant and synchronised across CPUs),
// unless CUTRACE_CLOCK=monotonic asks otherwise; CLOCK_MONOTONIC otherwise.
abi::ClockKind choose_clock();

// Lays a session's header out over `bytes` of zeroed memory for slot_count rings of ring_bytes, as
// `options` asks: what Session::create writes, and what a test's session in its own memory starts from.
abi::SessionHeader* init_header(void* zeroed, uint64_t bytes, uint32_t slot_count, uint32_t ring_bytes,
                                const Options& options);

// A mapping of a session object. Move-only; unmaps on destruction. The creator also unlinks the name.
class Session {
 public:
  Session() = default;
  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Creates a new object with mode 0600 under an unguessable name (128 random bits). Returns false and
  // sets `error` to one sentence on failure. header()->slot_count tells how many slots it got, and
  // shm_free_bytes() and shm_budget() what /dev/shm had free and the share of it the rings could take.
  bool create(const Options& options, std::string* error);
  uint64_t shm_free_bytes() const { return shm_free_bytes_; }
  uint64_t shm_budget() const { return shm_free_bytes_ / kShmShareDivisor; }
  // Maps an existing object and validates its layout against its real size.
  bool open(const std::string& name, std::string* error);

  // Removes the name from /dev/shm; the mapping stays valid. Idempotent.
  void unlink();

  bool valid() const { return header_ != nullptr; }
  const std::string& name() const { return name_; }
  abi::SessionHeader* header() const { return header_; }
  uint64_t bytes() const { return bytes_; }
  // The created object's descriptor (close-on-exec), kept open for the program to inherit a copy of
  // (abi::kSessionFdEnvVar); -1 for a session that was opened rather than created.
  int descriptor() const { return fd_; }
  abi::RingHeader* slot(uint32_t i) const { return abi::slot_header(header_, i); }
  uint8_t* data(uint32_t i) const { return abi::slot_data(header_, i); }

 private:
  void reset();
  std::string name_;
  abi::SessionHeader* header_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t shm_free_bytes_ = 0;
  int fd_ = -1;
  bool owner_ = false;
};

// Removes a session object by name; used by the launcher to clean up after a recorder that died.
void unlink_name(const std::string& name);

// Asks the recorder to drain everything and finish, and wakes it from its nap.
void request_shutdown(abi::SessionHeader* header);

}  // namespace cutrace::session
