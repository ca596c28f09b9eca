// `cutrace <subcommand>`: one executable, each subcommand a thin main over a library.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "launcher/profile.h"
#include "report/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: cutrace <command> [options]\n"
    "\n"
    "commands:\n"
    "  profile   run a program and record its CUDA calls:  cutrace profile [options] [--] <command> [args...]\n"
    "  info      processes, threads, counts, drops, options and versions of a trace\n"
    "  stats     summary tables (nsys report names, e.g. cuda_api_sum)\n"
    "  export    convert a trace (perfetto: Chrome trace-event JSON for ui.perfetto.dev)\n"
    "\n"
    "`cutrace <command> --help` describes each command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string_view command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version" || command == "version") {
    std::printf("cutrace %s\n", CUTRACE_VERSION_STRING);
    return 0;
  }
  // Each subcommand sees argv starting at its own name, like a standalone program.
  if (command == "profile") return cutrace::launcher::profile_main(argc - 1, argv + 1);
  if (command == "info") return cutrace::report::info_main(argc - 1, argv + 1);
  if (command == "stats") return cutrace::report::stats_main(argc - 1, argv + 1);
  if (command == "export") return cutrace::report::export_main(argc - 1, argv + 1);
  std::fprintf(stderr, "cutrace: unknown command '%s'; run `cutrace --help` for the list of commands.\n", argv[1]);
  return 2;
}
