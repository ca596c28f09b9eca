// Whole-process overhead benchmark: in one run, times a cheap CUDA runtime call (on the simulated
// device) in a separate program three ways, interleaved round by round so machine noise hits all
// three alike:
//   baseline     the program alone (no shim)
//   capture off  shim preloaded into a live session whose capture flag is 0
//   capture on   shim preloaded, every call recorded, a real cutrace-recorder draining the rings
//   outside a range  capture on for the session, but -c cudaProfilerApi and the program never opens
//                a range: its process's own gate is closed
//   floor        a preload that only reads the clock around the real call and writes a record of the
//                same size into a ring of the thread's own (floor_preload.cpp; CUDA runtime calls on
//                the plt route): what any tracer of the call must pay
// and reports the median ns per call of each, the nanoseconds the shim adds per call, and what capture
// on adds as a multiple of what the floor adds (issue 27's goal: at most 1.25).
//
// usage: bench_overhead [--calls N] [--rounds R] [--backtrace-threshold NS] [--burst N]
//                       [--api cudaGetDevice|cudaPeekAtLastError|nvtxRangePushA|pthread_mutex_lock]
//                       [--route plt|dlsym|dlsym12|getprocaddress]
// --burst N: the program times its calls in loops of N with pauses between them, after untimed loops
// that write a tracer's ring through once (default 100000; 0: one loop of all the calls, which on a
// machine with few CPUs outruns the recorder, drops records and pays for the ring's first lap).
// --api pthread_mutex_lock measures -t osrt: the OS runtime wrappers preloaded after the shim, osrt
// captured (or not), and every lock of the free mutex far under the default 1000 ns threshold, so
// "capture on" is the cost of a call that is timed and not recorded.
// --route picks how the program reaches the function (tests/apps/cheap_calls.cpp): bound by the
// dynamic linker (default), through dlsym on a dlopen handle, or cuDriverGetVersion through the
// driver's cuGetProcAddress; each hands the program the same kind of wrapper, so each should cost the
// same. dlsym12 does the same with libcudart.so.12: CUDA 12's wrappers, which live in
// libcutrace-cuda12.so and reach the shim's state through its exported names.
// The paths of the program, the shim, the recorder and the simulated device come from the build
// (compile definitions) and can be overridden with CUTRACE_BENCH_{APP,PRELOAD,RECORDER,SIMLIB}.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cutrace/session.h"

extern char** environ;

namespace {

std::string path_from(const char* env, const char* fallback) {
  const char* v = std::getenv(env);
  return v && *v ? v : fallback;
}

struct Paths {
  std::string app = path_from("CUTRACE_BENCH_APP", CUTRACE_BENCH_APP);
  std::string preload = path_from("CUTRACE_BENCH_PRELOAD", CUTRACE_BENCH_PRELOAD);
  std::string recorder = path_from("CUTRACE_BENCH_RECORDER", CUTRACE_BENCH_RECORDER);
  std::string simlib = path_from("CUTRACE_BENCH_SIMLIB", CUTRACE_BENCH_SIMLIB);
  // The simulated CUDA 12 runtime (--route dlsym12); empty in a build without CUDA 12.
  std::string simlib12 = path_from("CUTRACE_BENCH_SIMLIB12", CUTRACE_BENCH_SIMLIB12);
  std::string cutrace = path_from("CUTRACE_BENCH_CUTRACE", CUTRACE_BENCH_CUTRACE);
  std::string floor = path_from("CUTRACE_BENCH_FLOOR", CUTRACE_BENCH_FLOOR);
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_overhead: %s\n", message.c_str());
  std::exit(1);
}

std::vector<std::string> base_environment(const Paths& paths) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("LD_PRELOAD=", 0) == 0 || s.rfind("LD_LIBRARY_PATH=", 0) == 0 || s.rfind("CUTRACE_SESSION=", 0) == 0)
      continue;
    env.push_back(s);
  }
  env.push_back("LD_LIBRARY_PATH=" + paths.simlib + (paths.simlib12.empty() ? "" : ":" + paths.simlib12));
  return env;
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int stdout_fd,
            int stderr_fd = -1) {
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  pid_t pid;
  int rc = posix_spawn(&pid, a[0], &actions, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) die("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  return out;
}

// Calls per timed loop of the program (its `burst` argument; 0: one loop of all of them). The default
// fills about a third of the default ring (16 MiB) with records of one argument, and the program's
// untimed bursts before them write that ring through once: every configuration is timed in its steady
// state, and a recorder that keeps up drops nothing.
long g_burst = 100'000;

// Runs the program and returns its ns_per_call line.
double run_app(const Paths& paths, const std::vector<std::string>& env, long calls, const std::string& api,
               const std::string& route) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) die("pipe failed");
  pid_t pid = spawn({paths.app, std::to_string(calls), api, route, std::to_string(g_burst)}, env, out[1]);
  close(out[1]);
  std::string text = read_all(out[0]);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die(paths.app + " failed:\n" + text);
  auto at = text.find("ns_per_call ");
  if (at == std::string::npos) die("no ns_per_call in the program's output:\n" + text);
  if (text.find("failed 0\n") == std::string::npos) die("the program's calls failed (is the simulated device built?):\n" + text);
  return std::strtod(text.c_str() + at + 12, nullptr);
}

struct TracedResult {
  double ns_per_call;
  std::string summary;
};

uint64_t g_backtrace_ns = cutrace::abi::kBacktraceOff;

TracedResult run_traced(const Paths& paths, long calls, const std::string& api, const std::string& route, bool capture,
                        const std::string& trace, bool outside_range = false) {
  cutrace::session::Session session;
  cutrace::session::Options options;
  options.clock = cutrace::session::choose_clock();
  const bool osrt = api == "pthread_mutex_lock";
  options.trace_domains =
      capture ? cutrace::abi::kCudaDomains | cutrace::abi::domain_bit(cutrace::abi::ApiDomain::kNvtx) : 0;
  if (capture && osrt) options.trace_domains |= cutrace::abi::domain_bit(cutrace::abi::ApiDomain::kOsRuntime);
  options.slot_count = 4;
  // --backtrace-threshold: the CUDA calls at least this long carry their stack (0: every call).
  for (uint32_t k = 0; k < cutrace::abi::kBacktraceClassOsrt; ++k) options.backtrace_threshold_ns[k] = g_backtrace_ns;
  // The default ring, drained by a real recorder as in any run: the rings' pages are touched once and
  // then reused. Records the recorder could not keep up with show as dropped in the summary line.
  options.ring_bytes = cutrace::abi::kDefaultRingBytes;
  std::string error;
  if (!session.create(options, &error)) die(error);
  int ready[2];
  if (pipe2(ready, 0) != 0) die("pipe failed");
  fcntl(ready[0], F_SETFD, FD_CLOEXEC);
  std::vector<std::string> renv = base_environment(paths);
  pid_t recorder = spawn({paths.recorder, "--session", session.name(), "--output", trace, "--ready-fd",
                          std::to_string(ready[1]), "--force"},
                         renv, -1);
  close(ready[1]);
  char buf[16] = {};
  if (read(ready[0], buf, 6) != 6 || std::strncmp(buf, "ready\n", 6) != 0) die("the recorder did not start");
  std::vector<std::string> env = base_environment(paths);
  // As cutrace profile preloads them: CUDA 12's wrappers (where built) ahead of the shim, and with -t osrt
  // the OS runtime wrappers after it.
  const std::string lib_dir = paths.preload.substr(0, paths.preload.rfind('/') + 1);
  env.push_back("LD_PRELOAD=" + (paths.simlib12.empty() ? "" : lib_dir + "libcutrace-cuda12.so:") + paths.preload +
                (osrt ? ":" + lib_dir + "libcutrace-osrt.so" : ""));
  env.push_back("CUTRACE_SESSION=" + session.name());
  env.push_back("NVTX_INJECTION64_PATH=" + paths.preload);  // as cutrace profile sets it (-t nvtx)
  if (outside_range) env.push_back(std::string(cutrace::abi::kCaptureEnvVar) + "=cudaProfilerApi,stop,0");
  TracedResult result;
  result.ns_per_call = run_app(paths, env, calls, api, route);
  cutrace::session::request_shutdown(session.header());
  result.summary = read_all(ready[0]);
  close(ready[0]);
  int status = 0;
  waitpid(recorder, &status, 0);
  unlink(trace.c_str());
  return result;
}

// What two timestamps cost here, the floor under any per-call overhead that times a call: rdtsc's
// cost varies several-fold between machines (and under virtualisation), so results are only
// comparable next to it.
double two_timestamps_ns(bool tsc) {
  constexpr int kReads = 2'000'000;
  volatile uint64_t sink = 0;
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < kReads; ++i) {
    if (tsc) {
      sink = sink + __rdtsc();
    } else {
      timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      sink = sink + uint64_t(t.tv_nsec);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  return 2.0 * (double(b.tv_sec - a.tv_sec) * 1e9 + double(b.tv_nsec - a.tv_nsec)) / kReads;
}

double elapsed_ms(const Paths& paths, const std::vector<std::string>& argv) {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::vector<std::string> env = base_environment(paths);
  pid_t pid = spawn(argv, env, devnull, devnull);
  int status = 0;
  waitpid(pid, &status, 0);
  close(devnull);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die(argv[0] + " failed");
  return double(b.tv_sec - a.tv_sec) * 1e3 + double(b.tv_nsec - a.tv_nsec) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// A number from the recorder's summary line ("summary events=N ... dropped=N ..."), 0 when absent.
uint64_t summary_field(const std::string& summary, const std::string& key) {
  const size_t at = summary.find(" " + key + "=");
  return at == std::string::npos ? 0 : std::strtoull(summary.c_str() + at + key.size() + 2, nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 2'000'000;
  int rounds = 7;
  std::string api = "cudaGetDevice", route = "plt";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc) calls = std::atol(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--api" && i + 1 < argc) api = argv[++i];
    else if (a == "--route" && i + 1 < argc) route = argv[++i];
    else if (a == "--backtrace-threshold" && i + 1 < argc) g_backtrace_ns = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--burst" && i + 1 < argc) g_burst = std::atol(argv[++i]);
    else
      die("unknown argument '" + a +
          "'; usage: bench_overhead [--calls N] [--rounds R] [--api NAME] [--route plt|dlsym|dlsym12|getprocaddress] "
          "[--backtrace-threshold NS] [--burst N]");
  }
  if (calls <= 0 || rounds <= 0) die("--calls and --rounds must be positive");
  if (g_burst < 0) die("--burst must be 0 (one loop) or positive");
  Paths paths;
  const std::string trace = "/tmp/bench_overhead_" + std::to_string(getpid()) + ".cutrace";
  std::vector<double> baseline, off, on, outside, floor;
  std::string last_summary;
  uint64_t events = 0, dropped = 0;
  // The floor interposes the runtime's exported functions, which only the plt route reaches.
  const bool with_floor = route == "plt" && api.rfind("cuda", 0) == 0 && !paths.floor.empty();
  std::vector<std::string> floor_env = base_environment(paths);
  floor_env.push_back("LD_PRELOAD=" + paths.floor);
  for (int r = 0; r < rounds; ++r) {
    baseline.push_back(run_app(paths, base_environment(paths), calls, api, route));
    if (with_floor) floor.push_back(run_app(paths, floor_env, calls, api, route));
    off.push_back(run_traced(paths, calls, api, route, false, trace).ns_per_call);
    outside.push_back(run_traced(paths, calls, api, route, true, trace, true).ns_per_call);
    TracedResult traced = run_traced(paths, calls, api, route, true, trace);
    on.push_back(traced.ns_per_call);
    last_summary = traced.summary;
    events += summary_field(traced.summary, "events");
    dropped += summary_field(traced.summary, "dropped");
  }
  // What `cutrace profile` adds to a program's run time: start-up and finishing of an empty trace.
  std::vector<double> plain_ms, profiled_ms;
  const std::string startup_trace = "/tmp/bench_startup_" + std::to_string(getpid());
  for (int r = 0; r < 20; ++r) {
    plain_ms.push_back(elapsed_ms(paths, {"/bin/true"}));
    profiled_ms.push_back(elapsed_ms(paths, {paths.cutrace, "profile", "-f", "true", "-o", startup_trace, "--", "/bin/true"}));
  }
  unlink((startup_trace + ".cutrace").c_str());
  const double b = median(baseline), f = median(off), n = median(on), o = median(outside);
  const bool tsc = cutrace::session::choose_clock() == cutrace::abi::ClockKind::kTsc;
  std::printf("%s x %ld %s (route %s, %s), %d rounds, median ns per %s (clock: %s)\n",
              route == "getprocaddress"    ? "cuDriverGetVersion"
              : api == "nvtxRangePushA"     ? "nvtxRangePushA+nvtxRangePop"
              : api == "pthread_mutex_lock" ? "pthread_mutex_lock+unlock (-t osrt, under the threshold)"
                                            : api.c_str(),
              calls, api == "nvtxRangePushA" || api == "pthread_mutex_lock" ? "pairs" : "calls", route.c_str(),
              g_burst ? ("timed in bursts of " + std::to_string(g_burst) + " after the ring was written through").c_str()
                      : "one loop",
              rounds,
              api == "nvtxRangePushA" || api == "pthread_mutex_lock" ? "pair" : "call", tsc ? "tsc" : "monotonic");
  std::printf("  %-28s %8.2f ns\n", "without cutrace", b);
  std::printf("  %-28s %8.2f ns   added %+7.2f ns\n", "cutrace, capture off", f, f - b);
  std::printf("  %-28s %8.2f ns   added %+7.2f ns\n", "cutrace, outside a range (-c)", o, o - b);
  std::printf("  %-28s %8.2f ns   added %+7.2f ns%s\n", "cutrace, capture on", n, n - b,
              g_backtrace_ns == cutrace::abi::kBacktraceOff ? ""
              : g_backtrace_ns == 0 ? "   (every call with its stack)"
                                    : "   (calls over --backtrace-threshold with their stack)");
  if (with_floor) {
    const double fl = median(floor);
    std::printf("  %-28s %8.2f ns   added %+7.2f ns   capture on adds %.2fx this (goal: at most 1.25x)\n",
                "floor: time and record only", fl, fl - b, fl - b > 0 ? (n - b) / (fl - b) : 0.0);
  }
  std::printf("  %-28s %8.2f ns   (the floor under capture-on overhead on this machine)\n", "two timestamps", two_timestamps_ns(tsc));
  std::printf("  capture-on rounds: %llu events recorded, %llu dropped (%.3f%%)\n", (unsigned long long)events,
              (unsigned long long)dropped, events + dropped ? 100.0 * double(dropped) / double(events + dropped) : 0.0);
  std::printf("  last capture-on recorder: %s", last_summary.c_str());
  std::printf("cutrace profile -- true: %.2f ms, true alone: %.2f ms, added %.2f ms (median of 20)\n",
              median(profiled_ms), median(plain_ms), median(profiled_ms) - median(plain_ms));
  return 0;
}
