#include "capture.h"

#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "gpu_activity.h"
#include "runtime.h"

namespace cutrace::preload {

constinit std::atomic<abi::DomainSet> g_process_capture{~abi::DomainSet(0)};

}  // namespace cutrace::preload

// Exported for libcutrace-cuda12.so (shim_names.h), as an alias: the shim's own reads stay direct.
extern "C" {
extern __typeof__(cutrace::preload::g_process_capture) cutrace_shim_process_capture
    __attribute__((alias("_ZN7cutrace7preload17g_process_captureE"), visibility("default")));
}

namespace cutrace::preload {

namespace {

enum class Mode : uint8_t { kAlways, kProfilerApi, kNvtx };
enum class End : uint8_t { kNone, kStop, kStopShutdown, kRepeat, kRepeatShutdown };
enum class DomainRule : uint8_t { kDefault, kAny, kNamed };

// Written once by init_capture(), before any range can open; read-only afterwards. Fixed buffers:
// the shim allocates nothing here.
struct Config {
  Mode mode = Mode::kAlways;
  End end = End::kStopShutdown;
  uint32_t count = 0;  // ranges to capture with repeat; 0 = no limit
  char range[256] = {};
  size_t range_bytes = 0;
  DomainRule domain_rule = DomainRule::kDefault;
  char domain[256] = {};
  size_t domain_bytes = 0;
};
Config g_config;

// The process's ranges, one word so that it changes atomically (no lock a fork could leave held):
// bit 0 a range is open, bit 1 no range will open again, bits 32-63 ranges opened so far.
constexpr uint64_t kActive = 1, kDone = 2;
std::atomic<uint64_t> g_state{0};

// -c nvtx: the -p domain's id once the program creates it, and registered strings that are -p's text.
constexpr uint32_t kNoDomain = UINT32_MAX;
std::atomic<uint32_t> g_capture_domain{kNoDomain};
constexpr size_t kMaxCaptureStrings = 32;
std::atomic<uint64_t> g_capture_strings[kMaxCaptureStrings];
std::atomic<size_t> g_capture_string_count{0};
// The range that opened the capture: a push level on one thread, or a start/end range id.
thread_local int64_t t_capture_level __attribute__((tls_model("initial-exec"))) = -1;
thread_local uint32_t t_capture_domain __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint64_t> g_capture_range_id{0};

// The process's ranges in CLOCK_MONOTONIC ns, for GPU activity, which CUPTI delivers later: work that
// overlaps a range is the range's. The latest kMaxRanges; an older range's work is dropped.
constexpr uint32_t kMaxRanges = 1024;
struct TimedRange {
  std::atomic<uint64_t> begin{0}, end{UINT64_MAX};
};
TimedRange g_ranges[kMaxRanges];
std::atomic<uint32_t> g_ranges_opened{0};


void emit_state(abi::CaptureEvent event, uint32_t range, abi::CaptureReason reason) {
  ThreadState& ts = t_thread;
  const int saved_errno = errno;
  if (ts.in_tracer || (!ts.producer.header && !prepare_thread(ts))) {
    errno = saved_errno;
    return;
  }
  WritingRecord writing(ts);
  uint8_t* p = ts.producer.reserve(sizeof(abi::CaptureStateRecord));
  if (p) {
    auto* r = reinterpret_cast<abi::CaptureStateRecord*>(p);
    r->header = {uint16_t(abi::RecordKind::kCaptureState), uint16_t(sizeof *r), uint32_t(event)};
    r->time = now();
    r->range = range;
    r->reason = uint32_t(reason);
    ts.producer.commit(sizeof *r);
  }
  errno = saved_errno;
}

// Opens a range unless one is open or the process is done. Returns whether this call opened it.
bool begin(abi::CaptureReason reason) {
  uint64_t state = g_state.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    if (state & (kActive | kDone)) return false;
    next = ((state & ~uint64_t(0xffffffff)) + (uint64_t(1) << 32)) | kActive;
  } while (!g_state.compare_exchange_weak(state, next, std::memory_order_acq_rel, std::memory_order_relaxed));
  g_process_capture.store(~abi::DomainSet(0), std::memory_order_relaxed);
  TimedRange& timed = g_ranges[uint32_t(next >> 32) % kMaxRanges];
  timed.end.store(UINT64_MAX, std::memory_order_relaxed);
  timed.begin.store(monotonic_ns(), std::memory_order_relaxed);
  g_ranges_opened.store(uint32_t(next >> 32), std::memory_order_release);
  emit_state(abi::CaptureEvent::kBegin, uint32_t(next >> 32), reason);
  return true;
}

void end(abi::CaptureReason reason) {
  // `none`: the end of a range changes nothing; capture goes on to the end.
  if (g_config.end == End::kNone) return;
  uint64_t state = g_state.load(std::memory_order_relaxed);
  uint64_t next;
  bool shutdown;
  do {
    if (!(state & kActive)) return;
    const uint32_t ranges = uint32_t(state >> 32);
    const bool limit_reached = g_config.count != 0 && ranges >= g_config.count;
    bool done = false;
    shutdown = false;
    switch (g_config.end) {
      case End::kStop: done = true; break;
      case End::kStopShutdown: done = shutdown = true; break;
      case End::kRepeat: done = limit_reached; break;
      case End::kRepeatShutdown: done = shutdown = limit_reached; break;
      case End::kNone: break;
    }
    next = (state & ~(kActive | kDone)) | (done ? kDone : 0);
  } while (!g_state.compare_exchange_weak(state, next, std::memory_order_acq_rel, std::memory_order_relaxed));
  // The record goes out while the gate is still open to it; then calls pass through.
  emit_state(abi::CaptureEvent::kEnd, uint32_t(next >> 32), reason);
  g_ranges[uint32_t(next >> 32) % kMaxRanges].end.store(monotonic_ns(), std::memory_order_release);
  g_process_capture.store(0, std::memory_order_relaxed);
  // What the device did inside the range reaches the trace before the program may be ended for it.
  flush_gpu_activity();
  if (shutdown && g_session) g_session->capture_shutdown.store(1, std::memory_order_release);
  // The last range ended and the program goes on: CUPTI has nothing more to give the trace.
  if (next & kDone && !shutdown) tear_down_gpu_activity();
}

}  // namespace

bool capture_overlaps(uint64_t start_ns, uint64_t end_ns) {
  // The session's own window (-y, -d) bounds every process's ranges.
  if (g_session) {
    const uint64_t closed = g_session->capture_closed_ns.load(std::memory_order_acquire);
    if (closed && start_ns > closed) return false;
    if (end_ns < g_session->capture_opened_ns.load(std::memory_order_acquire)) return false;
  }
  if (g_config.mode == Mode::kAlways) return true;
  const uint32_t opened = g_ranges_opened.load(std::memory_order_acquire);
  for (uint32_t n = opened, seen = 0; n >= 1 && seen < kMaxRanges; --n, ++seen) {
    const TimedRange& r = g_ranges[n % kMaxRanges];
    const uint64_t begin = r.begin.load(std::memory_order_relaxed), end = r.end.load(std::memory_order_acquire);
    if (end_ns < begin) continue;
    if (start_ns <= end) return true;
  }
  return false;
}

namespace {

bool copy_field(std::string_view value, char* out, size_t room, size_t* bytes) {
  if (value.size() >= room) return false;
  std::memcpy(out, value.data(), value.size());
  *bytes = value.size();
  return true;
}

bool is_capture_text(const char* text, size_t bytes) {
  return text && bytes == g_config.range_bytes && std::memcmp(text, g_config.range, bytes) == 0;
}

bool domain_matches(uint32_t domain) {
  switch (g_config.domain_rule) {
    case DomainRule::kDefault: return domain == 0;
    case DomainRule::kAny: return true;
    case DomainRule::kNamed: return domain == g_capture_domain.load(std::memory_order_relaxed);
  }
  return false;
}

bool message_matches(const char* text, size_t bytes, uint64_t string_id) {
  if (is_capture_text(text, bytes)) return true;
  if (!string_id) return false;
  const size_t n = g_capture_string_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n && i < kMaxCaptureStrings; ++i)
    if (g_capture_strings[i].load(std::memory_order_relaxed) == string_id) return true;
  return false;
}

}  // namespace

void init_capture() {
  const char* spec = getenv(abi::kCaptureEnvVar);
  if (!spec || !*spec) return;
  std::string_view s(spec);
  auto take = [&s] {
    const size_t comma = s.find(',');
    std::string_view field = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    return field;
  };
  const std::string_view mode = take(), end = take(), count = take();
  if (mode == "cudaProfilerApi") g_config.mode = Mode::kProfilerApi;
  else if (mode == "nvtx") g_config.mode = Mode::kNvtx;
  else return;  // not from this version's launcher: capture everything rather than nothing
  if (end == "none") g_config.end = End::kNone;
  else if (end == "stop") g_config.end = End::kStop;
  else if (end == "repeat") g_config.end = End::kRepeat;
  else if (end == "repeat-shutdown") g_config.end = End::kRepeatShutdown;
  else g_config.end = End::kStopShutdown;
  g_config.count = uint32_t(std::strtoul(std::string_view(count).empty() ? "0" : count.data(), nullptr, 10));
  if (g_config.mode == Mode::kNvtx) {
    const char* nvtx = getenv(abi::kNvtxCaptureEnvVar);
    std::string_view range = nvtx ? nvtx : "";
    const size_t at = range.rfind('@');
    if (at != std::string_view::npos) {
      const std::string_view domain = range.substr(at + 1);
      range = range.substr(0, at);
      if (domain == "*") g_config.domain_rule = DomainRule::kAny;
      else if (copy_field(domain, g_config.domain, sizeof g_config.domain, &g_config.domain_bytes))
        g_config.domain_rule = DomainRule::kNamed;
    }
    copy_field(range, g_config.range, sizeof g_config.range, &g_config.range_bytes);
  }
  g_nvtx_capture_enabled = g_config.mode == Mode::kNvtx;
  g_process_capture.store(0, std::memory_order_relaxed);
}

bool g_nvtx_capture_enabled = false;

namespace hooks {
// cudaProfilerStart/Stop and cuProfilerStart/Stop, after the real call succeeded. The runtime's call
// makes the driver's inside it: the second start or stop of a pair finds nothing to change.
void capture_start() {
  if (g_config.mode == Mode::kProfilerApi) begin(abi::CaptureReason::kProfilerApi);
}
void capture_stop() {
  if (g_config.mode == Mode::kProfilerApi) end(abi::CaptureReason::kProfilerApi);
}
}  // namespace hooks

void nvtx_capture_domain_created(uint32_t domain, const char* name, size_t bytes) {
  if (g_config.mode != Mode::kNvtx || g_config.domain_rule != DomainRule::kNamed) return;
  if (bytes == g_config.domain_bytes && std::memcmp(name, g_config.domain, bytes) == 0)
    g_capture_domain.store(domain, std::memory_order_relaxed);
}

void nvtx_capture_string_registered(uint32_t domain, uint64_t id, const char* text, size_t bytes) {
  if (g_config.mode != Mode::kNvtx || !is_capture_text(text, bytes) || !domain_matches(domain)) return;
  const size_t slot = g_capture_string_count.load(std::memory_order_relaxed);
  // A string registered again keeps its id: it must not take another of the few slots.
  for (size_t i = 0; i < slot && i < kMaxCaptureStrings; ++i)
    if (g_capture_strings[i].load(std::memory_order_relaxed) == id) return;
  if (slot >= kMaxCaptureStrings) return;
  g_capture_strings[slot].store(id, std::memory_order_relaxed);
  g_capture_string_count.store(slot + 1, std::memory_order_release);
}

void nvtx_capture_push(uint32_t domain, uint32_t level, const char* text, size_t bytes, uint64_t string_id) {
  if (g_config.mode != Mode::kNvtx || t_capture_level >= 0) return;
  if (!domain_matches(domain) || !message_matches(text, bytes, string_id)) return;
  if (!begin(abi::CaptureReason::kNvtx)) return;
  t_capture_level = level;
  t_capture_domain = domain;
}

void nvtx_capture_pop(uint32_t domain, uint32_t level) {
  if (t_capture_level < 0 || domain != t_capture_domain || int64_t(level) != t_capture_level) return;
  t_capture_level = -1;
  end(abi::CaptureReason::kNvtx);
}

void nvtx_capture_start(uint32_t domain, uint64_t range_id, const char* text, size_t bytes, uint64_t string_id) {
  if (g_config.mode != Mode::kNvtx) return;
  if (!domain_matches(domain) || !message_matches(text, bytes, string_id)) return;
  if (begin(abi::CaptureReason::kNvtx)) g_capture_range_id.store(range_id, std::memory_order_relaxed);
}

void nvtx_capture_end(uint64_t range_id) {
  if (g_config.mode != Mode::kNvtx || range_id == 0) return;
  uint64_t expected = range_id;
  if (g_capture_range_id.compare_exchange_strong(expected, 0, std::memory_order_relaxed)) end(abi::CaptureReason::kNvtx);
}

namespace testing {

void reset_capture() {
  g_config = Config{};
  g_state.store(0, std::memory_order_relaxed);
  g_capture_domain.store(kNoDomain, std::memory_order_relaxed);
  for (auto& id : g_capture_strings) id.store(0, std::memory_order_relaxed);
  g_capture_string_count.store(0, std::memory_order_relaxed);
  t_capture_level = -1;
  t_capture_domain = 0;
  g_capture_range_id.store(0, std::memory_order_relaxed);
  for (TimedRange& r : g_ranges) {
    r.begin.store(0, std::memory_order_relaxed);
    r.end.store(UINT64_MAX, std::memory_order_relaxed);
  }
  g_ranges_opened.store(0, std::memory_order_relaxed);
  g_nvtx_capture_enabled = false;
  g_process_capture.store(~abi::DomainSet(0), std::memory_order_relaxed);
}

}  // namespace testing

}  // namespace cutrace::preload
