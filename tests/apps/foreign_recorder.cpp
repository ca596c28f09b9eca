// Stands in for a recorder of another cutrace build: changes the session's api table hash, as such a
// recorder would have written it, then runs the given command, whose shim must then stay out of the
// session (its api ids would name other functions there) and be counted for the recorder's warning.
//
// usage: foreign_recorder COMMAND [ARG...]   (under cutrace profile: CUTRACE_SESSION names the session)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cutrace/abi.h"

int main(int argc, char** argv) {
  const char* name = std::getenv(cutrace::abi::kSessionEnvVar);
  if (argc < 2 || !name) {
    std::fprintf(stderr, "usage: foreign_recorder COMMAND [ARG...], under cutrace profile\n");
    return 64;
  }
  const int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return 1;
  void* p = mmap(nullptr, sizeof(cutrace::abi::SessionHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 1;
  auto* header = static_cast<cutrace::abi::SessionHeader*>(p);
  header->api_table_hash ^= 0x5a5a5a5a;
  munmap(p, sizeof *header);
  execvp(argv[1], argv + 1);
  return 127;
}
