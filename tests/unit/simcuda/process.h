// Runs a program with a controlled environment and collects what it printed and how it ended.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace simcuda::test {

struct Result {
  int exit_code = -1;  // the exit status, or 128 + signal number
  std::string out;
  std::string err;
};

// The environment of this process without SIMCUDA_* and LD_LIBRARY_PATH, plus `env`: the simulator's
// knobs and the library path are always exactly what a test asks for.
std::vector<std::string> clean_environment(const std::map<std::string, std::string>& env);

// Runs argv[0] (a path) and waits for it.
Result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

// The environment that runs a program on the simulated device.
std::map<std::string, std::string> on_simulator(std::map<std::string, std::string> extra = {});

// Starts a program with stdout and stderr discarded and returns its pid.
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

// "key value" lines: the value of the first line starting with `key `, or "" if none.
std::string field(const std::string& text, const std::string& key);
long field_long(const std::string& text, const std::string& key);

}  // namespace simcuda::test
