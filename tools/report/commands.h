// The trace-reading subcommands of `cutrace`. Each is a main: argv[0] is the subcommand's name, the
// return value is the exit status (0 success, 1 the trace or the output could not be used, 2 usage).
#pragma once

namespace cutrace::report {

// `cutrace info FILE`: processes, threads, counts, drops, metadata and the trace's status.
int info_main(int argc, char** argv);
// `cutrace stats [--report NAME[,NAME...]] [--format column|csv|json] [-o FILE] FILE`: nsys-style tables.
int stats_main(int argc, char** argv);
// `cutrace export --type perfetto [-o OUT.json] [--force-overwrite true] FILE`.
int export_main(int argc, char** argv);
// `cutrace recipe NAME --input DIR|FILE... [options]`: carried out by the Python package.
int recipe_main(int argc, char** argv);

}  // namespace cutrace::report
