// `cutrace profile [options] [--] <command> [args...]`: runs a program under the preload library,
// with a recorder draining its rings into a .cutrace file, and exits with the program's exit code.
#pragma once

namespace cutrace::launcher {

// argv[0] is "profile". Returns the process exit code: the program's own (128+N when signal N killed
// it), 2 for usage errors, 126/127 when the command cannot be run, 1 when the trace cannot be set up.
int profile_main(int argc, char** argv);

}  // namespace cutrace::launcher
