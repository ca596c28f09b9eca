// `cutrace info`: what a trace holds and whether it is whole.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "common/cli.h"
#include "common/commands.h"
#include "report/table.h"

namespace cutrace::report {
namespace {

using cli::kExitFailure;
using cli::kExitOk;
using cli::kExitUsage;
using cli::kNextArgument;
using reader::thousands;

void print_help() {
  std::printf(
      "usage: cutrace info FILE.cutrace\n"
      "\n"
      "Prints the processes and threads of a trace, its event and loss counts, the options and versions\n"
      "it was recorded with, and whether it is complete.\n"
      "\n"
      "exit status: 0; 3 when the trace is cut off or damaged (everything intact in it is still shown,\n"
      "and a warning says what is missing); 1 or 2 when nothing could be shown.\n");
}

std::string size_text(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else if (bytes < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1ull << 30));
  return buf;
}

std::string utc_time(uint64_t realtime_ns) {
  if (!realtime_ns) return "unknown";
  std::time_t secs = std::time_t(realtime_ns / 1000000000ull);
  std::tm tm {};
  if (!gmtime_r(&secs, &tm)) return "unknown";
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// A plain aligned table: like the stats column format, without the title line.
void print_rows(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const std::vector<bool>& right) {
  std::vector<size_t> w(header.size());
  for (size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = " ";
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(w[c] - r[c].size(), ' ');
      s += ' ';
      s += right[c] ? pad + r[c] : r[c] + pad;
      s += ' ';
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(header);
  for (const auto& r : rows) line(r);
}

}  // namespace

int info_main(int argc, char** argv) {
  std::string trace_path;
  constexpr cli::OptionSpec kOptions[] = {{'h', "help", cli::Arity::kNone, 0}};
  cli::Scanner words(argc, argv, kOptions);
  for (cli::Arg arg; words.next(arg);) {
    if (cli::is_own_option(arg)) {
      print_help();
      return kExitOk;
    }
    if (const int exit_code = cli::take_trace(arg, "info", "usage: cutrace info FILE.cutrace", trace_path);
        exit_code != kNextArgument)
      return exit_code;
  }
  if (trace_path.empty()) {
    std::fprintf(stderr, "cutrace info: no trace given; usage: cutrace info FILE.cutrace.\n");
    return kExitUsage;
  }

  reader::TraceReader trace;
  if (!cli::open_trace(trace, trace_path, "info")) return kExitFailure;
  uint64_t api_calls = 0, timed_calls = 0, nvtx_events = 0;
  // Capture ranges (-c) per process: how many opened, and the time recorded inside them.
  struct Ranges {
    uint32_t pid = 0;
    uint32_t opened = 0;
    uint64_t open_since = 0, inside_ns = 0;
    bool open = false;
  };
  std::map<uint32_t, Ranges> ranges;
  reader::Event ev;
  while (trace.next(ev)) {
    if (ev.kind == reader::EventKind::kNvtx) ++nvtx_events;
    if (ev.kind == reader::EventKind::kCapture) {
      Ranges& r = ranges[ev.thread->process];
      r.pid = ev.thread->pid;
      if (ev.capture.begin) {
        ++r.opened;
        r.open = true;
        r.open_since = ev.capture.time_ns;
      } else if (r.open) {
        r.open = false;
        r.inside_ns += ev.capture.time_ns > r.open_since ? ev.capture.time_ns - r.open_since : 0;
      }
    }
    if (ev.kind != reader::EventKind::kApiCall) continue;
    ++api_calls;
    if (!ev.call.outside_capture()) ++timed_calls;
  }
  const reader::Status& status = trace.status();
  const int exit_code = cli::warn_status(trace, "info");

  const auto& h = trace.file_header();
  std::printf("File:      %s (%s, format version %u)\n", trace.path().c_str(), size_text(trace.file_bytes()).c_str(),
              h.format_version);
  std::printf("Created:   %s\n", utc_time(h.created_realtime_ns).c_str());
  std::printf("Status:    %s\n", status.describe().c_str());
  // The launcher normally ends the recording; one that died (SIGKILL) left it to go on by itself.
  if (const std::string* died = trace.summary_value("launcher.died_ns"))
    std::printf("Launcher:  died %s, before the program ended; recording went on without it%s\n",
                trace.time_into_recording(std::strtoull(died->c_str(), nullptr, 10)).c_str(),
                status.cut_off.empty() ? " until every traced process had exited" : "");

  std::printf("\nMetadata:\n");
  if (trace.metadata().empty()) std::printf("  (none)\n");
  size_t key_width = 0;
  for (const auto& [k, v] : trace.metadata()) key_width = std::max(key_width, k.size());
  for (const auto& [k, v] : trace.metadata()) std::printf("  %-*s  %s\n", int(key_width), k.c_str(), v.c_str());

  std::printf("\nProcesses (%zu):\n", trace.processes().size());
  {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> runtimes;  // distinct libraries, in order of first use
    // `cutrace profile -- mpirun -n 8 app`: each process's rank, from its own environment.
    const bool ranks = std::any_of(trace.processes().begin(), trace.processes().end(),
                                   [](const reader::Process& p) { return p.rank >= 0; });
    for (const auto& p : trace.processes()) {
      std::string command = p.command.empty() ? (p.exe.empty() ? "(not recorded)" : p.exe) : p.command;
      // cudaRuntimeGetVersion() encodes 1000 * major + 10 * minor.
      std::string runtime = "-";
      if (p.cuda_runtime_version)
        runtime = std::to_string(p.cuda_runtime_version / 1000) + "." + std::to_string(p.cuda_runtime_version % 1000 / 10);
      if (!p.cuda_runtime_path.empty() &&
          std::find(runtimes.begin(), runtimes.end(), p.cuda_runtime_path) == runtimes.end())
        runtimes.push_back(p.cuda_runtime_path);
      rows.push_back({std::to_string(p.pid), std::to_string(p.ppid), std::to_string(p.threads.size()), runtime, command});
      if (ranks) rows.back().insert(rows.back().begin() + 2, p.rank >= 0 ? std::to_string(p.rank) : "-");
    }
    if (ranks)
      print_rows({"PID", "PPID", "Rank", "Threads", "CUDA", "Command"}, rows, {true, true, true, true, false, false});
    else
      print_rows({"PID", "PPID", "Threads", "CUDA", "Command"}, rows, {true, true, true, false, false});
    for (const std::string& path : runtimes) std::printf("  CUDA runtime library: %s\n", path.c_str());
  }

  // --pytorch: what each process that imported torch said of its annotations.
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : trace.processes())
      if (p.pytorch_code >= 0)
        rows.push_back({std::to_string(p.pid), p.pytorch_code == 0 ? "started" : "not started", p.pytorch_status});
    if (!rows.empty()) {
      std::printf("\nPyTorch annotations (%zu):\n", rows.size());
      print_rows({"PID", "State", "What"}, rows, {true, false, false});
    }
  }

  // The GPUs CUPTI described to each process (GPU activity on): what the device numbers mean.
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : trace.processes())
      for (const reader::GpuDevice& d : p.gpu_devices) {
        const abi::GpuDeviceRecord& r = d.record;
        rows.push_back({std::to_string(p.pid), std::to_string(r.device), d.name,
                        std::to_string(r.compute_major) + "." + std::to_string(r.compute_minor),
                        std::to_string(r.sm_count), size_text(r.global_memory_bytes), reader::gpu_uuid_text(r.uuid)});
      }
    if (!rows.empty()) {
      std::printf("\nGPUs (%zu):\n", rows.size());
      print_rows({"PID", "Device", "Name", "CC", "SMs", "Memory", "UUID"}, rows,
                 {true, true, false, false, true, true, false});
    }
  }

  std::printf("\nThreads (%zu):\n", trace.threads().size());
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : trace.threads()) {
      const bool stats = t.has_stats;
      rows.push_back({std::to_string(t.pid), std::to_string(t.tid), t.name.empty() ? "-" : t.name,
                      thousands(t.records_read), stats ? thousands(t.records_dropped) : "unknown",
                      stats ? thousands(t.records_malformed) : "unknown"});
    }
    print_rows({"PID", "TID", "Name", "Records", "Dropped", "Malformed"}, rows, {true, true, false, true, true, true});
  }

  const cli::LossCounts loss = cli::loss_counts(trace);
  auto counted = [&](uint64_t n) { return loss.known ? thousands(n) : std::string("unknown (no end summary)"); };
  std::printf("\nTotals:\n");
  std::printf("  events         %s\n", thousands(status.events).c_str());
  std::printf("  api calls      %s (%s timed, %s recorded outside capture, to name later calls or open a range)\n", thousands(api_calls).c_str(),
              thousands(timed_calls).c_str(), thousands(api_calls - timed_calls).c_str());
  if (nvtx_events) std::printf("  nvtx           %s range events and marks\n", thousands(nvtx_events).c_str());
  for (const auto& [process, r] : ranges)
    std::printf("  capture        process %u: %u range%s, %.3f ms inside%s\n", r.pid, r.opened, r.opened == 1 ? "" : "s",
                double(r.inside_ns) / 1e6, r.open ? " (the last still open at its end)" : "");
  std::printf("  dropped        %s\n", counted(loss.dropped).c_str());
  // Only when it happened: most traces never meet a full /dev/shm.
  if (loss.dropped_no_memory)
    std::printf("    of them for want of room in /dev/shm: %s\n", counted(loss.dropped_no_memory).c_str());
  std::printf("  malformed      %s\n", counted(loss.malformed).c_str());
  std::printf("  lost_no_slot   %s\n", counted(loss.lost_no_slot).c_str());
  if (status.skipped_chunks)
    std::printf("  skipped        %s chunks of a kind this cutrace does not read\n",
                thousands(status.skipped_chunks).c_str());

  // The recorder's word on what the trace may lack, as `cutrace profile` printed it.
  const std::vector<std::string> warnings = cli::trace_warnings(trace);
  if (!warnings.empty()) {
    std::printf("\nWarnings:\n");
    for (const std::string& w : warnings) std::printf("  cutrace: warning: %s.\n", w.c_str());
  }

  if (!trace.summary().empty()) {
    std::printf("\nEnd summary:\n");
    auto shown = [](const std::string& k) { return k.rfind("warning.", 0) != 0; };  // listed above
    key_width = 0;
    for (const auto& [k, v] : trace.summary())
      if (shown(k)) key_width = std::max(key_width, k.size());
    for (const auto& [k, v] : trace.summary())
      if (shown(k)) std::printf("  %-*s  %s\n", int(key_width), k.c_str(), v.c_str());
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace cutrace::report
