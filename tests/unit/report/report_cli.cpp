// The report subcommands as a standalone program, so their tests run them exactly as `cutrace` does
// (separate process, real stdout/stderr and exit status) without depending on the launcher.
#include <cstdio>
#include <cstring>

#include "common/commands.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "info") == 0) return cutrace::report::info_main(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "stats") == 0) return cutrace::report::stats_main(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "export") == 0) return cutrace::exporting::export_main(argc - 1, argv + 1);
  std::fputs("usage: report_cli info|stats|export [options] FILE\n", stderr);
  return 2;
}
