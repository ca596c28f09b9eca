// The trace-reading subcommands of `cutrace`. Each is a main: argv[0] is the subcommand's name, the
// return value is the exit status (0 success, 1 the trace or the output could not be used, 2 usage).
// Each is declared in the namespace of the library that carries it out, so that one header reaches
// them all (the `cutrace` executable, the launcher's --stats and --export, the tests' report_cli).
#pragma once

#include <string>

namespace cutrace::report {

// `cutrace info FILE`: processes, threads, counts, drops, metadata and the trace's status.
int info_main(int argc, char** argv);
// `cutrace stats [--report NAME[,NAME...]] [--format column|csv|json] [-o FILE] FILE`: nsys-style tables.
int stats_main(int argc, char** argv);
// `cutrace profile --stats true`: the default reports of `cutrace stats` (nsys's) for the trace just
// written, on standard output. Returns stats' exit status.
int print_default_reports(const std::string& trace_path);

}  // namespace cutrace::report

namespace cutrace::exporting {

// `cutrace export --type perfetto [-o OUT.json] [--force-overwrite true] FILE`.
int export_main(int argc, char** argv);
// Where `cutrace export --type TYPE TRACE` writes when not told (TRACE.sqlite, TRACE_pqtdir, ...).
std::string default_export_path(const std::string& trace_path, const std::string& type);

}  // namespace cutrace::exporting

namespace cutrace::cli {

// `cutrace recipe NAME --input DIR|FILE... [options]`: carried out by the Python package.
int recipe_main(int argc, char** argv);
// `cutrace analyze [-r RULE[,RULE...]] TRACE|DIR...`: nsys's expert-system rules, carried out by the
// Python package.
int analyze_main(int argc, char** argv);
// `cutrace view [options] TRACE|DIR|EXPORT`: the trace opened in the Perfetto UI, by the Python package.
int view_main(int argc, char** argv);

}  // namespace cutrace::cli
