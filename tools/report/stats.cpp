// `cutrace stats`: nsys-style summary tables over one or more traces, with `nsys stats`'s options:
// several reports (-r, repeatable or comma-separated), paired in order with formats (-f) and outputs
// (-o), the last of each repeating; -o - for standard output, -o . for the trace's own name, any other
// -o a base name for <base>_<report>.<format> files.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/decode.h"
#include "common/cli.h"
#include "common/progress.h"
#include "common/commands.h"
#include "model/nvtx_ranges.h"
#include "model/symbolizer.h"
#include "report/reports.h"

namespace cutrace::report {
namespace {

using cli::kExitFailure;
using cli::kExitNoData;
using cli::kExitOk;
using cli::kExitPartialTrace;
using cli::kExitUsage;
using cli::kNextArgument;
using model::NvtxFilter;
using model::NvtxWindows;

std::string default_reports_text() {
  std::string text;
  for (const char* name : kDefaultReports) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

void print_help() {
  std::printf(
      "usage: cutrace stats [options] FILE.cutrace [FILE.cutrace...]\n"
      "\n"
      "Prints summary tables of traces, with nsys's report names, columns and options.\n"
      "\n"
      "options:\n"
      "  -r, --report NAME[,NAME...]   reports to produce, in order (repeatable; default: nsys's, %s)\n"
      "  -f, --format FORMAT[,...]     column, table, csv, tsv or json, paired with the reports in order,\n"
      "                                the last one repeating (default: column to standard output, csv\n"
      "                                to files)\n"
      "  -o, --output OUT[,...]        paired with the reports the same way: - is standard output\n"
      "                                (default); . is the trace's name without .cutrace; anything else\n"
      "                                is a base name: the report goes to BASE_REPORT.FORMAT\n"
      "      --timeunit UNIT           nsec (default), usec, msec or sec for every (ns) column\n"
      "      --force-overwrite true    replace existing output files\n"
      "      --force-export true|false accepted as nsys takes it: the reports always read the trace\n"
      "                                itself, never an export of it that could be out of date\n"
      "      --filter-nvtx RANGE[@DOMAIN|@*][/N]\n"
      "                                only calls and NVTX events inside the NVTX range RANGE (its Nth\n"
      "                                instance with /N), in the process that ran it\n"
      "      --symbol-path DIR[:DIR]   also look for the traced binaries here (a copy of them, found by\n"
      "                                name, path or build-id; default $CUTRACE_SYMBOL_PATH), to name\n"
      "                                the frames of callsite_sum and cpu_sample_sum\n"
      "      --show-internal true      also count the CUDA runtime's internal calls (kernel registration,\n"
      "                                __cudaPushCallConfiguration, ...), which are left out by default\n"
      "  -q, --quiet                   do not name the files written, nor show progress on a terminal\n"
      "  -h, --help                    show this help\n"
      "\n"
      "A report with nothing to show prints \"SKIPPED: FILE does not contain ... data.\" on stderr instead of\n"
      "an empty table. JSON on standard output is one array of {\"trace\", \"report\", \"rows\"} objects,\n"
      "whatever the number of reports and traces; a JSON file holds one report's rows.\n"
      "\n"
      "exit status: 0; 3 when a trace is cut off or damaged (everything intact in it is still shown,\n"
      "and a warning says what is missing); 4 when every report of every trace was SKIPPED; 1 when a\n"
      "trace or an output could not be used; 2 for a mistake on the command line.\n"
      "\n"
      "reports:\n",
      default_reports_text().c_str());
  for (const ReportInfo& r : stats_reports())
    std::printf("  %-16s %s%s\n", r.name, r.description,
                r.names_kernels ? " (NAME:base for the function names alone, NAME:mangled as compiled)" : "");
}

std::string report_names() {
  std::string out;
  for (const ReportInfo& r : stats_reports()) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

void split_into(const std::string& list, std::vector<std::string>& out) {
  for (std::string& item : cli::comma_items(list))
    if (!item.empty()) out.push_back(std::move(item));
}

template <typename T>
const T& paired(const std::vector<T>& list, size_t i) {
  return list[std::min(i, list.size() - 1)];
}

std::string without_extension(const std::string& trace) {
  const std::string ext = ".cutrace";
  if (trace.size() > ext.size() && trace.compare(trace.size() - ext.size(), ext.size(), ext) == 0)
    return trace.substr(0, trace.size() - ext.size());
  return trace;
}

int usage_error(const std::string& sentence) {
  std::fprintf(stderr, "cutrace stats: %s.\n", sentence.c_str());
  return kExitUsage;
}

struct Request {
  std::vector<std::string> reports, formats, outputs;
  TimeUnit unit = TimeUnit::kNanoseconds;
  bool overwrite = false, quiet = false;
  bool warnings_said = false;  // by the run that just recorded the trace (profile --stats)
  ReportOptions options;
  NvtxFilter filter;
};

// The worst of two exit codes: a usage mistake, then a failure, then a partial trace, then no data.
int worse(int a, int b) {
  auto rank = [](int code) {
    switch (code) {
      case kExitUsage: return 4;
      case kExitFailure: return 3;
      case kExitPartialTrace: return 2;
      case kExitNoData: return 1;
      default: return 0;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

// Standard output in JSON is one array of {trace, report, rows}, streamed as the tables come.
struct JsonDocument {
  size_t items = 0;
  void open_item(const std::string& trace, const std::string& report) {
    std::string head = items++ ? ",\n{\"trace\": " : "[\n{\"trace\": ";
    json::append_json_string(head, trace);
    head += ", \"report\": ";
    json::append_json_string(head, report);
    head += ", \"rows\": ";
    std::fputs(head.c_str(), stdout);
  }
  void close_item() { std::fputs("}", stdout); }
  void finish() {
    if (items) std::fputs("\n]\n", stdout);
  }
};

// Streams one report's table into `out`, measuring the column widths first where the layout needs them.
bool write_report(Report& report, reader::TraceReader& trace, FILE* out, TableFormat format, TimeUnit unit) {
  std::vector<size_t> widths;
  bool ok = true;
  if (needs_widths(format)) {
    WidthSink measure(unit);
    ok = report.write(trace, measure);
    widths = measure.widths();
  }
  auto sink = make_table_sink(out, format, unit, &widths);
  return report.write(trace, *sink) && ok;
}

// Produces every requested report of one trace. Returns its exit code; `shown` counts the reports
// that had something to show.
int stats_of(const std::string& trace_path, const Request& req, JsonDocument& json, bool& stdout_used,
             size_t& shown) {
  std::vector<std::unique_ptr<Report>> reports;
  for (const std::string& name : req.reports) reports.push_back(make_report(name, req.options));

  NvtxWindows windows;
  if (req.filter.on) {
    uint64_t found = 0;
    if (!model::collect_nvtx_windows(trace_path, req.filter, windows, found)) {
      reader::TraceReader probe;
      cli::open_trace(probe, trace_path, "stats");  // says why, in its words
      return kExitFailure;
    }
    if (windows.empty()) {
      std::fprintf(stderr, "SKIPPED: %s has no NVTX range %s (%s found).\n", trace_path.c_str(),
                   model::describe(req.filter).c_str(),
                   (std::to_string(found) + (found == 1 ? " instance" : " instances")).c_str());
      return kExitNoData;
    }
  }

  reader::TraceReader trace;
  if (!cli::open_trace(trace, trace_path, "stats")) return kExitFailure;
  cli::ProgressBar progress("cutrace stats", trace.file_bytes(), !req.quiet);
  progress.follow(trace);
  reader::Event ev;
  while (trace.next(ev)) {
    if (req.filter.on && ev.thread && ev.kind == reader::EventKind::kApiCall &&
        !model::inside_nvtx_windows(windows, ev.thread->process, ev.call.begin_ns, ev.call.end_ns))
      continue;
    if (req.filter.on && ev.thread && ev.kind == reader::EventKind::kNvtx &&
        !model::inside_nvtx_windows(windows, ev.thread->process, ev.nvtx.time_ns, ev.nvtx.time_ns))
      continue;
    for (auto& r : reports) r->add(trace, ev);
  }
  progress.finish();
  int exit_code = cli::warn_status(trace, "stats");
  if (!req.warnings_said) cli::mention_trace_warnings(trace, "stats");

  // Loss is never silent: on the console it heads the first table; elsewhere data stays pure data, so
  // it goes to stderr.
  const std::string loss = cli::loss_sentence(cli::loss_counts(trace));
  bool loss_told = loss.empty();
  auto tell_loss_on_stderr = [&] {
    if (loss_told) return;
    std::fprintf(stderr, "cutrace stats: warning: %s; the tables undercount.\n", loss.c_str());
    loss_told = true;
  };

  size_t empty = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const std::string& name = req.reports[i];
    const std::string& output = paired(req.outputs, i);
    const bool to_stdout = output == "-";
    TableFormat format = TableFormat::kColumn;
    if (!req.formats.empty()) parse_table_format(paired(req.formats, i), format);
    else if (!to_stdout) format = TableFormat::kCsv;

    for (const std::string& note : reports[i]->notes())
      std::fprintf(stderr, "cutrace stats: note: %s: %s.\n", name.c_str(), note.c_str());
    if (reports[i]->row_count(trace) == 0) {
      std::fprintf(stderr, "SKIPPED: %s does not contain %s.\n", trace_path.c_str(), find_report(name)->data);
      ++empty;
      continue;
    }
    auto temp_failure = [&] {
      std::fprintf(stderr, "cutrace stats: %s: a temporary file for %s could not be written or read back; check "
                   "the space in $TMPDIR (default /tmp).\n", trace_path.c_str(), name.c_str());
      exit_code = worse(exit_code, kExitFailure);
    };

    if (to_stdout && format == TableFormat::kJson) {
      tell_loss_on_stderr();
      json.open_item(trace_path, name);
      if (!write_report(*reports[i], trace, stdout, format, req.unit)) temp_failure();
      json.close_item();
      continue;
    }
    if (to_stdout) {
      const bool console = needs_widths(format);
      if (stdout_used) std::fputc('\n', stdout);
      if (console && !loss_told) {
        std::printf("Note: %s; the tables undercount.\n\n", loss.c_str());
        loss_told = true;
      }
      tell_loss_on_stderr();
      if (!write_report(*reports[i], trace, stdout, format, req.unit)) temp_failure();
      stdout_used = true;
      continue;
    }
    tell_loss_on_stderr();
    const std::string base = output == "." ? without_extension(trace_path) : output;
    std::string file_name = name;  // cuda_gpu_kern_sum:base -> cuda_gpu_kern_sum_base
    std::replace(file_name.begin(), file_name.end(), ':', '_');
    const std::string file = base + "_" + file_name + "." + table_format_name(format);
    cli::Output out;
    std::string error;
    if (!out.open(file, req.overwrite, "--force-overwrite true", error)) {
      std::fprintf(stderr, "cutrace stats: %s\n", error.c_str());
      exit_code = worse(exit_code, kExitFailure);
      continue;
    }
    if (!write_report(*reports[i], trace, out.file(), format, req.unit)) {
      temp_failure();
      continue;  // the partial file is discarded with `out`
    }
    if (!out.commit(error)) {
      std::fprintf(stderr, "cutrace stats: %s\n", error.c_str());
      exit_code = worse(exit_code, kExitFailure);
      continue;
    }
    if (!req.quiet) std::printf("Generated: %s\n", file.c_str());
  }
  shown += reports.size() - empty;
  return exit_code;
}

int run_stats(Request req, const std::vector<std::string>& traces);

}  // namespace

int stats_main(int argc, char** argv) {
  Request req;
  std::vector<std::string> traces;
  enum Option : int { kHelp, kQuiet, kReport, kFormat, kOutput, kTimeUnit, kForce, kFilterNvtx, kShowInternal,
                      kSymbolPath, kForceExport };
  constexpr cli::OptionSpec kOptions[] = {
      {'h', "help", cli::Arity::kNone, kHelp},
      {'q', "quiet", cli::Arity::kNone, kQuiet},
      {'r', "report", cli::Arity::kValue, kReport},
      {'f', "format", cli::Arity::kValue, kFormat},
      {'o', "output", cli::Arity::kValue, kOutput},
      {0, "timeunit", cli::Arity::kValue, kTimeUnit},
      {0, "force-overwrite", cli::Arity::kSwitch, kForce},
      {0, "filter-nvtx", cli::Arity::kValue, kFilterNvtx},
      {0, "show-internal", cli::Arity::kSwitch, kShowInternal},
      {0, "symbol-path", cli::Arity::kValue, kSymbolPath},
      {0, "force-export", cli::Arity::kSwitch, kForceExport},
  };
  cli::Scanner words(argc, argv, kOptions);
  for (cli::Arg arg; words.next(arg);) {
    if (!cli::is_own_option(arg)) {
      if (const int exit_code = cli::take_trace(arg, "stats", "see `cutrace stats --help`", traces);
          exit_code != kNextArgument)
        return exit_code;
      continue;
    }
    std::string value, bad;
    const bool given = arg.spec->arity != cli::Arity::kValue || words.value(arg, value);
    // -r, -f and -o take comma-separated lists, and may be repeated.
    auto add_to = [&](std::vector<std::string>& list) {
      if (!given) return usage_error(arg.word + " needs a value; see `cutrace stats --help`");
      const size_t before = list.size();
      split_into(value, list);
      if (list.size() == before) return usage_error(arg.word + " names nothing; see `cutrace stats --help`");
      return kNextArgument;
    };
    switch (Option(arg.spec->id)) {
      case kHelp:
        print_help();
        return kExitOk;
      case kQuiet:
        req.quiet = true;
        break;
      case kReport:
      case kFormat:
      case kOutput: {
        std::vector<std::string>& list = arg.spec->id == kReport   ? req.reports
                                         : arg.spec->id == kFormat ? req.formats
                                                                   : req.outputs;
        if (const int exit_code = add_to(list); exit_code != kNextArgument) return exit_code;
        break;
      }
      case kTimeUnit:
        if (!given) return usage_error("--timeunit needs a value: nsec, usec, msec or sec");
        if (!parse_time_unit(value, req.unit))
          return usage_error("unknown --timeunit '" + value + "'; use nsec, usec, msec or sec");
        break;
      case kForce:
        if (!words.switch_value(arg, req.overwrite, bad)) return usage_error("--force-overwrite takes true or false");
        break;
      case kForceExport: {
        bool unused;
        if (!words.switch_value(arg, unused, bad)) return usage_error("--force-export takes true or false");
        break;
      }
      case kShowInternal:
        if (!words.switch_value(arg, req.options.show_internal, bad))
          return usage_error("--show-internal takes true or false");
        break;
      case kFilterNvtx:
        if (!given || !model::parse_nvtx_filter(value, req.filter))
          return usage_error("--filter-nvtx takes RANGE, RANGE@DOMAIN or RANGE@*, optionally followed by /INDEX" +
                             (!given ? std::string() : std::string(", not '") + value + "'"));
        break;
      case kSymbolPath:
        if (!given || value.empty()) return usage_error("--symbol-path takes DIR or DIR:DIR...");
        model::set_symbol_path(model::split_symbol_path(value));
        break;
    }
  }
  if (traces.empty()) return usage_error("no trace given; usage: cutrace stats [options] FILE.cutrace");
  return run_stats(req, traces);
}

namespace {

// Every report of `req` for each trace, as `cutrace stats` prints them.
int run_stats(Request req, const std::vector<std::string>& traces) {
  if (req.reports.empty()) req.reports.assign(std::begin(kDefaultReports), std::end(kDefaultReports));
  if (req.outputs.empty()) req.outputs.push_back("-");
  for (const std::string& name : req.reports) {
    std::string why;
    if (!find_report(name, &why))
      return usage_error(why.empty() ? "unknown report '" + name + "'; available reports: " + report_names() : why);
  }
  TableFormat unused;
  for (const std::string& f : req.formats)
    if (!parse_table_format(f, unused)) return usage_error("unknown format '" + f + "'; use column, table, csv, tsv or json");
  if (traces.size() > 1)
    for (const std::string& o : req.outputs)
      if (o != "-" && o != ".")
        return usage_error("-o " + o + " with several traces would write their reports to the same files; use -o . "
                           "(each trace's own name) or -o -");

  JsonDocument json;
  bool stdout_used = false;
  size_t shown = 0;
  int exit_code = kExitOk;
  for (const std::string& trace : traces) exit_code = worse(exit_code, stats_of(trace, req, json, stdout_used, shown));
  json.finish();
  std::fflush(stdout);
  if (std::ferror(stdout)) {
    std::fprintf(stderr, "cutrace stats: cannot write to standard output.\n");
    return kExitFailure;
  }
  if (shown == 0 && exit_code == kExitOk) return kExitNoData;
  return exit_code;
}

}  // namespace

int print_default_reports(const std::string& trace_path) {
  Request req;
  req.reports.assign(std::begin(kDefaultReports), std::end(kDefaultReports));
  req.warnings_said = true;
  return run_stats(req, {trace_path});
}

}  // namespace cutrace::report
