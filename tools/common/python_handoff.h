// The commands the Python package carries out (python/cutrace): `cutrace export --type parquetdir`,
// `cutrace recipe`, `cutrace analyze`, `cutrace view`.
#pragma once

namespace cutrace::cli {

// Set by the `cutrace` command of a pip-installed package (python/_cutrace_command.py) to the
// interpreter it runs under, whose environment has the package: the one to hand over to. The launcher
// keeps it out of the profiled program's environment.
inline constexpr const char* kPackagePythonEnvVar = "CUTRACE_PACKAGE_PYTHON";

// Runs `python3 -m MODULE ARGV...` in place of this process (argv[0] is the subcommand's name), with
// what it needs to find the package and its library. Returns only when Python cannot be run, with
// exit status 1 after one sentence on stderr: "cutrace COMMAND: WHAT by Python, and ..." (WHAT: "--type
// parquetdir is written", "recipes are run").
int run_python_module(const char* module, const char* command, const char* what, int argc, char** argv);

}  // namespace cutrace::cli
