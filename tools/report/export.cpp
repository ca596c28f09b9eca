// `cutrace export`: converts a trace for other tools.
#include <cstdio>
#include <string>

#include "reader/decode.h"
#include "report/cli.h"
#include "report/commands.h"
#include "report/perfetto.h"

namespace cutrace::report {
namespace {

void print_help() {
  std::printf(
      "usage: cutrace export --type perfetto [options] FILE.cutrace\n"
      "\n"
      "Converts a trace for other tools.\n"
      "\n"
      "options:\n"
      "  -t, --type perfetto             Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing\n"
      "  -o, --output FILE               output file (default: the trace's name with .json)\n"
      "  -f, --force-overwrite true      replace an existing output file\n"
      "      --show-internal true        also export the CUDA runtime's internal calls (kernel registration,\n"
      "                                  __cudaPushCallConfiguration, ...), which are left out by default\n"
      "  -h, --help                      show this help\n"
      "\n"
      "exit status: 0; 3 when the trace is cut off or damaged (everything intact in it is still\n"
      "exported, and a warning says what is missing); 1 or 2 when nothing could be exported.\n");
}

// trace.cutrace -> trace.json; any other name gets .json appended.
std::string default_output(const std::string& trace_path) {
  const std::string ext = format::kFileExtension;
  const size_t slash = trace_path.rfind('/');
  if (trace_path.size() > ext.size() && trace_path.compare(trace_path.size() - ext.size(), ext.size(), ext) == 0 &&
      (slash == std::string::npos || trace_path.size() - ext.size() > slash + 1))
    return trace_path.substr(0, trace_path.size() - ext.size()) + ".json";
  return trace_path + ".json";
}

}  // namespace

int export_main(int argc, char** argv) {
  std::string type, output_arg, trace_path;
  bool overwrite = false;
  PerfettoOptions options;
  ArgCursor args(argc, argv);
  while (!args.done()) {
    std::string_view a = args.current();
    bool missing = false, bad = false;
    if (!args.options_done() && (a == "-h" || a == "--help")) {
      print_help();
      return kExitOk;
    }
    if (!args.options_done() &&
        (args.value_option("-t", "--type", type, missing) || args.value_option("-o", "--output", output_arg, missing))) {
      if (missing) {
        std::fprintf(stderr, "cutrace export: %s needs a value; see `cutrace export --help`.\n", std::string(a).c_str());
        return kExitUsage;
      }
      continue;
    }
    if (!args.options_done() && args.bool_option("-f", "--force-overwrite", overwrite, bad)) {
      if (bad) {
        std::fprintf(stderr, "cutrace export: --force-overwrite takes true or false.\n");
        return kExitUsage;
      }
      continue;
    }
    if (!args.options_done() && args.bool_option(nullptr, "--show-internal", options.show_internal, bad)) {
      if (bad) {
        std::fprintf(stderr, "cutrace export: --show-internal takes true or false.\n");
        return kExitUsage;
      }
      continue;
    }
    if (const int exit_code = args.take_common("export", "see `cutrace export --help`", trace_path); exit_code != ArgCursor::kNextArgument)
      return exit_code;
  }
  if (type.empty()) {
    std::fprintf(stderr, "cutrace export: no export type given; add --type perfetto.\n");
    return kExitUsage;
  }
  if (type != "perfetto") {
    std::fprintf(stderr, "cutrace export: unknown export type '%s'; the available type is perfetto.\n", type.c_str());
    return kExitUsage;
  }
  if (trace_path.empty()) {
    std::fprintf(stderr, "cutrace export: no trace given; usage: cutrace export --type perfetto FILE.cutrace.\n");
    return kExitUsage;
  }

  reader::TraceReader trace;
  if (!open_trace(trace, trace_path, "export")) return kExitFailure;
  const std::string output_path = output_arg.empty() ? default_output(trace_path) : output_arg;
  Output out;
  std::string error;
  if (!out.open(output_path, overwrite, "-f true", error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  const PerfettoCounts counts = write_perfetto(trace, out.file(), options);
  const int exit_code = warn_status(trace, "export");
  print_trace_warnings(trace, "export");
  if (!out.commit(error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  const LossCounts loss = loss_counts(trace);
  const std::string loss_text = loss_sentence(loss);
  if (!loss_text.empty()) std::fprintf(stderr, "cutrace export: warning: %s; the timeline has gaps.\n", loss_text.c_str());
  auto count = [](uint64_t n, const char* one, const char* many) {
    return reader::thousands(n) + " " + (n == 1 ? one : many);
  };
  if (!out.is_stdout())
    std::fprintf(stderr, "cutrace export: wrote %s (%s, %s, %s).\n", output_path.c_str(),
                 count(counts.calls, "call", "calls").c_str(), count(counts.processes, "process", "processes").c_str(),
                 count(counts.threads, "thread", "threads").c_str());
  return exit_code;
}

}  // namespace cutrace::report
