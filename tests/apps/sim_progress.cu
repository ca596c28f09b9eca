// Makes cheap runtime calls in a loop and, every `every` iterations, publishes how many calls have
// completed to a file, atomically (written beside it, fsync'd, renamed over it). A test kills it
// with SIGKILL at some point and checks that the trace holds at least the published number of calls.
//
// usage: sim_progress <progress-file> [iterations=0 (until killed)] [every=100]
// Each iteration calls cudaGetDevice, cudaMemsetAsync (4 KiB, legacy stream) and
// cudaStreamSynchronize(0); one cudaMalloc comes first and, when the loop ends, one cudaFree.
// The progress file holds "completed <calls>" and then one "<function> <calls>" line per function,
// counting only calls that had returned when it was written.
// stdout (when the loop ends): "iterations N", then the calls table.
// exit: 0 on success, 1 when a CUDA call fails, 3 when the progress file cannot be written.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "app_util.h"

namespace {

constexpr const char kUsage[] = "sim_progress <progress-file> [iterations=0] [every=100]";
constexpr size_t kBufferBytes = 4096;
const char* const kApis[] = {"cudaMalloc", "cudaGetDevice", "cudaMemsetAsync",
                             "cudaStreamSynchronize", "cudaFree"};

bool publish(const std::string& path, const CallCounter& calls) {
  std::string text = "completed " + std::to_string(calls.total()) + "\n";
  for (const char* api : kApis) text += std::string(api) + " " + std::to_string(calls.get(api)) + "\n";
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return 64;
  }
  std::string path = argv[1];
  long iterations = argc > 2 ? parse_count(argv[2], "iterations", kUsage) : 0;
  long every = argc > 3 ? parse_count(argv[3], "every", kUsage) : 100;
  if (every == 0) every = 1;

  CallCounter calls;
  void* buffer = nullptr;
  if (!counted(calls, "cudaMalloc", cudaMalloc(&buffer, kBufferBytes))) return 1;
  if (!publish(path, calls)) {
    std::fprintf(stderr, "error: cannot write the progress file %s\n", path.c_str());
    return 3;
  }
  long done = 0;
  for (; iterations == 0 || done < iterations; ++done) {
    int device = -1;
    if (!counted(calls, "cudaGetDevice", cudaGetDevice(&device)) ||
        !counted(calls, "cudaMemsetAsync",
                 cudaMemsetAsync(buffer, int(done & 0xff), kBufferBytes, nullptr)) ||
        !counted(calls, "cudaStreamSynchronize", cudaStreamSynchronize(nullptr))) {
      return 1;
    }
    if ((done + 1) % every == 0 && !publish(path, calls)) {
      std::fprintf(stderr, "error: cannot write the progress file %s\n", path.c_str());
      return 3;
    }
  }
  if (!counted(calls, "cudaFree", cudaFree(buffer))) return 1;
  if (!publish(path, calls)) {
    std::fprintf(stderr, "error: cannot write the progress file %s\n", path.c_str());
    return 3;
  }
  std::printf("iterations %ld\n", done);
  calls.print();
  return 0;
}
