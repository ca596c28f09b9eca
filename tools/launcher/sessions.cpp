#include "launcher/sessions.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/command_line.h"
#include "cutrace/abi.h"
#include "cutrace/api_table.h"
#include "cutrace/proc_stat.h"
#include "launcher/environment.h"
#include "recorder/clock.h"

namespace cutrace::launcher {
namespace {

constexpr size_t kRandomHexChars = 32;  // session::Session::create's 128 random bits
// The shim's own threads (GPU activity, Python sampling) name themselves so.
constexpr std::string_view kTracerThreadPrefix = "cutrace-";

// "cutrace-<uid>-<32 hex digits>": the objects Session::create makes for this user, and nothing else
// (the unreached markers beside them carry a suffix).
bool is_session_object_of(const std::string& entry, const std::string& prefix) {
  if (entry.size() != prefix.size() + kRandomHexChars || entry.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(entry.begin() + long(prefix.size()), entry.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool process_alive(uint32_t pid) { return pid != 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM); }

std::string read_small_file(const std::string& path, size_t limit = 4096) {
  std::ifstream in(path, std::ios::binary);
  std::string text(limit, '\0');
  in.read(text.data(), std::streamsize(limit));
  text.resize(size_t(in.gcount()));
  return text;
}

// /proc/<pid>/cmdline as a shell would show it, shortened to `limit` characters.
std::string command_line_of(uint32_t pid, size_t limit) {
  const std::string raw = read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> words;
  for (size_t start = 0; start < raw.size();) {
    const size_t end = std::min(raw.find('\0', start), raw.size());
    words.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  std::string out = shell_join(words);
  if (out.size() > limit) out = out.substr(0, limit - 3) + "...";
  return out;
}

std::string thread_name_of(uint32_t pid, uint32_t tid) {
  std::string name = read_small_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm", 64);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
  return name;
}

// How long ago process `pid` started, from its start time in clock ticks after boot.
uint64_t process_age_ns(uint32_t pid) {
  proc::Stat st;
  if (!proc::read_stat(pid, &st)) return 0;
  double uptime_s = 0;
  std::istringstream(read_small_file("/proc/uptime", 64)) >> uptime_s;
  const double started_s = double(st.start_ticks) / double(sysconf(_SC_CLK_TCK));
  return uptime_s > started_s ? uint64_t((uptime_s - started_s) * 1e9) : 0;
}

std::string api_name(uint32_t api_id) {
  if (api_id >= kApiTableSize) return "api#" + std::to_string(api_id);
  const ApiInfo& info = kApiTable[api_id];
  return info.display_name ? info.display_name : info.name;
}

// A read-only view of a session's header and ring headers (never the rings: nothing here reads
// records, and a stuck program's rings may be large).
class HeaderMapping {
 public:
  ~HeaderMapping() {
    if (base_) munmap(base_, bytes_);
  }
  // False for anything that is not a well-formed session object of this user.
  bool open(const std::string& object) {
    const int fd = shm_open(object.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return false;
    struct stat st {};
    const bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                      (st.st_mode & 077) == 0 && uint64_t(st.st_size) >= sizeof(abi::SessionHeader);
    if (!ours) {
      close(fd);
      return false;
    }
    void* head = mmap(nullptr, sizeof(abi::SessionHeader), PROT_READ, MAP_SHARED, fd, 0);
    if (head == MAP_FAILED) {
      close(fd);
      return false;
    }
    const auto* h = static_cast<const abi::SessionHeader*>(head);
    const bool valid = abi::session_layout_valid(h, uint64_t(st.st_size));
    const uint64_t headers = valid ? abi::session_data_offset(h->slot_count) : 0;
    munmap(head, sizeof(abi::SessionHeader));
    if (!valid) {
      close(fd);
      return false;
    }
    void* all = mmap(nullptr, headers, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (all == MAP_FAILED) return false;
    base_ = static_cast<uint8_t*>(all);
    bytes_ = headers;
    // Copied once: a program may not rewrite the geometry under us.
    slot_count_ = header()->slot_count;
    return true;
  }
  const abi::SessionHeader* header() const { return reinterpret_cast<const abi::SessionHeader*>(base_); }
  uint32_t slot_count() const { return slot_count_; }
  const abi::RingHeader* slot(uint32_t i) const {
    return reinterpret_cast<const abi::RingHeader*>(base_ + sizeof(abi::SessionHeader) + uint64_t(i) * sizeof(abi::RingHeader));
  }

 private:
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t slot_count_ = 0;
};

const char* state_of(const abi::SessionHeader* h) {
  if (h->shutdown_requested.load(std::memory_order_acquire)) return "finishing";
  if (h->recorder_pid.load(std::memory_order_acquire) == 0) return "starting";
  return h->capture_domains.load(std::memory_order_acquire) ? "recording" : "not recording";
}

// How long ago a call began, from the low bits of its start in the session's clock: the ticks
// since then are taken modulo 2^48, and a TSC's rate is measured here (the recorder's calibration is
// its own).
struct SessionClock {
  double ns_per_tick = 0;  // 0: not measured yet
  uint64_t elapsed_ns(const abi::SessionHeader* h, uint64_t begin_low_bits) {
    if (h->clock_kind != uint32_t(abi::ClockKind::kTsc))
      return (recorder::monotonic_ns() - begin_low_bits) & abi::kCallInProgressBeginMask;
    if (ns_per_tick == 0) {
      recorder::TimestampConverter converter;
      std::string error;
      if (!converter.init(abi::ClockKind::kTsc, UINT64_MAX, &error) || converter.tsc_hz() <= 0) return 0;
      ns_per_tick = 1e9 / converter.tsc_hz();
    }
    return uint64_t(double((__rdtsc() - begin_low_bits) & abi::kCallInProgressBeginMask) * ns_per_tick);
  }
};

void read_calls(const HeaderMapping& session, SessionView* view, SessionClock* clock) {
  const abi::SessionHeader* h = session.header();
  std::map<uint32_t, bool> process_live;  // pid -> alive with the start time its slots name
  for (uint32_t i = 0; i < session.slot_count(); ++i) {
    const abi::RingHeader* ring = session.slot(i);
    if (ring->state.load(std::memory_order_acquire) != uint32_t(abi::SlotState::kActive)) continue;
    const uint32_t pid = ring->pid, tid = ring->tid;
    auto known = process_live.find(pid);
    if (known == process_live.end()) {
      proc::Stat st;
      known = process_live.emplace(pid, proc::read_stat(pid, &st) && st.start_ticks == ring->process_start_ticks &&
                                            st.state != 'Z' && st.state != 'X').first;
    }
    if (!known->second) continue;
    // A thread that ended without retiring its ring (its process exits, or it was cancelled).
    if (access(("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid)).c_str(), F_OK) != 0) continue;
    CallInProgress call;
    call.pid = pid;
    call.tid = tid;
    call.thread_name = thread_name_of(pid, tid);
    call.tracer_thread = call.thread_name.starts_with(kTracerThreadPrefix);
    if (!call.tracer_thread) ++view->threads;
    if (const uint64_t word = ring->call_in_progress.load(std::memory_order_relaxed)) {
      const uint32_t api = abi::call_in_progress_api(word);
      call.api = api == abi::kCallInProgressUnknownApi ? std::string("a call") : api_name(api - 1);
      call.elapsed_ns = clock->elapsed_ns(h, abi::call_in_progress_begin(word));
    }
    view->calls.push_back(std::move(call));
  }
  view->processes = uint32_t(std::count_if(process_live.begin(), process_live.end(), [](auto& p) { return p.second; }));
  std::sort(view->calls.begin(), view->calls.end(),
            [](const CallInProgress& a, const CallInProgress& b) { return std::tie(a.pid, a.tid) < std::tie(b.pid, b.tid); });
}

std::string clock_text(uint64_t ns) {
  const uint64_t s = ns / 1'000'000'000;
  char text[32];
  std::snprintf(text, sizeof text, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, s / 3600, s / 60 % 60, s % 60);
  return text;
}

std::string duration_text(uint64_t ns) {
  char text[32];
  if (ns < 1'000'000) std::snprintf(text, sizeof text, "%.1f us", double(ns) / 1e3);
  else if (ns < 1'000'000'000) std::snprintf(text, sizeof text, "%.1f ms", double(ns) / 1e6);
  else std::snprintf(text, sizeof text, "%.3f s", double(ns) / 1e9);
  return text;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

nlohmann::json status_json(const std::vector<SessionView>& sessions, bool with_calls) {
  nlohmann::json out = {{"host", host_name()}, {"sessions", nlohmann::json::array()}};
  for (const SessionView& s : sessions) {
    nlohmann::json session = {{"name", s.name},         {"pid", s.launcher_pid},        {"state", s.state},
                              {"running_ns", s.age_ns}, {"command", s.command},         {"process_count", s.processes},
                              {"thread_count", s.threads}};
    if (with_calls) {
      nlohmann::json processes = nlohmann::json::array();
      for (const CallInProgress& c : s.calls) {
        if (processes.empty() || processes.back()["pid"] != c.pid)
          processes.push_back({{"pid", c.pid}, {"command", command_line_of(c.pid, 1000)}, {"threads", nlohmann::json::array()}});
        nlohmann::json thread = {{"tid", c.tid}, {"name", c.thread_name}, {"cutrace_thread", c.tracer_thread}};
        thread["call"] = c.api.empty() ? nlohmann::json(nullptr) : nlohmann::json{{"name", c.api}, {"elapsed_ns", c.elapsed_ns}};
        processes.back()["threads"].push_back(std::move(thread));
      }
      session["processes"] = std::move(processes);
    }
    out["sessions"].push_back(std::move(session));
  }
  return out;
}

int usage_error(const char* command, const std::string& sentence) {
  std::fprintf(stderr, "cutrace %s: %s; see `cutrace %s --help`.\n", command, sentence.c_str(), command);
  return 2;
}

}  // namespace

std::vector<SessionView> find_sessions(bool with_calls) {
  std::vector<SessionView> sessions;
  const std::string prefix = "cutrace-" + std::to_string(getuid()) + "-";
  DIR* dir = opendir("/dev/shm");
  if (!dir) return sessions;
  std::vector<std::string> objects;
  while (dirent* entry = readdir(dir))
    if (is_session_object_of(entry->d_name, prefix)) objects.emplace_back(entry->d_name);
  closedir(dir);
  SessionClock clock;
  for (const std::string& object : objects) {
    HeaderMapping session;
    if (!session.open("/" + object)) continue;
    const abi::SessionHeader* h = session.header();
    SessionView view;
    view.launcher_pid = h->launcher_pid;
    // A launcher killed with SIGKILL leaves its object until the recorder ends; it is no session.
    if (!process_alive(view.launcher_pid)) continue;
    view.shm_name = "/" + object;
    view.name = "profile-" + std::to_string(view.launcher_pid);
    view.recorder_pid = h->recorder_pid.load(std::memory_order_acquire);
    view.command = command_line_of(view.launcher_pid, 200);
    view.age_ns = process_age_ns(view.launcher_pid);
    view.state = state_of(h);
    read_calls(session, &view, &clock);
    if (!with_calls) view.calls.clear();
    sessions.push_back(std::move(view));
  }
  std::sort(sessions.begin(), sessions.end(),
            [](const SessionView& a, const SessionView& b) { return a.launcher_pid < b.launcher_pid; });
  return sessions;
}

namespace {

constexpr const char* kSessionsUsage =
    "usage: cutrace sessions list\n"
    "\n"
    "Lists the sessions of this user on this host: each `cutrace profile` running, with its name (what\n"
    "`cutrace status --session` takes), the launcher's pid, how long it has run, whether it is recording,\n"
    "the traced processes and threads alive, and its command.\n";

constexpr const char* kStatusUsage =
    "usage: cutrace status [--session NAME] [--calls] [--format text|json]\n"
    "\n"
    "Says what each session of this user on this host is doing (or only NAME's: profile-<pid> as\n"
    "`cutrace sessions list` names it, or the pid alone).\n"
    "\n"
    "  --session NAME   only this session\n"
    "  --calls          for every traced thread of every process, the recorded call it is in now (its\n"
    "                   outermost CUDA, library or MPI call) and for how long, as `py-spy dump` shows a\n"
    "                   Python program's stacks: what a hung program is stuck in\n"
    "  --format json    one JSON object on standard output (host, sessions, their processes and\n"
    "                   threads with their calls), for gathering every host of a job\n";

}  // namespace

int sessions_main(int argc, char** argv) {
  enum Option : int { kHelp };
  constexpr cli::OptionSpec kOptions[] = {{'h', "help", cli::Arity::kNone, kHelp}};
  cli::Scanner words(argc, argv, kOptions);
  std::vector<std::string> operands;
  for (cli::Arg arg; words.next(arg);) {
    if (arg.kind == cli::Arg::Kind::kOperand) {
      operands.push_back(arg.word);
      continue;
    }
    if (arg.kind != cli::Arg::Kind::kOption) return usage_error("sessions", "unknown option '" + arg.word + "'");
    std::fputs(kSessionsUsage, stdout);
    return 0;
  }
  if (operands.size() != 1 || operands[0] != "list")
    return usage_error("sessions", operands.empty() ? std::string("say what to do with the sessions (list)")
                                                    : "unknown action '" + operands[0] + "' (only list is known)");
  const std::vector<SessionView> sessions = find_sessions(false);
  std::printf("%-16s %8s %9s  %-13s %9s %7s  %s\n", "NAME", "PID", "TIME", "STATE", "PROCESSES", "THREADS", "COMMAND");
  for (const SessionView& s : sessions)
    std::printf("%-16s %8u %9s  %-13s %9u %7u  %s\n", s.name.c_str(), s.launcher_pid, clock_text(s.age_ns).c_str(),
                s.state.c_str(), s.processes, s.threads, s.command.c_str());
  return 0;
}

int status_main(int argc, char** argv) {
  enum Option : int { kHelp, kSession, kCalls, kFormat };
  constexpr cli::OptionSpec kOptions[] = {
      {'h', "help", cli::Arity::kNone, kHelp},
      {0, "session", cli::Arity::kValue, kSession},
      {0, "calls", cli::Arity::kNone, kCalls},
      {0, "format", cli::Arity::kValue, kFormat},
  };
  cli::Scanner words(argc, argv, kOptions);
  std::string wanted;
  bool calls = false, json = false;
  for (cli::Arg arg; words.next(arg);) {
    if (arg.kind == cli::Arg::Kind::kOperand) return usage_error("status", "unexpected argument '" + arg.word + "'");
    if (arg.kind != cli::Arg::Kind::kOption || (arg.spec->arity == cli::Arity::kNone && arg.has_attached))
      return usage_error("status", "unknown option '" + arg.word + "'");
    switch (Option(arg.spec->id)) {
      case kHelp:
        std::fputs(kStatusUsage, stdout);
        return 0;
      case kCalls:
        calls = true;
        break;
      case kSession:
        if (!words.value(arg, wanted) || wanted.empty()) return usage_error("status", "--session needs a name");
        break;
      case kFormat: {
        std::string format;
        if (!words.value(arg, format)) return usage_error("status", "--format needs text or json");
        if (format != "text" && format != "json")
          return usage_error("status", "--format takes text or json, not '" + format + "'");
        json = format == "json";
        break;
      }
    }
  }
  std::vector<SessionView> sessions = find_sessions(calls);
  if (!wanted.empty()) {
    std::erase_if(sessions, [&](const SessionView& s) { return s.name != wanted && std::to_string(s.launcher_pid) != wanted; });
    if (sessions.empty()) {
      std::fprintf(stderr,
                   "cutrace status: no session named %s is running for this user on this host; `cutrace sessions "
                   "list` lists those that are.\n",
                   wanted.c_str());
      return 1;
    }
  } else if (sessions.empty() && !json) {
    std::fputs("cutrace status: no cutrace session of this user is running on this host.\n", stderr);
    return 1;
  }
  if (json) {
    // Every host of a job answers alike, so the answers are read side by side; none is an empty list.
    std::puts(status_json(sessions, calls).dump().c_str());
    return 0;
  }
  for (const SessionView& s : sessions) {
    std::printf("%s (pid %u): %s, running for %s, %s, %s\n", s.name.c_str(), s.launcher_pid, s.state.c_str(),
                clock_text(s.age_ns).c_str(), plural(s.processes, "traced process", "traced processes").c_str(),
                plural(s.threads, "thread", "threads").c_str());
    std::printf("  command: %s\n", s.command.c_str());
    if (!calls) continue;
    uint32_t process = 0;
    for (const CallInProgress& c : s.calls) {
      if (c.pid != process) {
        process = c.pid;
        std::printf("  process %u: %s\n", c.pid, command_line_of(c.pid, 160).c_str());
      }
      if (c.tracer_thread)
        std::printf("    thread %u (%s): cutrace's own thread\n", c.tid, c.thread_name.c_str());
      else if (c.api.empty())
        std::printf("    thread %u (%s): in no traced call\n", c.tid, c.thread_name.c_str());
      else
        std::printf("    thread %u (%s): in %s for %s\n", c.tid, c.thread_name.c_str(), c.api.c_str(),
                    duration_text(c.elapsed_ns).c_str());
    }
  }
  return 0;
}

}  // namespace cutrace::launcher
