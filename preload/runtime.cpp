// The slow paths of the shim: attaching the process to its session, claiming a ring for a thread,
// giving it back when the thread ends, starting over in a fork()ed child, and finding real functions.
//
// Nothing here may allocate through malloc or take a lock that another thread could hold across a
// fork(): the shim runs inside arbitrary programs, before and after their own initialisation, and in
// children that may only call async-signal-safe functions until they exec.
#include "runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "api_ids.h"
#include "api_lookup.h"
#include "cutrace/api_table.h"
#include "cutrace/job.h"
#include "cutrace/proc_stat.h"
#include "interpose.h"
#include "loaded_objects.h"
#include "modules.h"
#include "osrt.h"
#include "gpu_activity.h"
#include "python_frames.h"
#include "unwind_stack.h"

namespace cutrace::preload {

constinit thread_local ThreadState t_thread __attribute__((tls_model("initial-exec"))){};
abi::SessionHeader* g_session = nullptr;
bool g_clock_is_tsc = false;

}  // namespace cutrace::preload

// Exported for libcutrace-cuda12.so (shim_names.h): aliases, so that the shim's own accesses stay direct.
extern "C" {
extern __typeof__(cutrace::preload::g_session) cutrace_shim_session
    __attribute__((alias("_ZN7cutrace7preload9g_sessionE"), visibility("default")));
extern __typeof__(cutrace::preload::g_clock_is_tsc) cutrace_shim_clock_is_tsc
    __attribute__((alias("_ZN7cutrace7preload14g_clock_is_tscE"), visibility("default")));
}

namespace cutrace::preload {

namespace {

enum AttachState : int { kNotTried = 0, kAttaching = 1, kAttached = 2, kNoSession = 3 };
std::atomic<int> g_attach_state{kNotTried};
// The shim's own mapped range, set before attaching completes: OS runtime calls made from here are the
// tracer's (cutrace_preload_record_osrt).
uintptr_t g_self_begin = 0, g_self_end = 0;

void note_own_range() {
  elf::Object self;
  if (elf::object_containing(self_address(), &self)) elf::mapped_span(self, &g_self_begin, &g_self_end);
}

// The mapped ranges of cutrace's own objects besides the shim (libcutrace-cuda12.so,
// libcutrace-osrt.so), noted when they bind to the shim: a backtrace leaves their frames out.
struct Range {
  std::atomic<uintptr_t> begin{0}, end{0};
};
Range g_client_ranges[4];

void debug_log(const char* message);

bool is_own_frame(uintptr_t ip) {
  if (ip >= g_self_begin && ip < g_self_end) return true;
  for (const Range& r : g_client_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_relaxed);
    if (b && ip >= b && ip < r.end.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

uint64_t g_session_bytes = 0;
pthread_key_t g_thread_exit_key;

// Per-process facts, reset in a fork()ed child.
std::atomic<bool> g_process_announced{false};
std::atomic<bool> g_runtime_reported{false};
uint64_t g_process_start_ticks = 0;
bool g_is_forked_child = false;

bool debug_log_enabled() {
  static const bool enabled = [] {
    const char* v = getenv("CUTRACE_LOG");
    return v && v[0] == 'd';
  }();
  return enabled;
}

void debug_log(const char* message) {
  if (!debug_log_enabled()) return;
  // write(2) rather than stdio: this may run in a forked child or before stdio is usable.
  const char prefix[] = "cutrace-preload: ";
  ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
  ignored = write(STDERR_FILENO, message, strlen(message));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
}

// Reads a small file into `buf` with plain syscalls; returns the bytes read.
size_t read_small_file(const char* path, char* buf, size_t capacity) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t total = 0;
  while (total < capacity) {
    ssize_t n = read(fd, buf + total, capacity - total);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += size_t(n);
  }
  close(fd);
  return total;
}

// Field 22 of /proc/self/stat: the process's start time in clock ticks since boot. Together with the
// pid it names this process uniquely, so the recorder can tell a dead process from a reused pid.
uint64_t read_process_start_ticks() {
  proc::Stat st;
  return proc::read_stat(0, &st) ? st.start_ticks : 0;
}

// Set once the thread's key destructor has run: a ring claimed after that (by a later destructor's call)
// is retired at the destructor's next call.
constinit thread_local bool t_thread_ending __attribute__((tls_model("initial-exec"))) = false;

// The thread's key destructor. glibc calls key destructors in rounds, in key order within a round, and
// runs another round when one of them set a value again (PTHREAD_DESTRUCTOR_ITERATIONS rounds at most).
// The shim's key is created early, so its destructor comes before the program's and other libraries':
// it sets its key again once, so that the ring outlives the round in which those run and their calls
// (a sleep) are recorded on the thread's ring, not in a second one taken
// for it. The value counts the calls: 1 when the ring was claimed, 2 once re-armed.
void on_thread_exit(void* calls) {
  ThreadState& ts = t_thread;
  t_thread_ending = true;
  if (!ts.producer.header) return;
  if (reinterpret_cast<uintptr_t>(calls) < 2) {
    pthread_setspecific(g_thread_exit_key, reinterpret_cast<void*>(uintptr_t(2)));
    return;
  }
  // Release: every record this thread pushed is published before the recorder may reclaim the slot.
  ts.producer.header->state.store(uint32_t(abi::SlotState::kRetired), std::memory_order_release);
  ts.producer = ring::Producer{};
}

void on_fork_child() {
  // Only this thread exists in the child. The ring it used belongs to the parent's thread, which is
  // still writing to it; the child must claim its own on its next call.
  ThreadState& ts = t_thread;
  ts.producer = ring::Producer{};
  ts.depth = 0;
  ts.domains = 0;
  ts.in_tracer = 0;
  t_thread_ending = false;
  g_process_announced.store(false, std::memory_order_relaxed);
  g_runtime_reported.store(false, std::memory_order_relaxed);
  g_process_start_ticks = 0;
  g_is_forked_child = true;
  forget_reported_objects();
  forget_python_functions();
  forget_gpu_activity();
  if (g_session) g_session->processes_attached.fetch_add(1, std::memory_order_relaxed);
}

// Parses "<fd>:<dev>:<ino>" (abi::kSessionFdEnvVar): the descriptor if it is still the session's
// object, -1 otherwise (never inherited, closed by the program, or its number reused since).
int inherited_session_fd() {
  const char* text = getenv(abi::kSessionFdEnvVar);
  if (!text || !*text) return -1;
  unsigned long long fields[3];
  for (int i = 0; i < 3; ++i) {
    char* end = nullptr;
    fields[i] = strtoull(text, &end, 10);
    if (end == text || *end != (i < 2 ? ':' : '\0')) return -1;
    text = end + 1;
  }
  if (fields[0] > INT32_MAX) return -1;
  struct stat st;
  const int fd = int(fields[0]);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_dev) != fields[1] ||
      uint64_t(st.st_ino) != fields[2])
    return -1;
  return fd;
}

// The session exists but this process may not open it (it changed user and lost the inherited
// descriptor): said through a name the recorder watches for, since nothing can be written into the
// session. A session that is gone (ENOENT: a process that outlived its run) is no news.
void announce_unreached(const char* name, int open_errno) {
  if (open_errno == ENOENT) return;
  char marker[256];
  const int n = snprintf(marker, sizeof marker, "%s%s%u.%u.%d", name, abi::kUnreachedMarker, unsigned(getpid()),
                         unsigned(getuid()), open_errno);
  if (n <= 0 || size_t(n) >= sizeof marker) return;
  const int fd = shm_open(marker, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  close(fd);
  shm_unlink(marker);
}

bool map_session() {
  const char* name = getenv(abi::kSessionEnvVar);
  if (!name || !*name) return false;
  // The inherited descriptor first: it reaches the session whatever user the process runs as, and is
  // left open for the processes it starts, which may change user in turn.
  int fd = inherited_session_fd();
  const bool inherited = fd >= 0;
  if (!inherited) fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    announce_unreached(name, errno);
    debug_log("CUTRACE_SESSION is set but the session cannot be opened; calls pass through untraced");
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(abi::SessionHeader))) {
    if (!inherited) close(fd);
    debug_log("the session object is too small; calls pass through untraced");
    return false;
  }
  void* base = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (!inherited) close(fd);
  if (base == MAP_FAILED) {
    debug_log("cannot map the session; calls pass through untraced");
    return false;
  }
  auto* header = static_cast<abi::SessionHeader*>(base);
  if (!abi::session_layout_valid(header, uint64_t(st.st_size))) {
    munmap(base, size_t(st.st_size));
    debug_log("the session was made by a different cutrace version; calls pass through untraced");
    return false;
  }
  if (header->api_table_hash != 0 && header->api_table_hash != kApiTableHash) {
    // Another build's recorder would name this shim's api ids as other functions: the program runs
    // untraced, and the recorder says so.
    header->foreign_shims.fetch_add(1, std::memory_order_relaxed);
    munmap(base, size_t(st.st_size));
    debug_log("the session's recorder is of another cutrace build; calls pass through untraced");
    return false;
  }
  g_session_bytes = uint64_t(st.st_size);
  g_clock_is_tsc = header->clock_kind == uint32_t(abi::ClockKind::kTsc);
  header->processes_attached.fetch_add(1, std::memory_order_relaxed);
  g_session = header;
  return true;
}

// Attaches at most once per process image, from whichever comes first: the library constructor or a
// wrapper called by another library's constructor that ran before ours.
bool attach_once() {
  int state = g_attach_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == kAttached, 1)) return true;
  if (state == kNoSession) return false;
  int expected = kNotTried;
  if (g_attach_state.compare_exchange_strong(expected, kAttaching, std::memory_order_acq_rel)) {
    pthread_key_create(&g_thread_exit_key, on_thread_exit);
    pthread_atfork(nullptr, nullptr, on_fork_child);
    note_own_range();
    const int saved_errno = errno;
    bool attached = map_session();
    errno = saved_errno;
    if (attached) init_capture();
    g_attach_state.store(attached ? kAttached : kNoSession, std::memory_order_release);
    return attached;
  }
  // Another thread is attaching; it does a handful of syscalls, so waiting is short.
  while ((state = g_attach_state.load(std::memory_order_acquire)) == kAttaching) sched_yield();
  return state == kAttached;
}

__attribute__((constructor)) void cutrace_preload_init() {
  if (!attach_once()) return;
  // The objects loaded at start-up are noted (a later look redirects only what came after), and a
  // program that carries CUDA from the start shows in the trace even if none of its calls can be
  // recorded (a static runtime without a driver).
  ThreadState& ts = t_thread;
  note_loaded_objects(ts);
  if (!ts.producer.header && process_uses_cuda()) prepare_thread(ts);
  start_python_sampling();
}

// Libraries loaded through dlopen and never looked up through a handle are found here at last.
__attribute__((destructor)) void cutrace_preload_fini() {
  if (g_attach_state.load(std::memory_order_acquire) != kAttached) return;
  const int saved_errno = errno;
  ThreadState& ts = t_thread;
  note_loaded_objects(ts);
  errno = saved_errno;
}

}  // namespace

// The runtime the process really uses (a PyTorch or JAX wheel brings its own, CUDA 12's or 13's), asked
// of the library itself, once it is loaded; the real function is called, not a wrapper, so the
// program's trace does not show it.
void report_cuda_runtime(ThreadState& ts) {
  if (g_runtime_reported.load(std::memory_order_relaxed) || !ts.producer.header) return;
  int32_t ids[kMaxMajorVersions];
  const size_t count = find_apis("cudaRuntimeGetVersion", ids, kMaxMajorVersions);
  for (size_t k = 0; k < count; ++k) {
    using RuntimeGetVersion = int (*)(int*);
    auto get_version = real_function<RuntimeGetVersion>(uint32_t(ids[k]));
    int version = 0;
    Dl_info where{};
    if (!get_version || get_version(&version) != 0 || !dladdr(reinterpret_cast<void*>(get_version), &where) ||
        !where.dli_fname)
      continue;
    if (!g_runtime_reported.exchange(true, std::memory_order_relaxed))
      emit_string(ts, abi::StringKind::kCudaRuntime, uint64_t(version), where.dli_fname, strlen(where.dli_fname));
    return;
  }
}

namespace {

// The process's own rank variables (`cutrace profile -- mpirun -n 8 app`: one trace, a rank per
// process), raw: the reader picks the rank by cutrace/job.h's precedence. Read now, not when the shim
// loads, so that a child forked without exec that set its RANK before its first traced call is named by
// it. getenv neither allocates nor locks; the stack buffer is bounded by the variables' count.
void announce_job(ThreadState& ts) {
  char text[256 + sizeof job::kFamilies / sizeof job::kFamilies[0] * 3 * (job::kMaxValueBytes + 32)];
  size_t n = 0;
  auto add = [&](const char* name) {
    if (!name) return;
    const char* value = getenv(name);
    if (!value || !*value) return;
    const size_t name_bytes = strlen(name), value_bytes = strnlen(value, job::kMaxValueBytes);
    if (n + name_bytes + value_bytes + 2 > sizeof text) return;
    if (n) text[n++] = '\0';
    std::memcpy(text + n, name, name_bytes);
    n += name_bytes;
    text[n++] = '=';
    std::memcpy(text + n, value, value_bytes);
    n += value_bytes;
  };
  for (const job::Family& f : job::kFamilies) {
    add(f.rank);
    add(f.local_rank);
    add(f.world_size);
  }
  if (n) emit_string(ts, abi::StringKind::kProcessJob, 0, text, n);
}

void announce_process(ThreadState& ts) {
  char buf[abi::kMaxStringBytes];
  size_t n = read_small_file("/proc/self/cmdline", buf, sizeof buf);
  // Arguments are NUL-separated, and the last one NUL-terminated.
  while (n > 0 && buf[n - 1] == '\0') --n;
  for (size_t i = 0; i < n; ++i)
    if (buf[i] == '\0') buf[i] = ' ';
  emit_string(ts, abi::StringKind::kProcessCommand, 0, buf, n);
  ssize_t exe = readlink("/proc/self/exe", buf, sizeof buf);
  if (exe > 0) emit_string(ts, abi::StringKind::kProcessExe, 0, buf, size_t(exe));
  announce_job(ts);
  report_all_objects(ts);
  report_cuda_runtime(ts);
}

bool claim_ring(ThreadState& ts) {
  abi::SessionHeader* s = g_session;
  const uint32_t tid = uint32_t(syscall(SYS_gettid));
  const uint32_t count = s->slot_count;
  // Start at a slot derived from the tid so that threads starting together rarely contend.
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t slot = (tid + i) % count;
    if (abi::slot_header(s, slot)->state.load(std::memory_order_relaxed) != uint32_t(abi::SlotState::kFree)) continue;
    if (g_process_start_ticks == 0) g_process_start_ticks = read_process_start_ticks();
    if (!ring::claim_slot(s, slot, uint32_t(getpid()), tid, uint32_t(getppid()), g_process_start_ticks, &ts.producer))
      continue;
    // A recorder with no ring in use naps long; this one is about to fill.
    abi::wake_recorder(s);
    return true;
  }
  return false;
}

}  // namespace

// -s cpu where perf events are forbidden (SessionHeader::timer_sampling_hz): the timer signal's
// handler. It writes one CPU sample of the thread it interrupted into that thread's ring: the
// interrupted instruction and the return addresses below it, without cutrace's frames. A signal that
// comes while the thread is inside cutrace (writing a record, taking a stack) is counted and skipped:
// the ring is the thread's own and not reentrant.
void on_sample_signal(int, siginfo_t* info, void* context) {
  if (info->si_code != SI_TIMER || !g_session) return;
  const int saved_errno = errno;
  ThreadState& ts = t_thread;
  if (ts.in_tracer || !ts.producer.header) {
    g_session->timer_samples_skipped.fetch_add(1, std::memory_order_relaxed);
    errno = saved_errno;
    return;
  }
  const uint64_t time = now();
  const auto pc = uint64_t(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
  constexpr int kHandlerFrames = 8;  // this handler, libc's signal trampoline
  void* frames[abi::kMaxSampleFrames + kHandlerFrames];
  WritingRecord writing(ts);
  const int n = unwind_stack(frames, int(abi::kMaxSampleFrames) + kHandlerFrames);
  // The unwinder steps through the signal frame (glibc's restorer carries its unwind table): the
  // interrupted instruction is one of the frames, and the ones before it are the handler's.
  int first = 0;
  while (first < n && uint64_t(reinterpret_cast<uintptr_t>(frames[first])) != pc) ++first;
  uint64_t kept[abi::kMaxSampleFrames];
  uint32_t count = 0;
  kept[count++] = pc;
  for (int k = first + 1; k < n && count < abi::kMaxSampleFrames; ++k)
    if (first < n && !is_own_frame(reinterpret_cast<uintptr_t>(frames[k]))) kept[count++] = uint64_t(reinterpret_cast<uintptr_t>(frames[k]));
  const uint32_t bytes = uint32_t(sizeof(abi::CpuSampleRecord)) + 8u * count;
  if (uint8_t* p = ts.producer.reserve(bytes)) {
    auto* r = reinterpret_cast<abi::CpuSampleRecord*>(p);
    r->header = {uint16_t(abi::RecordKind::kCpuSample), uint16_t(bytes), count};
    r->time = time;
    r->cpu = uint32_t(sched_getcpu());
    r->flags = 0;
    std::memcpy(r->frames, kept, 8u * count);
    ts.producer.commit(bytes);
  }
  errno = saved_errno;
}

// Starts the timer sampler on the calling thread, which has just claimed its ring: a timer on its own
// CPU clock, signalling this thread alone, every 1/timer_sampling_hz second of its CPU time (so a
// thread blocked in a system call is never interrupted by it).
void start_timer_sampling() {
  const uint32_t hz = g_session->timer_sampling_hz;
  if (!hz) return;
  static std::atomic<bool> handler_installed{false};
  if (!handler_installed.exchange(true)) {
    struct sigaction sa {};
    sa.sa_sigaction = on_sample_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(abi::timer_sample_signal(), &sa, nullptr);
  }
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = abi::timer_sample_signal();
  event._sigev_un._tid = pid_t(syscall(SYS_gettid));  // sigev_notify_thread_id, which glibc 2.36 does not name
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &event, &timer) != 0) return;
  const long period_ns = long(1000000000u / hz);
  itimerspec every{{period_ns / 1000000000, period_ns % 1000000000}, {period_ns / 1000000000, period_ns % 1000000000}};
  timer_settime(timer, 0, &every, nullptr);
}

bool prepare_thread(ThreadState& ts) {
  if (ts.in_tracer) return false;
  // Attaching (for a call made before this library's constructor ran) and claiming make system calls.
  const int saved_errno = errno;
  if (!attach_once()) {
    errno = saved_errno;
    return false;
  }
  ts.in_tracer++;
  bool claimed = claim_ring(ts);
  if (claimed) {
    pthread_setspecific(g_thread_exit_key, reinterpret_cast<void*>(uintptr_t(t_thread_ending ? 2 : 1)));
    const bool first_in_process = !g_process_announced.exchange(true, std::memory_order_relaxed);
    abi::ThreadStartRecord start{};
    // Once per thread: nsys's cuda_api_trace shows it (T-Pri). errno is restored below.
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, 0);
    const uint32_t priority = errno == 0 && nice >= -20 && nice <= 19 ? abi::kThreadPriorityKnown | uint32_t(20 + nice) : 0;
    start.header = {uint16_t(abi::RecordKind::kThreadStart), uint16_t(sizeof start), priority};
    start.time = now();
    start.pid = ts.producer.header->pid;
    start.tid = ts.producer.header->tid;
    start.ppid = ts.producer.header->ppid;
    start.flags = (first_in_process ? abi::kThreadFlagFirstInProcess : 0) |
                  (first_in_process && g_is_forked_child ? abi::kThreadFlagForkedChild : 0);
    ts.producer.push(&start, sizeof start);  // in_tracer is held: no WritingRecord needed
    char name[17] = {};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0) emit_string(ts, abi::StringKind::kThreadName, 0, name, strlen(name));
    if (first_in_process) announce_process(ts);
    start_timer_sampling();
    // A forked child's sampler starts here, once the child records: at the fork, its interpreter is
    // not yet fit for another thread to take the GIL.
    if (first_in_process && g_is_forked_child) start_python_sampling();
  } else if (g_session->capture_domains.load(std::memory_order_relaxed)) {
    // Every slot is taken: this call's record is lost, and counted so the loss is reported.
    g_session->lost_no_slot.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
  ts.in_tracer--;
  return claimed;
}

bool process_announced() { return g_process_announced.load(std::memory_order_relaxed); }

namespace testing {
void set_process_announced(bool announced) { g_process_announced.store(announced, std::memory_order_relaxed); }
}  // namespace testing

void* resolve_real(uint32_t api_id) {
  if (api_id >= kApiTableSize) return nullptr;
  const ApiInfo& info = kApiTable[api_id];
  const int saved_errno = errno;
  // RTLD_NEXT (asked from inside the shim) finds what the program would have bound to without it,
  // including another preloaded tool stacked after cutrace. Asked for the library's own symbol version
  // where it has one, so that a wrapper built from CUDA 13's prototypes never calls CUDA 12's function
  // (and the other way round); an unversioned definition (a tool's) still matches.
  const char* version = g_real_versions[api_id];
  void* fn = version ? real_dlvsym()(RTLD_NEXT, info.name, version) : real_dlsym()(RTLD_NEXT, info.name);
  // A library loaded with RTLD_LOCAL (ctypes, dlopen-based loaders) is not in the global scope that
  // RTLD_NEXT searches, but the program reaches its functions through the wrappers all the same:
  // look inside it by its soname, without another dl call.
  if (!fn) fn = elf::find_in_library(info.library, self_address(), info.name);
  // Only another major version is loaded, and the program reached this wrapper by an unversioned name
  // (dlsym(RTLD_DEFAULT, ...)): where both versions declare the function alike, calling that version's
  // is what the program would have done without cutrace.
  if (!fn && version && g_may_fall_back[api_id]) fn = real_dlsym()(RTLD_NEXT, info.name);
  // The same for that version loaded with RTLD_LOCAL, as the dependency of a library the program
  // dlopen()ed (CUDA 12's libcusolver.so.11 under a framework's extension module): that library's
  // calls bind to this wrapper, and without cutrace they would have reached that version, not failed.
  if (!fn && version && g_may_fall_back[api_id]) fn = elf::find_in_other_version(info.library, info.name);
  errno = saved_errno;
  if (fn) g_real_functions[api_id].store(fn, std::memory_order_relaxed);
  return fn;
}

void missing_function(uint32_t api_id, const void* caller) {
  // Without cutrace the program's reference would have found no definition, and the loader's lazy
  // binding would have ended it with this message (glibc: "PROGRAM: symbol lookup error: OBJECT:
  // undefined symbol: NAME, version VERSION", the object being the program itself when its name is
  // empty) and exit status 127. Anything else (an invented error code) changes what the program does.
  const char* program = program_invocation_name && *program_invocation_name ? program_invocation_name : "<main program>";
  Dl_info where{};
  const char* object = dladdr(caller, &where) && where.dli_fname && *where.dli_fname ? where.dli_fname : program;
  const char* name = api_id < kApiTableSize ? kApiTable[api_id].name : "?";
  const char* version = api_id < kApiTableSize ? g_real_versions[api_id] : nullptr;
  char message[1024];
  const int n = std::snprintf(message, sizeof message, "%s: symbol lookup error: %s: undefined symbol: %s%s%s\n",
                              program, object, name, version ? ", version " : "", version ? version : "");
  if (n > 0) {
    size_t left = std::min(size_t(n), sizeof message - 1);
    const char* p = message;
    while (left > 0) {
      const ssize_t wrote = write(STDERR_FILENO, p, left);
      if (wrote <= 0 && errno != EINTR) break;
      if (wrote > 0) p += wrote, left -= size_t(wrote);
    }
  }
  _exit(127);
}

bool start_tracer_thread(void* (*body)(void*)) {
  const int saved_errno = errno;
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  const bool started = pthread_create(&thread, &attr, body, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = saved_errno;
  return started;
}

void emit_string(ThreadState& ts, abi::StringKind kind, uint64_t key, const char* text, size_t length) {
  if (!ts.producer.header) return;
  if (length > abi::kMaxStringBytes) length = abi::kMaxStringBytes;
  const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::StringRecord) + length));
  WritingRecord writing(ts);
  uint8_t* p = ts.producer.reserve(bytes);
  if (!p) return;
  auto* r = reinterpret_cast<abi::StringRecord*>(p);
  r->header = {uint16_t(abi::RecordKind::kString), uint16_t(bytes), uint32_t(kind)};
  r->key = key;
  r->length = uint32_t(length);
  r->reserved = 0;
  std::memcpy(r->text, text, length);
  // Zero the alignment tail so no stale ring bytes reach the trace.
  std::memset(r->text + length, 0, bytes - sizeof(abi::StringRecord) - length);
  ts.producer.commit(bytes);
}

void note_client_range(const void* address) {
  elf::Object o;
  uintptr_t begin = 0, end = 0;
  if (!address || !elf::object_containing(reinterpret_cast<uintptr_t>(address), &o) ||
      !elf::mapped_span(o, &begin, &end))
    return;
  for (Range& r : g_client_ranges) {
    uintptr_t seen = 0;
    // A free slot is claimed by its begin, then given its end: a reader that sees the begin before the
    // end sees an empty range for that moment, never another object's end.
    if (r.begin.compare_exchange_strong(seen, begin, std::memory_order_relaxed)) {
      r.end.store(end, std::memory_order_relaxed);
      return;
    }
    if (seen == begin) return;
  }
}

void record_backtrace(ThreadState& ts, uint32_t api_id, uint64_t begin, uint64_t duration, bool osrt) {
  if (api_id >= kApiTableSize || ts.in_tracer) return;
  const uint32_t cls = osrt ? abi::kBacktraceClassOsrt : uint32_t(kApiTable[api_id].api_class);
  if (cls >= abi::kBacktraceClasses || duration < g_session->backtrace_threshold[cls]) return;
  const int saved_errno = errno;
  // The objects its frames lie in are reported first, so that a reader can place every frame.
  note_loaded_objects(ts);
  const uint32_t depth = std::min(osrt ? g_session->backtrace_depth_osrt : g_session->backtrace_depth_cuda,
                                  abi::kMaxBacktraceFrames);
  // Room for the tracer's own frames (this function, the wrapper, the OS runtime's recording path).
  constexpr int kOwnFrames = 8;
  void* frames[abi::kMaxBacktraceFrames + kOwnFrames];
  ++ts.in_tracer;
  const int n = unwind_stack(frames, int(depth) + kOwnFrames);
  --ts.in_tracer;
  // The tracer's frames: this function and the wrapper at the top, and a wrapper deeper down when a
  // library calls back into the program (a host callback, a cuDNN engine calling cuBLAS).
  uint32_t count = 0;
  for (int k = 0; k < n && count < depth; ++k)
    if (!is_own_frame(reinterpret_cast<uintptr_t>(frames[k]))) frames[count++] = frames[k];
  if (!ts.producer.header) {
    errno = saved_errno;
    return;
  }
  // A CPython thread's script frames: which line of the program made the call.
  abi::PythonFrame python[abi::kMaxPythonFrames];
  ++ts.in_tracer;
  const uint32_t python_count =
      python_frames(ts, python, std::min(g_session->backtrace_depth_python, abi::kMaxPythonFrames));
  --ts.in_tracer;
  if (count + python_count == 0) {
    errno = saved_errno;
    return;
  }
  const uint32_t bytes = abi::backtrace_record_bytes(count, python_count);
  {
    WritingRecord writing(ts);
    if (uint8_t* p = ts.producer.reserve(bytes)) {
      auto* r = reinterpret_cast<abi::BacktraceRecord*>(p);
      r->header = {uint16_t(abi::RecordKind::kBacktrace), uint16_t(bytes), count};
      r->call_begin = begin;
      r->api_id = api_id;
      r->python_frames = python_count;
      std::memcpy(r->frames, frames, 8u * count);
      std::memcpy(r->frames + count, python, sizeof(abi::PythonFrame) * python_count);
      ts.producer.commit(bytes);
    }
  }
  errno = saved_errno;
}

}  // namespace cutrace::preload

using namespace cutrace;

extern "C" preload::OsrtBindingState cutrace_preload_osrt_binding(preload::OsrtBinding* out) {
  const int state = preload::g_attach_state.load(std::memory_order_acquire);
  if (state == preload::kNoSession) return preload::OsrtBindingState::kNoSession;
  if (state != preload::kAttached) return preload::OsrtBindingState::kNotYet;
  out->session = preload::g_session;
  out->process_capture = &preload::g_process_capture;
  out->clock_is_tsc = preload::g_clock_is_tsc;
  // Its wrappers' frames are the tracer's, left out of the OS runtime's backtraces.
  preload::note_client_range(__builtin_return_address(0));
  return preload::OsrtBindingState::kBound;
}

extern "C" void cutrace_preload_record_osrt(preload::ThreadState& ts, uint32_t api_id, uint64_t begin, uint64_t end,
                                            uint64_t result, uint8_t flags, const uint64_t* args, uint32_t arg_count,
                                            const void* caller) {
  const auto from = reinterpret_cast<uintptr_t>(caller);
  if (from >= preload::g_self_begin && from < preload::g_self_end) return;
  // CUPTI's own threads wait on semaphores and conditions of their own: the tracer's calls, not the
  // program's.
  if (preload::in_shims_cupti(from)) return;
  // The call's own errno stays what the program sees; claiming a ring makes system calls of its own.
  const int saved_errno = errno;
  if (ts.in_tracer || (!ts.producer.header && !preload::prepare_thread(ts))) {
    errno = saved_errno;
    return;
  }
  if (arg_count > abi::kMaxApiArgs) arg_count = abi::kMaxApiArgs;
  // Not inside a CUDA call, whose own stack covers it.
  if (ts.depth == 0) preload::record_backtrace(ts, api_id, begin, end - begin, true);
  // Inside the calls in progress on this thread (a CUDA call whose driver made this ioctl).
  preload::write_call_record(ts, api_id, begin, end, result, ts.depth, ts.domains, flags, args, arg_count);
  errno = saved_errno;
}
