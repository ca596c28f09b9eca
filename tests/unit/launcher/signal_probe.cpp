// A program for the launcher's signal tests: blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT, creates
// READY_FILE, then logs every one of those signals it receives to LOG_FILE as
// `sig=N code=C pid=P`, until no further signal has come for half a second after the first
// (or 20 s passed without any). Exits 0.
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <initializer_list>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: signal_probe READY_FILE LOG_FILE\n");
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  FILE* log = std::fopen(argv[2], "w");
  if (!log) return 1;
  if (FILE* ready = std::fopen(argv[1], "w"))
    std::fclose(ready);
  else
    return 1;

  timespec wait{20, 0};
  siginfo_t info;
  while (sigtimedwait(&set, &info, &wait) > 0) {
    std::fprintf(log, "sig=%d code=%d pid=%d\n", info.si_signo, info.si_code, int(info.si_pid));
    std::fflush(log);
    wait = timespec{0, 500'000'000};
  }
  std::fclose(log);
  return 0;
}
