#include "launcher/options.h"

#include "common/command_line.h"
#include "export/exporter.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <vector>

namespace cutrace::launcher {
namespace {

using cli::Arity;
enum Id : int {
  kOutput, kForce, kShowOutput, kStopOnExit, kTrace, kWait, kStats, kRingSize, kRingSlots, kQuiet, kHelp,
  kCaptureRange, kCaptureRangeEnd, kNvtxCapture, kStopOnRangeEnd, kDelay, kDuration, kKill, kOsrtThreshold,
  kCudaBacktrace, kCudaBacktraceThreshold, kOsrtBacktraceThreshold, kOsrtBacktraceDepth, kPythonBacktrace,
  kSample, kSamplingFrequency, kCpuctxsw, kPythonSampling, kPythonSamplingFrequency, kGpuActivity,
  kCudaMemoryUsage, kCudaGraphTrace, kMpiImpl, kExport, kEnvVar, kTraceForkBeforeExec, kPytorch, kPythonFunctions,
};

constexpr cli::OptionSpec kSupported[] = {
    {'o', "output", Arity::kValue, kOutput},
    {'f', "force-overwrite", Arity::kSwitch, kForce},
    {'w', "show-output", Arity::kSwitch, kShowOutput},
    {'x', "stop-on-exit", Arity::kSwitch, kStopOnExit},
    {'t', "trace", Arity::kValue, kTrace},
    {0, "wait", Arity::kValue, kWait},
    {0, "stats", Arity::kSwitch, kStats},
    {0, "ring-size", Arity::kValue, kRingSize},
    {0, "ring-slots", Arity::kValue, kRingSlots},
    {'q', "quiet", Arity::kNone, kQuiet},
    {'c', "capture-range", Arity::kValue, kCaptureRange},
    {0, "capture-range-end", Arity::kValue, kCaptureRangeEnd},
    {'p', "nvtx-capture", Arity::kValue, kNvtxCapture},
    {0, "stop-on-range-end", Arity::kSwitch, kStopOnRangeEnd},
    {'y', "delay", Arity::kValue, kDelay},
    {'d', "duration", Arity::kValue, kDuration},
    {0, "kill", Arity::kValue, kKill},
    {0, "osrt-threshold", Arity::kValue, kOsrtThreshold},
    {0, "cudabacktrace", Arity::kValue, kCudaBacktrace},
    {0, "cudabacktrace-threshold", Arity::kValue, kCudaBacktraceThreshold},
    {0, "osrt-backtrace-threshold", Arity::kValue, kOsrtBacktraceThreshold},
    {0, "osrt-backtrace-depth", Arity::kValue, kOsrtBacktraceDepth},
    {0, "python-backtrace", Arity::kValue, kPythonBacktrace},
    {'s', "sample", Arity::kValue, kSample},
    {0, "sampling-frequency", Arity::kValue, kSamplingFrequency},
    {0, "cpuctxsw", Arity::kValue, kCpuctxsw},
    {0, "python-sampling", Arity::kSwitch, kPythonSampling},
    {0, "gpu-activity", Arity::kSwitch, kGpuActivity},
    {0, "cuda-memory-usage", Arity::kSwitch, kCudaMemoryUsage},
    {0, "cuda-graph-trace", Arity::kValue, kCudaGraphTrace},
    {0, "python-sampling-frequency", Arity::kValue, kPythonSamplingFrequency},
    {0, "mpi-impl", Arity::kValue, kMpiImpl},
    {0, "export", Arity::kValue, kExport},
    {'e', "env-var", Arity::kValue, kEnvVar},
    {0, "trace-fork-before-exec", Arity::kSwitch, kTraceForkBeforeExec},
    {0, "pytorch", Arity::kValue, kPytorch},
    {0, "python-functions-trace", Arity::kValue, kPythonFunctions},
    {'h', "help", Arity::kNone, kHelp},
};

// nsys options cutrace does not implement. Where `off` is set, that value asks nsys for nothing, which
// is what cutrace does anyway, so published scripts that spell it out (`-s none`, `-b none`) keep
// working; any other value, or an option without `off`, is refused.
struct Unsupported {
  char short_name;
  const char* long_name;
  const char* off;
};

constexpr Unsupported kUnsupported[] = {
    {'b', "backtrace", "none"},
    {0, "nvtx-domain-include", nullptr},
    {0, "nvtx-domain-exclude", nullptr},
    {0, "osrt-backtrace-stack-size", nullptr},
    {0, "dask", "none"},
    {0, "cuda-um-cpu-page-faults", "false"},
    {0, "cuda-um-gpu-page-faults", "false"},
    {0, "cuda-event-trace", "false"},
    {0, "cuda-flush-interval", nullptr},
    {0, "cuda-trace-scope", nullptr},
    {0, "duration-frames", nullptr},
    {'n', "inherit-environment", "true"},
    {0, "session", nullptr},
    {0, "session-new", nullptr},
    {0, "command-file", nullptr},
    {0, "cpu-core-events", "none"},
    {0, "sampling-period", nullptr},
    {0, "sampling-trigger", nullptr},
    {0, "samples-per-backtrace", nullptr},
    {0, "event-sample", "none"},
    {0, "event-sampling-interval", nullptr},
    {0, "event-sampling-frequency", nullptr},
    {0, "os-events", nullptr},
    {0, "ftrace", nullptr},
    {0, "ftrace-keep-user-config", nullptr},
    {0, "gpu-metrics-devices", "none"},
    {0, "gpu-metrics-device", "none"},
    {0, "gpu-metrics-frequency", nullptr},
    {0, "gpu-metrics-set", nullptr},
    {0, "gpuctxsw", "false"},
    {0, "gpu-video-device", "none"},
    {0, "nic-metrics", "false"},
    {0, "ib-switch-metrics-device", nullptr},
    {0, "ib-switch-congestion-device", nullptr},
    {0, "ib-net-info-devices", nullptr},
    {0, "soc-metrics", "false"},
    {0, "accelerator-trace", "none"},
    {0, "hotkey-capture", nullptr},
    {0, "flush-on-cudaprofilerstop", nullptr},
    {0, "opengl-gpu-workload", nullptr},
    {0, "vulkan-gpu-workload", nullptr},
    {0, "vsync", nullptr},
    {0, "isr", nullptr},
    {0, "process-scope", nullptr},
    {0, "resolve-symbols", nullptr},
    {0, "debug-symbols", nullptr},
    {0, "run-as", nullptr},
    {0, "start-frame-index", nullptr},
    {0, "xhv-trace", nullptr},
    {0, "enable", nullptr},
    {0, "clock-frequency-changes", nullptr},
    {0, "force-export", "false"},
    {0, "retain-export", nullptr},
    {0, "cpu-cluster-events", "none"},
    {0, "cpu-socket-events", "none"},
    {0, "cuda-trace-all-apis", "false"},
    {0, "storage-metrics", "none"},
    {0, "el1-sampling", "false"},
    {0, "el1-sampling-config", nullptr},
};

// The -t values cutrace records, for the messages that list them: the groups of domains.def, in the
// order of its rows ("cuda, nvtx, osrt, cublas, cudnn, cusolver and cusparse").
std::string traced_values(std::string_view separator, std::string_view last_separator) {
  std::vector<std::string_view> groups;
  for (const abi::DomainInfo& d : abi::kDomains)
    if (!d.group.empty() && std::find(groups.begin(), groups.end(), d.group) == groups.end()) groups.push_back(d.group);
  std::string out;
  for (size_t i = 0; i < groups.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == groups.size() ? last_separator : separator) + std::string(groups[i]);
  return out;
}

// -t values nsys knows that cutrace does not record yet; refused by name.
// clang-format off
constexpr const char* kKnownTraceValues[] = {
    "cublas-verbose", "cusolver-verbose", "cusparse-verbose", "nccl", "ucx", "oshmem", "openacc", "openmp",
    "opengl", "opengl-annotations",
    "vulkan", "vulkan-annotations", "nvvideo", "python-gil", "gds", "syscall", "dx11", "dx12", "dx12-annotations",
    "wddm", "tegra-accelerators", "nvmedia",
};
// clang-format on

constexpr std::string_view kPrefix = "cutrace profile: ";

using cli::equals_ignoring_case;

// Every message is one sentence: the prefix, the cause and what to do, and a full stop.
UsageError usage(const std::string& message) { return UsageError{kExitUsage, std::string(kPrefix) + message + "."}; }

// `not_yet` is set when the only problem is values cutrace does not record yet, so the caller can
// name it beside the command line's other refusals.
bool parse_trace_list(const std::string& spelled, const std::string& list, ProfileOptions* options, UsageError* error,
                      bool* not_yet) {
  *not_yet = false;
  abi::DomainSet domains = 0;
  bool any = false, none = false;
  std::string refused;  // every value not recorded yet, so that one message names them all
  for (const std::string& value : cli::comma_items(list)) {
    if (value.empty()) continue;
    if (equals_ignoring_case(value, "none")) {
      none = true;
      continue;
    }
    bool found = false;
    for (const abi::DomainInfo& d : abi::kDomains) {
      if (!d.group.empty() && equals_ignoring_case(value, d.group)) {
        domains |= abi::trace_value_domains(d.group);
        any = found = true;
      }
    }
    if (found) continue;
    bool known = false;
    for (const char* k : kKnownTraceValues) known = known || equals_ignoring_case(value, k);
    if (!known) {
      *error = usage("unknown " + spelled + " value '" + value + "'; cutrace traces " + traced_values(", ", " and ") +
                     " (" + spelled + " " + traced_values(",", ",") + ")");
      return false;
    }
    refused += (refused.empty() ? "" : ",") + value;
  }
  if (!refused.empty()) {
    *error = usage(spelled + " " + refused + (refused.find(',') == std::string::npos ? " is" : " are") +
                   " not supported yet by cutrace; leave " + (refused.find(',') == std::string::npos ? "it" : "them") +
                   " out (cutrace traces " + traced_values(", ", " and ") + ")");
    *not_yet = true;
    return false;
  }
  if (!any && !none) {
    *error = usage("option '" + spelled + "' needs a value such as cuda");
    return false;
  }
  if (any && none) {
    *error =
        usage(spelled + " none cannot be combined with other values; use " + spelled + " cuda or " + spelled + " none");
    return false;
  }
  options->trace_domains = domains;
  return true;
}

constexpr const char* kPytorchModes = "autograd-nvtx, autograd-shapes-nvtx, functions-trace or none, or a comma list";

// --pytorch's comma list, as nsys takes it, kept in a fixed order ("" for none). The two autograd
// modes are one profiler with and without shapes, so at most one of them; none stands alone.
bool parse_pytorch(const std::string& value, std::string* modes, std::string* why) {
  bool ops = false, shapes = false, functions = false, none = false;
  size_t count = 0;
  for (size_t start = 0; start <= value.size();) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string mode = value.substr(start, comma - start);
    ++count;
    if (mode == "autograd-nvtx") ops = true;
    else if (mode == "autograd-shapes-nvtx") shapes = true;
    else if (mode == "functions-trace") functions = true;
    else if (mode == "none") none = true;
    else {
      *why = "takes " + std::string(kPytorchModes) + ", not '" + (mode.empty() ? value : mode) + "'";
      return false;
    }
    start = comma + 1;
  }
  if (ops && shapes) {
    *why = "takes autograd-nvtx or autograd-shapes-nvtx, not both: the second is the first with shapes";
    return false;
  }
  if (none && count > 1) {
    *why = "takes none alone, not with other values";
    return false;
  }
  *modes = ops ? "autograd-nvtx" : shapes ? "autograd-shapes-nvtx" : "";
  if (functions) *modes += modes->empty() ? "functions-trace" : ",functions-trace";
  return true;
}

// --python-functions-trace's file, in nsys's format, checked before the program starts so that a mistake
// is one sentence now rather than one per Python process later: a list of objects, each with a
// "module" string and a "functions" list of strings, and optionally "domain" and "color" strings.
bool check_python_functions(const std::string& path, std::string* absolute, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    *why = std::string("cannot read it (") + std::strerror(errno) + ")";
    return false;
  }
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    *why = "it is not JSON; it holds a list of {\"module\": ..., \"functions\": [...]} objects";
    return false;
  }
  if (!doc.is_array()) {
    *why = "it holds a list of {\"module\": ..., \"functions\": [...]} objects, not a list";
    return false;
  }
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& e = doc[i];
    const std::string which = "entry " + std::to_string(i + 1);
    if (!e.is_object() || !e.contains("module") || !e["module"].is_string() || e["module"].get<std::string>().empty()) {
      *why = which + " has no \"module\" string";
      return false;
    }
    if (!e.contains("functions") || !e["functions"].is_array()) {
      *why = which + " (" + e["module"].get<std::string>() + ") has no \"functions\" list";
      return false;
    }
    for (const nlohmann::json& f : e["functions"])
      if (!f.is_string() || f.get<std::string>().empty()) {
        *why = which + " (" + e["module"].get<std::string>() + ") lists a function that is not a name";
        return false;
      }
    for (const char* key : {"domain", "color"})
      if (e.contains(key) && !e[key].is_string()) {
        *why = which + " (" + e["module"].get<std::string>() + ") has a \"" + key + "\" that is not a string";
        return false;
      }
  }
  std::error_code ec;
  *absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) *absolute = path;
  return true;
}

// Digits only, as nsys takes --osrt-threshold.
bool parse_whole_number(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + uint64_t(c - '0');
  }
  *out = value;
  return true;
}

// --cudabacktrace: nsys's values. "none" (or "false"): no CUDA backtraces; "true", the legacy form: every
// class at --cudabacktrace-threshold; otherwise a comma-separated list of all, kernel, memory, sync and
// other, each with an optional ":NS" (the class's own threshold; --cudabacktrace-threshold without one).
bool parse_cudabacktrace(const std::string& value, uint64_t default_ns, uint64_t* thresholds, UsageError* error) {
  constexpr std::pair<const char*, abi::ApiClass> kClasses[] = {
      {"kernel", abi::ApiClass::kKernel}, {"memory", abi::ApiClass::kMemory},
      {"sync", abi::ApiClass::kSync},     {"other", abi::ApiClass::kOther}};
  if (value.empty() || equals_ignoring_case(value, "none") || equals_ignoring_case(value, "false")) return true;
  if (equals_ignoring_case(value, "true")) {
    for (const auto& [name, cls] : kClasses) thresholds[uint32_t(cls)] = default_ns;
    return true;
  }
  for (const std::string& item : cli::comma_items(value)) {
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    uint64_t ns = default_ns;
    if (colon != std::string::npos && !parse_whole_number(item.substr(colon + 1), &ns)) {
      *error = usage("--cudabacktrace " + value + ": '" + item.substr(colon + 1) +
                     "' is not a whole number of nanoseconds");
      return false;
    }
    bool known = false;
    for (const auto& [class_name, cls] : kClasses) {
      if (equals_ignoring_case(name, "all") || equals_ignoring_case(name, class_name)) {
        thresholds[uint32_t(cls)] = ns;
        known = true;
      }
    }
    if (!known) {
      *error = usage("--cudabacktrace " + value + ": '" + name +
                     "' is not a class; use all, none, kernel, memory, sync or other, each with an optional "
                     ":THRESHOLD_NS (e.g. kernel:500,sync:10000)");
      return false;
    }
  }
  return true;
}

bool parse_u32(const std::string& text, uint64_t min, uint64_t max, uint32_t* out) {
  uint64_t value = 0;
  if (!parse_byte_count(text, &value) || value < min || value > max) return false;
  *out = uint32_t(value);
  return true;
}

// "cutrace profile: " and the final period off a refusal, to list it with others.
std::string refusal_body(const UsageError& e) {
  std::string body = e.message.substr(kPrefix.size());
  if (!body.empty() && body.back() == '.') body.pop_back();
  return body;
}

}  // namespace

bool parse_byte_count(const std::string& text, uint64_t* bytes) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;
  std::string_view suffix(end);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else
    return false;
  if (shift && value > (std::numeric_limits<uint64_t>::max() >> shift)) return false;
  *bytes = uint64_t(value) << shift;
  return true;
}

// Seconds as nsys takes them for -y and -d: a whole or decimal number, optionally with "s".
bool parse_seconds(std::string text, uint64_t* ns) {
  if (!text.empty() && (text.back() == 's' || text.back() == 'S')) text.pop_back();
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text.c_str(), &end);
  if (errno || *end || !(seconds >= 0) || seconds > 1e9) return false;
  *ns = uint64_t(seconds * 1e9 + 0.5);
  return true;
}

// --kill none|sigkill|sigterm|<signal number>; 0 for none.
bool parse_kill(const std::string& text, int* signal) {
  if (equals_ignoring_case(text, "none")) return *signal = 0, true;
  if (equals_ignoring_case(text, "sigterm")) return *signal = 15, true;
  if (equals_ignoring_case(text, "sigkill")) return *signal = 9, true;
  if (text.empty() || text.size() > 2 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const int n = std::atoi(text.c_str());
  if (n < 1 || n > 64) return false;
  *signal = n;
  return true;
}

// --capture-range-end none|stop|stop-shutdown|repeat[:N]|repeat-shutdown:N
bool parse_capture_end(const std::string& text, ProfileOptions* options) {
  const size_t colon = text.find(':');
  const std::string word = text.substr(0, colon);
  uint32_t count = 0;
  if (colon != std::string::npos) {
    const std::string n = text.substr(colon + 1);
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) return false;
    count = uint32_t(std::stoul(n));
    if (count == 0) return false;
  }
  for (const char* known : {"none", "stop", "stop-shutdown", "repeat", "repeat-shutdown"}) {
    if (!equals_ignoring_case(word, known)) continue;
    const bool counted = std::string_view(known).starts_with("repeat");
    if (colon != std::string::npos && !counted) return false;
    if (equals_ignoring_case(word, "repeat-shutdown") && count == 0) return false;  // N is required
    options->capture_end = known;
    options->capture_count = count;
    return true;
  }
  return false;
}

// The types `cutrace export` writes, "a, b or c".
static std::string export_types_text() { return exporting::exporter_types(exporting::any_exporter, " or "); }

static const Unsupported* find_unsupported(const cli::Arg& w) {
  for (const auto& u : kUnsupported)
    if (w.short_name ? u.short_name == w.short_name : w.long_name == u.long_name) return &u;
  return nullptr;
}

bool parse_options(int argc, const char* const* argv, ProfileOptions* options, UsageError* error) {
  *options = ProfileOptions{};
  // Options cutrace knows of but cannot honour yet, and unknown ones, are all named in one message,
  // so porting a command line takes one run, not one per option.
  std::vector<std::string> refusals;
  cli::Scanner words(argc, argv, kSupported,
                     {.short_values_attach = true, .operand_ends_options = true,
                      .catch_mistyped_switch_values = true, .empty_value_is_missing = true});
  cli::Arg w;
  while (words.next(w)) {
    auto take_value = [&](std::string* value) { return words.value(w, *value); };
    // Only true and false are taken as a switch's value, so `-f ./app` runs ./app with overwriting on.
    auto take_bool = [&](bool* value) {
      std::string bad;
      if (words.switch_value(w, *value, bad)) return true;
      *error = usage("option '" + w.spelled + "' takes true or false, not '" + bad + "'");
      return false;
    };

    if (const cli::OptionSpec* s = w.spec) {
      std::string value;
      switch (Id(s->id)) {
        case kQuiet:
          if (w.has_attached) {
            *error = usage("option '" + w.spelled + "' takes no value");
            return false;
          }
          options->quiet = true;
          break;
        case kHelp:
          if (w.has_attached) {
            *error = usage("option '" + w.spelled + "' takes no value");
            return false;
          }
          options->help = true;
          return true;
        case kForce:
          if (!take_bool(&options->force_overwrite)) return false;
          break;
        case kShowOutput:
          if (!take_bool(&options->show_output)) return false;
          break;
        case kStats:
          if (!take_bool(&options->stats)) return false;
          break;
        case kStopOnExit: {
          bool stop = true;
          if (!take_bool(&stop)) return false;
          if (!stop) {
            *error =
                usage(w.spelled + " false is not supported; cutrace always stops recording when the program exits");
            return false;
          }
          break;
        }
        case kOutput:
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' needs a file name");
            return false;
          }
          options->output_pattern = value;
          break;
        case kTrace:
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' needs a value such as cuda");
            return false;
          }
          if (bool not_yet = false; !parse_trace_list(w.spelled, value, options, error, &not_yet)) {
            if (!not_yet) return false;
            refusals.push_back(refusal_body(*error));
          }
          break;
        case kWait:
          if (!take_value(&value) || !(equals_ignoring_case(value, "all") || equals_ignoring_case(value, "primary"))) {
            *error = usage("option '" + w.spelled + "' takes primary or all" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          options->wait_all = equals_ignoring_case(value, "all");
          break;
        case kRingSize:
          if (!take_value(&value) || !parse_u32(value, abi::kMinRingBytes, uint64_t(1) << 31, &options->ring_bytes) ||
              !abi::is_power_of_two(options->ring_bytes)) {
            *error = usage("--ring-size needs a power of two between " + std::to_string(abi::kMinRingBytes) +
                           " and 2147483648 bytes (suffixes K, M, G allowed)");
            return false;
          }
          options->ring_bytes_given = true;
          break;
        case kCaptureRange:
          if (!take_value(&value)) value.clear();
          if (equals_ignoring_case(value, "none")) {
            options->capture_range = ProfileOptions::CaptureRange::kNone;
          } else if (equals_ignoring_case(value, "cudaProfilerApi")) {
            options->capture_range = ProfileOptions::CaptureRange::kProfilerApi;
          } else if (equals_ignoring_case(value, "nvtx")) {
            options->capture_range = ProfileOptions::CaptureRange::kNvtx;
          } else if (equals_ignoring_case(value, "hotkey")) {
            refusals.push_back("option '" + w.spelled + " hotkey' is not supported; use cudaProfilerApi or nvtx");
          } else {
            *error = usage("option '" + w.spelled + "' takes none, cudaProfilerApi or nvtx" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kCaptureRangeEnd:
          if (!take_value(&value) || !parse_capture_end(value, options)) {
            *error = usage("option '" + w.spelled + "' takes none, stop, stop-shutdown, repeat[:N] or repeat-shutdown:N" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kStopOnRangeEnd: {
          // The older spelling: true is stop, false lets capture go on after the range (none).
          bool stop = true;
          if (!take_bool(&stop)) return false;
          options->capture_end = stop ? "stop" : "none";
          options->capture_count = 0;
          break;
        }
        case kNvtxCapture:
          if (!take_value(&value) || value.front() == '@') {
            *error = usage("option '" + w.spelled + "' needs a range name: RANGE, RANGE@DOMAIN or RANGE@*");
            return false;
          }
          // The shim keeps the range and the domain in fields of 255 bytes: longer names could never match.
          if (const size_t at = value.rfind('@'); (at == std::string::npos ? value.size() : at) > 255 ||
                                                  (at != std::string::npos && value.size() - at - 1 > 255)) {
            *error = usage("option '" + w.spelled + "' takes a range name and a domain of at most 255 bytes each");
            return false;
          }
          options->nvtx_capture = value;
          break;
        case kDelay:
        case kDuration: {
          uint64_t ns = 0;
          if (!take_value(&value) || !parse_seconds(value, &ns)) {
            *error = usage("option '" + w.spelled + "' takes a number of seconds" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          // As nsys: a duration must be more than zero. Zero would have meant no limit at all, the
          // opposite of what it says.
          if (s->id == kDuration && ns == 0) {
            *error = usage("option '" + w.spelled + "' takes a number of seconds greater than zero, not '" + value +
                           "'; leave it out to record until the program ends");
            return false;
          }
          (s->id == kDelay ? options->delay_ns : options->duration_ns) = ns;
          break;
        }
        case kKill:
          if (!take_value(&value) || !parse_kill(value, &options->kill_signal)) {
            *error = usage("option '" + w.spelled + "' takes none, sigterm, sigkill or a signal number" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kCudaBacktrace:
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' takes all, none, kernel, memory, sync or other, each with an "
                           "optional :THRESHOLD_NS, comma-separated (e.g. kernel:500,sync:10000)");
            return false;
          }
          options->cudabacktrace = value;
          break;
        case kCudaBacktraceThreshold:
        case kOsrtBacktraceThreshold: {
          uint64_t& target = s->id == kCudaBacktraceThreshold ? options->cudabacktrace_threshold_ns
                                                                  : options->osrt_backtrace_threshold_ns;
          if (!take_value(&value) || !parse_whole_number(value, &target)) {
            *error = usage("option '" + w.spelled + "' takes a whole number of nanoseconds" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        }
        case kOsrtBacktraceDepth:
          if (!take_value(&value) || !parse_u32(value, 1, abi::kMaxBacktraceFrames, &options->osrt_backtrace_depth)) {
            *error = usage("option '" + w.spelled + "' takes a number of frames from 1 to " +
                           std::to_string(abi::kMaxBacktraceFrames) +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kSample:
          if (!take_value(&value) || (value != "process-tree" && value != "cpu" && value != "none")) {
            *error = usage("option '" + w.spelled + "' takes process-tree (or cpu) or none" +
                           (value == "system-wide" ? ", not system-wide: cutrace samples the command's processes alone"
                            : value.empty()        ? std::string()
                                                   : ", not '" + value + "'"));
            return false;
          }
          options->cpu_sampling = value != "none";
          break;
        case kCpuctxsw:
          if (!take_value(&value) || (value != "process-tree" && value != "none")) {
            *error = usage("option '" + w.spelled + "' takes process-tree or none" +
                           (value == "system-wide" ? ", not system-wide: cutrace follows the command's processes alone"
                            : value.empty()        ? std::string()
                                                   : ", not '" + value + "'"));
            return false;
          }
          options->context_switches = value == "process-tree";
          break;
        case kSamplingFrequency:
          if (!take_value(&value) || !parse_u32(value, 100, 8000, &options->sampling_frequency)) {
            *error = usage("option '" + w.spelled + "' takes a number of samples per second from 100 to 8000" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kPythonSampling:
          if (!take_bool(&options->python_sampling)) return false;
          break;
        case kGpuActivity:
          if (!take_bool(&options->gpu_activity)) return false;
          break;
        case kCudaMemoryUsage:
          if (!take_bool(&options->cuda_memory_usage)) return false;
          break;
        case kCudaGraphTrace:
          if (!take_value(&value) || (value != "graph" && value != "node")) {
            *error = usage("option '" + w.spelled + "' takes graph or node" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          options->cuda_graph_nodes = value == "node";
          break;
        case kPythonSamplingFrequency:
          if (!take_value(&value) || !parse_u32(value, 1, 2000, &options->python_sampling_frequency)) {
            *error = usage("option '" + w.spelled + "' takes a number of samples per second from 1 to 2000" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kPytorch:
          if (std::string why; !take_value(&value) || !parse_pytorch(value, &options->pytorch, &why)) {
            *error = usage("option '" + w.spelled + "' " + (value.empty() ? std::string("takes ") + kPytorchModes : why));
            return false;
          }
          break;
        case kPythonFunctions:
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' needs a JSON file of the functions to annotate");
            return false;
          }
          if (std::string why; !check_python_functions(value, &options->python_functions, &why)) {
            *error = usage("--python-functions-trace " + value + ": " + why);
            return false;
          }
          break;
        case kMpiImpl:
          if (!take_value(&value) || (value != "openmpi" && value != "mpich")) {
            *error = usage("option '" + w.spelled + "' takes openmpi or mpich" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          options->mpi_impl = value;
          break;
        case kExport: {
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' takes export types, such as sqlite or sqlite,parquetdir");
            return false;
          }
          for (const std::string& type : cli::comma_items(value)) {
            if (type == "none") {
              options->exports.clear();
            } else if (type == "hdf" || type == "json" || type == "text" || type == "jsonlines") {
              *error = usage("option '" + w.spelled + "': nsys's " + type + " export is not one cutrace writes; it " +
                             "writes " + export_types_text() + " (" +
                             exporting::exporter_types(exporting::is_made_of_tables) + " as nsys does)");
              return false;
            } else if (!exporting::find_exporter(type)) {
              *error = usage("option '" + w.spelled + "' takes " + export_types_text() + " or none, not '" + type +
                             "'");
              return false;
            } else if (std::find(options->exports.begin(), options->exports.end(), type) == options->exports.end()) {
              options->exports.push_back(type);
            }
          }
          break;
        }
        case kEnvVar: {
          if (!take_value(&value)) {
            *error = usage("option '" + w.spelled + "' takes NAME=VALUE[,NAME=VALUE...]");
            return false;
          }
          for (const std::string& pair : cli::comma_items(value)) {
            const size_t equals = pair.find('=');
            if (equals == 0 || equals == std::string::npos) {
              *error = usage("option '" + w.spelled + "' takes NAME=VALUE[,NAME=VALUE...], not '" + pair + "'");
              return false;
            }
            options->env_vars.push_back(pair);
          }
          break;
        }
        case kTraceForkBeforeExec: {
          // A child forked without exec is always traced here: either value is taken.
          bool unused;
          if (!take_bool(&unused)) return false;
          break;
        }
        case kPythonBacktrace:
          if (!take_value(&value) || (value != "cuda" && value != "none" && value != "false")) {
            *error = usage("option '" + w.spelled + "' takes cuda or none" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          options->python_backtrace = value == "cuda";
          break;
        case kOsrtThreshold:
          if (!take_value(&value) || !parse_whole_number(value, &options->osrt_threshold_ns)) {
            *error = usage("option '" + w.spelled + "' takes a whole number of nanoseconds" +
                           (value.empty() ? std::string() : ", not '" + value + "'"));
            return false;
          }
          break;
        case kRingSlots:
          if (!take_value(&value) || !parse_u32(value, 1, std::numeric_limits<uint32_t>::max(), &options->ring_slots)) {
            *error = usage("--ring-slots needs a whole number of at least 1");
            return false;
          }
          break;
      }
      continue;
    }

    if (const Unsupported* u = find_unsupported(w)) {
      bool accepted = false;
      if (u->off) {
        if (w.has_attached) accepted = equals_ignoring_case(w.attached, u->off);
        else accepted = words.take_next_if([&](std::string_view next) { return equals_ignoring_case(next, u->off); });
      }
      if (!accepted) {
        // The remedy: profile without it, or spell out the value that asks for nothing.
        std::string remedy = "remove it to profile without it";
        if (u->off) remedy += ", or pass " + w.spelled + (w.short_name ? " " : "=") + u->off;
        refusals.push_back("option '" + w.spelled + "' is not supported yet; " + remedy);
        // nsys's options take a value; passing over it keeps it from being read as the command.
        if (!w.has_attached) words.take_next_if([](std::string_view next) { return next.empty() || next[0] != '-'; });
      }
      continue;
    }

    refusals.push_back("unknown option '" + (w.short_name ? w.word : w.spelled) + "'; run `cutrace profile --help`");
  }

  if (refusals.size() == 1) {
    *error = usage(refusals[0]);
    return false;
  }
  if (refusals.size() > 1) {
    std::string all = std::to_string(refusals.size()) + " options cannot be used";
    for (size_t k = 0; k < refusals.size(); ++k)
      all += (k ? "; (" : ": (") + std::to_string(k + 1) + ") " + refusals[k];
    *error = usage(all);
    return false;
  }

  options->given = words.taken();
  options->command = words.rest();
  if (options->command.empty()) {
    *error = usage("no command given; usage: cutrace profile [options] [--] <command> [args...]");
    return false;
  }
  if (options->capture_range == ProfileOptions::CaptureRange::kNvtx && options->nvtx_capture.empty()) {
    *error = usage("-c nvtx needs the range to follow: add -p RANGE, -p RANGE@DOMAIN or -p RANGE@*");
    return false;
  }
  // The annotations are NVTX ranges: without -t nvtx they would be made and never recorded.
  if (!options->pytorch.empty() && !(options->trace_domains & abi::domain_bit(abi::ApiDomain::kNvtx))) {
    *error = usage("--pytorch " + options->pytorch + " annotates through NVTX, which -t leaves out; add nvtx to -t");
    return false;
  }
  if (!options->python_functions.empty() && !(options->trace_domains & abi::domain_bit(abi::ApiDomain::kNvtx))) {
    *error = usage("--python-functions-trace annotates through NVTX, which -t leaves out; add nvtx to -t");
    return false;
  }
  if (!parse_cudabacktrace(options->cudabacktrace, options->cudabacktrace_threshold_ns,
                           options->backtrace_threshold_ns, error))
    return false;
  if (options->trace_domains & abi::domain_bit(abi::ApiDomain::kOsRuntime))
    options->backtrace_threshold_ns[abi::kBacktraceClassOsrt] = options->osrt_backtrace_threshold_ns;
  return true;
}

static const char* help_template();

const char* help_text() {
  // The -t values come from domains.def, in its order; the sentences that describe them are checked
  // against it (LauncherHelp.EveryTraceValueIsDescribed).
  static const std::string text = [] {
    std::string t = help_template();
    const std::string marker = "@TRACE_VALUES@";
    t.replace(t.find(marker), marker.size(), traced_values(",", ","));
    return t;
  }();
  return text.c_str();
}

static const char* help_template() {
  return R"(usage: cutrace profile [options] [--] <command> [args...]

Runs <command> with its CUDA runtime and driver calls and its NVTX annotations (and with -t, its
cuBLAS, cuBLASLt, cuDNN, cuSOLVER and cuSPARSE calls) recorded into a .cutrace file, however the
program reaches them (linked, dlopen/dlsym, cuGetProcAddress, the static runtime's driver calls, NVTX
injection), then exits with the command's exit code
(128+N if signal N killed it). Options follow `nsys profile`.

options:
  -o, --output NAME           trace file; ".cutrace" is appended unless NAME ends with it; missing
                              directories are created. Default: the first free reportN.cutrace in the
                              current directory. NAME may contain
                                %q{VAR}  the value of environment variable VAR (which must be set)
                                %h       the host name
                                %p       the process id of <command>
                                %%       a literal %
                              e.g. -o /out/job%q{SLURM_JOB_ID}/rank%q{SLURM_PROCID}
                              A name is claimed (NAME.cutrace.lock) before the command starts: a
                              name another run is writing is refused, even with -f, and runs
                              started together without -o each get their own reportN.
  -f, --force-overwrite true|false
                              overwrite an existing trace file (default false)
  -w, --show-output true|false
                              false writes the command's stdout and stderr to files named after
                              the trace (NAME.stdout, NAME.stderr) instead of the terminal
                              (default true)
  -t, --trace @TRACE_VALUES@|none
                              what to record, comma-separated (default cuda,nvtx): cuda is the
                              CUDA runtime and driver, nvtx the program's NVTX ranges and marks,
                              osrt its blocking libc calls (read, poll, sleeps, locks, waits),
                              cublas adds cuBLAS and cuBLASLt, cudnn adds cuDNN, cusolver adds
                              cuSOLVER, cusparse adds cuSPARSE, cufft adds cuFFT (each of those
                              also records cuda), mpi the program's MPI calls (point to point,
                              collectives, communicators, one-sided); none runs the command with
                              recording off
      --mpi-impl openmpi|mpich
                              the MPI implementation the program uses, with -t mpi (default
                              openmpi)
      --osrt-threshold NS     record an osrt call only when it lasts at least NS nanoseconds
                              (default 1000)
      --cudabacktrace all|none|kernel|memory|sync|other[:NS][,...]
                              take the stack of a CUDA call of those classes that lasts at least
                              NS nanoseconds (default 1000), e.g. kernel:500,sync:10000; the
                              legacy --cudabacktrace=true takes every class (default none)
      --cudabacktrace-threshold NS
                              the threshold of the classes given without their own
      --osrt-backtrace-threshold NS
                              with -t osrt, take the stack of an osrt call that lasts at least NS
                              nanoseconds (default 80000)
      --osrt-backtrace-depth N
                              frames kept of an osrt call's stack (default 24; 32 for CUDA calls)
  -s, --sample process-tree|cpu|none
                              CPU samples of every thread of the command's processes, with their
                              stacks (perf events; default none)
      --sampling-frequency HZ samples per second and thread, 100 to 8000 (default 1000)
      --cpuctxsw process-tree|none
                              record when each thread of the command's processes leaves its CPU
                              and gets it back (perf events; default none)
      --python-backtrace cuda|none
                              in a CPython thread that holds the GIL, add its Python frames to
                              the stacks taken (default cuda: on); none leaves them out
      --gpu-activity true|false
                              with -t cuda, what the GPU ran (kernels, copies, sets,
                              synchronisation, allocations) from CUPTI where a driver is present
                              (default true; false records the API calls alone)
      --cuda-memory-usage true|false
                              with GPU activity, the device memory each process has allocated,
                              over time (a counter in the Perfetto export; default false)
      --cuda-graph-trace graph|node
                              with GPU activity, a CUDA graph launch as one interval (graph, the
                              default) or each of its nodes as its own kernel, copy or set (node)
      --python-sampling true|false
                              sample the Python stack of every thread of each CPython process
                              (3.9 or newer), from a thread that takes the GIL (default false)
      --python-sampling-frequency HZ
                              Python samples per second, 1 to 2000 (default 1000)
      --python-functions-trace FILE
                              annotate the Python functions FILE names (nsys's JSON: a list of
                              {"module", "functions", "domain", "color"}) as NVTX ranges, in
                              every Python process of the command (needs -t nvtx)
      --pytorch autograd-nvtx|autograd-shapes-nvtx|functions-trace|none
                              annotate PyTorch in every Python process of the command, with no
                              change to it, as NVTX ranges (needs -t nvtx): each op
                              (autograd-nvtx), each op with its inputs' shapes
                              (autograd-shapes-nvtx), each module by its path in the model with
                              its class, backward calls and optimizer steps (functions-trace);
                              a comma list combines them (default none)
  -c, --capture-range none|cudaProfilerApi|nvtx
                              record each process only inside its own ranges: between its
                              cudaProfilerStart and cudaProfilerStop (or cuProfilerStart/Stop),
                              or inside the NVTX range -p names
      --capture-range-end stop-shutdown|stop|none|repeat[:N]|repeat-shutdown:N
                              what the end of a range does (default stop-shutdown): stop
                              recording that process; stop-shutdown also ends the program
                              (--kill); none ignores range ends; repeat records every range (the
                              first N), each told apart in the trace; repeat-shutdown:N ends the
                              program after N ranges. --stop-on-range-end true|false is the older
                              spelling of stop and none
  -p, --nvtx-capture RANGE[@DOMAIN|@*]
                              the NVTX range -c nvtx follows (push/pop or start/end, plain or
                              registered message); without @ in the default domain
  -y, --delay SECONDS         start recording after SECONDS
  -d, --duration SECONDS      stop recording after SECONDS (more than 0) of it and end the program (--kill)
      --kill sigterm|sigkill|none|N
                              the signal that ends the program for -d and the shutdown modes
                              (default sigterm); none leaves it running unrecorded
  -x, --stop-on-exit true     stop when the command exits (the only mode cutrace has)
      --wait all|primary      all (default): after the command exits, keep recording until every
                              process it started has exited, also those it left running in the
                              background; primary: stop when the command itself exits, and say how
                              many processes were still running (their later calls are not recorded)
  -e, --env-var NAME=VALUE[,NAME=VALUE...]
                              set these in the command's environment (repeatable)
      --trace-fork-before-exec true|false
                              taken as nsys takes it; a child forked without exec is always traced
      --stats true|false      print nsys's summary reports after the run, as cutrace stats does by
                              default: nvtx_sum, osrt_sum, cuda_api_sum, cuda_gpu_kern_sum and the
                              two memory operation summaries (default false)
      --export TYPE[,TYPE...] also write `cutrace export --type TYPE` of the trace beside it (sqlite,
                              parquetdir, arrowdir, arrow, perfetto, ...: TRACE.sqlite, TRACE_pqtdir,
                              ...; an existing one needs -f true); none (default) writes none
      --ring-size BYTES       per-thread ring size, a power of two (default 16M, halved down to
                              64K to fit cutrace's share of /dev/shm, half its free space;
                              suffixes K, M, G)
      --ring-slots N          rings in the session, one per recording thread (default 256; fewer
                              when /dev/shm's share has no room for them)
  -q, --quiet                 leave out the lines that say where collection starts and what it
                              wrote (warnings are still printed)
  -h, --help                  print this help

A boolean option given alone (-f) means true. Other nsys options are refused by name, all of them in
one message, except those given the value that turns them off (-s none, -b none, --dask none,
...), which match what cutrace does.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to cutrace with kill are passed on to the command;
a terminal's Ctrl+C or Ctrl+\ already reaches the command directly. The trace is finished after the
command exits, also when a signal ended it.

environment:
  CUTRACE_PRELOAD_LIB         path of libcutrace-preload.so (default: found next to cutrace)
  CUTRACE_RECORDER            path of cutrace-recorder (default: found next to cutrace, or in
                              libexec/cutrace of its installation)
  CUTRACE_RECORDER_START_TIMEOUT
                              seconds the recorder may take to start (default 10)
  CUTRACE_RECORDER_STOP_TIMEOUT
                              seconds the recorder may take to finish the trace after the command
                              exits before it is stopped with SIGTERM (default 120)
  CUTRACE_CLOCK               monotonic or tsc: the clock of the trace (default: tsc when the kernel
                              uses it as its clocksource)
)";
}

}  // namespace cutrace::launcher
