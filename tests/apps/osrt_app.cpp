// OS runtime calls for the tests of -t osrt, each counted by the program.
//
// usage: osrt_app sleeps <long> <short> <long_ms> <short_us>
//          <long> usleep(long_ms ms) and <short> usleep(short_us us), alternating, then the same
//          numbers of nanosleep
//        osrt_app calls <n>
//          n times each: close(-1), read and write of one byte through a pipe, poll of the pipe with
//          timeout 0, open and close of /dev/null; then read(-1) once, printing its errno
//        osrt_app threads <hold_ms>
//          a second thread locks a mutex main holds for <hold_ms> (nanosleep), then sleeps <hold_ms>/2
//          (nanosleep) while main waits in pthread_join; then the second thread's tid
//        osrt_app key_destructor <ms>
//          a thread sleeps <ms> (usleep) and ends; a pthread key main created, whose destructor sleeps
//          <ms> too, runs as it ends (after the tracer's own key destructor); then the thread's tid
//        osrt_app key_destructor_threads <n>
//          n threads one after another, each making no call of its own but setting that key, whose
//          destructor sleeps 1 ms: each thread's only recorded call comes as it ends
//        osrt_app cuda <n>
//          n times: cudaMalloc, cudaMemcpy to the device, cudaFree, each between usleep(1000)
//        osrt_app signals <n>
//          n cudaGetDevice calls, a short spin apart, while a 20 us interval timer's handler writes one
//          byte to /dev/null:
//          handlers interrupt the writing of records; prints "handler_writes <k>" too
// stdout: "<name> <count>" per function called (sorted), and the extras above.
// exit: 0, or 64 on a usage error.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

std::map<std::string, long> g_calls;

void print_calls() {
  for (const auto& [name, count] : g_calls) std::printf("%s %ld\n", name.c_str(), count);
}

int sleeps(int longs, int shorts, long long_ms, long short_us) {
  for (int i = 0; i < longs || i < shorts; ++i) {
    if (i < longs) usleep(useconds_t(long_ms * 1000)), ++g_calls["usleep"];
    if (i < shorts) usleep(useconds_t(short_us)), ++g_calls["usleep"];
  }
  for (int i = 0; i < longs || i < shorts; ++i) {
    if (i < longs) {
      timespec t{long_ms / 1000, (long_ms % 1000) * 1000000};
      nanosleep(&t, nullptr), ++g_calls["nanosleep"];
    }
    if (i < shorts) {
      timespec t{0, short_us * 1000};
      nanosleep(&t, nullptr), ++g_calls["nanosleep"];
    }
  }
  print_calls();
  return 0;
}

int calls(int n) {
  int fds[2];
  if (pipe(fds) != 0) return std::perror("pipe"), 1;
  char byte = 'x';
  for (int i = 0; i < n; ++i) {
    close(-1), ++g_calls["close"];
    if (write(fds[1], &byte, 1) != 1) return std::perror("write"), 1;
    ++g_calls["write"];
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 0), ++g_calls["poll"];
    if (read(fds[0], &byte, 1) != 1) return std::perror("read"), 1;
    ++g_calls["read"];
    const int fd = open("/dev/null", O_RDONLY);
    ++g_calls["open"];
    if (fd < 0) return std::perror("open"), 1;
    close(fd), ++g_calls["close"];
  }
  errno = 0;
  const ssize_t r = read(-1, &byte, 1);
  const int e = errno;
  ++g_calls["read"];
  print_calls();
  std::printf("bad_read %zd errno %d\n", r, e);
  return 0;
}

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
sem_t g_locked;
long g_waiter_tid = 0;
timespec g_after_lock{};

void* waiter(void*) {
  g_waiter_tid = syscall(SYS_gettid);
  sem_wait(&g_locked);
  pthread_mutex_lock(&g_mutex);  // blocks until main unlocks
  pthread_mutex_unlock(&g_mutex);
  nanosleep(&g_after_lock, nullptr);  // main is in pthread_join meanwhile
  return nullptr;
}

int threads(long hold_ms) {
  sem_init(&g_locked, 0, 0);
  g_after_lock = {hold_ms / 2000, (hold_ms / 2 % 1000) * 1000000};
  pthread_mutex_lock(&g_mutex);
  pthread_t t;
  if (pthread_create(&t, nullptr, waiter, nullptr) != 0) return std::fputs("pthread_create failed\n", stderr), 1;
  sem_post(&g_locked);
  timespec hold{hold_ms / 1000, (hold_ms % 1000) * 1000000};
  nanosleep(&hold, nullptr);
  pthread_mutex_unlock(&g_mutex);
  pthread_join(t, nullptr);
  std::printf("waiter_tid %ld\n", g_waiter_tid);
  return 0;
}

pthread_key_t g_sleepy_key;
long g_sleepy_ms = 0;

void sleep_as_the_thread_ends(void*) { usleep(useconds_t(g_sleepy_ms * 1000)); }

void* sleepy(void*) {
  g_waiter_tid = long(syscall(SYS_gettid));
  pthread_setspecific(g_sleepy_key, reinterpret_cast<void*>(1));
  usleep(useconds_t(g_sleepy_ms * 1000));
  return nullptr;
}

int key_destructor(long ms) {
  g_sleepy_ms = ms;
  pthread_key_create(&g_sleepy_key, sleep_as_the_thread_ends);
  pthread_t t;
  if (pthread_create(&t, nullptr, sleepy, nullptr) != 0) return std::fputs("pthread_create failed\n", stderr), 1;
  pthread_join(t, nullptr);
  std::printf("thread_tid %ld\n", g_waiter_tid);
  return 0;
}

void* quiet(void*) {
  pthread_setspecific(g_sleepy_key, reinterpret_cast<void*>(1));
  return nullptr;
}

int key_destructor_threads(int n) {
  g_sleepy_ms = 1;
  pthread_key_create(&g_sleepy_key, sleep_as_the_thread_ends);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, nullptr, quiet, nullptr) != 0) return std::fputs("pthread_create failed\n", stderr), 1;
    pthread_join(t, nullptr);
  }
  std::printf("threads %d\n", n);
  return 0;
}

int cuda(int n) {
  char host[256] = {};
  for (int i = 0; i < n; ++i) {
    void* device = nullptr;
    usleep(1000), ++g_calls["usleep"];
    cudaMalloc(&device, sizeof host), ++g_calls["cudaMalloc"];
    cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice), ++g_calls["cudaMemcpy"];
    cudaFree(device), ++g_calls["cudaFree"];
  }
  print_calls();
  return 0;
}

int g_null_fd = -1;
volatile sig_atomic_t g_handler_writes = 0;

void on_alarm(int) {
  const int saved = errno;
  if (write(g_null_fd, "x", 1) == 1) g_handler_writes = g_handler_writes + 1;
  errno = saved;
}

int signals(long n) {
  g_null_fd = open("/dev/null", O_WRONLY);
  ++g_calls["open"];
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval every{{0, 20}, {0, 20}};
  setitimer(ITIMER_REAL, &every, nullptr);
  int device = 0;
  long calls = 0;
  for (long i = 0; i < n; ++i) {
    cudaGetDevice(&device), ++calls;
    // A few hundred ns between calls: a rate the recorder drains without drops on a shared machine.
    for (volatile int spin = 0; spin < 64;) spin = spin + 1;
  }
  g_calls["cudaGetDevice"] = calls;
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  print_calls();
  std::printf("handler_writes %ld\n", long(g_handler_writes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sleeps" && argc == 6) return sleeps(std::atoi(argv[2]), std::atoi(argv[3]), std::atol(argv[4]), std::atol(argv[5]));
  if (mode == "calls" && argc == 3) return calls(std::atoi(argv[2]));
  if (mode == "threads" && argc == 3) return threads(std::atol(argv[2]));
  if (mode == "key_destructor" && argc == 3) return key_destructor(std::atol(argv[2]));
  if (mode == "key_destructor_threads" && argc == 3) return key_destructor_threads(std::atoi(argv[2]));
  if (mode == "cuda" && argc == 3) return cuda(std::atoi(argv[2]));
  if (mode == "signals" && argc == 3) return signals(std::atol(argv[2]));
  std::fputs("usage: osrt_app sleeps <long> <short> <long_ms> <short_us> | calls <n> | threads <hold_ms> | cuda <n> | "
             "signals <n>\n",
             stderr);
  return 64;
}
