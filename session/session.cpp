#include "cutrace/session.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

#include "cutrace/ring.h"

namespace cutrace::session {

abi::ClockKind choose_clock() {
  if (const char* forced = std::getenv("CUTRACE_CLOCK")) {
    if (std::strcmp(forced, "monotonic") == 0) return abi::ClockKind::kMonotonicNs;
    if (std::strcmp(forced, "tsc") == 0) return abi::ClockKind::kTsc;
  }
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (source >> name && name == "tsc") return abi::ClockKind::kTsc;
  return abi::ClockKind::kMonotonicNs;
}

Session::Session(Session&& other) noexcept { *this = std::move(other); }

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    header_ = std::exchange(other.header_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    shm_free_bytes_ = std::exchange(other.shm_free_bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

Session::~Session() { reset(); }

void Session::reset() {
  if (owner_) unlink();
  if (header_) munmap(header_, bytes_);
  header_ = nullptr;
  bytes_ = 0;
  shm_free_bytes_ = 0;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  owner_ = false;
}

void Session::unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

void unlink_name(const std::string& name) { shm_unlink(name.c_str()); }

void request_shutdown(abi::SessionHeader* header) {
  header->shutdown_requested.store(1, std::memory_order_release);
  abi::wake_recorder(header);
}

namespace {

std::string mib(uint64_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

bool plan_rings(const Options& options, uint64_t free_bytes, RingPlan* plan, std::string* error) {
  const uint64_t budget = free_bytes / kShmShareDivisor;
  uint32_t slots = options.slot_count, ring = options.ring_bytes;
  *plan = RingPlan{slots, ring, budget};
  if (abi::session_bytes(slots, ring) <= budget) return true;
  const std::string share = "/dev/shm has " + mib(free_bytes) + " free, and cutrace takes at most half of it (" +
                            mib(budget) + ") so that the program keeps the rest";
  if (!options.fit_to_free_space) {
    *error = share + ": too little for " + std::to_string(slots) + " rings of " + mib(ring) +
             "; give the container a larger /dev/shm (docker run --shm-size) or pass a smaller --ring-size";
    return false;
  }
  if (options.min_ring_bytes) {
    const uint32_t floor = std::max({options.min_ring_bytes, kSmallestFittedRingBytes, abi::kMinRingBytes});
    const uint32_t wanted = std::min(slots, kFittedSlotsWanted);
    while (ring / 2 >= floor && abi::session_bytes(wanted, ring) > budget) ring /= 2;
  }
  // The rings that fit beside the headers (whose pages take a little of the share).
  uint64_t fit = std::min<uint64_t>(budget / ring, slots);
  while (fit > 0 && abi::session_bytes(uint32_t(fit), ring) > budget) --fit;
  if (fit == 0) {
    *error = share + ": too little for one ring of " + mib(ring) +
             "; give the container a larger /dev/shm (docker run --shm-size)" +
             (options.min_ring_bytes ? "" : " or pass a smaller --ring-size");
    return false;
  }
  plan->slot_count = uint32_t(fit);
  plan->ring_bytes = ring;
  return true;
}

bool Session::create(const Options& options, std::string* error) {
  reset();
  if (!abi::is_power_of_two(options.ring_bytes) || options.ring_bytes < abi::kMinRingBytes) {
    *error = "the ring size must be a power of two of at least " + std::to_string(abi::kMinRingBytes) + " bytes";
    return false;
  }
  if (options.slot_count == 0) {
    *error = "the session needs at least one ring slot";
    return false;
  }
  unsigned char random[16];
  if (getrandom(random, sizeof random, 0) != ssize_t(sizeof random)) {
    *error = std::string("cannot draw a random session name: ") + std::strerror(errno);
    return false;
  }
  char name[64];
  int n = std::snprintf(name, sizeof name, "/cutrace-%u-", unsigned(getuid()));
  for (unsigned char b : random) n += std::snprintf(name + n, sizeof name - n, "%02x", b);

  uint32_t slot_count = options.slot_count;
  uint32_t ring_bytes = options.ring_bytes;
  struct statvfs shm;
  if (statvfs("/dev/shm", &shm) == 0) {
    RingPlan plan;
    shm_free_bytes_ = uint64_t(shm.f_bavail) * shm.f_frsize;
    if (!plan_rings(options, shm_free_bytes_, &plan, error)) return false;
    slot_count = plan.slot_count;
    ring_bytes = plan.ring_bytes;
  }
  const uint64_t bytes = abi::session_bytes(slot_count, ring_bytes);
  // O_EXCL: a name that already exists is never reused; 0600: only this user's processes may attach.
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = std::string("cannot create shared memory in /dev/shm: ") + std::strerror(errno);
    return false;
  }
  fchmod(fd, 0600);  // shm_open's mode is filtered by the umask; make sure group/other get nothing
  if (ftruncate(fd, off_t(bytes)) != 0) {
    *error = std::string("cannot size the session's shared memory: ") + std::strerror(errno);
    close(fd);
    shm_unlink(name);
    return false;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    *error = std::string("cannot map the session's shared memory: ") + std::strerror(errno);
    close(fd);
    shm_unlink(name);
    return false;
  }
  // The session header and every ring header are written by producers that must never meet a page
  // /dev/shm cannot supply (SIGBUS); back them with memory now, in one call since they lie together.
  // Producers make their rings' data ready themselves (ring::Producer).
  if (!ring::populate_hook(base, abi::session_data_offset(slot_count))) {
    *error = "/dev/shm has no room left for the session's ring headers";
    munmap(base, bytes);
    close(fd);
    shm_unlink(name);
    return false;
  }
  // The object is fresh from ftruncate, so every byte is already zero: slots are kFree, counters 0.
  abi::SessionHeader* h = init_header(base, bytes, slot_count, ring_bytes, options);
  name_ = name;
  header_ = h;
  bytes_ = bytes;
  fd_ = fd;
  owner_ = true;
  return true;
}

abi::SessionHeader* init_header(void* zeroed, uint64_t bytes, uint32_t slot_count, uint32_t ring_bytes,
                                const Options& options) {
  auto* h = new (zeroed) abi::SessionHeader();
  h->magic = abi::kSessionMagic;
  h->abi_version = abi::kAbiVersion;
  h->header_bytes = sizeof(abi::SessionHeader);
  h->total_bytes = bytes;
  h->slots_offset = sizeof(abi::SessionHeader);
  h->data_offset = abi::session_data_offset(slot_count);
  h->slot_count = slot_count;
  h->ring_bytes = ring_bytes;
  h->clock_kind = uint32_t(options.clock);
  h->on_full = uint32_t(abi::OnFull::kDrop);
  h->launcher_pid = uint32_t(getpid());
  h->trace_domains = options.trace_domains;
  h->osrt_threshold_ns = options.osrt_threshold_ns;
  // In TSC ticks the recorder rewrites it once its clock is calibrated, before the program runs.
  h->osrt_threshold = options.osrt_threshold_ns;
  // The same for the backtrace thresholds.
  h->backtrace_min_threshold = abi::kBacktraceOff;
  for (uint32_t k = 0; k < abi::kBacktraceClasses; ++k) {
    h->backtrace_threshold_ns[k] = h->backtrace_threshold[k] = options.backtrace_threshold_ns[k];
    if (k != abi::kBacktraceClassOsrt)
      h->backtrace_min_threshold = std::min(h->backtrace_min_threshold, h->backtrace_threshold[k]);
  }
  h->backtrace_depth_cuda = std::min(options.backtrace_depth_cuda, abi::kMaxBacktraceFrames);
  h->backtrace_depth_osrt = std::min(options.backtrace_depth_osrt, abi::kMaxBacktraceFrames);
  h->backtrace_depth_python = std::min(options.backtrace_depth_python, abi::kMaxPythonFrames);
  h->capture_domains.store(options.trace_domains, std::memory_order_release);
  return h;
}

bool Session::open(const std::string& name, std::string* error) {
  reset();
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    *error = "cannot open session '" + name + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(abi::SessionHeader))) {
    *error = "session '" + name + "' is too small to be a cutrace session";
    close(fd);
    return false;
  }
  const uint64_t bytes = uint64_t(st.st_size);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *error = "cannot map session '" + name + "': " + std::strerror(errno);
    return false;
  }
  auto* h = static_cast<abi::SessionHeader*>(base);
  if (!abi::session_layout_valid(h, bytes)) {
    *error = "session '" + name + "' has an unknown layout (a different cutrace version?)";
    munmap(base, bytes);
    return false;
  }
  name_ = name;
  header_ = h;
  bytes_ = bytes;
  owner_ = false;
  return true;
}

}  // namespace cutrace::session
