// `cutrace export`: converts a trace for other tools.

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <memory>
#include <string>
#include <regex>
#include <tuple>
#include <vector>

#include "reader/decode.h"
#include "common/cli.h"
#include "common/commands.h"
#include "export/gzip_stream.h"
#include "model/nvtx_ranges.h"
#include "common/progress.h"
#include "common/python_handoff.h"
#include "export/exporter.h"
#include "model/symbolizer.h"

namespace cutrace::exporting {
namespace {

using cli::kExitFailure;
using cli::kExitNoData;
using cli::kExitOk;
using cli::kExitPartialTrace;
using cli::kExitUsage;
using cli::kNextArgument;
using model::ExportOptions;
using model::NvtxFilter;
using model::NvtxWindows;

void print_help() {
  std::printf("usage: cutrace export --type %s [options] FILE.cutrace\n"
              "       cutrace export --type perfetto -o JOB.pftrace [options] RANK0.cutrace RANK1.cutrace... | DIR\n"
              "\n"
              "Converts a trace for other tools. Several traces (the ranks of a job, or a directory of them)\n"
              "make one Perfetto timeline, put on one clock by their wall-clock anchors, each process named\n"
              "\"rank N (host, pid P)\" (docs/jobs.md).\n"
              "\n"
              "options:\n",
              exporters().size() == 1 ? exporters()[0].type : "TYPE");
  for (const ExporterInfo& e : exporters()) {
    const std::string flag = std::string("  -t, --type ") + e.type;
    if (flag.size() < 33) std::printf("%-34s%s\n", flag.c_str(), e.description);
    else std::printf("%s\n%34s%s\n", flag.c_str(), "", e.description);
  }
  std::printf(
      "  -o, --output FILE               output file (default: the trace's name with the type's suffix:\n"
      "                                  .pftrace, .json, .sqlite, ...; .gz added when compressed)\n"
      "  -f, --force-overwrite true      replace an existing output file\n"
      "  -z, --gzip true                 gzip-compress the Perfetto export (the UI opens it as it is); also\n"
      "                                  chosen by an output name ending in .gz\n"
      "      --filter-nvtx RANGE[@DOMAIN|@*][/N]\n"
      "                                  only the time of the NVTX range RANGE (its Nth instance with /N;\n"
      "                                  with several, from the first one's start to the last one's end)\n"
      "      --from TIME, --to TIME      only the calls that overlap this window, counted from the start\n"
      "                                  of the session: seconds, or a number with ns, us, ms or s\n"
      "      --symbol-path DIR[:DIR]     also look for the traced binaries here (a copy of them, found by\n"
      "                                  name, path or build-id; default $CUTRACE_SYMBOL_PATH), to name\n"
      "                                  the frames of stacks and samples\n"
      "      --tables REGEX[,REGEX...]   only the tables whose whole name matches a REGEX, in any case\n"
      "                                  (sqlite, parquetdir, arrowdir, arrow; e.g.\n"
      "                                  'CUPTI_ACTIVITY_KIND_.*,StringIds'); may be repeated\n"
      "      --times RANGE[,RANGE...]    nsys's time filter for the table exports: only the events within a\n"
      "                                  range, START/END (either may be left out), each a sum such as\n"
      "                                  1s500ms or 2.5e9 (ns when no unit; us, ms, s, m, h); a ':' before\n"
      "                                  START or after END keeps the events that cross that bound too;\n"
      "                                  applied after --ts-normalize and --ts-shift; may be repeated\n"
      "      --ts-normalize true         the table exports' times in ns since the Unix epoch (UTC), from\n"
      "                                  the session's wall-clock start, rather than from the session's\n"
      "                                  start; to line up traces of several hosts (as good as their clocks)\n"
      "      --ts-shift NS               add NS (may be negative) to the table exports' times\n"
      "      --show-internal true        also export the CUDA runtime's internal calls (kernel registration,\n"
      "                                  __cudaPushCallConfiguration, ...), which are left out by default\n"
      "  -l, --lazy true                 only the tables that have rows (sqlite, parquetdir, arrowdir,\n"
      "                                  arrow); by default every table, empty or not (nsys's --lazy=false)\n"
      "  -q, --quiet [true]              no progress bar on a terminal\n"
      "  -h, --help                      show this help\n"
      "\n"
      "The Perfetto UI keeps a trace in the browser's memory (about 2 GB): a warning says when the export\n"
      "is larger than it can load (CUTRACE_PERFETTO_UI_LIMIT_BYTES, default 2 GiB of protobuf or 1 GiB of\n"
      "JSON); export a window, or open the file with trace_processor --httpd.\n"
      "\n"
      "exit status: 0; 3 when the trace is cut off or damaged (everything intact in it is still\n"
      "exported, and a warning says what is missing); 1 or 2 when nothing could be exported.\n");
}

// trace.cutrace -> trace.pftrace (or .pftrace.gz, .json, ...); any other name gets it appended.
std::string default_output(const std::string& trace_path, const char* extension, bool gzip) {
  const std::string ext = format::kFileExtension;
  const std::string json = std::string(extension) + (gzip ? ".gz" : "");
  const size_t slash = trace_path.rfind('/');
  if (trace_path.size() > ext.size() && trace_path.compare(trace_path.size() - ext.size(), ext.size(), ext) == 0 &&
      (slash == std::string::npos || trace_path.size() - ext.size() > slash + 1))
    return trace_path.substr(0, trace_path.size() - ext.size()) + json;
  return trace_path + json;
}

// "1.5" (seconds), "200ms", "30us", "1000ns", "2s" -> nanoseconds.
bool parse_time_ns(const std::string& text, uint64_t* ns) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(value >= 0) || value > 1e10) return false;
  const std::string unit = end;
  double scale;
  if (unit.empty() || unit == "s") scale = 1e9;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns") scale = 1;
  else return false;
  *ns = uint64_t(value * scale + 0.5);
  return true;
}

// After the writer: what the trace lacked, the writer's notes, the output moved into place, size and
// loss warnings, and what was written. Returns the exit code.
int finish_export(reader::TraceReader& trace, cli::Output& out, const std::string& output_path,
                  const ExportResult& result, std::vector<std::string> (*size_warnings)(const std::string&, uint64_t),
                  uint64_t bytes) {
  const int exit_code = cli::warn_status(trace, "export");
  cli::mention_trace_warnings(trace, "export");
  for (const std::string& note : result.notes) std::fprintf(stderr, "cutrace export: note: %s.\n", note.c_str());
  std::string error;
  if (!out.commit(error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  if (size_warnings)
    for (const std::string& warning : size_warnings(output_path, bytes))
      std::fprintf(stderr, "cutrace export: warning: %s.\n", warning.c_str());
  const cli::LossCounts loss = cli::loss_counts(trace);
  const std::string loss_text = cli::loss_sentence(loss);
  if (!loss_text.empty()) std::fprintf(stderr, "cutrace export: warning: %s; the timeline has gaps.\n", loss_text.c_str());
  if (!out.is_stdout())
    std::fprintf(stderr, "cutrace export: wrote %s (%s).\n", output_path.c_str(), result.written.c_str());
  return exit_code;
}

// Writes a stream format into `out` through `write` (a gzip stream around it when asked), then
// finishes the stream. False after one sentence on stderr; `bytes` is the size before compression, for
// the size warnings.
template <typename Write>
bool write_stream(cli::Output& out, const std::string& output_path, bool gzip, cli::ProgressBar& progress,
                  uint64_t& bytes, Write&& write) {
  bytes = 0;
  FILE* stream = gzip ? open_gzip_stream(out.file(), &bytes) : out.file();
  if (!stream) {
    std::fprintf(stderr, "cutrace export: cannot start the gzip compression (out of memory).\n");
    return false;
  }
  write(stream);
  progress.finish();
  if (gzip && std::fclose(stream) != 0) {
    std::fprintf(stderr, "cutrace export: cannot write %s (%s).\n", output_path.c_str(), std::strerror(errno));
    return false;
  }
  if (!gzip) {
    std::fflush(stream);
    const long at = std::ftell(stream);
    bytes = at > 0 ? uint64_t(at) : 0;
  }
  return true;
}

// A directory given as a trace stands for the .cutrace files in it (a job's ranks, one per file), in
// name order, as `cutrace view DIR` and `cutrace recipe --input DIR` take them.
int expand_directories(std::vector<std::string>& traces) {
  std::vector<std::string> expanded;
  for (const std::string& path : traces) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      expanded.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      const std::string name = entry.path().filename().string();
      std::error_code ignored;
      if (name.size() > std::strlen(format::kFileExtension) && name.ends_with(format::kFileExtension) &&
          entry.is_regular_file(ignored))
        found.push_back(entry.path().string());
    }
    if (error) {
      std::fprintf(stderr, "cutrace export: cannot read the directory %s (%s).\n", path.c_str(), error.message().c_str());
      return kExitFailure;
    }
    if (found.empty()) {
      std::fprintf(stderr, "cutrace export: %s holds no %s trace; give traces, or a directory of them.\n", path.c_str(),
                   format::kFileExtension);
      return kExitUsage;
    }
    std::sort(found.begin(), found.end());
    expanded.insert(expanded.end(), found.begin(), found.end());
  }
  traces = std::move(expanded);
  return kExitOk;
}

// Several traces as one output (ExporterInfo::write_job: a job's ranks on one timeline).
int export_job(const ExporterInfo& exporter, const std::vector<std::string>& paths, const std::string& output_path,
               bool overwrite, bool gzip, bool quiet, const ExportOptions& options) {
  std::vector<std::unique_ptr<reader::TraceReader>> readers;
  std::vector<reader::TraceReader*> traces;
  uint64_t total_bytes = 0;
  for (const std::string& path : paths) {
    readers.push_back(std::make_unique<reader::TraceReader>());
    if (!cli::open_trace(*readers.back(), path, "export")) return kExitFailure;
    traces.push_back(readers.back().get());
    total_bytes += readers.back()->file_bytes();
  }
  cli::Output out;
  std::string error;
  if (!out.open(output_path, overwrite, "-f true", error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  cli::ProgressBar progress("cutrace export", total_bytes, !quiet);
  uint64_t before = 0;
  for (reader::TraceReader* t : traces) {
    t->on_chunk([&progress, before](uint64_t done) { progress.update(before + done); });
    before += t->file_bytes();
  }
  uint64_t stream_bytes = 0;
  ExportResult result;
  if (!write_stream(out, output_path, gzip, progress, stream_bytes,
                  [&](FILE* stream) { result = exporter.write_job(traces, stream, options); }))
    return kExitFailure;
  int exit_code = kExitOk;
  for (reader::TraceReader* t : traces) {
    if (cli::warn_status(*t, "export") != kExitOk) exit_code = kExitPartialTrace;
    cli::mention_trace_warnings(*t, "export");
    const std::string loss = cli::loss_sentence(cli::loss_counts(*t));
    if (!loss.empty()) std::fprintf(stderr, "cutrace export: warning: %s: %s; the timeline has gaps.\n", t->path().c_str(), loss.c_str());
  }
  for (const std::string& note : result.notes) std::fprintf(stderr, "cutrace export: note: %s.\n", note.c_str());
  if (!out.commit(error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  for (const std::string& warning : exporter.size_warnings(output_path, stream_bytes))
    std::fprintf(stderr, "cutrace export: warning: %s.\n", warning.c_str());
  if (!out.is_stdout())
    std::fprintf(stderr, "cutrace export: wrote %s (%s).\n", output_path.c_str(), result.written.c_str());
  return exit_code;
}

}  // namespace

std::string default_export_path(const std::string& trace_path, const std::string& type) {
  const ExporterInfo* exporter = find_exporter(type);
  return exporter ? default_output(trace_path, exporter->extension, false) : std::string();
}

int export_main(int argc, char** argv) {
  std::string type, output_arg, trace_path, from_arg, to_arg, filter_arg, symbol_path_arg;
  std::vector<std::string> traces;
  bool overwrite = false, gzip = false, quiet = false;
  // nsys's options that only the table exports take (--times, --ts-normalize, ...): which were given.
  std::vector<std::string> given_table_options, times_args;
  std::string ts_shift_arg;
  std::vector<std::string> tables_args;  // each --tables value, several patterns by commas as nsys takes them
  ExportOptions options;
  enum Option : int { kHelp, kQuiet, kType, kOutput, kFrom, kTo, kFilterNvtx, kTables, kGzip, kForce, kShowInternal,
                      kSymbolPath, kTsNormalize, kTsShift, kTimes, kLazy };
  constexpr cli::OptionSpec kOptions[] = {
      {'h', "help", cli::Arity::kNone, kHelp},
      {'q', "quiet", cli::Arity::kSwitch, kQuiet},
      {'t', "type", cli::Arity::kValue, kType},
      {'o', "output", cli::Arity::kValue, kOutput},
      {0, "from", cli::Arity::kValue, kFrom},
      {0, "to", cli::Arity::kValue, kTo},
      {0, "filter-nvtx", cli::Arity::kValue, kFilterNvtx},
      {0, "tables", cli::Arity::kValue, kTables},
      {'z', "gzip", cli::Arity::kSwitch, kGzip},
      {'f', "force-overwrite", cli::Arity::kSwitch, kForce},
      {0, "show-internal", cli::Arity::kSwitch, kShowInternal},
      {0, "symbol-path", cli::Arity::kValue, kSymbolPath},
      {0, "ts-normalize", cli::Arity::kSwitch, kTsNormalize},
      {0, "ts-shift", cli::Arity::kValue, kTsShift},
      {0, "times", cli::Arity::kValue, kTimes},
      {'l', "lazy", cli::Arity::kSwitch, kLazy},
  };
  cli::Scanner words(argc, argv, kOptions);
  for (cli::Arg arg; words.next(arg);) {
    if (!cli::is_own_option(arg)) {
      if (const int exit_code = cli::take_trace(arg, "export", "see `cutrace export --help`", traces);
          exit_code != kNextArgument)
        return exit_code;
      continue;
    }
    auto value_into = [&](std::string& into) {
      if (words.value(arg, into)) return true;
      std::fprintf(stderr, "cutrace export: %s needs a value; see `cutrace export --help`.\n", arg.word.c_str());
      return false;
    };
    auto switch_into = [&](bool& into) {
      if (std::string bad; words.switch_value(arg, into, bad)) return true;
      std::fprintf(stderr, "cutrace export: --%s takes true or false.\n", std::string(arg.spec->long_name).c_str());
      return false;
    };
    bool ok = true;
    switch (Option(arg.spec->id)) {
      case kHelp: print_help(); return kExitOk;
      case kQuiet: ok = switch_into(quiet); break;
      case kType: ok = value_into(type); break;
      case kOutput: ok = value_into(output_arg); break;
      case kFrom: ok = value_into(from_arg); break;
      case kTo: ok = value_into(to_arg); break;
      case kFilterNvtx: ok = value_into(filter_arg); break;
      case kTables: {
        std::string value;
        ok = value_into(value);
        tables_args.push_back(value);
        break;
      }
      case kGzip: ok = switch_into(gzip); break;
      case kForce: ok = switch_into(overwrite); break;
      case kShowInternal: ok = switch_into(options.show_internal); break;
      case kTsNormalize:
        given_table_options.push_back("--ts-normalize");
        ok = switch_into(options.ts_normalize);
        break;
      case kLazy:
        given_table_options.push_back("--lazy");
        ok = switch_into(options.lazy);
        break;
      case kTsShift:
        given_table_options.push_back("--ts-shift");
        ok = value_into(ts_shift_arg);
        break;
      case kTimes: {
        given_table_options.push_back("--times");
        std::string value, error;
        ok = value_into(value);
        if (ok && !model::parse_time_ranges(value, options.times, error)) {
          std::fprintf(stderr, "cutrace export: %s.\n", error.c_str());
          return kExitUsage;
        }
        times_args.push_back(value);
        break;
      }
      case kSymbolPath: {
        std::string value;
        if (!words.value(arg, value) || value.empty()) {
          std::fprintf(stderr, "cutrace export: --symbol-path takes DIR or DIR:DIR....\n");
          return kExitUsage;
        }
        model::set_symbol_path(model::split_symbol_path(value));
        symbol_path_arg = value;
        break;
      }
    }
    if (!ok) return kExitUsage;
  }
  const char* const one_type = exporters().size() == 1 ? exporters()[0].type : "TYPE";
  if (type.empty()) {
    std::fprintf(stderr, "cutrace export: no export type given; add --type %s.\n",
                 exporters().size() == 1 ? one_type : ("TYPE (" + exporter_types(any_exporter) + ")").c_str());
    return kExitUsage;
  }
  const ExporterInfo* exporter = find_exporter(type);
  if (!exporter) {
    std::fprintf(stderr, "cutrace export: unknown export type '%s'; the available %s %s.\n", type.c_str(),
                 exporters().size() == 1 ? "type is" : "types are", exporter_types(any_exporter).c_str());
    return kExitUsage;
  }
  if (traces.empty()) {
    std::fprintf(stderr, "cutrace export: no trace given; usage: cutrace export --type %s FILE.cutrace.\n", type.c_str());
    return kExitUsage;
  }
  if (const int exit_code = expand_directories(traces); exit_code != kExitOk) return exit_code;
  if (traces.size() > 1 && !merges_traces(*exporter)) {
    std::fprintf(stderr, "cutrace export: several traces are merged into one timeline by --type %s only; export "
                         "each trace on its own with --type %s.\n", exporter_types(merges_traces).c_str(), exporter->type);
    return kExitUsage;
  }
  if (traces.size() > 1 && output_arg.empty()) {
    std::fprintf(stderr, "cutrace export: %zu traces make one timeline; name it with -o (e.g. -o job%s).\n",
                 traces.size(), exporter->extension);
    return kExitUsage;
  }
  if (traces.size() > 1 && !filter_arg.empty()) {
    std::fprintf(stderr, "cutrace export: --filter-nvtx picks a range of one trace; with several, use --from and --to "
                         "(counted from the earliest trace's start).\n");
    return kExitUsage;
  }
  trace_path = traces[0];
  const bool made_of_tables = exporter->made_of_tables;
  const std::string tables_types = exporter_types(is_made_of_tables);
  if (!given_table_options.empty() && !made_of_tables) {
    const std::string& option = given_table_options.front();
    std::fprintf(stderr, "cutrace export: %s is for the exports made of tables (%s), not %s%s.\n", option.c_str(),
                 tables_types.c_str(), exporter->type,
                 option == "--lazy" ? "" : "; --from and --to choose the time of a timeline");
    return kExitUsage;
  }
  if (!ts_shift_arg.empty()) {
    const char* first = ts_shift_arg.data() + (ts_shift_arg.front() == '+');
    const auto [end, failure] = std::from_chars(first, ts_shift_arg.data() + ts_shift_arg.size(), options.ts_shift_ns);
    if (failure != std::errc() || end != ts_shift_arg.data() + ts_shift_arg.size()) {
      std::fprintf(stderr, "cutrace export: --ts-shift takes a whole number of nanoseconds, such as 1000000 or "
                           "-250, not '%s'.\n", ts_shift_arg.c_str());
      return kExitUsage;
    }
  }
  if (!tables_args.empty() && !made_of_tables) {
    std::fprintf(stderr, "cutrace export: --tables is for the exports made of tables (%s), not %s.\n",
                 tables_types.c_str(), exporter->type);
    return kExitUsage;
  }
  // Every pattern of every --tables, one alternative each of the one expression the exports match.
  for (const std::string& value : tables_args) {
    for (const std::string& pattern : cli::comma_items(value)) {
      try {
        std::regex check(pattern, std::regex::icase);
      } catch (const std::regex_error& e) {
        std::fprintf(stderr, "cutrace export: --tables takes regular expressions; '%s' is not one (%s).\n",
                     pattern.c_str(), e.what());
        return kExitUsage;
      }
      options.tables += (options.tables.empty() ? "(?:" : "|(?:") + pattern + ")";
    }
  }

  for (auto [arg, name, field] : {std::tuple{&from_arg, "--from", &options.window_begin_ns},
                                   std::tuple{&to_arg, "--to", &options.window_end_ns}}) {
    if (!arg->empty() && !parse_time_ns(*arg, field)) {
      std::fprintf(stderr, "cutrace export: %s takes a time such as 1.5 (seconds), 200ms, 30us or 1000ns, not '%s'.\n",
                   name, arg->c_str());
      return kExitUsage;
    }
  }
  if (options.window_end_ns <= options.window_begin_ns) {
    std::fprintf(stderr, "cutrace export: --to must come after --from.\n");
    return kExitUsage;
  }

  NvtxFilter filter;
  if (!filter_arg.empty() && !model::parse_nvtx_filter(filter_arg, filter)) {
    std::fprintf(stderr, "cutrace export: --filter-nvtx takes RANGE, RANGE@DOMAIN or RANGE@*, optionally followed by "
                         "/INDEX, not '%s'.\n", filter_arg.c_str());
    return kExitUsage;
  }
  if (traces.size() > 1) return export_job(*exporter, traces, output_arg, overwrite, gzip || output_arg.ends_with(".gz"), quiet, options);
  reader::TraceReader trace;
  if (!cli::open_trace(trace, trace_path, "export")) return kExitFailure;
  if (filter.on) {
    // The window from the first selected range's start to the last one's end, within --from/--to.
    NvtxWindows windows;
    uint64_t found = 0;
    model::collect_nvtx_windows(trace_path, filter, windows, found);
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& [process, list] : windows)
      for (const auto& [start, end] : list) first = std::min(first, start), last = std::max(last, end);
    if (first > last) {
      std::fprintf(stderr, "cutrace export: %s has no NVTX range %s (%s found); nothing was written.\n",
                   trace_path.c_str(), model::describe(filter).c_str(),
                   (std::to_string(found) + (found == 1 ? " instance" : " instances")).c_str());
      return kExitNoData;
    }
    const uint64_t origin = trace.file_header().created_monotonic_ns;
    const uint64_t from = first > origin ? first - origin : 0, to = (last > origin ? last - origin : 0) + 1;
    options.window_begin_ns = std::max(options.window_begin_ns, from);
    options.window_end_ns = std::min(options.window_end_ns, to);
  }
  if (output_arg.ends_with(".gz")) gzip = true;
  // Only a stream is compressed or goes to stdout; a database or a directory is a file of its own.
  if (!exporter->write && gzip) {
    std::fprintf(stderr, "cutrace export: --gzip is for the exports written as one stream (%s); a %s export is not "
                 "compressed.\n", exporter_types([](const ExporterInfo& e) { return e.write != nullptr; }).c_str(),
                 exporter->type);
    return kExitUsage;
  }
  if (!exporter->write && output_arg == "-") {
    std::fprintf(stderr, "cutrace export: a %s export is a file and cannot go to stdout; give it a name with -o.\n",
                 exporter->type);
    return kExitUsage;
  }
  if (exporter->python_module) {
    // The command line as checked here, every value spelled out: the NVTX filter is a time window
    // by now, and the symbol path is where the symbolizer looks by default.
    std::vector<std::string> args = {"export", "--type", exporter->type, "-f", overwrite ? "true" : "false",
                                     "--show-internal", options.show_internal ? "true" : "false",
                                     "--from", std::to_string(options.window_begin_ns) + "ns"};
    if (options.window_end_ns != UINT64_MAX) args.insert(args.end(), {"--to", std::to_string(options.window_end_ns) + "ns"});
    // The output named here, so that the table's extension is the one default.
    args.insert(args.end(), {"-o", output_arg.empty() ? default_output(trace_path, exporter->extension, false) : output_arg});
    if (!options.tables.empty()) args.insert(args.end(), {"--tables", options.tables});
    for (const std::string& times : times_args) args.insert(args.end(), {"--times", times});
    if (options.ts_normalize) args.insert(args.end(), {"--ts-normalize", "true"});
    if (options.ts_shift_ns) args.insert(args.end(), {"--ts-shift", std::to_string(options.ts_shift_ns)});
    if (options.lazy) args.insert(args.end(), {"--lazy", "true"});
    if (quiet) args.push_back("-q");
    args.insert(args.end(), {"--", trace_path});
    if (!symbol_path_arg.empty()) ::setenv("CUTRACE_SYMBOL_PATH", symbol_path_arg.c_str(), 1);
    std::vector<char*> python_argv;
    for (std::string& a : args) python_argv.push_back(a.data());
    python_argv.push_back(nullptr);
    const std::string what = "--type " + std::string(exporter->type) + " is written";
    return cli::run_python_module(exporter->python_module, "export", what.c_str(), int(args.size()),
                                  python_argv.data());
  }
  const std::string output_path = output_arg.empty() ? default_output(trace_path, exporter->extension, gzip) : output_arg;
  cli::Output out;
  std::string error;
  if (!out.open(output_path, overwrite, "-f true", error)) {
    std::fprintf(stderr, "cutrace export: %s\n", error.c_str());
    return kExitFailure;
  }
  uint64_t stream_bytes = 0;
  cli::ProgressBar progress("cutrace export", trace.file_bytes(), !quiet);
  progress.follow(trace);
  if (exporter->write_file) {
    // The database is written into the temporary file, which takes the output's name once complete.
    const ExportResult result = exporter->write_file(trace, out.temp_path(), options, error);
    progress.finish();
    if (!error.empty()) {
      std::fprintf(stderr, "cutrace export: %s; nothing was written.\n", error.c_str());
      return kExitFailure;
    }
    return finish_export(trace, out, output_path, result, nullptr, 0);
  }
  ExportResult result;
  if (!write_stream(out, output_path, gzip, progress, stream_bytes,
                  [&](FILE* stream) { result = exporter->write(trace, stream, options); }))
    return kExitFailure;
  return finish_export(trace, out, output_path, result, exporter->size_warnings, stream_bytes);
}

}  // namespace cutrace::exporting
