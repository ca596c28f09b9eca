// `cutrace <subcommand>`: one executable, each subcommand a thin main over a library.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "launcher/profile.h"
#include "launcher/sessions.h"
#include "common/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: cutrace <command> [options]\n"
    "\n"
    "commands:\n"
    "  profile   run a program and record its CUDA calls:  cutrace profile [options] [--] <command> [args...]\n"
    "  info      processes, threads, counts, drops, options and versions of a trace\n"
    "  stats     summary tables (nsys report names, e.g. cuda_api_sum)\n"
    "  export    convert a trace for other tools (Perfetto, SQLite, Parquet, HTA; `cutrace export --help` lists them)\n"
    "  recipe    a recipe over many traces, one per rank (nsys recipe names, e.g. cuda_api_sum)\n"
    "  analyze   nsys's expert-system rules over a trace or a job's traces (e.g. cuda_memcpy_async)\n"
    "  view      open a trace in the Perfetto UI: serves its export from 127.0.0.1 and prints the link\n"
    "  sessions  the sessions of this user on this host:  cutrace sessions list\n"
    "  status    what each session is doing; with --calls, the call every traced thread is in now\n"
    "\n"
    "`cutrace help <command>` or `cutrace <command> --help` describes each command;\n"
    "`cutrace -v` (--version) prints the version.\n";

using Main = int (*)(int, char**);

Main command_main(std::string_view name) {
  if (name == "profile") return cutrace::launcher::profile_main;
  if (name == "info") return cutrace::report::info_main;
  if (name == "stats") return cutrace::report::stats_main;
  if (name == "export") return cutrace::exporting::export_main;
  if (name == "recipe") return cutrace::cli::recipe_main;
  if (name == "analyze") return cutrace::cli::analyze_main;
  if (name == "view") return cutrace::cli::view_main;
  if (name == "sessions") return cutrace::launcher::sessions_main;
  if (name == "status") return cutrace::launcher::status_main;
  return nullptr;
}

int unknown_command(const char* name) {
  std::fprintf(stderr, "cutrace: unknown command '%s'; run `cutrace --help` for the list of commands.\n", name);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string_view command = argv[1];
  if (command == "-h" || command == "--help" || (command == "help" && argc == 2)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "help") {
    // `cutrace help stats` is `cutrace stats --help`, as with nsys.
    Main help_of = command_main(argv[2]);
    if (!help_of) return unknown_command(argv[2]);
    char help_flag[] = "--help";
    char* help_argv[] = {argv[2], help_flag, nullptr};
    return help_of(2, help_argv);
  }
  if (command == "-v" || command == "--version" || command == "version") {
    std::printf("cutrace %s\n", CUTRACE_VERSION_STRING);
    return 0;
  }
  // Each subcommand sees argv starting at its own name, like a standalone program.
  if (Main main_of = command_main(command)) return main_of(argc - 1, argv + 1);
  return unknown_command(argv[1]);
}
