#include "recorder/warnings.h"

#include <array>
#include <cstddef>

namespace cutrace::recorder {

namespace {

struct WarningRow {
  Warning warning;
  std::string_view text;
};

// In the order of the enum (checked below), so that a warning's row is found by its value.
constexpr std::array kWarnings = {
    WarningRow{Warning::kCutOff, "the trace is cut off: {why}; later calls are not in it"},
    WarningRow{Warning::kForeignShim,
               "{count} [process|processes] ran a cutrace shim of another build (its table of functions differs "
               "from this recorder's), so [its|their] calls were not recorded rather than named wrongly; run the "
               "launcher, the recorder and the shim of one build (CUTRACE_PRELOAD_LIB names the shim)"},
    WarningRow{Warning::kUnreached,
               "{who} ran as uid {uid} and could not open the session's shared memory ({cause}), so [its|their] "
               "calls were not recorded"},
    WarningRow{Warning::kUnreachedAfterUserSwitch,
               "{who} ran as uid {uid} and could not open the session's shared memory ({cause}), so [its|their] "
               "calls were not recorded: [it|they] had changed user after losing the descriptor of the session "
               "that cutrace hands down (CUTRACE_SESSION_FD), as a program that closes inherited descriptors "
               "before switching user does; keep that descriptor open, or run cutrace as the user the program "
               "switches to"},
    WarningRow{Warning::kUnreachedOverflow,
               "/dev/shm changed faster than the recorder could follow, so processes that could not open the "
               "session may have gone unnoticed"},
    WarningRow{Warning::kProcessesCutOff,
               "{count} [process|processes] the command started [was|were] still running when it exited and "
               "recording stopped (--wait primary): calls made after that are not in the trace; --wait all waits "
               "for them"},
    WarningRow{Warning::kUnwrappedEntryPoints,
               "{who}: the driver handed out {count} [entry point|entry points] this cutrace has no wrapper for "
               "(asked for by a CUDA runtime or library newer than the one cutrace was built from), so calls "
               "through [it are|them are] not recorded: {names}"},
    WarningRow{Warning::kNoCaptureRange,
               "{who} never opened a capture range ({range}), so none of its calls was recorded; check that it "
               "reaches the range, or profile without -c"},
    WarningRow{Warning::kStaticRuntimeWithoutDriver,
               "{who} carries CUDA device code but loaded no CUDA library and no CUDA call was recorded: the "
               "program is built with the static CUDA runtime and no driver was found, or it ended before using "
               "CUDA"},
    WarningRow{Warning::kStaticRuntimeDriverSilent,
               "{who} carries CUDA device code and loaded {driver}, but no CUDA call was recorded: the program is "
               "built with the static CUDA runtime, whose work shows only as driver calls, and none reached "
               "cutrace"},
    WarningRow{Warning::kStaticRuntimeDriverUntraced,
               "{who} carries CUDA device code and loaded {driver}, but no CUDA call was recorded: the program is "
               "built with the static CUDA runtime, whose work shows only as driver calls, which this cutrace "
               "does not record"},
    WarningRow{Warning::kUnlaunchedKernels,
               "{who}: the GPU ran {count} [kernel|kernels] of it, but no call that launches kernels was recorded: "
               "they came through a route cutrace does not see{libraries}"},
    WarningRow{Warning::kNoCuda,
               "no CUDA call was recorded and no traced process loaded a CUDA library; check that the program "
               "uses CUDA"},
    WarningRow{Warning::kOtherMajorVersion,
               "{library} is a major version this cutrace has no wrappers of its own for: its calls were recorded "
               "only where they reached another version's wrappers by name, through that version's prototypes; "
               "use a cutrace built for it"},
    WarningRow{Warning::kUnwrappedExports,
               "{library} exports {count} [function|functions] this cutrace has no wrapper for (the library is "
               "newer than the one cutrace was built from), so calls to [it are|them are] not recorded: {names}"},
    WarningRow{Warning::kNoGpuActivity,
               "{who} [has|have] no GPU activity in the trace, only [its|their] API calls: {reason}"},
    WarningRow{Warning::kNoPythonFrames, "{who}: {reason}"},
    WarningRow{Warning::kPytorchNotStarted,
               "{who}: --pytorch's annotations did not start, so [its|their] kernels have no PyTorch op or "
               "module: {reason}"},
    WarningRow{Warning::kPytorchNoProcess,
               "--pytorch {modes} was given, but no process of the command imported torch with cutrace's "
               "start-up hook, so the trace has no PyTorch annotations: the hook comes through PYTHONPATH and "
               "sitecustomize, which a Python started with -I, -E or -S skips"},
    WarningRow{Warning::kGpuRecordsDropped,
               "{count} GPU activity records were dropped by CUPTI: its buffers filled faster than the trace took "
               "them"},
    WarningRow{Warning::kCpuSamplesLost,
               "{count} CPU samples were lost: the kernel's sampling buffers filled before the recorder read them "
               "(lower --sampling-frequency)"},
    WarningRow{Warning::kTimerSamplesSkipped,
               "{count} CPU samples of the timer sampler were skipped: the signal came while the thread was inside "
               "cutrace, whose own time they would have shown"},
    WarningRow{Warning::kUntracedCpuSamples,
               "{count} CPU samples of processes that recorded nothing (no CUDA call, no traced library) were left "
               "out: the trace has no thread of theirs to put them on"},
    WarningRow{Warning::kCallsNotReturned,
               "{count} [call|calls] had not returned when recording of [its|their] thread ended (the process hung "
               "or died in [it|them], or recording stopped first): {calls}; the trace has [it|them], marked not "
               "returned"},
};

constexpr bool rows_in_enum_order() {
  if (kWarnings.size() != size_t(Warning::kCount)) return false;
  for (size_t i = 0; i < kWarnings.size(); ++i)
    if (size_t(kWarnings[i].warning) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kWarnings has one row per Warning, in the enum's order");

}  // namespace

std::string_view warning_template(Warning w) {
  return size_t(w) < kWarnings.size() ? kWarnings[size_t(w)].text : std::string_view();
}

std::string warning_text(Warning w, uint64_t count, std::initializer_list<WarningField> fields) {
  const std::string_view text = warning_template(w);
  std::string out;
  out.reserve(text.size() + 64);
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const size_t close = c == '{' ? text.find('}', i) : c == '[' ? text.find(']', i) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += c;
      ++i;
      continue;
    }
    const std::string_view inside = text.substr(i + 1, close - i - 1);
    if (c == '[') {
      const size_t bar = inside.find('|');
      out += count == 1 ? inside.substr(0, bar) : bar == std::string_view::npos ? inside : inside.substr(bar + 1);
    } else if (inside == "count") {
      out += std::to_string(count);
    } else {
      const WarningField* field = nullptr;
      for (const WarningField& f : fields)
        if (f.name == inside) field = &f;
      out += field ? field->value : text.substr(i, close - i + 1);
    }
    i = close + 1;
  }
  return out;
}

std::string process_name(uint32_t pid, std::string_view command) {
  std::string out = "process " + std::to_string(pid);
  if (!command.empty()) out.append(" (").append(command).append(")");
  return out;
}

std::string processes_name(const std::vector<NamedProcess>& processes) {
  if (processes.size() == 1) return process_name(processes.front().pid, processes.front().command);
  std::string pids;
  for (size_t i = 0; i < processes.size() && i < 8; ++i) pids += (i ? ", " : "") + std::to_string(processes[i].pid);
  if (processes.size() > 8) pids += ", ...";
  return std::to_string(processes.size()) + " processes (" + pids + ")";
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace cutrace::recorder
