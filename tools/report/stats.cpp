// `cutrace stats`: nsys-style summary tables over a trace.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "report/cli.h"
#include "report/commands.h"
#include "report/reports.h"

namespace cutrace::report {
namespace {

void print_help() {
  std::printf(
      "usage: cutrace stats [options] FILE.cutrace\n"
      "\n"
      "Prints summary tables of a trace, with nsys's report names and columns.\n"
      "\n"
      "options:\n"
      "  -r, --report NAME[,NAME...]   reports to print (default: %s)\n"
      "  -f, --format column|csv|json  output format (default: column)\n"
      "  -o, --output FILE             write to FILE instead of standard output ('-' is standard output)\n"
      "      --force-overwrite true    replace an existing output file\n"
      "      --show-internal true      also count the CUDA runtime's internal calls (kernel registration,\n"
      "                                __cudaPushCallConfiguration, ...), which are left out by default\n"
      "  -h, --help                    show this help\n"
      "\n"
      "exit status: 0; 3 when the trace is cut off or damaged (everything intact in it is still shown,\n"
      "and a warning says what is missing); 1 or 2 when nothing could be shown.\n"
      "\n"
      "reports:\n",
      kDefaultReport);
  for (const ReportInfo& r : stats_reports()) std::printf("  %-16s %s\n", r.name, r.description);
}

std::string report_names() {
  std::string out;
  for (const ReportInfo& r : stats_reports()) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

}  // namespace

int stats_main(int argc, char** argv) {
  std::string reports_arg = kDefaultReport, format_arg = "column", output_arg, trace_path;
  bool overwrite = false;
  ReportOptions options;
  ArgCursor args(argc, argv);
  while (!args.done()) {
    std::string_view a = args.current();
    bool missing = false, bad = false;
    if (!args.options_done() && (a == "-h" || a == "--help")) {
      print_help();
      return kExitOk;
    }
    if (!args.options_done() && (args.value_option("-r", "--report", reports_arg, missing) ||
                          args.value_option("-f", "--format", format_arg, missing) ||
                          args.value_option("-o", "--output", output_arg, missing))) {
      if (missing) {
        std::fprintf(stderr, "cutrace stats: %s needs a value; see `cutrace stats --help`.\n", std::string(a).c_str());
        return kExitUsage;
      }
      continue;
    }
    if (!args.options_done() && args.bool_option(nullptr, "--force-overwrite", overwrite, bad)) {
      if (bad) {
        std::fprintf(stderr, "cutrace stats: --force-overwrite takes true or false.\n");
        return kExitUsage;
      }
      continue;
    }
    if (!args.options_done() && args.bool_option(nullptr, "--show-internal", options.show_internal, bad)) {
      if (bad) {
        std::fprintf(stderr, "cutrace stats: --show-internal takes true or false.\n");
        return kExitUsage;
      }
      continue;
    }
    if (const int exit_code = args.take_common("stats", "see `cutrace stats --help`", trace_path); exit_code != ArgCursor::kNextArgument)
      return exit_code;
  }
  if (trace_path.empty()) {
    std::fprintf(stderr, "cutrace stats: no trace given; usage: cutrace stats [options] FILE.cutrace.\n");
    return kExitUsage;
  }
  TableFormat format;
  if (!parse_table_format(format_arg, format)) {
    std::fprintf(stderr, "cutrace stats: unknown format '%s'; use column, csv or json.\n", format_arg.c_str());
    return kExitUsage;
  }
  std::vector<std::unique_ptr<Report>> reports;
  std::vector<std::string> names;
  for (size_t start = 0; start <= reports_arg.size();) {
    size_t comma = reports_arg.find(',', start);
    if (comma == std::string::npos) comma = reports_arg.size();
    std::string name = reports_arg.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    auto report = make_report(name, options);
    if (!report) {
      std::fprintf(stderr, "cutrace stats: unknown report '%s'; available reports: %s.\n", name.c_str(),
                   report_names().c_str());
      return kExitUsage;
    }
    reports.push_back(std::move(report));
    names.push_back(name);
  }
  if (reports.empty()) {
    std::fprintf(stderr, "cutrace stats: --report names no report; available reports: %s.\n", report_names().c_str());
    return kExitUsage;
  }

  reader::TraceReader trace;
  if (!open_trace(trace, trace_path, "stats")) return kExitFailure;
  Output out;
  std::string error;
  if (!out.open(output_arg, overwrite, "--force-overwrite true", error)) {
    std::fprintf(stderr, "cutrace stats: %s\n", error.c_str());
    return kExitFailure;
  }
  reader::Event ev;
  while (trace.next(ev))
    for (auto& r : reports) r->add(trace, ev);
  const int exit_code = warn_status(trace, "stats");
  print_trace_warnings(trace, "stats");

  // Loss is never silent: in column output it heads the report; csv and json stay pure data, so there
  // it goes to stderr.
  const std::string loss = loss_sentence(loss_counts(trace));
  if (!loss.empty()) {
    if (format == TableFormat::kColumn) std::fprintf(out.file(), "Note: %s; the tables undercount.\n\n", loss.c_str());
    else std::fprintf(stderr, "cutrace stats: warning: %s; the tables undercount.\n", loss.c_str());
  }
  // Several json reports form one object keyed by report name, so the output stays one JSON document.
  const bool json_object = format == TableFormat::kJson && reports.size() > 1;
  if (json_object) std::fputs("{\n", out.file());
  for (size_t i = 0; i < reports.size(); ++i) {
    if (json_object) {
      std::string key;
      append_json_string(key, names[i]);
      std::fprintf(out.file(), "%s%s: ", i ? ",\n" : "", key.c_str());
    } else if (i) {
      std::fputc('\n', out.file());
    }
    write_table(out.file(), reports[i]->table(trace), format);
  }
  if (json_object) std::fputs("}\n", out.file());
  if (!out.commit(error)) {
    std::fprintf(stderr, "cutrace stats: %s\n", error.c_str());
    return kExitFailure;
  }
  return exit_code;
}

}  // namespace cutrace::report
