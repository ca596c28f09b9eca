// Known output on both streams, an errno that must survive CUDA calls, a few calls of which one
// fails, and a chosen exit code: a tracer must pass all of it through unchanged.
//
// usage: sim_output <exit-code>
// stdout (exactly, on the simulator):
//   sim_output: line 1 to stdout
//   errno before ENOENT
//   cudaGetDeviceCount 0 cudaSuccess count 1
//   cudaSetDevice(99) 101 cudaErrorInvalidDevice
//   cudaGetLastError 101 cudaErrorInvalidDevice
//   cudaGetLastError 0 cudaSuccess
//   errno after ENOENT
//   sim_output: last line to stdout
// stderr: "sim_output: line 1 to stderr", "sim_output: last line to stderr".
// Calls: cudaGetDeviceCount 1, cudaSetDevice 1, cudaGetLastError 2, cudaGetErrorName 4.
// exit: the exit code given.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app_util.h"

namespace {

constexpr const char kUsage[] = "sim_output <exit-code>";

const char* errno_name(int e) { return e == ENOENT ? "ENOENT" : std::strerror(e); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  long code = parse_count(argv[1], "exit-code", kUsage);
  if (code > 255) {
    std::fprintf(stderr, "error: exit-code must be from 0 to 255\nusage: %s\n", kUsage);
    return 64;
  }
  std::printf("sim_output: line 1 to stdout\n");
  std::fflush(stdout);
  std::fprintf(stderr, "sim_output: line 1 to stderr\n");

  // A failed open leaves errno set; CUDA calls that succeed must not change it.
  int fd = open("/nonexistent/sim_output", O_RDONLY);
  int before = errno;
  if (fd >= 0) close(fd);
  std::printf("errno before %s\n", errno_name(before));

  errno = before;
  int count = -1;
  cudaError_t e = cudaGetDeviceCount(&count);
  int after = errno;
  std::printf("cudaGetDeviceCount %d %s count %d\n", int(e), cudaGetErrorName(e), count);
  e = cudaSetDevice(99);
  std::printf("cudaSetDevice(99) %d %s\n", int(e), cudaGetErrorName(e));
  e = cudaGetLastError();
  std::printf("cudaGetLastError %d %s\n", int(e), cudaGetErrorName(e));
  e = cudaGetLastError();
  std::printf("cudaGetLastError %d %s\n", int(e), cudaGetErrorName(e));
  std::printf("errno after %s\n", errno_name(after));

  std::printf("sim_output: last line to stdout\n");
  std::fflush(stdout);
  std::fprintf(stderr, "sim_output: last line to stderr\n");
  return int(code);
}
